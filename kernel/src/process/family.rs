//! Processes as a family, after Linux's kernel/fork.c and kernel/exit.c: `fork` (`clone`
//! without `CLONE_VM`) and `vfork`, the parent and children of each process, zombies, the exit
//! signal, `wait4` and `waitid` with Linux's status encodings, and orphans.
//!
//! - **fork** (with `CLONE_PARENT`, a sibling of the caller) copies the memory copy-on-write (`mm::user::UserMemory::fork`: one flush for the
//!   parent, no frame copied), the descriptors (shared open file descriptions), the signal
//!   actions, mask and alternate stack, the limits and the ids; the child gets its own ASID at
//!   its first switch and returns 0 from `clone`.
//! - **vfork** (`CLONE_VFORK`): the parent's thread is parked in the child until the child execs
//!   or exits (not interruptible by signals, as Linux's killable wait). With `CLONE_VM` (what
//!   `vfork()` and `posix_spawn` pass) the child runs on the parent's own address space, as on
//!   Linux: both processes hold the same [`Vmspace`] (one memory, one ASID, one set of CPUs
//!   that may cache it), the parent's other threads keep running on it, and what the child
//!   writes before its `execve` or `_exit` (glibc's `posix_spawn` error report) the parent sees.
//!   The child's `execve` gives it an address space of its own; its exit drops its reference.
//! - **Zombies**: a process whose last thread ended has given back every frame, but stays in its
//!   parent's list with its status until the parent reaps it with `wait4`/`waitid`. A parent
//!   that ignores `SIGCHLD` (or set `SA_NOCLDWAIT`) gets no zombies, as on Linux.
//! - **Orphans** are given to the first process (the kernel's init); when it ends, every process
//!   left is killed, and `process::run` returns once all have been torn down.
//!
//! Waiting uses the scheduler's kernel events ([`sched::WaitFor::Event`]): a parent reads the
//! event count, looks at its children, and blocks with that count; a child's exit changes the
//! state first, then notifies, so no exit is missed.
//!
//! **The process table.** A walk over every process (`kill(-1)`, and a memfd's truncation, which
//! must reach every memory mapping the object) goes through a table of every allocated
//! [`Process`] in pid order, not through the family tree: a tree walk needs a work list, which
//! may not grow when the heap is exhausted, and then a subtree would be skipped silently. The
//! table's room is made when a process is created (where `ENOMEM` is an answer), so the walk
//! allocates nothing; it steps by pid under the table's lock, taking no other lock, so entries
//! coming and going meanwhile cannot make it skip a process that lives throughout. A zombie is
//! in it until it is reaped (its `Process` is freed), as Linux's task list holds it until
//! `release_task`. A child is entered before its parent's memory is unlocked at fork, and has
//! a higher pid than its parent: a truncation that reaches the parent after the child's copy
//! was made reaches the child after it (see [`for_each_process`]).
//!
//! One file (about 590 lines): fork, exit and wait are the three sides of one state, a
//! process's place among its parent and children and in the table, and each relies on the order
//! the others keep (a child entered in the table before the parent's memory is unlocked; the
//! state changed before the notify that wakes a waiter), which reads best in one place.
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ::signal::info::SigInfo;
use ::signal::num;
use mm::asid::AsidContext;
use mm::paging::{PageTable, VaRange};
use mm::tlb::TlbIssuer;
use mm::tlb::issue::Aarch64Tlb;
use spin::Mutex;

use super::usage::Usage;

use super::signals::JobReport;
use super::{Action, Process, Thread, Vmspace};
use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::asids::AsidTargets;
use crate::memory::fallible;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::uaccess::copy_out;
use crate::memory::{frames, tlb};
use crate::sched;
use linux_abi::Errno;

/// Processes started and not yet torn down (a teardown ends when the CPU that did it has dropped
/// its reference: `sched::queue::finish`).
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The first process: orphans' new parent.
static ROOT: Mutex<Option<Weak<Process>>> = Mutex::new(None);

