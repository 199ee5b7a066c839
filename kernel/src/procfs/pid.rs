//! The files of `/proc/PID/`: their names, and the text each shows, in the formats of Linux
//! 6.1's `fs/proc/array.c` (`status`, `stat`), `base.c` (`cmdline`, `environ`, `auxv`, the
//! links) and `task_mmu.c` (`maps`, `smaps`, `smaps_rollup`, `pagemap`: [`super::maps`]).
//!
//! `cmdline` and `environ` are read from the process's memory between the bounds the loader
//! recorded (`process::exec::image`), `auxv` is the vector it was given; `status` and `stat`
//! gather the ids, credentials, signal masks, memory sizes and times Linux shows, in its order
//! and with its padding, each line or field whether or not this kernel has the thing behind it
//! (no namespaces, no seccomp: what Linux shows for a process without them).
use alloc::vec::Vec;
use core::fmt::Write;
use core::sync::atomic::Ordering;

use linux_abi::Errno;
use mm::addr::PAGE_SIZE;
use mm::vm::VmaFlags;

use crate::fs::text::Text as Out;
use crate::process::Process;

/// A generated file of a process's directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// `auxv`: the auxiliary vector, as binary words.
    Auxv,
    /// `cmdline`: the arguments, each ended by a NUL.
    Cmdline,
    /// `comm`: the thread's name and a newline.
    Comm,
    /// `environ`: the environment strings, each ended by a NUL.
    Environ,
    /// `maps`: the memory map (`super::maps`).
    Maps,
    /// `mounts`: the mount table, as `/proc/mounts`.
    Mounts,
    /// `oom_score_adj`: 0 (writable on Linux; writes are accepted and change nothing here).
    OomScoreAdj,
    /// `pagemap`: one word per page of the address space (read at offsets, never generated).
    Pagemap,
    /// `smaps`: the memory map with each area's sizes.
    Smaps,
    /// `smaps_rollup`: the sizes summed.
    SmapsRollup,
    /// `stat`: the one-line summary `ps` reads.
    Stat,
    /// `statm`: memory sizes in pages.
    Statm,
    /// `status`: names and numbers, one per line.
    Status,
}

impl Text {
    /// Every file, in listing order.
    pub const ALL: &'static [Text] = &[
        Text::Auxv,
        Text::Cmdline,
        Text::Comm,
        Text::Environ,
        Text::Maps,
        Text::Mounts,
        Text::OomScoreAdj,
        Text::Pagemap,
        Text::Smaps,
        Text::SmapsRollup,
        Text::Stat,
        Text::Statm,
        Text::Status,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Text::Auxv => "auxv",
            Text::Cmdline => "cmdline",
            Text::Comm => "comm",
            Text::Environ => "environ",
            Text::Maps => "maps",
            Text::Mounts => "mounts",
            Text::OomScoreAdj => "oom_score_adj",
            Text::Pagemap => "pagemap",
            Text::Smaps => "smaps",
            Text::SmapsRollup => "smaps_rollup",
            Text::Stat => "stat",
            Text::Statm => "statm",
            Text::Status => "status",
        }
    }

    /// Its permission bits (Linux's).
    pub fn perm(self) -> u32 {
        match self {
            Text::Comm | Text::OomScoreAdj => 0o644,
            Text::Auxv | Text::Environ | Text::Pagemap => 0o400,
            _ => 0o444,
        }
    }
}

/// A link of a process's directory: a magic link (`super::ProcNode`), which a walk follows to
/// the node it stands for rather than by its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `exe`: the program's file.
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

/// The text of link `l` of process `p`.
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

