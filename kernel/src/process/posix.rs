//! The per-process and per-thread state of the Linux ABI that is not memory: ids (the process
//! group and session, and the user and group ids with Linux's rules for changing them,
//! [`Creds`]), the descriptor table, the thread's name and robust list, CPU time, and which
//! unknown system calls were already reported. Kept in one place so the process and thread structures (`process/mod.rs`)
//! carry it as one field each.
//!
//! The descriptor table itself is `fs::file`'s: a process holds one behind a lock.
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use spin::Mutex;

use crate::fs::file::{FdTable, OpenFile};
use crate::fs::namespace::FsContext;

/// The user and group ids of a process (real, effective, saved, file-system) and whether it has
/// the capabilities root has (Linux's `struct cred`, with the capability sets reduced to all or
/// nothing: a process is root or it is not). Every process starts as root; the `set*id` calls
/// change the ids with Linux's rules (`kernel/sys.c`) and drop the capabilities as
/// `cap_task_fix_setuid` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creds {
    /// Real, effective, saved and file-system user ids.
    pub uid: [u32; 4],
    /// Real, effective, saved and file-system group ids.
    pub gid: [u32; 4],
    /// The permitted capabilities (all of them, or none).
    pub permitted: bool,
    /// The effective capabilities: what `capable()` checks.
    pub effective: bool,
}

/// An id argument that leaves the id unchanged (`(uid_t) -1`).
const KEEP: u32 = u32::MAX;

/// Which ids a `set*id` call changes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    User,
    Group,
}

impl Creds {
    /// Root, with every capability.
    pub const ROOT: Creds = Creds { uid: [0; 4], gid: [0; 4], permitted: true, effective: true };

    /// Whether the process may change its ids freely (`CAP_SETUID`, `CAP_SETGID`) or raise
    /// limits (`CAP_SYS_RESOURCE`): whether its effective capabilities are on.
    pub const fn capable(&self) -> bool {
        self.effective
    }

    fn ids(&mut self, which: Which) -> &mut [u32; 4] {
        match which {
            Which::User => &mut self.uid,
            Which::Group => &mut self.gid,
        }
    }

    /// `setresuid`/`setresgid`: each id not -1 becomes the new real, effective or saved id; an
    /// unprivileged process may only choose among its current three (EPERM).
    fn setres(&mut self, which: Which, r: u32, e: u32, s: u32) -> Result<(), linux_abi::Errno> {
        let capable = self.capable();
        let old = *self.ids(which);
        let allowed = |id: u32| id == KEEP || capable || id == old[0] || id == old[1] || id == old[2];
        if !(allowed(r) && allowed(e) && allowed(s)) {
            return Err(linux_abi::Errno::EPERM);
        }
        let ids = self.ids(which);
        for (slot, new) in ids.iter_mut().zip([r, e, s]) {
            if new != KEEP {
                *slot = new;
            }
        }
        ids[3] = ids[1];
        self.fix_caps(which, old);
        Ok(())
    }

    /// `setreuid`/`setregid`: unprivileged, the real id may become the effective one and the
    /// effective id any of the three; the saved id follows the new effective one when the real
    /// id is set or the effective one becomes other than the old real one.
    fn setre(&mut self, which: Which, r: u32, e: u32) -> Result<(), linux_abi::Errno> {
        let capable = self.capable();
        let old = *self.ids(which);
        if r != KEEP && !capable && r != old[0] && r != old[1] {
            return Err(linux_abi::Errno::EPERM);
        }
        if e != KEEP && !capable && e != old[0] && e != old[1] && e != old[2] {
            return Err(linux_abi::Errno::EPERM);
        }
        let ids = self.ids(which);
        if r != KEEP {
            ids[0] = r;
        }
        if e != KEEP {
            ids[1] = e;
        }
        if r != KEEP || (e != KEEP && e != old[0]) {
            ids[2] = ids[1];
        }
        ids[3] = ids[1];
        self.fix_caps(which, old);
        Ok(())
    }

    /// `setuid`/`setgid`: privileged, all of real, effective, saved; unprivileged, only the
    /// effective id, to the real or saved one (EPERM otherwise).
    fn set(&mut self, which: Which, id: u32) -> Result<(), linux_abi::Errno> {
        let capable = self.capable();
        let old = *self.ids(which);
        if id == KEEP {
            return Err(linux_abi::Errno::EINVAL);
        }
        let ids = self.ids(which);
        if capable {
            *ids = [id; 4];
        } else if id == old[0] || id == old[2] {
            ids[1] = id;
            ids[3] = id;
        } else {
            return Err(linux_abi::Errno::EPERM);
        }
        self.fix_caps(which, old);
        Ok(())
    }

