//! Advisory file locks, after Linux's `fs/locks.c`: POSIX record locks (`fcntl` `F_GETLK`,
//! `F_SETLK`, `F_SETLKW`), owned by a process, released by any close of the file by that process
//! and at its exit; open-file-description locks (`F_OFD_*`), owned by the description and
//! released with it; and `flock(2)` locks on the whole file, owned by the description, which
//! conflict only with each other, as on Linux.
//!
//! One table for the machine, searched linearly (a program holds a handful of locks). A lock's
//! file is its node (or, for a file without one, its open file), compared by address. A
//! `F_SETLKW` or `flock` that must wait blocks on the table's event and restarts when any lock
//! goes. A process's `F_SETLKW` that would wait for a process that waits (through a chain of at
//! most 10 waits, Linux's `MAX_DEADLK_ITERATIONS`) for it is `EDEADLK` (Linux's
//! `posix_locks_deadlock`): each waiting thread is recorded with the process it waits for, until
//! its call ends, is interrupted, or it exits ([`wait_abandoned`]).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{
    F_GETLK, F_OFD_GETLK, F_OFD_SETLKW, F_RDLCK, F_SETLKW, F_UNLCK, F_WRLCK, SEEK_CUR, SEEK_END, SEEK_SET,
};
use spin::Mutex;

use super::file::OpenFile;
use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::sched::{self, Action, Wait, WaitFor};

/// Who holds a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// A process's POSIX record lock.
    Process(u32),
    /// An open file description's lock (`F_OFD_*`).
    Description(usize),
    /// A description's `flock`.
    Flock(usize),
}

#[derive(Clone, Copy, Debug)]
struct Lock {
    file: usize,
    owner: Owner,
    write: bool,
    /// First and last byte (inclusive).
    start: u64,
    end: u64,
}

static TABLE: Mutex<Vec<Lock>> = Mutex::new(Vec::new());

/// Threads waiting in `F_SETLKW` for a process's record lock: (waiting process, its thread,
/// the process holding the lock). Kept under [`TABLE`]'s lock.
static WAITS: Mutex<Vec<(u32, u32, u32)>> = Mutex::new(Vec::new());

/// How many waits a deadlock search follows (Linux's `MAX_DEADLK_ITERATIONS`).
const MAX_DEADLOCK_STEPS: usize = 10;

/// Whether process `pid` waiting for process `holder` would close a circle of waits.
fn deadlock(waits: &[(u32, u32, u32)], pid: u32, holder: u32) -> bool {
    let mut at = holder;
    for _ in 0..MAX_DEADLOCK_STEPS {
        if at == pid {
            return true;
        }
        match waits.iter().find(|w| w.0 == at) {
            Some(w) => at = w.2,
            None => return false,
        }
    }
    false
}

/// Thread `tid` of process `pid` no longer waits for a lock (its call ended, was interrupted,
/// or it exits).
pub fn wait_abandoned(pid: u32, tid: u32) {
    let mut waits = WAITS.lock();
    waits.retain(|w| !(w.0 == pid && w.1 == tid));
}

fn key() -> usize {
    core::ptr::from_ref(&TABLE) as usize | 2
}

/// The identity of the file `f` is open on.
fn file_id(f: &OpenFile) -> usize {
    match f.file.inode() {
        Some(node) => Arc::as_ptr(node).cast::<u8>() as usize,
        None => Arc::as_ptr(&f.file).cast::<u8>() as usize,
    }
}

fn description_id(f: &OpenFile) -> usize {
    core::ptr::from_ref(f) as usize
}

fn conflicts(a: &Lock, b: &Lock) -> bool {
    let flock = |o: Owner| matches!(o, Owner::Flock(_));
    a.file == b.file
        && a.owner != b.owner
        && flock(a.owner) == flock(b.owner)
        && (a.write || b.write)
        && a.start <= b.end
        && b.start <= a.end
}

/// Removes `owner`'s locks on `file` over `start..=end`, splitting the ones that reach past it.
fn unlock_range(table: &mut Vec<Lock>, file: usize, owner: Owner, start: u64, end: u64) -> Result<(), Errno> {
    let mut keep: Vec<Lock> = Vec::new();
    keep.try_reserve(table.len() + 1).map_err(|_| Errno::ENOLCK)?;
    for l in table.iter() {
        if l.file != file || l.owner != owner || l.end < start || l.start > end {
            keep.push(*l);
            continue;
        }
        if l.start < start {
            keep.push(Lock { end: start - 1, ..*l });
        }
        if l.end > end {
            keep.push(Lock { start: end + 1, ..*l });
        }
    }
    *table = keep;
    Ok(())
}