/// Processes not yet torn down.
pub fn live() -> usize {
    LIVE.load(Ordering::Acquire)
}

/// A process was created.
pub fn started() {
    LIVE.fetch_add(1, Ordering::AcqRel);
}

/// A process that was counted by [`started`] no longer counts as live: it was given up before
/// it ran, or its teardown ([`exited`]) is over and the CPU that did it has dropped its own
/// reference (`sched::queue::finish`).
pub fn ended() {
    LIVE.fetch_sub(1, Ordering::AcqRel);
}

/// A process's place in its family.
pub struct Family {
    /// Its entry in the process table (module documentation).
    _entry: TableEntry,
    parent: Mutex<Option<Weak<Process>>>,
    ppid: AtomicU32,
    /// Children not yet reaped (running ones and zombies).
    children: Mutex<Vec<Arc<Process>>>,
    /// The signal the parent gets at exit (`clone`'s `CSIGNAL` byte; 0: none).
    exit_signal: u32,
    /// Ended by a signal (its status is 128 + the signal), not by `exit`/`exit_group`.
    killed: AtomicBool,
    /// Reaped by its parent (or never a zombie: its parent asked for none). Its pid is gone, as
    /// Linux's `release_task` makes it before `wait4` returns, even while a CPU that ran its
    /// last thread still holds a reference for a moment.
    reaped: AtomicBool,
    /// A zombie its parent may reap: set by [`exited`] once it has decided the parent keeps one
    /// (Linux's `exit_notify` setting `EXIT_ZOMBIE`). Not `done`, which is set before that
    /// decision: a wait on another CPU in between would reap a child whose parent asked for no
    /// zombies.
    zombie: AtomicBool,
    /// Where a vfork parent's thread waits until this child execs or exits.
    vfork: Arc<sched::Rendezvous>,
    /// CPU time of reaped children (counter ticks), for `times`/`getrusage(RUSAGE_CHILDREN)`.
    pub children_ticks: AtomicU64,
    /// Minor page faults of reaped children (`process::usage`).
    pub children_min_flt: AtomicU64,
}

impl Family {
    /// The kernel's first process (`pid`): no parent (ppid 0). `None` when the heap has no
    /// room for its vfork rendezvous.
    pub fn first(pid: u32) -> Option<Self> {
        Self::with(pid, None, 0, 0)
    }

    fn with(pid: u32, parent: Option<Weak<Process>>, ppid: u32, exit_signal: u32) -> Option<Self> {
        let vfork = fallible::arc(sched::Rendezvous::default()).ok()?;
        Some(Self {
            _entry: TableEntry(pid),
            parent: Mutex::new(parent),
            ppid: AtomicU32::new(ppid),
            children: Mutex::new(Vec::new()),
            exit_signal,
            killed: AtomicBool::new(false),
            reaped: AtomicBool::new(false),
            zombie: AtomicBool::new(false),
            vfork,
            children_ticks: AtomicU64::new(0),
            children_min_flt: AtomicU64::new(0),
        })
    }

    /// `getppid`.
    pub fn ppid(&self) -> u32 {
        self.ppid.load(Ordering::Acquire)
    }

    /// Records how the process ends (set once, by the first `exit_group` or fatal signal).
    pub fn set_killed(&self, killed: bool) {
        self.killed.store(killed, Ordering::Release);
    }
}

/// The event key of `p`'s children (odd: never a user futex's key, which is a pointer).
fn children_key(p: &Process) -> usize {
    core::ptr::from_ref(p) as usize | 1
}

/// The wait status of an ended process, Linux's encoding: `code << 8` for an exit, the signal
/// number for a fatal signal (no core dumps here, so never the 0x80 bit).
pub fn wait_status(p: &Process) -> u32 {
    let status = p.status.load(Ordering::Acquire) as u32;
    if p.family.killed.load(Ordering::Acquire) {
        status.saturating_sub(128) & 0x7f
    } else {
        (status & 0xff) << 8
    }
}