    /// `setfsuid`/`setfsgid`: returns the old file-system id; it changes when the process is
    /// privileged or the new one is one of its four ids (no error either way, as Linux).
    fn setfs(&mut self, which: Which, id: u32) -> u32 {
        let capable = self.capable();
        let ids = self.ids(which);
        let old = ids[3];
        if id != KEEP && (capable || ids.contains(&id)) {
            ids[3] = id;
        }
        old
    }

    /// Linux's `cap_task_fix_setuid` for a change of the user ids from `old`: a process left
    /// with no root id loses every capability, one whose effective id leaves 0 its effective
    /// ones, and one whose effective id becomes 0 gets its permitted ones back.
    fn fix_caps(&mut self, which: Which, old: [u32; 4]) {
        if which == Which::Group {
            return;
        }
        let any_root = |ids: &[u32; 4]| ids[..3].contains(&0);
        if any_root(&old) && !any_root(&self.uid) {
            self.permitted = false;
            self.effective = false;
        }
        if old[1] == 0 && self.uid[1] != 0 {
            self.effective = false;
        }
        if old[1] != 0 && self.uid[1] == 0 {
            self.effective = self.permitted;
        }
    }
}

/// A `set*id` call (the system-call layer decodes the arguments).
#[derive(Clone, Copy, Debug)]
pub enum SetId {
    /// `setuid(id)`.
    Uid(u32),
    /// `setgid(id)`.
    Gid(u32),
    /// `setreuid(r, e)`.
    ReUid(u32, u32),
    /// `setregid(r, e)`.
    ReGid(u32, u32),
    /// `setresuid(r, e, s)`.
    ResUid(u32, u32, u32),
    /// `setresgid(r, e, s)`.
    ResGid(u32, u32, u32),
    /// `setfsuid(id)`: returns the old one.
    FsUid(u32),
    /// `setfsgid(id)`: returns the old one.
    FsGid(u32),
}

impl Creds {
    /// Applies `call`; its return value (0, or the old id of `setfs*id`).
    ///
    /// # Errors
    /// EPERM (or EINVAL for `setuid(-1)`); nothing changes then.
    pub fn apply(&mut self, call: SetId) -> Result<u64, linux_abi::Errno> {
        use Which::{Group, User};
        match call {
            SetId::Uid(id) => self.set(User, id),
            SetId::Gid(id) => self.set(Group, id),
            SetId::ReUid(r, e) => self.setre(User, r, e),
            SetId::ReGid(r, e) => self.setre(Group, r, e),
            SetId::ResUid(r, e, s) => self.setres(User, r, e, s),
            SetId::ResGid(r, e, s) => self.setres(Group, r, e, s),
            SetId::FsUid(id) => return Ok(u64::from(self.setfs(User, id))),
            SetId::FsGid(id) => return Ok(u64::from(self.setfs(Group, id))),
        }
        .map(|()| 0)
    }
}

/// Ids, descriptors and accounting of a process.
pub struct ProcessPosix {
    /// User and group ids (`Creds`).
    pub creds: Mutex<Creds>,
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
            creds: Mutex::new(Creds::ROOT),
            pgid: AtomicU32::new(0),
            sid: AtomicU32::new(0),
            ctty: AtomicBool::new(false),
            files: Mutex::new(FdTable::with_console(open).ok()?),
            fs: Mutex::new(fs),
            personality: AtomicU32::new(0),
            cpu_ticks: AtomicU64::new(0),
            reported: Mutex::new([0; 16]),
            exe: Mutex::new(([0; 255], 0)),
        })
    }

    /// The state of a child forked by this process: the same ids, process group and session, a copy
    /// of the descriptor table (sharing the open file descriptions, as Linux's `dup_fd`), the
    /// personality; no CPU time; the unknown calls already reported stay reported. `None` when
    /// the heap cannot hold the table.
    pub fn forked(&self) -> Option<Self> {
        let files = self.files.lock().try_clone()?;
        Some(Self {
            creds: Mutex::new(*self.creds.lock()),
            pgid: AtomicU32::new(self.pgid.load(Ordering::Acquire)),
            sid: AtomicU32::new(self.sid.load(Ordering::Acquire)),
            ctty: AtomicBool::new(false),
            files: Mutex::new(files),
            fs: Mutex::new(self.fs.lock().clone()),
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