/// `struct flock` (arm64: type, whence, start, len, pid; 32 bytes).
struct Flock {
    kind: u16,
    whence: u16,
    start: i64,
    len: i64,
    pid: i32,
}

impl Flock {
    fn read(addr: u64) -> Result<Self, Errno> {
        let mut b = [0u8; 32];
        copy_in(&mut b, addr).map_err(|_| Errno::EFAULT)?;
        let word = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        Ok(Self {
            kind: u16::from_le_bytes([b[0], b[1]]),
            whence: u16::from_le_bytes([b[2], b[3]]),
            start: word(8),
            len: word(16),
            pid: i32::from_le_bytes(b[24..28].try_into().unwrap_or_default()),
        })
    }

    fn write(&self, addr: u64) -> Result<(), Errno> {
        let mut b = [0u8; 32];
        b[0..2].copy_from_slice(&self.kind.to_le_bytes());
        b[2..4].copy_from_slice(&self.whence.to_le_bytes());
        b[8..16].copy_from_slice(&self.start.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..28].copy_from_slice(&self.pid.to_le_bytes());
        copy_out(addr, &b).map_err(|_| Errno::EFAULT)
    }

    /// The byte range it names (Linux's `flock_to_posix_lock`).
    fn range(&self, f: &OpenFile) -> Result<(u64, u64), Errno> {
        let base: i64 = match u64::from(self.whence) {
            SEEK_SET => 0,
            SEEK_CUR => *f.pos.lock() as i64,
            SEEK_END => f.file.stat()?.size,
            _ => return Err(Errno::EINVAL),
        };
        let mut start = base.checked_add(self.start).ok_or(Errno::EOVERFLOW)?;
        let mut end = if self.len > 0 {
            start.checked_add(self.len - 1).ok_or(Errno::EOVERFLOW)?
        } else if self.len < 0 {
            let e = start - 1;
            start = start.checked_add(self.len).ok_or(Errno::EINVAL)?;
            e
        } else {
            i64::MAX
        };
        if start < 0 {
            return Err(Errno::EINVAL);
        }
        if end < start {
            end = start;
        }
        Ok((start as u64, end as u64))
    }
}