/// Every allocated process, by pid (ascending): the table of the module documentation.
static TABLE: Mutex<Vec<(u32, Weak<Process>)>> = Mutex::new(Vec::new());

/// A process's entry in [`TABLE`], removed when the process is freed (this is dropped with it).
pub struct TableEntry(u32);

impl Drop for TableEntry {
    fn drop(&mut self) {
        let mut table = TABLE.lock();
        if let Ok(at) = table.binary_search_by_key(&self.0, |(pid, _)| *pid) {
            table.remove(at);
        }
    }
}

/// Puts `process` on the heap and in the table in one step; `process` back when the heap has
/// no room for either (the caller's `ENOMEM`). Called by a fork with the parent's memory locked
/// (the module documentation says why).
///
/// # Errors
/// `process` itself, when the heap cannot hold it or its table entry.
#[allow(clippy::result_large_err, reason = "the failure hands the process back to be taken apart")]
pub(super) fn enter(process: Process) -> Result<Arc<Process>, Process> {
    let mut table = TABLE.lock();
    if fallible::reserve(&mut table, 1).is_err() {
        return Err(process);
    }
    let pid = process.pid;
    let p = fallible::arc(process)?;
    let at = table.partition_point(|(listed, _)| *listed < pid);
    table.insert(at, (pid, Arc::downgrade(&p)));
    Ok(p)
}

/// How many processes the table holds (the test image checks it is 0 once a program and every
/// process it started are gone: no entry outlives its process).
pub fn listed() -> usize {
    TABLE.lock().len()
}

/// Runs `f` on every process, zombies included, in pid order, with no lock held while `f` runs
/// and no allocation. A process that lives throughout the walk is reached; so is a child whose
/// fork copied its parent's memory before the walk visited the parent (it is in the table by
/// then, after its parent). A process being freed meanwhile is passed over: nothing can reach
/// its memory any more; so is one already reaped (its pid is gone).
pub fn for_each_process(mut f: impl FnMut(&Arc<Process>)) {
    let mut after = 0;
    loop {
        let next = {
            let table = TABLE.lock();
            let at = table.partition_point(|(pid, _)| *pid <= after);
            table.get(at).map(|(pid, p)| (*pid, p.upgrade()))
        };
        let Some((pid, p)) = next else { return };
        after = pid;
        // Dropped after the lock: the last reference frees the process, whose entry then
        // leaves the table.
        if let Some(p) = p.filter(|p| !p.family.reaped.load(Ordering::Acquire)) {
            f(&p);
        }
    }
}

/// The process `pid`, if it is in the table and not reaped (zombies included).
pub fn by_pid(pid: u32) -> Option<Arc<Process>> {
    let table = TABLE.lock();
    let at = table.binary_search_by_key(&pid, |(p, _)| *p).ok()?;
    let p = table[at].1.upgrade();
    drop(table);
    p.filter(|p| !p.family.reaped.load(Ordering::Acquire))
}

/// Makes `p` the first process (orphans go to it).
pub fn set_root(p: &Arc<Process>) {
    *ROOT.lock() = Some(Arc::downgrade(p));
}

/// `clone` without `CLONE_THREAD`: fork (and vfork with `CLONE_VFORK`). `flags` are checked by
/// the caller; `exit_signal` is their low byte.
#[allow(clippy::too_many_arguments, reason = "clone's arguments, decoded")]
pub fn fork(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    flags: u64,
    stack: u64,
    ptid: u64,
    tls: u64,
    ctid: u64,
    vfork: bool,
) -> Action {
    use linux_abi::clone::*;
    let result = fork_child(thread, frame, flags, stack, tls, ctid);
    let child = match result {
        Ok(child) => child,
        Err(e) => return Action::reply(frame, Err(e)),
    };
    let pid = child.pid;
    if flags & CLONE_PARENT_SETTID != 0 {
        // Into the parent's memory (after the fork's copy), as Linux's `kernel_clone`; a bad
        // address is ignored, as there.
        let _ = copy_out(ptid, &pid.to_le_bytes());
    }
    frame.x[0] = u64::from(pid);
    if vfork {
        let rendezvous = child.family.vfork.clone();
        return Action::Block(sched::Wait { what: sched::WaitFor::Rendezvous(rendezvous), deadline: None });
    }
    Action::Continue
}

