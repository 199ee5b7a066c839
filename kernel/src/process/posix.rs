//! The per-process and per-thread state of the Linux ABI that is not memory: ids, the descriptor
//! table, the thread's name and robust list, CPU time, and which unknown system calls were
//! already reported. Kept in one place so the process and thread structures (`process/mod.rs`)
//! carry it as one field each.
//!
//! Descriptors follow Linux's split: a descriptor ([`FdEntry`]) has its own close-on-exec flag and
//! points at an open file description ([`OpenFile`]), which dup'ed descriptors share, with the
//! status flags (`O_NONBLOCK`, `O_APPEND`) that `fcntl(F_SETFL)` changes. The first process gets
//! descriptors 0, 1 and 2 on one description of the console, opened read-write, as Linux's
//! `console_on_rootfs` does for init.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use spin::Mutex;

use crate::syscall::errno::{EMFILE, ENOMEM};

/// Descriptors a process may have open (Linux's default `RLIMIT_NOFILE` soft limit).
pub const FD_LIMIT: usize = 1024;
/// `O_RDWR`.
pub const O_RDWR: u32 = 2;
/// `O_APPEND`.
pub const O_APPEND: u32 = 0o2000;
/// `O_NONBLOCK`.
pub const O_NONBLOCK: u32 = 0o4000;
/// `O_CLOEXEC`.
pub const O_CLOEXEC: u32 = 0o2_000_000;

/// What an open file is.
#[derive(Debug)]
pub enum FileKind {
    /// The console (`/dev/console`): the UART through the line discipline (`crate::fs::tty`).
    Console,
    /// One end of a pipe (`crate::fs::pipe`).
    Pipe(crate::fs::pipe::PipeEnd),
    /// `/proc/self/maps` (`crate::procfs`).
    Listing(crate::procfs::Listing),
    /// A memfd (`crate::fs::memfd`): a shared memory object.
    Memfd(crate::fs::memfd::Memfd),
}

/// An open file description.
#[derive(Debug)]
pub struct OpenFile {
    /// What it is.
    pub kind: FileKind,
    /// Access mode and status flags (`O_RDWR | O_NONBLOCK ...`), shared by every dup.
    pub flags: AtomicU32,
}

/// One descriptor.
#[derive(Clone, Debug)]
pub struct FdEntry {
    /// The description it refers to.
    pub file: Arc<OpenFile>,
    /// `FD_CLOEXEC`.
    pub cloexec: bool,
}

/// A process's descriptors, indexed by number.
#[derive(Debug, Default)]
pub struct FdTable {
    fds: Vec<Option<FdEntry>>,
}

impl FdTable {
    /// Descriptors 0, 1, 2 on one read-write console description.
    pub fn console() -> Self {
        let file = Arc::new(OpenFile { kind: FileKind::Console, flags: AtomicU32::new(O_RDWR) });
        let entry = FdEntry { file, cloexec: false };
        Self { fds: alloc::vec![Some(entry.clone()), Some(entry.clone()), Some(entry)] }
    }

    /// The descriptor `fd`, if open.
    pub fn get(&self, fd: u64) -> Option<&FdEntry> {
        self.fds.get(usize::try_from(fd).ok()?)?.as_ref()
    }

    /// The descriptor `fd` for changing its flag, if open.
    pub fn get_mut(&mut self, fd: u64) -> Option<&mut FdEntry> {
        self.fds.get_mut(usize::try_from(fd).ok()?)?.as_mut()
    }

    /// Puts `entry` at the lowest free number at or above `min` and returns it.
    ///
    /// # Errors
    /// `EMFILE` when none is below the limit (`EINVAL` is the caller's for `min` itself too
    /// large); `ENOMEM` when the table cannot grow (nothing changes).
    pub fn install_lowest(&mut self, min: usize, entry: FdEntry) -> Result<usize, i64> {
        let free = (min..FD_LIMIT).find(|&i| self.fds.get(i).is_none_or(Option::is_none)).ok_or(EMFILE)?;
        self.install_at(free, entry)?;
        Ok(free)
    }

    /// Puts `entry` at `fd` (below the limit), closing what was there.
    ///
    /// # Errors
    /// `ENOMEM` when the table cannot grow to `fd` (nothing changes).
    pub fn install_at(&mut self, fd: usize, entry: FdEntry) -> Result<(), i64> {
        if self.fds.len() <= fd {
            let more = fd + 1 - self.fds.len();
            crate::memory::fallible::reserve(&mut self.fds, more).map_err(|_| ENOMEM)?;
            self.fds.resize(fd + 1, None);
        }
        self.fds[fd] = Some(entry);
        Ok(())
    }

    /// A copy (the same descriptions, each descriptor's own flag), or `None` when the heap cannot
    /// hold it.
    pub fn try_clone(&self) -> Option<Self> {
        let mut fds = Vec::new();
        fds.try_reserve_exact(self.fds.len()).ok()?;
        fds.extend(self.fds.iter().cloned());
        Some(Self { fds })
    }

    /// `execve`: closes every close-on-exec descriptor.
    pub fn close_on_exec(&mut self) {
        for slot in &mut self.fds {
            if slot.as_ref().is_some_and(|e| e.cloexec) {
                *slot = None;
            }
        }
    }

