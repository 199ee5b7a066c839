//! The files of `/proc/PID/`: their names, and the text each shows, in the formats of Linux's
//! `fs/proc/array.c`, `base.c` and `task_mmu.c`.
use alloc::vec::Vec;
use core::fmt::Write;
use core::sync::atomic::Ordering;

use linux_abi::Errno;

use crate::fs::text::Text as Out;
use crate::process::Process;

/// A generated file of a process's directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// `maps`: the memory map (`super::maps`).
    Maps,
    /// `status`: names and numbers, one per line.
    Status,
    /// `stat`: the one-line summary `ps` reads.
    Stat,
    /// `statm`: memory sizes in pages.
    Statm,
    /// `cmdline`: the arguments, each ended by a NUL.
    Cmdline,
    /// `comm`: the thread's name and a newline.
    Comm,
    /// `mounts`: the mount table, as `/proc/mounts`.
    Mounts,
    /// `oom_score_adj`: 0 (writable on Linux; writes are accepted and change nothing here).
    OomScoreAdj,
}

impl Text {
    /// Every file, in listing order.
    pub const ALL: &'static [Text] = &[
        Text::Cmdline,
        Text::Comm,
        Text::Maps,
        Text::Mounts,
        Text::OomScoreAdj,
        Text::Stat,
        Text::Statm,
        Text::Status,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Text::Maps => "maps",
            Text::Status => "status",
            Text::Stat => "stat",
            Text::Statm => "statm",
            Text::Cmdline => "cmdline",
            Text::Comm => "comm",
            Text::Mounts => "mounts",
            Text::OomScoreAdj => "oom_score_adj",
        }
    }

    /// Its permission bits.
    pub fn perm(self) -> u32 {
        match self {
            Text::Comm | Text::OomScoreAdj => 0o644,
            _ => 0o444,
        }
    }
}

/// A link of a process's directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `exe`: the program's path.
    Exe,
    /// `cwd`: the working directory.
    Cwd,
    /// `root`: the root directory.
    Root,
}

impl Link {
    /// Every link, in listing order.
    pub const ALL: &'static [Link] = &[Link::Cwd, Link::Exe, Link::Root];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Link::Exe => "exe",
            Link::Cwd => "cwd",
            Link::Root => "root",
        }
    }
}

/// The target of link `l` of process `p`.
///
/// # Errors
/// `ENOENT` (a removed working directory), `ENOMEM`.
pub fn link(p: &Process, l: Link) -> Result<Vec<u8>, Errno> {
    match l {
        Link::Exe => {
            let (exe, len) = p.posix.exe();
            crate::fs::copy_bytes(&exe[..len])
        }
        Link::Cwd | Link::Root => {
            let ctx = p.posix.fs.lock().clone();
            let dir = if l == Link::Cwd { ctx.cwd.clone() } else { ctx.root.clone() };
            crate::fs::namespace::path_of_dir(&ctx, &dir)
        }
    }
}

/// The state letter `ps` shows.
fn state(p: &Process) -> char {
    if p.done.load(Ordering::Acquire) || p.threads.load(Ordering::Acquire) == 0 { 'Z' } else { 'R' }
}

/// The process's name (its program's file name, as `comm`).
fn comm(p: &Process) -> Vec<u8> {
    let (exe, len) = p.posix.exe();
    let path = &exe[..len];
    let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    base[..base.len().min(15)].to_vec()
}

/// The text of file `t` of process `p`.
///
/// # Errors
/// `ENOMEM`.
pub fn generate(p: &Process, t: Text) -> Result<Vec<u8>, Errno> {
    let mut out = Out::default();
    let name = comm(p);
    let name = core::str::from_utf8(&name).unwrap_or("?");
    let r = match t {
        Text::Maps => return super::maps::generate(p).map_err(|_| Errno::ENOMEM),
        Text::Comm => writeln!(out, "{name}"),
        Text::Cmdline => {
            let (exe, len) = p.posix.exe();
            out.0.try_reserve(len + 1).map_err(|_| Errno::ENOMEM)?;
            out.0.extend_from_slice(&exe[..len]);
            out.0.push(0);
            Ok(())
        }
        Text::Status => {
            let threads = p.threads.load(Ordering::Acquire);
            writeln!(out, "Name:\t{name}")
                .and_then(|()| writeln!(out, "Umask:\t{:04o}", p.posix.fs.lock().umask))
                .and_then(|()| {
                    writeln!(out, "State:\t{}", if state(p) == 'Z' { "Z (zombie)" } else { "R (running)" })
                })
                .and_then(|()| writeln!(out, "Tgid:\t{}", p.pid))
                .and_then(|()| writeln!(out, "Pid:\t{}", p.pid))
                .and_then(|()| writeln!(out, "PPid:\t{}", p.family.ppid()))
                .and_then(|()| {
                    let c = *p.posix.creds.lock();
                    let (u, g) = (c.uid, c.gid);
                    writeln!(out, "Uid:\t{}\t{}\t{}\t{}", u[0], u[1], u[2], u[3])?;
                    writeln!(out, "Gid:\t{}\t{}\t{}\t{}", g[0], g[1], g[2], g[3])?;
                    writeln!(out, "Threads:\t{threads}")?;
                    // Linux 6.1's 41 capabilities, all or none.
                    let all = 0x0000_01ff_ffff_ffffu64;
                    let caps = |on: bool| if on { all } else { 0 };
                    writeln!(out, "CapInh:\t{:016x}", 0)?;
                    writeln!(out, "CapPrm:\t{:016x}", caps(c.permitted))?;
                    writeln!(out, "CapEff:\t{:016x}", caps(c.effective))?;
                    writeln!(out, "CapBnd:\t{all:016x}")?;
                    writeln!(out, "CapAmb:\t{:016x}", 0)
                })
        }
        Text::Stat => {
            let ticks = crate::process::cpu_ticks(p);
            let utime = crate::arch::time::ticks_to_us(ticks) / 10_000;
            writeln!(
                out,
                "{} ({}) {} {} {} {} 0 -1 4194560 0 0 0 0 {} 0 0 0 20 0 {} 0 0 0 0",
                p.pid,
                name,
                state(p),
                p.family.ppid(),
                p.posix.pgid.load(Ordering::Acquire),
                p.posix.sid.load(Ordering::Acquire),
                utime,
                p.threads.load(Ordering::Acquire)
            )
        }
        Text::Statm => writeln!(out, "0 0 0 0 0 0 0"),
        Text::Mounts => return super::global::mounts(),
        Text::OomScoreAdj => writeln!(out, "0"),
    };
    out.done(r)
}