fn fork_child(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    flags: u64,
    stack: u64,
    tls: u64,
    ctid: u64,
) -> Result<Arc<Process>, Errno> {
    use linux_abi::clone::*;
    let p = thread.process.clone();
    if p.exiting.load(Ordering::Acquire) {
        return Err(Errno::EAGAIN);
    }
    // Linux's copy_process checks the thread limit before anything is copied.
    if sched::live_threads() >= sched::max_threads() {
        return Err(Errno::EAGAIN);
    }
    let pid = super::NEXT_PID.fetch_add(1, Ordering::Relaxed);
    let signals = p.signals.forked(thread.tid, pid).ok_or(Errno::ENOMEM)?;
    let posix = p.posix.forked().ok_or(Errno::ENOMEM)?;
    let rlimits = *p.rlimits.lock();
    let parent_space = p.space().ok_or(Errno::EAGAIN)?;
    // CLONE_PARENT: the child is the caller's sibling, with the caller's exit signal; the first
    // process has no parent to give (Linux refuses it for init: EINVAL).
    let parent = if flags & CLONE_PARENT != 0 {
        p.family.parent.lock().as_ref().and_then(Weak::upgrade).ok_or(Errno::EINVAL)?
    } else {
        p.clone()
    };
    let exit_signal = if flags & CLONE_PARENT != 0 { p.family.exit_signal } else { (flags & 0xff) as u32 };
    let family =
        Family::with(pid, Some(Arc::downgrade(&parent)), parent.pid, exit_signal).ok_or(Errno::ENOMEM)?;
    let child = if flags & CLONE_VM != 0 {
        // vfork: the parent's own address space, shared (module documentation).
        if flags & CLONE_CHILD_SETTID != 0 {
            // Into the shared memory, as Linux's `schedule_tail` does; a bad address is
            // ignored, as there.
            let _ = parent_space.lock().write(ctid, &pid.to_le_bytes());
        }
        Process::new(pid, parent_space, signals, rlimits, posix, family).ok_or(Errno::ENOMEM)?
    } else {
        let asid = fallible::arc(Mutex::new(AsidContext::new())).map_err(|_| Errno::ENOMEM)?;
        let features = tlb::features();
        let issuer = TlbIssuer::new(Aarch64Tlb, features.errata);
        let table = PageTable::new(FrameTranslation, VaRange::Lower).map_err(|_| Errno::ENOMEM)?;
        let mut parent_mm = parent_space.lock();
        let targets = AsidTargets::new(asid.clone());
        let mut mm = parent_mm.fork(table, issuer, features, targets, frames::UserFrames)?;
        if flags & CLONE_CHILD_SETTID != 0 {
            // Written into the child's memory (a copy-on-write break there), as Linux's
            // `schedule_tail` does; a bad address is ignored, as there.
            let _ = mm.write(ctid, &pid.to_le_bytes());
        }
        // In the process table before the parent's memory is unlocked (module documentation).
        // A failure drops the child's copy, which frees it (under the parent's lock, as a
        // copy-on-write break frees frames under it: the frame allocator's lock comes after).
        let child = Vmspace::new(mm, asid)
            .ok()
            .and_then(|space| Process::new(pid, space, signals, rlimits, posix, family));
        drop(parent_mm);
        child.ok_or(Errno::ENOMEM)?
    };
    let clone = super::clone::CloneArgs { flags, stack, tls, ctid };
    let posix = super::posix::ThreadPosix { cpu_ticks: 0, min_flt: 0, ..thread.posix.clone() };
    let child_thread = clone.child(thread, frame, pid, child.clone(), posix);
    started();
    let listed = fallible::push(&mut parent.family.children.lock(), child.clone());
    if let Err(e) = listed.and_then(|()| sched::admit(child_thread)) {
        parent.family.children.lock().retain(|c| !Arc::ptr_eq(c, &child));
        // The child's reference to its address space (the last one, unless it shares the
        // parent's): it never ran.
        child.release_space();
        ended();
        return Err(e);
    }
    Ok(child)
}