    /// Closes `fd`; false if it was not open.
    pub fn close(&mut self, fd: u64) -> bool {
        let Ok(i) = usize::try_from(fd) else { return false };
        self.fds.get_mut(i).and_then(Option::take).is_some()
    }
}

/// Ids, descriptors and accounting of a process.
pub struct ProcessPosix {
    /// Process group (0 until `setsid`/`setpgid`, as for a Linux init started by the kernel).
    pub pgid: AtomicU32,
    /// Session (0 likewise).
    pub sid: AtomicU32,
    /// The console is its controlling terminal (after `setsid` and `TIOCSCTTY`).
    pub ctty: AtomicBool,
    /// Descriptors.
    pub files: Mutex<FdTable>,
    /// `personality(2)` value (`PER_LINUX` = 0).
    pub personality: AtomicU32,
    /// Counter ticks its threads spent running, slices already ended.
    pub cpu_ticks: AtomicU64,
    /// System-call numbers (below 1024) already reported as unknown.
    reported: Mutex<[u64; 16]>,
    /// The path of the program it runs (what `/proc/self/exe` names), up to 255 bytes.
    exe: Mutex<([u8; 255], u8)>,
}

impl ProcessPosix {
    /// The state of a process the kernel starts: ppid 0, console descriptors.
    pub fn first() -> Self {
        Self {
            pgid: AtomicU32::new(0),
            sid: AtomicU32::new(0),
            ctty: AtomicBool::new(false),
            files: Mutex::new(FdTable::console()),
            personality: AtomicU32::new(0),
            cpu_ticks: AtomicU64::new(0),
            reported: Mutex::new([0; 16]),
            exe: Mutex::new(([0; 255], 0)),
        }
    }

    /// The state of a child forked by this process: the same process group and session, a copy
    /// of the descriptor table (sharing the open file descriptions, as Linux's `dup_fd`), the
    /// personality; no CPU time; the unknown calls already reported stay reported. `None` when
    /// the heap cannot hold the table.
    pub fn forked(&self) -> Option<Self> {
        let files = self.files.lock().try_clone()?;
        Some(Self {
            pgid: AtomicU32::new(self.pgid.load(Ordering::Acquire)),
            sid: AtomicU32::new(self.sid.load(Ordering::Acquire)),
            ctty: AtomicBool::new(false),
            files: Mutex::new(files),
            personality: AtomicU32::new(self.personality.load(Ordering::Acquire)),
            cpu_ticks: AtomicU64::new(0),
            reported: Mutex::new(*self.reported.lock()),
            exe: Mutex::new(*self.exe.lock()),
        })
    }

    /// Records the path of the program now running (cut to 255 bytes).
    pub fn set_exe(&self, path: &[u8]) {
        let mut exe = self.exe.lock();
        let n = path.len().min(255);
        exe.0[..n].copy_from_slice(&path[..n]);
        exe.1 = n as u8;
    }

    /// The path of the program it runs.
    pub fn exe(&self) -> ([u8; 255], usize) {
        let exe = self.exe.lock();
        (exe.0, usize::from(exe.1))
    }

    /// Whether unknown system call `nr` is reported now, and how: the first time for each number
    /// (numbers from 1024 on share one), for the first [`REPORTS`] numbers; one more report says
    /// that the rest go unreported (a program probing every number prints a screenful, not more).
    pub fn report_unknown(&self, nr: u64) -> Report {
        let bit = nr.min(1023) as usize;
        let mut reported = self.reported.lock();
        let (word, mask) = (bit / 64, 1u64 << (bit % 64));
        if reported[word] & mask != 0 {
            return Report::Silent;
        }
        reported[word] |= mask;
        let count = reported.iter().map(|w| w.count_ones()).sum::<u32>();
        match count {
            n if n <= REPORTS => Report::Name,
            n if n == REPORTS + 1 => Report::LastOne,
            _ => Report::Silent,
        }
    }

    /// Adds a finished slice of CPU time.
    pub fn charge(&self, ticks: u64) {
        self.cpu_ticks.fetch_add(ticks, Ordering::Relaxed);
    }
}

/// Distinct unknown system calls reported per process.
pub const REPORTS: u32 = 16;

/// What to print about an unknown system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// Its number and name.
    Name,
    /// That further ones are not reported.
    LastOne,
    /// Nothing (already said).
    Silent,
}

/// The thread's name (`comm`): 15 bytes and a NUL, as `PR_SET_NAME` keeps it.
pub type ThreadName = [u8; 16];

/// Makes a thread name from a program path: its last component, cut to 15 bytes.
pub fn name_from_path(path: &str) -> ThreadName {
    let base = path.rsplit('/').next().unwrap_or(path).as_bytes();
    let mut name = [0u8; 16];
    let n = base.len().min(15);
    name[..n].copy_from_slice(&base[..n]);
    name
}

/// Per-thread state.
#[derive(Clone, Debug)]
pub struct ThreadPosix {
    /// `set_robust_list` head (0: none).
    pub robust_list: u64,
    /// `PR_SET_NAME`.
    pub name: ThreadName,
    /// Counter ticks this thread spent running, slices already ended.
    pub cpu_ticks: u64,
}

impl ThreadPosix {
    /// A thread named after `path`.
    pub fn named(path: &str) -> Self {
        Self { robust_list: 0, name: name_from_path(path), cpu_ticks: 0 }
    }

    /// The name as text (for messages).
    pub fn name_str(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(self.name.len());
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }
}
