//! The per-process and per-thread state of the Linux ABI that is not memory: ids (the process
//! group and session, and the credentials, `fs::cred`'s), the descriptor table, the thread's name and robust list, CPU time, and which
//! unknown system calls were already reported. Kept in one place so the process and thread structures (`process/mod.rs`)
//! carry it as one field each.
//!
//! The descriptor table itself is `fs::file`'s: a process holds one behind a lock.
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use spin::Mutex;

use crate::fs::cred::Credentials;
use crate::fs::file::{FdTable, OpenFile};
use crate::fs::namespace::FsContext;
use crate::fs::pagecache::DenyWrite;
use crate::process::exec::image::ProgramImage;

/// The release `uname` and `/proc/sys/kernel/osrelease` report, in Linux's form (C libraries
/// parse it). Linux keeps the system's names in the process's UTS namespace; there is one here.
pub const RELEASE: &str = "6.1.0-mmkernel";

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
    /// Root, working directory and umask.
    pub fs: Mutex<FsContext>,
    /// User and group ids and capabilities (`fs::cred`; replaced whole by the `set*id` calls).
    pub cred: Mutex<Arc<Credentials>>,
    /// `personality(2)` value (`PER_LINUX` = 0).
    pub personality: AtomicU32,
    /// Counter ticks its threads spent running, slices already ended.
    pub cpu_ticks: AtomicU64,
    /// Minor page faults its threads took (`process::usage`).
    pub min_flt: AtomicU64,
    /// System-call numbers (below 1024) already reported as unknown.
    reported: Mutex<[u64; 16]>,
    /// The path of the program it runs (what `/proc/self/exe` names), up to 255 bytes.
    exe: Mutex<([u8; 255], u8)>,
    /// The `membarrier` commands it registered for (their `MEMBARRIER_CMD_*` bits).
    pub membarrier: AtomicU32,
    /// What `/proc` shows of the program it runs (`exec::image`).
    image: Mutex<Option<Arc<ProgramImage>>>,
    /// Its program's file held against writers while it runs (Linux's `deny_write_access` on
    /// `mm->exe_file`, taken again for a fork's new address space): released when its last
    /// thread exits, before its parent can reap it, and replaced by `execve`.
    exe_hold: Mutex<Option<DenyWrite>>,
}

impl ProcessPosix {
    /// The state of a process the kernel starts: ppid 0, descriptors 0, 1 and 2 on `/dev/console`
    /// opened read-write (Linux's `console_on_rootfs`; the console device itself when the tree
    /// has no `/dev/console`), at the root of the tree. `None` without memory or a tree.
    pub fn first() -> Option<Self> {
        let fs = FsContext::first().ok()?;
        let console = crate::fs::namespace::lookup(&fs, &fs.root, b"/dev/console", true)
            .ok()
            .and_then(|node| {
                let named =
                    crate::fs::node_file::Named { node, path: crate::fs::copy_bytes(b"/dev/console").ok()? };
                crate::fs::dev::open(named).ok()
            })
            .or_else(|| crate::fs::dev::console().ok())?;
        let open = crate::memory::fallible::arc(OpenFile::new(
            console,
            linux_abi::fcntl::O_RDWR | linux_abi::fcntl::O_LARGEFILE,
        ))
        .ok()?;
        Some(Self {
            pgid: AtomicU32::new(0),
            sid: AtomicU32::new(0),
            ctty: AtomicBool::new(false),
            files: Mutex::new(FdTable::with_console(open).ok()?),
            fs: Mutex::new(fs),
            cred: Mutex::new(crate::fs::cred::root().ok()?),
            personality: AtomicU32::new(0),
            cpu_ticks: AtomicU64::new(0),
            min_flt: AtomicU64::new(0),
            reported: Mutex::new([0; 16]),
            exe: Mutex::new(([0; 255], 0)),
            membarrier: AtomicU32::new(0),
            image: Mutex::new(None),
            exe_hold: Mutex::new(None),
        })
    }

    /// The state of a child forked by this process: the same ids, process group and session, a copy
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
            fs: Mutex::new(self.fs.lock().clone()),
            cred: Mutex::new(self.cred.lock().clone()),
            personality: AtomicU32::new(self.personality.load(Ordering::Acquire)),
            cpu_ticks: AtomicU64::new(0),
            min_flt: AtomicU64::new(0),
            reported: Mutex::new(*self.reported.lock()),
            exe: Mutex::new(*self.exe.lock()),
            membarrier: AtomicU32::new(self.membarrier.load(Ordering::Acquire)),
            image: Mutex::new(self.image.lock().clone()),
            exe_hold: Mutex::new(self.exe_hold.lock().as_ref().map(DenyWrite::another)),
        })
    }

    /// `execve`: the credentials the new program starts with (`Credentials::after_exec`,
    /// made before the point of no return), no `membarrier` registration (Linux's
    /// `membarrier_exec_mmap`).
    pub fn exec_reset(&self, cred: Arc<Credentials>) {
        *self.cred.lock() = cred;
        self.membarrier.store(0, Ordering::Release);
    }

    /// Records the path of the program now running (cut to 255 bytes).
    pub fn set_exe(&self, path: &[u8]) {
        let mut exe = self.exe.lock();
        let n = path.len().min(255);
        exe.0[..n].copy_from_slice(&path[..n]);
        exe.1 = n as u8;
    }

    /// Records what `/proc` shows of the program now running, and the hold on its file.
    pub fn set_image(&self, image: Arc<ProgramImage>, hold: Option<DenyWrite>) {
        *self.image.lock() = Some(image);
        let old = core::mem::replace(&mut *self.exe_hold.lock(), hold);
        drop(old);
    }

    /// Lets writers at its program's file again (its last thread has exited).
    pub fn release_exe(&self) {
        let hold = self.exe_hold.lock().take();
        drop(hold);
    }

    /// What `/proc` shows of the program it runs (`None` before the first is loaded).
    pub fn image(&self) -> Option<Arc<ProgramImage>> {
        self.image.lock().clone()
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

    /// The credentials it acts with now.
    pub fn cred(&self) -> Arc<Credentials> {
        self.cred.lock().clone()
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
    /// Minor page faults this thread took (`process::usage`).
    pub min_flt: u64,
    /// Its restartable-sequence area (`rseq`): kept by a fork's child, not by a new thread.
    pub rseq: Option<super::rseq::Rseq>,
}

impl ThreadPosix {
    /// A thread named after `path`.
    pub fn named(path: &str) -> Self {
        Self { robust_list: 0, name: name_from_path(path), cpu_ticks: 0, min_flt: 0, rseq: None }
    }

    /// The name as text (for messages).
    pub fn name_str(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(self.name.len());
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }
}