/// The vfork child `p` execs or exits: its parent's thread runs on.
pub fn release_vfork(p: &Process) {
    p.family.vfork.release();
}

/// Whether `p` asked for no zombies: `SIGCHLD` ignored or `SA_NOCLDWAIT`.
fn no_zombies(p: &Process) -> bool {
    let a = p.signals.action_of(num::SIGCHLD);
    a.handler == num::SIG_IGN || a.flags & num::SA_NOCLDWAIT != 0
}

/// After the teardown of `p` (every frame back): a vfork parent runs on, its children go to
/// the first process (or are killed when it is gone), and its parent is told (`SIGCHLD`, a
/// wake-up of its waits) or, asking for no zombies, forgets it. The caller calls [`ended`] once
/// it has dropped its own reference to `p`.
pub fn exited(p: &Arc<Process>) {
    release_vfork(p);
    let orphans = core::mem::take(&mut *p.family.children.lock());
    let root = ROOT.lock().as_ref().and_then(Weak::upgrade).filter(|r| !Arc::ptr_eq(r, p));
    for c in orphans {
        let adopted = root.as_ref().is_some_and(|r| {
            let mut list = r.family.children.lock();
            if r.done.load(Ordering::Acquire) || list.try_reserve(1).is_err() {
                return false;
            }
            let mut parent = c.family.parent.lock();
            *parent = Some(Arc::downgrade(r));
            c.family.ppid.store(r.pid, Ordering::Release);
            list.push(c.clone());
            true
        });
        if let (true, Some(r)) = (adopted, &root) {
            sched::notify(children_key(r));
        } else if !c.done.load(Ordering::Acquire) {
            // No reaper left: the orphan ends (Linux would have init reap it).
            super::kill(&c, ::signal::action::killed_status(num::SIGKILL));
        }
    }
    // Under the parent link's lock, so an adoption cannot slip between the look and the signal.
    let link = p.family.parent.lock();
    if let Some(parent) = link.as_ref().and_then(Weak::upgrade) {
        let no_zombies_asked = no_zombies(&parent);
        if no_zombies_asked {
            p.family.reaped.store(true, Ordering::Release);
            parent.family.children.lock().retain(|c| !Arc::ptr_eq(c, p));
        } else {
            // A zombie before the signal: a SIGCHLD handler's `waitpid(-1, WNOHANG)` on another
            // CPU must find it. A wait may then reap it before the signal is sent (Linux's
            // tasklist lock makes the two one step); the signal still carries its status.
            p.family.zombie.store(true, Ordering::Release);
        }
        if !no_zombies_asked && p.family.exit_signal != 0 {
            let killed = p.family.killed.load(Ordering::Acquire);
            let mut info =
                SigInfo::sent(p.family.exit_signal, if killed { CLD_KILLED } else { CLD_EXITED }, p.pid, 0);
            let status = if killed { wait_status(p) } else { wait_status(p) >> 8 };
            info.0[24..28].copy_from_slice(&status.to_le_bytes());
            super::signals::send_to_process(&parent, info);
        }
        drop(link);
        sched::notify(children_key(&parent));
    }
    super::pidfd::exited(p);
}

use linux_abi::signal::{CLD_CONTINUED, CLD_EXITED, CLD_KILLED, CLD_STOPPED};

