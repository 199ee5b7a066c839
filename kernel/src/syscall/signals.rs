//! The signal system calls: `rt_sigaction`, `rt_sigprocmask`, `rt_sigpending`, `sigaltstack`,
//! `rt_sigsuspend`, `rt_sigtimedwait`, `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`,
//! `rt_tgsigqueueinfo` and `rt_sigreturn`, with Linux's argument checks in Linux's order (the
//! set size, then user pointers, then the signal number). Each copies user memory before or after
//! it takes the signal state, never while holding it.
use core::sync::atomic::Ordering;

use signal::action::{self, Outcome, SIGACTION_SIZE, SigAction};
use signal::frame;
use signal::info::{SIGINFO_SIZE, SigInfo};
use signal::num;
use signal::set::SigSet;
use signal::stack::{STACK_T_SIZE, StackError, StackT};

use crate::arch::aarch64::exception::TrapFrame;
use crate::kprintln;
use linux_abi::Errno;

use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::signals::{Fault, Target, Wait, finish_taken, force_fault, send, take_from, with_frame};
use crate::process::{Process, Thread};
use crate::sched::{self, Action, WaitFor};

/// `rt_sigsuspend(mask, sigsetsize)`: the mask is replaced and the thread waits for a signal
/// (the signal code restores the mask and finishes the call with `EINTR` when one is taken).
pub fn sigsuspend(p: &Process, tid: u32, frame: &mut TrapFrame, mask_ptr: u64, setsize: u64) -> Action {
    match suspend(p, tid, mask_ptr, setsize) {
        Ok(()) => Action::Block(sched::Wait { what: WaitFor::Signal, deadline: None }),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// `rt_sigtimedwait(set, info, timeout, sigsetsize)`: a signal of `set` already pending is taken
/// at once; otherwise the thread waits for one, until the timeout.
pub fn sigtimedwait(
    p: &Process,
    tid: u32,
    frame: &mut TrapFrame,
    uset: u64,
    uinfo: u64,
    uts: u64,
    setsize: u64,
) -> Action {
    match timedwait(p, tid, uset, uinfo, uts, setsize) {
        Ok(Waited::Block(deadline)) => Action::Block(sched::Wait {
            what: WaitFor::Signal,
            deadline: (deadline != 0).then_some(deadline),
        }),
        Ok(Waited::Taken(ret)) => Action::reply(frame, ret),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// What `rt_sigtimedwait` found: a signal (the call's return value, its number or `Err(Errno::EFAULT)` from
/// writing its siginfo), or nothing yet (wait until this counter value; 0: no timeout).
enum Waited {
    Taken(Result<u64, Errno>),
    Block(u64),
}

/// `sigaction`.
pub fn sigaction(p: &Process, sig: u64, act: u64, oact: u64, setsize: u64) -> Result<u64, Errno> {
    if setsize != 8 {
        return Err(Errno::EINVAL);
    }
    let new = if act != 0 {
        let mut b = [0u8; SIGACTION_SIZE];
        if copy_in(&mut b, act).is_err() {
            return Err(Errno::EFAULT);
        }
        Some(SigAction::from_bytes(&b).sanitized())
    } else {
        None
    };
    let Some(sig) = action::check_sigaction(sig, new.is_some()) else { return Err(Errno::EINVAL) };
    let old = {
        let mut st = p.signals.state.lock();
        let old = st.action(sig);
        if let Some(new) = new {
            st.set_action(sig, new);
            // Pending instances of a signal that is now ignored are dropped (Linux does so even
            // where blocked: the action, not the mask, decides).
            if action::outcome(sig, &new) == Outcome::Ignore {
                st.shared.discard(sig);
                for t in &mut st.threads {
                    t.pending.discard(sig);
                }
                p.signals.queued.store(st.queued(), Ordering::Release);
            }
        }
        old
    };
    if oact != 0 && copy_out(oact, &old.to_bytes()).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// `sigprocmask`.
pub fn sigprocmask(p: &Process, tid: u32, how: u64, set: u64, oset: u64, setsize: u64) -> Result<u64, Errno> {
    if setsize != 8 {
        return Err(Errno::EINVAL);
    }
    let new = if set != 0 {
        let mut b = [0u8; 8];
        if copy_in(&mut b, set).is_err() {
            return Err(Errno::EFAULT);
        }
        Some(SigSet(u64::from_le_bytes(b)))
    } else {
        None
    };
    let old = {
        let mut st = p.signals.state.lock();
        let Some(t) = st.thread(tid) else { return Err(Errno::ESRCH) };
        let old = t.blocked;
        if let Some(new) = new {
            match old.apply(how, new) {
                Some(m) => t.blocked = m,
                None => return Err(Errno::EINVAL),
            }
        }
        old
    };
    if oset != 0 && copy_out(oset, &old.0.to_le_bytes()).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// `sigpending`.
pub fn sigpending(p: &Process, tid: u32, uset: u64, setsize: u64) -> Result<u64, Errno> {
    if setsize > 8 {
        return Err(Errno::EINVAL);
    }
    let set = {
        let mut st = p.signals.state.lock();
        let shared = st.shared.set();
        let Some(t) = st.thread(tid) else { return Err(Errno::ESRCH) };
        t.pending.set().union(shared).intersect(t.blocked)
    };
    if copy_out(uset, &set.0.to_le_bytes()[..setsize as usize]).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// `sigaltstack`.
pub fn sigaltstack(p: &Process, tid: u32, uss: u64, uoss: u64, sp: u64) -> Result<u64, Errno> {
    let new = if uss != 0 {
        let mut b = [0u8; STACK_T_SIZE];
        if copy_in(&mut b, uss).is_err() {
            return Err(Errno::EFAULT);
        }
        Some(StackT::from_bytes(&b))
    } else {
        None
    };
    let old = {
        let mut st = p.signals.state.lock();
        let Some(t) = st.thread(tid) else { return Err(Errno::ESRCH) };
        let old = t.altstack.report(sp);
        if let Some(new) = new {
            match t.altstack.set(new, sp) {
                Ok(()) => {}
                Err(StackError::OnStack) => return Err(Errno::EPERM),
                Err(StackError::BadFlags) => return Err(Errno::EINVAL),
                Err(StackError::TooSmall) => return Err(Errno::ENOMEM),
            }
        }
        old
    };
    if uoss != 0 && copy_out(uoss, &old.to_bytes()).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

fn read_set(at: u64, setsize: u64) -> Result<SigSet, Errno> {
    if setsize != 8 {
        return Err(Errno::EINVAL);
    }
    let mut b = [0u8; 8];
    copy_in(&mut b, at).map_err(|_| Errno::EFAULT)?;
    Ok(SigSet(u64::from_le_bytes(b)).blockable())
}

fn suspend(p: &Process, tid: u32, mask_ptr: u64, setsize: u64) -> Result<(), Errno> {
    let mask = read_set(mask_ptr, setsize)?;
    let mut st = p.signals.state.lock();
    let t = st.thread(tid).ok_or(Errno::ESRCH)?;
    t.saved_mask = Some(t.blocked);
    t.blocked = mask;
    Ok(())
}

fn timedwait(p: &Process, tid: u32, uset: u64, uinfo: u64, uts: u64, setsize: u64) -> Result<Waited, Errno> {
    let set = read_set(uset, setsize)?;
    let timeout = if uts != 0 {
        let mut ts = [0u8; 16];
        copy_in(&mut ts, uts).map_err(|_| Errno::EFAULT)?;
        let secs = i64::from_le_bytes(ts[..8].try_into().unwrap_or_default());
        let nanos = i64::from_le_bytes(ts[8..].try_into().unwrap_or_default());
        if secs < 0 || !(0..1_000_000_000).contains(&nanos) {
            return Err(Errno::EINVAL);
        }
        Some((secs as u64, nanos as u64))
    } else {
        None
    };
    let taken = {
        let mut st = p.signals.state.lock();
        let taken = take_from(&p.signals, &mut st, tid, set);
        p.signals.queued.store(st.queued(), Ordering::Release);
        if taken.is_none() && timeout != Some((0, 0)) {
            let t = st.thread(tid).ok_or(Errno::ESRCH)?;
            let real_blocked = t.blocked;
            // While it waits, the thread takes the signals it waits for.
            t.blocked = t.blocked.minus(set);
            p.signals.set_wait(t, Wait::Timed { set, info: uinfo, real_blocked });
            let deadline = timeout.map_or(0, |(secs, nanos)| {
                let freq = crate::arch::time::frequency();
                let ticks = secs.saturating_mul(freq).saturating_add(nanos * freq / 1_000_000_000);
                crate::arch::time::counter().saturating_add(ticks.max(1))
            });
            return Ok(Waited::Block(deadline));
        }
        taken
    };
    match taken {
        Some(info) => Ok(Waited::Taken(finish_taken(&info, uinfo))),
        None => Err(Errno::EAGAIN),
    }
}

fn check_sig(sig: u64) -> Result<u32, Errno> {
    if sig == 0 || num::valid(sig) { Ok(sig as u32) } else { Err(Errno::EINVAL) }
}

/// `kill(pid, sig)`, as Linux's `kill_something_info`: `pid > 0` is that process, `0` the
/// caller's process group, `-1` every process but the first and the caller, `-pgid` a group.
/// There is one user, so every process may signal every other. As on Linux a missing target is
/// `ESRCH` before an invalid signal is `EINVAL` (the signal is checked per target found), a
/// zombie is signalled successfully (nothing is queued: it runs no more), and a call that reaches
/// several processes fails only when none of them took the signal.
/// `kill`.
pub fn kill(p: &Process, pid: i32, sig: u64) -> Result<u64, Errno> {
    use crate::process::family::Targets;
    let Some(which) = Targets::of_pid(pid, p, Targets::AllBut(p.pid)) else { return Err(Errno::ESRCH) };
    let mut sent = false;
    let mut error = Errno::ESRCH;
    crate::process::family::for_each_process(|target| {
        if !which.matches(target) {
            return;
        }
        let result = match check_sig(sig) {
            Err(e) => Err(e),
            Ok(s) if !may_kill(p, target, s) => Err(Errno::EPERM),
            Ok(_) if target.done.load(Ordering::Acquire) => Ok(()),
            Ok(s) => send(target, Target::Process, SigInfo::sent(s, num::SI_USER, p.pid, 0)).map(|_| ()),
        };
        match result {
            Ok(()) => sent = true,
            Err(e) => error = e,
        }
    });
    if sent { Ok(0) } else { Err(error) }
}

/// Whether `p` may send `sig` to `target` (Linux's `check_kill_permission`): its own process,
/// or a target whose real or saved user id is the sender's real or effective one, or a sender
/// with root's capabilities, or SIGCONT within the session.
fn may_kill(p: &Process, target: &Process, sig: u32) -> bool {
    if core::ptr::eq(p, target) {
        return true;
    }
    let (me, them) = (p.posix.cred(), target.posix.cred());
    let related = [me.uid, me.euid].iter().any(|u| *u == them.uid || *u == them.suid);
    related
        || me.capable(crate::fs::cred::cap::KILL)
        || sig == num::SIGCONT
            && target.posix.sid.load(Ordering::Acquire) == p.posix.sid.load(Ordering::Acquire)
}

fn thread_target(p: &Process, tgid: Option<i32>, tid: i32) -> Result<u32, Errno> {
    if tid <= 0 || tgid.is_some_and(|g| g <= 0) {
        return Err(Errno::EINVAL);
    }
    if tgid.is_some_and(|g| g as u32 != p.pid) {
        return Err(Errno::ESRCH);
    }
    let tid = tid as u32;
    if p.signals.state.lock().thread(tid).is_none() {
        return Err(Errno::ESRCH);
    }
    Ok(tid)
}

/// `tgkill`.
pub fn tgkill(p: &Process, tgid: Option<i32>, tid: i32, sig: u64) -> Result<u64, Errno> {
    let target = thread_target(p, tgid, tid)?;
    let sig = check_sig(sig)?;
    send(p, Target::Thread(target), SigInfo::sent(sig, num::SI_TKILL, p.pid, 0)).map(|_| 0)
}

/// `sigqueueinfo`.
pub fn sigqueueinfo(
    p: &Process,
    me: u32,
    tgid: Option<i32>,
    pid: i32,
    sig: u64,
    uinfo: u64,
) -> Result<u64, Errno> {
    let mut raw = [0u8; SIGINFO_SIZE];
    if copy_in(&mut raw, uinfo).is_err() {
        return Err(Errno::EFAULT);
    }
    let code = i32::from_le_bytes([raw[8], raw[9], raw[10], raw[11]]);
    // A program may not pose as the kernel or as kill/tgkill when signalling another process
    // (or, for the thread form, another thread).
    let to_self = match tgid {
        None => pid as u32 == p.pid,
        Some(_) => pid as u32 == me,
    };
    if (code >= 0 || code == num::SI_TKILL) && !to_self {
        return Err(Errno::EPERM);
    }
    let target = match tgid {
        None if pid as u32 == p.pid => Target::Process,
        None => return Err(Errno::ESRCH),
        Some(_) => Target::Thread(thread_target(p, tgid, pid)?),
    };
    let sig = check_sig(sig)?;
    send(p, target, SigInfo::from_user(sig, raw)).map(|_| 0)
}

/// rt_sigreturn: restores the registers, FP/SIMD state, mask and alternate stack from the frame
/// at sp. A bad frame raises SIGSEGV as Linux's does: a misaligned sp with the registers as they
/// were (si_addr = sp); any other with the frame's mask and general registers already in place
/// ([`frame::Clobbered`]; zeros where the frame could not be read), si_addr the new sp, and the
/// signal delivered on that stack or the alternate one — so a garbage frame usually ends the
/// process, on Linux as here.
/// `sigreturn`.
pub fn sigreturn(thread: &mut Thread, frame: &mut TrapFrame) -> Action {
    let p = thread.process.clone();
    let sp = frame.sp_el0;
    let mut bytes = crate::process::signals::FRAME_IN[crate::cpu::current_cpu()].lock();
    bytes.fill(0);
    // What the kernel wrote first (as Linux, it reads the whole frame only if the records go on).
    let parsed = if !frame::frame_address_ok(sp) {
        Err("sp not 16-aligned")
    } else if copy_in(&mut bytes[..frame::WRITTEN_MAX], sp).is_err() {
        Err("frame not readable")
    } else {
        match frame::parse(&bytes, frame::WRITTEN_MAX) {
            Err(frame::BadFrame::Truncated) => match copy_in(&mut bytes[..], sp) {
                Ok(()) => frame::parse(&bytes, frame::FRAME_SIZE).map_err(|_| "malformed frame"),
                Err(_) => Err("frame not readable"),
            },
            other => other.map_err(|_| "malformed frame"),
        }
    };
    match parsed {
        Ok(r) => {
            // The interrupted call the handler ran for is over: no `restart_syscall` resumes it
            // now (Linux's `rt_sigreturn` resets the restart block).
            thread.call.restart_block = None;
            with_frame(frame, |ctx| *ctx = r.ctx);
            let mut st = p.signals.state.lock();
            if let Some(t) = st.thread(thread.tid) {
                t.blocked = r.mask;
                t.restart_x0 = None;
                // Errors are ignored, as Linux does (restore_altstack squashes all but EFAULT).
                let _ = t.altstack.set(r.stack, r.ctx.sp);
            }
            Action::Continue
        }
        Err(why) => {
            let sp = if frame::frame_address_ok(sp) { clobber(thread, frame, &mut bytes, sp) } else { sp };
            let mapped = p.space().is_some_and(|space| space.lock().vm().find(sp).is_some());
            let code = if mapped { num::SEGV_ACCERR } else { num::SEGV_MAPERR };
            let fault = Fault { info: SigInfo::fault(num::SIGSEGV, code, sp), address: 0, esr: 0 };
            match force_fault(thread, frame, &fault) {
                Ok(()) => Action::Continue,
                Err(status) => {
                    kprintln!(
                        "\n*** pid {}: rt_sigreturn with a bad signal frame at sp {:#x} ({}); exit status {}",
                        p.pid,
                        sp,
                        why,
                        status
                    );
                    crate::process::kill(&p, status)
                }
            }
        }
    }
}

/// Puts into `frame` (and the thread's mask) what a bad signal frame at `sp` leaves behind on
/// Linux ([`frame::Clobbered`]); returns the new sp. Registers the frame could not give read as
/// 0, as Linux's `__get_user_error` leaves them.
fn clobber(thread: &Thread, frame: &mut TrapFrame, bytes: &mut [u8; frame::FRAME_SIZE], sp: u64) -> u64 {
    let p = &thread.process;
    let c = if copy_in(&mut bytes[..frame::REGISTERS_END], sp).is_ok() {
        let c = frame::clobbered(bytes);
        if let Some(t) = p.signals.state.lock().thread(thread.tid) {
            t.blocked = c.mask;
            t.restart_x0 = None;
        }
        c
    } else {
        frame::Clobbered { mask: SigSet(0), x: [0; 31], sp: 0, pc: 0, pstate: 0 }
    };
    frame.x = c.x;
    frame.sp_el0 = c.sp;
    frame.elr = c.pc;
    frame.spsr = c.pstate;
    c.sp
}