/// `fcntl(fd, F_GETLK | F_SETLK | F_SETLKW | F_OFD_*, &flock)` by thread `tid` of process
/// `pid` on `f`.
pub fn fcntl_lock(
    frame: &mut TrapFrame,
    pid: u32,
    tid: u32,
    f: &Arc<OpenFile>,
    cmd: u64,
    arg: u64,
) -> Action {
    let generation = sched::event_generation();
    let r = lock_call(pid, tid, f, cmd, arg);
    if !matches!(r, Ok(None)) {
        wait_abandoned(pid, tid);
    }
    match r {
        Ok(Some(n)) => Action::reply(frame, Ok(n)),
        Ok(None) => Action::Block(Wait { what: WaitFor::Event { key: key(), generation }, deadline: None }),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// The call's result, or `None` to wait.
fn lock_call(pid: u32, tid: u32, f: &Arc<OpenFile>, cmd: u64, arg: u64) -> Result<Option<u64>, Errno> {
    let mut fl = Flock::read(arg)?;
    let ofd = cmd >= F_OFD_GETLK;
    if ofd && fl.pid != 0 {
        return Err(Errno::EINVAL);
    }
    let owner = if ofd { Owner::Description(description_id(f)) } else { Owner::Process(pid) };
    let (start, end) = fl.range(f)?;
    let file = file_id(f);
    let write = match fl.kind {
        F_RDLCK => false,
        F_WRLCK => true,
        F_UNLCK => false,
        _ => return Err(Errno::EINVAL),
    };
    let mut table = TABLE.lock();
    let wanted = Lock { file, owner, write, start, end };
    if cmd == F_GETLK || cmd == F_OFD_GETLK {
        if fl.kind == F_UNLCK {
            return Err(Errno::EINVAL);
        }
        match table.iter().find(|l| conflicts(l, &wanted)) {
            Some(l) => {
                fl.kind = if l.write { F_WRLCK } else { F_RDLCK };
                fl.whence = SEEK_SET as u16;
                fl.start = l.start as i64;
                fl.len = if l.end == i64::MAX as u64 { 0 } else { (l.end - l.start + 1) as i64 };
                fl.pid = match l.owner {
                    Owner::Process(p) => p as i32,
                    _ => -1,
                };
            }
            None => fl.kind = F_UNLCK,
        }
        drop(table);
        fl.write(arg)?;
        return Ok(Some(0));
    }
    if fl.kind != F_UNLCK {
        // The mode must allow the lock (Linux: EBADF).
        if (write && !f.writable()) || (!write && !f.readable()) {
            return Err(Errno::EBADF);
        }
        if let Some(held) = table.iter().find(|l| conflicts(l, &wanted)) {
            if cmd != F_SETLKW && cmd != F_OFD_SETLKW {
                return Err(Errno::EAGAIN);
            }
            // A process's wait for another process's lock: refused if it closes a circle, else
            // recorded for the next one's search.
            if let (Owner::Process(_), Owner::Process(holder)) = (owner, held.owner) {
                let mut waits = WAITS.lock();
                if deadlock(&waits, pid, holder) {
                    return Err(Errno::EDEADLK);
                }
                waits.retain(|w| !(w.0 == pid && w.1 == tid));
                waits.try_reserve(1).map_err(|_| Errno::ENOLCK)?;
                waits.push((pid, tid, holder));
            }
            return Ok(None);
        }
    }
    unlock_range(&mut table, file, owner, start, end)?;
    if fl.kind != F_UNLCK {
        table.try_reserve(1).map_err(|_| Errno::ENOLCK)?;
        table.push(wanted);
    }
    drop(table);
    sched::notify(key());
    Ok(Some(0))
}

/// `flock(fd, operation)` on `f`: `EBADF` for an `O_PATH` descriptor (Linux's `fdget` has
/// none), `EINVAL` for an unknown operation.
pub fn flock(frame: &mut TrapFrame, f: &Arc<OpenFile>, operation: u64) -> Action {
    if f.file.path_only() {
        return Action::reply(frame, Err(Errno::EBADF));
    }
    const LOCK_SH: u64 = 1;
    const LOCK_EX: u64 = 2;
    const LOCK_NB: u64 = 4;
    const LOCK_UN: u64 = 8;
    let generation = sched::event_generation();
    let owner = Owner::Flock(description_id(f));
    let file = file_id(f);
    let r = (|| {
        let op = operation & !LOCK_NB;
        let mut table = TABLE.lock();
        if op == LOCK_UN {
            unlock_range(&mut table, file, owner, 0, u64::MAX)?;
            drop(table);
            sched::notify(key());
            return Ok(Some(0));
        }
        let write = match op {
            LOCK_SH => false,
            LOCK_EX => true,
            _ => return Err(Errno::EINVAL),
        };
        let wanted = Lock { file, owner, write, start: 0, end: u64::MAX };
        if table.iter().any(|l| conflicts(l, &wanted)) {
            return if operation & LOCK_NB != 0 { Err(Errno::EWOULDBLOCK) } else { Ok(None) };
        }
        unlock_range(&mut table, file, owner, 0, u64::MAX)?;
        table.try_reserve(1).map_err(|_| Errno::ENOLCK)?;
        table.push(wanted);
        drop(table);
        sched::notify(key());
        Ok(Some(0))
    })();
    match r {
        Ok(Some(n)) => Action::reply(frame, Ok(n)),
        Ok(None) => Action::Block(Wait { what: WaitFor::Event { key: key(), generation }, deadline: None }),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// Process `pid` closed a descriptor of `f`: its POSIX locks on that file go (POSIX's rule).
pub fn closed(pid: u32, f: &OpenFile) {
    let file = file_id(f);
    let mut table = TABLE.lock();
    let before = table.len();
    table.retain(|l| !(l.file == file && l.owner == Owner::Process(pid)));
    if table.len() != before {
        drop(table);
        sched::notify(key());
    }
}

/// Process `pid` exited: its POSIX locks go.
pub fn process_exited(pid: u32) {
    WAITS.lock().retain(|w| w.0 != pid);
    let mut table = TABLE.lock();
    let before = table.len();
    table.retain(|l| l.owner != Owner::Process(pid));
    if table.len() != before {
        drop(table);
        sched::notify(key());
    }
}

/// The open file description at `id` is gone: its OFD and `flock` locks go.
pub fn description_dropped(id: usize) {
    let mut table = TABLE.lock();
    let before = table.len();
    table.retain(|l| l.owner != Owner::Description(id) && l.owner != Owner::Flock(id));
    if table.len() != before {
        drop(table);
        sched::notify(key());
    }
}