/// `p` stopped or was continued (job control): its parent's waits look again, and the parent
/// gets `SIGCHLD` with `CLD_STOPPED` or `CLD_CONTINUED` unless its `SIGCHLD` action has
/// `SA_NOCLDSTOP` (Linux's `do_notify_parent_cldstop`).
pub fn notify_parent_of_stop(p: &Process, what: JobReport) {
    let Some(parent) = p.family.parent.lock().as_ref().and_then(Weak::upgrade) else { return };
    if parent.signals.action_of(num::SIGCHLD).flags & num::SA_NOCLDSTOP == 0 {
        let (code, status) = match what {
            JobReport::Stopped(sig) => (CLD_STOPPED, sig),
            JobReport::Continued => (CLD_CONTINUED, num::SIGCONT),
        };
        let mut info = SigInfo::sent(num::SIGCHLD, code, p.pid, 0);
        info.0[24..28].copy_from_slice(&status.to_le_bytes());
        super::signals::send_to_process(&parent, info);
    }
    sched::notify(children_key(&parent));
}

/// Whom a process-id argument names, Linux's convention for `kill` and `wait4`: `n > 0` that
/// process, `0` the caller's process group, `-pgid` that group, and `-1` everyone, which is
/// every child for a wait ([`Targets::Any`]) and every process but the first and the caller for
/// `kill` ([`Targets::AllBut`]); `waitid`'s `P_ALL`/`P_PID`/`P_PGID` name the same sets.
#[derive(Clone, Copy)]
pub enum Targets {
    /// Any process (of those looked at: a wait looks at its children only).
    Any,
    /// The process with this pid.
    Pid(u32),
    /// The processes of this process group.
    Group(u32),
    /// Every process except the first (pid 1) and this one.
    AllBut(u32),
}

impl Targets {
    /// The processes `pid` names for `caller`, `-1` meaning `everyone`; `None` for `INT_MIN`,
    /// whose group would be `-INT_MIN` (`ESRCH` in both calls, as on Linux).
    pub fn of_pid(pid: i32, caller: &Process, everyone: Self) -> Option<Self> {
        Some(match pid {
            i32::MIN => return None,
            -1 => everyone,
            0 => Self::Group(caller.posix.pgid.load(Ordering::Acquire)),
            n if n < 0 => Self::Group(n.unsigned_abs()),
            n => Self::Pid(n as u32),
        })
    }

    /// Whether `p` is one of them.
    pub fn matches(self, p: &Process) -> bool {
        match self {
            Self::Any => true,
            Self::Pid(pid) => p.pid == pid,
            Self::Group(g) => p.posix.pgid.load(Ordering::Acquire) == g,
            Self::AllBut(me) => p.pid > 1 && p.pid != me,
        }
    }
}

/// What a wait found.
enum Found {
    /// A zombie (reaped unless `WNOWAIT`).
    Zombie(Arc<Process>),
    /// A child that stopped or was continued, as the options asked (the report taken unless
    /// `WNOWAIT`).
    Job(Arc<Process>, super::signals::JobReport),
    /// Matching children, none ended yet.
    Running,
    /// No matching child.
    None,
}

/// What a wait asks for besides ended children.
#[derive(Clone, Copy)]
struct Asked {
    /// Stopped children (`WUNTRACED`, `WSTOPPED`).
    stops: bool,
    /// Continued children (`WCONTINUED`).
    continues: bool,
    /// Leave what is found for a later wait (`WNOWAIT`).
    keep: bool,
}

fn find(p: &Process, which: Targets, asked: Asked) -> Found {
    let mut children = p.family.children.lock();
    let mut any = false;
    for i in 0..children.len() {
        if !which.matches(&children[i]) {
            continue;
        }
        any = true;
        if children[i].family.zombie.load(Ordering::Acquire) {
            let c = if asked.keep { children[i].clone() } else { children.swap_remove(i) };
            if !asked.keep {
                c.family.reaped.store(true, Ordering::Release);
                // Its own reaped children's usage comes with it (Linux's `cutime`, `cmin_flt`).
                let u = Usage::of_process(&c).plus(Usage::of_children(&c));
                p.family.children_ticks.fetch_add(u.cpu_ticks, Ordering::Relaxed);
                p.family.children_min_flt.fetch_add(u.min_flt, Ordering::Relaxed);
            }
            return Found::Zombie(c);
        }
        if (asked.stops || asked.continues)
            && let Some(report) =
                super::signals::job_report(&children[i], asked.stops, asked.continues, asked.keep)
        {
            return Found::Job(children[i].clone(), report);
        }
    }
    if any { Found::Running } else { Found::None }
}