/// The node link `l` of process `p` stands for (`None`: a program the kernel was given as bytes
/// has no file).
pub fn link_node(p: &Process, l: Link) -> Option<alloc::sync::Arc<dyn vfs::node::Inode>> {
    match l {
        Link::Exe => p.posix.image()?.file.clone(),
        Link::Cwd => Some(p.posix.fs.lock().cwd.clone()),
        Link::Root => Some(p.posix.fs.lock().root.clone()),
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
    crate::fs::copy_bytes(&base[..base.len().min(15)]).unwrap_or_default()
}

/// What `status` and `stat` say of a process's memory, in bytes.
#[derive(Default)]
struct Memory {
    size: u64,
    rss: u64,
    data: u64,
    stack: u64,
    exe: u64,
    locked: u64,
    code: (u64, u64),
    data_range: (u64, u64),
    brk_start: u64,
}

fn memory(p: &Process) -> Memory {
    let mut m = Memory::default();
    let Some(space) = p.space() else { return m };
    let mm = space.lock();
    let zero = crate::memory::frames::zero_region();
    for vma in mm.vm().iter() {
        let len = vma.len();
        m.size += len;
        let mut pages = 0;
        let _ = mm.space().table().walk(mm::addr::VirtAddr(vma.start), len, |leaf| {
            let (s, e) = (leaf.va.0.max(vma.start), (leaf.va.0 + leaf.size).min(vma.end));
            // The shared zero region is nobody's memory: Linux counts its pages (and its huge
            // zero page) in no RSS counter.
            let pa = leaf.translate(mm::addr::VirtAddr(s)).0;
            pages += (e - s) / PAGE_SIZE - zero.map_or(0, |z| z.pages_in(pa, e - s));
        });
        m.rss += pages * PAGE_SIZE;
        let f = vma.flags;
        if f.contains(VmaFlags::LOCKED) {
            m.locked += len;
        }
        if f.contains(VmaFlags::STACK) {
            m.stack += len;
        } else if f.contains(VmaFlags::IMAGE) && vma.prot.exec() {
            m.exe += len;
            if m.code.0 == 0 {
                m.code = (vma.start, vma.end);
            }
        } else if !f.contains(VmaFlags::SHARED) && vma.prot.write() {
            m.data += len;
            if f.contains(VmaFlags::IMAGE) && m.data_range.0 == 0 {
                m.data_range = (vma.start, vma.end);
            }
        }
        if f.contains(VmaFlags::HEAP) && m.brk_start == 0 {
            m.brk_start = vma.start;
        }
    }
    m
}

/// The signal facts `status` and `stat` show for the process's main thread: pending (the
/// thread's, the process's), blocked, ignored, caught.
fn signal_sets(p: &Process) -> [u64; 5] {
    let st = p.signals.state.lock();
    let main = st.threads.iter().find(|t| t.tid == p.pid).or(st.threads.first());
    let (own, blocked) = main.map_or((0, 0), |t| (t.pending.set().0, t.blocked.0));
    let shared = st.shared.set().0;
    let (mut ignored, mut caught) = (0u64, 0u64);
    for sig in 1..=signal::num::_NSIG {
        let a = st.action(sig);
        if a.handler == signal::num::SIG_IGN {
            ignored |= 1 << (sig - 1);
        } else if a.has_handler() {
            caught |= 1 << (sig - 1);
        }
    }
    [own, shared, blocked, ignored, caught]
}

/// The CPUs a process may run on, as `Cpus_allowed` and `Cpus_allowed_list` show them: every
/// online one (affinity is per thread here, and every thread starts with all).
fn cpus() -> (u64, usize) {
    let n = crate::cpu::ONLINE.load(Ordering::Acquire).clamp(1, 64);
    (if n == 64 { u64::MAX } else { (1 << n) - 1 }, n)
}

/// `status` (Linux 6.1's `proc_pid_status`, its keys in its order).
fn status(p: &Process, out: &mut Out, name: &str) -> core::fmt::Result {
    let c = p.posix.cred();
    let threads = p.threads.load(Ordering::Acquire);
    let fd_size = {
        let files = p.posix.files.lock();
        files.numbers().last().map_or(64, |n| (n + 1).next_power_of_two().max(64))
    };
    let state = if state(p) == 'Z' { "Z (zombie)" } else { "R (running)" };
    let pgid = p.posix.pgid.load(Ordering::Acquire);
    let sid = p.posix.sid.load(Ordering::Acquire);
    writeln!(out, "Name:\t{name}")?;
    writeln!(out, "Umask:\t{:04o}", p.posix.fs.lock().umask)?;
    writeln!(out, "State:\t{state}")?;
    writeln!(out, "Tgid:\t{}\nNgid:\t0\nPid:\t{}\nPPid:\t{}\nTracerPid:\t0", p.pid, p.pid, p.family.ppid())?;
    writeln!(out, "Uid:\t{}\t{}\t{}\t{}", c.uid, c.euid, c.suid, c.fsuid)?;
    writeln!(out, "Gid:\t{}\t{}\t{}\t{}", c.gid, c.egid, c.sgid, c.fsgid)?;
    writeln!(out, "FDSize:\t{fd_size}")?;
    out.write_str("Groups:\t")?;
    for (i, g) in c.groups.iter().enumerate() {
        write!(out, "{}{g}", if i == 0 { "" } else { " " })?;
    }
    // Linux writes the space after the list whatever it holds.
    out.write_str(" \n")?;
    writeln!(out, "NStgid:\t{}\nNSpid:\t{}\nNSpgid:\t{pgid}\nNSsid:\t{sid}", p.pid, p.pid)?;
    let m = memory(p);
    let kb = |out: &mut Out, key: &str, bytes: u64| writeln!(out, "{key}:\t{:>8} kB", bytes >> 10);
    for (key, bytes) in [
        ("VmPeak", m.size),
        ("VmSize", m.size),
        ("VmLck", m.locked),
        ("VmPin", 0),
        ("VmHWM", m.rss),
        ("VmRSS", m.rss),
        ("RssAnon", m.rss),
        ("RssFile", 0),
        ("RssShmem", 0),
        ("VmData", m.data),
        ("VmStk", m.stack),
        ("VmExe", m.exe),
        ("VmLib", 0),
        ("VmPTE", 0),
        ("VmSwap", 0),
        ("HugetlbPages", 0),
    ] {
        kb(out, key, bytes)?;
    }
    writeln!(out, "CoreDumping:\t0\nTHP_enabled:\t1\nThreads:\t{threads}")?;
    let limit = p.rlimits.lock().get(mm::vm::limits::resource::RLIMIT_SIGPENDING).cur;
    writeln!(out, "SigQ:\t{}/{limit}", p.signals.queued.load(Ordering::Acquire))?;
    let [own, shared, blocked, ignored, caught] = signal_sets(p);
    for (key, set) in
        [("SigPnd", own), ("ShdPnd", shared), ("SigBlk", blocked), ("SigIgn", ignored), ("SigCgt", caught)]
    {
        writeln!(out, "{key}:\t{set:016x}")?;
    }
    for (key, set) in [
        ("CapInh", c.cap_inheritable),
        ("CapPrm", c.cap_permitted),
        ("CapEff", c.cap_effective),
        ("CapBnd", c.cap_bounding),
        ("CapAmb", 0),
    ] {
        writeln!(out, "{key}:\t{set:016x}")?;
    }
    writeln!(out, "NoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0")?;
    writeln!(out, "Speculation_Store_Bypass:\tthread vulnerable\nSpeculationIndirectBranch:\tunknown")?;
    let (mask, n) = cpus();
    write!(out, "Cpus_allowed:\t{mask:x}\nCpus_allowed_list:\t")?;
    if n == 1 {
        writeln!(out, "0")?
    } else {
        writeln!(out, "0-{}", n - 1)?
    }
    writeln!(out, "Mems_allowed:\t1\nMems_allowed_list:\t0")?;
    writeln!(out, "voluntary_ctxt_switches:\t0\nnonvoluntary_ctxt_switches:\t0")
}

/// `stat` (Linux's `do_task_stat`): 52 fields.
fn stat(p: &Process, out: &mut Out, name: &str) -> core::fmt::Result {
    let ticks = crate::process::cpu_ticks(p);
    let utime = crate::arch::time::ticks_to_us(ticks) / 10_000;
    let m = memory(p);
    let image = p.posix.image();
    let (args, env) = image.as_ref().map_or(((0, 0), (0, 0)), |i| (i.args, i.env));
    let [own, shared, blocked, ignored, caught] = signal_sets(p);
    let limits = *p.rlimits.lock();
    let rsslim = limits.get(mm::vm::limits::resource::RLIMIT_RSS).cur;
    write!(
        out,
        "{} ({name}) {} {} {} {} 0 -1 4194560 0 0 0 0 {utime} 0 0 0 20 0 {} 0 0 {} {} {rsslim} ",
        p.pid,
        state(p),
        p.family.ppid(),
        p.posix.pgid.load(Ordering::Acquire),
        p.posix.sid.load(Ordering::Acquire),
        p.threads.load(Ordering::Acquire),
        m.size,
        m.rss / PAGE_SIZE,
    )?;
    let stack_top = image.as_ref().map_or(crate::process::STACK_TOP, |i| i.stack_top);
    write!(out, "{} {} {stack_top} 0 0 ", m.code.0, m.code.1)?;
    // The obsolete signal fields are decimal (the low 32 bits would do; Linux prints the word).
    write!(out, "{} {blocked} {ignored} {caught} 0 0 0 17 0 0 0 0 0 0 ", own | shared)?;
    writeln!(
        out,
        "{} {} {} {} {} {} {} 0",
        m.data_range.0, m.data_range.1, m.brk_start, args.0, args.1, env.0, env.1
    )
}

/// `/proc/PID/cmdline` and `environ` read at most this much (Linux's `get_mm_cmdline` reads it
/// all; the initial stack's strings are bounded by the `execve` limits anyway).
const STRINGS_MAX: usize = 1 << 20;

/// The text of file `t` of process `p` (`pagemap` is read at offsets instead: [`super::maps`]).
///
/// # Errors
/// `ENOMEM`.
pub fn generate(p: &Process, t: Text) -> Result<Vec<u8>, Errno> {
    let mut out = Out::default();
    let name = comm(p);
    let name = core::str::from_utf8(&name).unwrap_or("?");
    let image = || p.posix.image();
    let r = match t {
        Text::Maps => return super::maps::generate(p),
        Text::Smaps => return super::maps::smaps(p),
        Text::SmapsRollup => return super::maps::smaps_rollup(p),
        Text::Pagemap => return Ok(Vec::new()),
        Text::Cmdline => {
            let Some(i) = image() else { return Ok(Vec::new()) };
            return super::maps::read_memory(p, i.args.0, i.args.1, STRINGS_MAX);
        }
        Text::Environ => {
            let Some(i) = image() else { return Ok(Vec::new()) };
            return super::maps::read_memory(p, i.env.0, i.env.1, STRINGS_MAX);
        }
        Text::Auxv => {
            let Some(i) = image() else { return Ok(Vec::new()) };
            out.0.try_reserve(i.auxv.len() * 16).map_err(|_| Errno::ENOMEM)?;
            for (key, value) in &i.auxv {
                out.0.extend_from_slice(&key.to_le_bytes());
                out.0.extend_from_slice(&value.to_le_bytes());
            }
            return Ok(out.0);
        }
        Text::Comm => writeln!(out, "{name}"),
        Text::Status => status(p, &mut out, name),
        Text::Stat => stat(p, &mut out, name),
        Text::Statm => {
            let m = memory(p);
            writeln!(
                out,
                "{} {} 0 {} 0 {} 0",
                m.size / PAGE_SIZE,
                m.rss / PAGE_SIZE,
                m.exe / PAGE_SIZE,
                (m.data + m.stack) / PAGE_SIZE
            )
        }
        Text::Mounts => return super::global::mounts(),
        Text::OomScoreAdj => writeln!(out, "0"),
    };
    out.done(r)
}