/// `wait4` options.
const WNOHANG: u64 = 1;
const WUNTRACED: u64 = 2;
const WSTOPPED: u64 = 2;
const WEXITED: u64 = 4;
const WCONTINUED: u64 = 8;
const WNOWAIT: u64 = 0x0100_0000;
const WNOTHREAD: u64 = 0x2000_0000;
const WALL: u64 = 0x4000_0000;
const WCLONE: u64 = 0x8000_0000;

/// `wait4(pid, wstatus, options, rusage)`, as Linux's `kernel_wait4`: `EINVAL` for unknown
/// options, `ESRCH` for `INT_MIN`, `ECHILD` when no child matches, 0 with `WNOHANG` while they
/// all run; else the reaped child's pid, its status written (`EFAULT` if that fails: the child
/// is reaped all the same, as on Linux) and the rusage zeroed.
pub fn wait4(
    thread: &Thread,
    frame: &mut TrapFrame,
    pid: u64,
    wstatus: u64,
    options: u64,
    rusage: u64,
) -> Action {
    let p = &thread.process;
    if options & !(WNOHANG | WUNTRACED | WCONTINUED | WNOTHREAD | WCLONE | WALL) != 0 {
        return done(frame, Err(Errno::EINVAL));
    }
    let Some(which) = Targets::of_pid(pid as i32, p, Targets::Any) else {
        return done(frame, Err(Errno::ESRCH));
    };
    let generation = sched::event_generation();
    let asked = Asked { stops: options & WUNTRACED != 0, continues: options & WCONTINUED != 0, keep: false };
    let reported = |c: &Process, status: u32| {
        if wstatus != 0 && copy_out(wstatus, &status.to_le_bytes()).is_err() {
            return Err(Errno::EFAULT);
        }
        // The child's usage with its reaped children's (Linux's `getrusage(RUSAGE_BOTH)`).
        let usage = Usage::of_process(c).plus(Usage::of_children(c));
        if rusage != 0 && copy_out(rusage, &usage.to_bytes()).is_err() {
            return Err(Errno::EFAULT);
        }
        Ok(u64::from(c.pid))
    };
    match find(p, which, asked) {
        Found::Zombie(c) => done(frame, reported(&c, wait_status(&c))),
        // Linux's encodings: `sig << 8 | 0x7f` for a stop, 0xffff for a continuation.
        Found::Job(c, JobReport::Stopped(sig)) => done(frame, reported(&c, sig << 8 | 0x7f)),
        Found::Job(c, JobReport::Continued) => done(frame, reported(&c, 0xffff)),
        Found::None => done(frame, Err(Errno::ECHILD)),
        Found::Running if options & WNOHANG != 0 => done(frame, Ok(0)),
        Found::Running => block_for_children(p, generation),
    }
}

/// `waitid(idtype, id, infop, options, rusage)`, as Linux's `kernel_waitid`: `P_ALL`, `P_PID`,
/// `P_PGID`, `P_PIDFD` (the child a pidfd names; a pidfd opened `PIDFD_NONBLOCK` makes the wait
/// `WNOHANG`, and finding the child running `EAGAIN`); ended (`WEXITED`), stopped (`WSTOPPED`)
/// and continued (`WCONTINUED`) children; `WNOWAIT` leaves what it found. The siginfo is Linux's
/// for `SIGCHLD` (all zero when `WNOHANG` finds nothing).
#[allow(clippy::too_many_arguments, reason = "waitid's arguments")]
pub fn waitid(
    thread: &Thread,
    frame: &mut TrapFrame,
    idtype: u64,
    id: u64,
    infop: u64,
    options: u64,
    rusage: u64,
) -> Action {
    const P_ALL: u64 = 0;
    const P_PID: u64 = 1;
    const P_PGID: u64 = 2;
    const P_PIDFD: u64 = 3;
    let p = &thread.process;
    if options & !(WNOHANG | WNOWAIT | WEXITED | WSTOPPED | WCONTINUED | WNOTHREAD | WCLONE | WALL) != 0
        || options & (WEXITED | WSTOPPED | WCONTINUED) == 0
    {
        return done(frame, Err(Errno::EINVAL));
    }
    let id = id as u32;
    let mut nonblock = false;
    let which = match idtype {
        P_ALL => Targets::Any,
        P_PID if (id as i32) > 0 => Targets::Pid(id),
        P_PGID if (id as i32) >= 0 => {
            Targets::Group(if id == 0 { p.posix.pgid.load(Ordering::Acquire) } else { id })
        }
        P_PIDFD if (id as i32) >= 0 => match super::pidfd::lookup(&p.posix.files, u64::from(id)) {
            Ok((pidfd, flag)) => {
                nonblock = flag;
                Targets::Pid(pidfd.file_as::<super::pidfd::PidFd>().map_or(0, |f| f.pid()))
            }
            Err(e) => return done(frame, Err(e)),
        },
        _ => return done(frame, Err(Errno::EINVAL)),
    };
    let generation = sched::event_generation();
    let asked = Asked {
        stops: options & WSTOPPED != 0,
        continues: options & WCONTINUED != 0,
        keep: options & WNOWAIT != 0,
    };
    let found = if options & WEXITED == 0 { find_jobs(p, which, asked) } else { find(p, which, asked) };
    let mut info = [0u8; 128];
    let mut child_usage = Usage::default();
    let mut fill = |c: &Process, code: i32, status: u32| {
        child_usage = Usage::of_process(c).plus(Usage::of_children(c));
        info[0..4].copy_from_slice(&num::SIGCHLD.to_le_bytes());
        info[8..12].copy_from_slice(&code.to_le_bytes());
        info[16..20].copy_from_slice(&c.pid.to_le_bytes());
        info[24..28].copy_from_slice(&status.to_le_bytes());
    };
    match found {
        Found::Zombie(c) => {
            let killed = c.family.killed.load(Ordering::Acquire);
            let status = if killed { wait_status(&c) } else { wait_status(&c) >> 8 };
            fill(&c, if killed { CLD_KILLED } else { CLD_EXITED }, status);
        }
        Found::Job(c, JobReport::Stopped(sig)) => fill(&c, CLD_STOPPED, sig),
        Found::Job(c, JobReport::Continued) => fill(&c, CLD_CONTINUED, num::SIGCONT),
        Found::None => return done(frame, Err(Errno::ECHILD)),
        Found::Running if options & WNOHANG != 0 => {}
        Found::Running if nonblock => return done(frame, Err(Errno::EAGAIN)),
        Found::Running => return block_for_children(p, generation),
    }
    if infop != 0 && copy_out(infop, &info).is_err() {
        return done(frame, Err(Errno::EFAULT));
    }
    if rusage != 0 && copy_out(rusage, &child_usage.to_bytes()).is_err() {
        return done(frame, Err(Errno::EFAULT));
    }
    done(frame, Ok(0))
}

/// [`find`] for a `waitid` that asks for stops or continuations only: ended children are
/// looked at for nothing but their being there.
fn find_jobs(p: &Process, which: Targets, asked: Asked) -> Found {
    let children = p.family.children.lock();
    let mut any = false;
    for c in children.iter().filter(|c| which.matches(c)) {
        any = true;
        if let Some(report) = super::signals::job_report(c, asked.stops, asked.continues, asked.keep) {
            return Found::Job(c.clone(), report);
        }
    }
    if any { Found::Running } else { Found::None }
}

fn block_for_children(p: &Process, generation: u32) -> Action {
    Action::Block(sched::Wait {
        what: sched::WaitFor::Event { key: children_key(p), generation },
        deadline: None,
    })
}

fn done(frame: &mut TrapFrame, result: Result<u64, Errno>) -> Action {
    Action::reply(frame, result)
}
