//! The event-loop calls: `epoll_create1`, `epoll_ctl`, `epoll_pwait`, `epoll_pwait2`,
//! `eventfd2`, `timerfd_create`, `timerfd_settime`, `timerfd_gettime`, `signalfd4`, the pidfd
//! family (`pidfd_open`, `pidfd_send_signal`, `pidfd_getfd`, `process_madvise`,
//! `process_mrelease`), `membarrier`, `rseq`, `capget` and `capset`, with Linux 6.1's argument
//! checks in Linux's order. The objects are `fs`'s (epoll, eventfd, timerfd) and `process`'s
//! (signalfd, pidfd, rseq, capabilities); this file reads the arguments and joins them.
//!
//! `epoll_pwait` blocks on its epoll's key (`WaitFor::Event`) with its deadline kept in the
//! thread across the restarts, as `ppoll` does (`poll`), and with the signal mask it is given
//! while it waits ([`poll::set_wait_mask`](super::poll)); a signal whose handler runs ends it
//! with `EINTR`, never restarted, as on Linux.
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use ::signal::info::{SIGINFO_SIZE, SigInfo};
use ::signal::num;
use ::signal::set::SigSet;
use linux_abi::Errno;
use linux_abi::mman::{MADV_COLD, MADV_COLLAPSE, MADV_PAGEOUT, MADV_WILLNEED};
use linux_abi::poll::{
    EPOLL_CLOEXEC, EPOLL_CTL_DEL, SFD_CLOEXEC, SFD_NONBLOCK, TFD_TIMER_ABSTIME, TFD_TIMER_CANCEL_ON_SET,
};
use linux_abi::sched::*;
use linux_abi::time::{
    CLOCK_BOOTTIME, CLOCK_BOOTTIME_ALARM, CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_REALTIME_ALARM, Timespec,
};

use super::poll::{restore_wait_mask, set_wait_mask};
use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::cred::{cap, cap_version};
use crate::fs::epoll::{self, EVENT_SIZE, Epoll, MAX_EVENTS};
use crate::fs::file::FdEntry;
use crate::fs::timerfd::{Setting, TimerFd};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::pidfd::{self, PidFd};
use crate::process::signalfd::SignalFd;
use crate::process::signals::{Target, send};
use crate::process::{Process, Thread};
use crate::sched::{Action, Wait, WaitFor};

/// The end of the user half: a user range must end at or below it (Linux's `access_ok`).
const TASK_SIZE: u64 = 1 << mm::addr::USER_VA_BITS;

// ---- epoll ---------------------------------------------------------------------------------------

/// `epoll_create1(flags)`.
pub fn epoll_create1(p: &Process, flags: u64) -> Result<u64, Errno> {
    if flags & !EPOLL_CLOEXEC != 0 {
        return Err(Errno::EINVAL);
    }
    crate::fs::anon::install(&p.posix.files, epoll::create()?, 0, flags)
}

/// `epoll_ctl(epfd, op, fd, event)`: the event is read first (but for `EPOLL_CTL_DEL`), then
/// both descriptors (`EBADF`); the rest is `fs::epoll::ctl`'s.
pub fn epoll_ctl(p: &Process, epfd: u64, op: u64, fd: u64, uevent: u64) -> Result<u64, Errno> {
    let event = if op == EPOLL_CTL_DEL {
        (0, 0)
    } else {
        let mut b = [0u8; EVENT_SIZE as usize];
        copy_in(&mut b, uevent).map_err(|_| Errno::EFAULT)?;
        let events = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        (events, u64::from_le_bytes(b[8..].try_into().unwrap_or_default()))
    };
    let (ep, target) = {
        let files = p.posix.files.lock();
        (files.file(epfd)?, files.file(fd)?)
    };
    epoll::ctl(&ep, op, &target, fd, event).map(|()| 0)
}

/// `epoll_pwait(epfd, events, maxevents, timeout, sigmask, sigsetsize)`: `timeout` in
/// milliseconds (negative: none).
pub fn epoll_pwait(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let kept = thread.poll_deadline.take();
    let timeout = a[3] as i32;
    let deadline = kept.or_else(|| {
        (timeout >= 0)
            .then(|| crate::wallclock::deadline_after(u64::from(timeout.unsigned_abs()) * 1_000_000))
    });
    epoll_wait(thread, frame, a, Ok(deadline))
}

/// `epoll_pwait2(epfd, events, maxevents, timeout, sigmask, sigsetsize)`: `timeout` a
/// `struct timespec` (null: none).
pub fn epoll_pwait2(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let kept = thread.poll_deadline.take();
    let deadline = match (kept, a[3]) {
        (Some(d), _) => Ok(Some(d)),
        (None, 0) => Ok(None),
        (None, uts) => {
            super::time::read_valid_timespec(uts).map(|t| Some(crate::wallclock::deadline_after(t.to_ns())))
        }
    };
    epoll_wait(thread, frame, a, deadline)
}

/// The wait of both forms, once the timeout is a deadline (or the error reading it).
fn epoll_wait(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    a: [u64; 6],
    deadline: Result<Option<u64>, Errno>,
) -> Action {
    let [epfd, events, maxevents, _, sigmask, sigsetsize] = a;
    let generation = crate::sched::event_generation();
    let p = thread.process.clone();
    let mut umask = 0;
    let outcome = (|| {
        let deadline = deadline?;
        set_wait_mask(&p, thread.tid, sigmask, sigsetsize)?;
        umask = sigmask;
        let max = maxevents as i32;
        if max <= 0 || max as u64 > MAX_EVENTS {
            return Err(Errno::EINVAL);
        }
        if events.checked_add(max as u64 * EVENT_SIZE).is_none_or(|end| end > TASK_SIZE) {
            return Err(Errno::EFAULT);
        }
        let open = p.posix.files.lock().file(epfd)?;
        let ep = open.file_as::<Epoll>().ok_or(Errno::EINVAL)?;
        let n = ep.collect(events, max as u64)?;
        if n > 0 || deadline.is_some_and(|d| crate::arch::time::counter() >= d) {
            return Ok(Ok(n));
        }
        Ok(Err((ep.key(), deadline)))
    })();
    match outcome {
        Ok(Err((key, deadline))) => {
            thread.poll_deadline = deadline;
            Action::Block(Wait { what: WaitFor::Event { key, generation }, deadline })
        }
        Ok(Ok(n)) => {
            restore_wait_mask(&p, thread.tid, umask);
            Action::reply(frame, Ok(n))
        }
        Err(e) => {
            restore_wait_mask(&p, thread.tid, umask);
            Action::reply(frame, Err(e))
        }
    }
}

// ---- eventfd, timerfd, signalfd ------------------------------------------------------------------

/// `eventfd2(initval, flags)`.
pub fn eventfd2(p: &Process, initval: u64, flags: u64) -> Result<u64, Errno> {
    crate::fs::eventfd::eventfd2(&p.posix.files, initval, flags)
}

/// `timerfd_create(clockid, flags)`: CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME and their
/// _ALARM forms (which need `CAP_WAKE_ALARM`).
pub fn timerfd_create(p: &Process, clock: u64, flags: u64) -> Result<u64, Errno> {
    let clock = clock as i32;
    let realtime = match clock {
        CLOCK_REALTIME | CLOCK_REALTIME_ALARM => true,
        CLOCK_MONOTONIC | CLOCK_BOOTTIME | CLOCK_BOOTTIME_ALARM => false,
        _ => return Err(Errno::EINVAL),
    };
    if flags & !(linux_abi::poll::TFD_CLOEXEC | linux_abi::poll::TFD_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    if matches!(clock, CLOCK_REALTIME_ALARM | CLOCK_BOOTTIME_ALARM)
        && !p.posix.cred().capable(cap::WAKE_ALARM)
    {
        return Err(Errno::EPERM);
    }
    crate::fs::timerfd::create(&p.posix.files, realtime, flags)
}

/// Reads a `struct itimerspec` (interval, then value), both valid timespecs.
fn read_itimerspec(at: u64) -> Result<Setting, Errno> {
    let mut b = [0u8; 32];
    copy_in(&mut b, at).map_err(|_| Errno::EFAULT)?;
    let mut half = [0u8; 16];
    half.copy_from_slice(&b[..16]);
    let interval = Timespec::from_bytes(half);
    half.copy_from_slice(&b[16..]);
    let value = Timespec::from_bytes(half);
    if !interval.is_valid() || !value.is_valid() {
        return Err(Errno::EINVAL);
    }
    Ok(Setting { value: value.to_ns(), interval: interval.to_ns() })
}

/// Writes a `struct itimerspec`.
fn write_itimerspec(at: u64, s: Setting) -> Result<(), Errno> {
    let mut b = [0u8; 32];
    b[..16].copy_from_slice(&Timespec::from_ns(s.interval).to_bytes());
    b[16..].copy_from_slice(&Timespec::from_ns(s.value).to_bytes());
    copy_out(at, &b).map_err(|_| Errno::EFAULT)
}

/// The timerfd at `fd` (`EBADF`; `EINVAL` for another file).
fn timerfd(p: &Process, fd: u64) -> Result<alloc::sync::Arc<crate::fs::file::OpenFile>, Errno> {
    let open = p.posix.files.lock().file(fd)?;
    if open.file_as::<TimerFd>().is_none() {
        return Err(Errno::EINVAL);
    }
    Ok(open)
}

/// `timerfd_settime(fd, flags, new, old)`.
pub fn timerfd_settime(p: &Process, fd: u64, flags: u64, new: u64, old: u64) -> Result<u64, Errno> {
    let setting = read_itimerspec(new)?;
    if flags & !(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET) != 0 {
        return Err(Errno::EINVAL);
    }
    let open = timerfd(p, fd)?;
    let before = open.file_as::<TimerFd>().map(|t| t.set(flags & TFD_TIMER_ABSTIME != 0, setting));
    match before {
        Some(before) if old != 0 => write_itimerspec(old, before).map(|()| 0),
        _ => Ok(0),
    }
}

/// `timerfd_gettime(fd, cur)`.
pub fn timerfd_gettime(p: &Process, fd: u64, cur: u64) -> Result<u64, Errno> {
    let open = timerfd(p, fd)?;
    let now = open.file_as::<TimerFd>().map(TimerFd::get).unwrap_or_default();
    write_itimerspec(cur, now).map(|()| 0)
}

/// `signalfd4(fd, mask, sizemask, flags)`: a new signalfd (`fd` -1) or a new mask for one.
pub fn signalfd4(p: &Process, fd: u64, umask: u64, size: u64, flags: u64) -> Result<u64, Errno> {
    if size != 8 {
        return Err(Errno::EINVAL);
    }
    let mut b = [0u8; 8];
    copy_in(&mut b, umask).map_err(|_| Errno::EFAULT)?;
    let mask = SigSet(u64::from_le_bytes(b));
    if flags & !(SFD_CLOEXEC | SFD_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    if fd as i32 == -1 {
        let file = fallible::arc(SignalFd::new(mask)).map_err(|_| Errno::ENOMEM)?;
        return crate::fs::anon::install(&p.posix.files, file, (flags & SFD_NONBLOCK) as u32, flags);
    }
    let open = p.posix.files.lock().file(fd)?;
    let sfd = open.file_as::<SignalFd>().ok_or(Errno::EINVAL)?;
    sfd.set_mask(mask);
    Ok(fd)
}

// ---- pidfds --------------------------------------------------------------------------------------

/// `pidfd_open(pid, flags)`.
pub fn pidfd_open(p: &Process, pid: u64, flags: u64) -> Result<u64, Errno> {
    pidfd::open(&p.posix.files, pid, flags)
}

/// The process the pidfd at `fd` names, unless reaped (`EBADF`: not a pidfd; `ESRCH`: reaped).
fn pidfd_target(p: &Process, fd: u64) -> Result<alloc::sync::Arc<Process>, Errno> {
    let (open, _) = pidfd::lookup(&p.posix.files, fd)?;
    open.file_as::<PidFd>().and_then(PidFd::process).ok_or(Errno::ESRCH)
}

/// `pidfd_send_signal(pidfd, sig, info, flags)`, as Linux's: the flags, the pidfd, the siginfo
/// (its number must be `sig`; another process may not be sent a code that poses as the kernel
/// or as `tgkill`), then the target (`ESRCH` once reaped) and the signal number.
pub fn pidfd_send_signal(p: &Process, fd: u64, sig: u64, uinfo: u64, flags: u64) -> Result<u64, Errno> {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let (open, _) = pidfd::lookup(&p.posix.files, fd)?;
    let named = open.file_as::<PidFd>().map_or(0, PidFd::pid);
    let sig32 = sig as u32;
    let info = if uinfo != 0 {
        let mut raw = [0u8; SIGINFO_SIZE];
        copy_in(&mut raw, uinfo).map_err(|_| Errno::EFAULT)?;
        let info = SigInfo::from_user(sig32, raw);
        if u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) != sig32 || sig >> 32 != 0 {
            return Err(Errno::EINVAL);
        }
        if named != p.pid && (info.code() >= 0 || info.code() == num::SI_TKILL) {
            return Err(Errno::EPERM);
        }
        info
    } else {
        SigInfo::sent(sig32, num::SI_USER, p.pid, 0)
    };
    let target = open.file_as::<PidFd>().and_then(PidFd::process).ok_or(Errno::ESRCH)?;
    if sig != 0 && !num::valid(sig) {
        return Err(Errno::EINVAL);
    }
    if sig == 0 || target.done.load(Ordering::Acquire) {
        return Ok(0); // a zombie takes it and does nothing, as on Linux
    }
    send(&target, Target::Process, info).map(|_| 0)
}

/// `pidfd_getfd(pidfd, targetfd, flags)`: a close-on-exec copy of the target's descriptor.
pub fn pidfd_getfd(p: &Process, fd: u64, targetfd: u64, flags: u64) -> Result<u64, Errno> {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let target = pidfd_target(p, fd)?;
    let file = target.posix.files.lock().file(targetfd)?;
    let entry = FdEntry { file, cloexec: true };
    let installed = p.posix.files.lock().install_lowest(0, entry.clone());
    drop(entry);
    installed.map(|n| n as u64)
}

/// `process_madvise(pidfd, iovec, vlen, advice, flags)`: the advice Linux 6.1 takes from
/// another process (`MADV_COLD`, `MADV_PAGEOUT`, `MADV_WILLNEED`, `MADV_COLLAPSE`) on each
/// range; the bytes advised, or the first range's error.
pub fn process_madvise(
    p: &Process,
    fd: u64,
    iov: u64,
    vlen: u64,
    advice: u64,
    flags: u64,
) -> Result<u64, Errno> {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    if vlen > linux_abi::fcntl::IOV_MAX {
        return Err(Errno::EINVAL);
    }
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    fallible::reserve(&mut ranges, vlen as usize)?;
    for i in 0..vlen {
        let mut b = [0u8; 16];
        copy_in(&mut b, iov.wrapping_add(i * 16)).map_err(|_| Errno::EFAULT)?;
        let base = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        let len = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
        ranges.push((base, len));
    }
    let target = pidfd_target(p, fd)?;
    if !matches!(advice, MADV_COLD | MADV_PAGEOUT | MADV_WILLNEED | MADV_COLLAPSE) {
        return Err(Errno::EINVAL);
    }
    if target.space().is_none() {
        return Err(Errno::ESRCH);
    }
    if !p.posix.cred().capable(cap::SYS_NICE) {
        return Err(Errno::EPERM);
    }
    let mut done = 0u64;
    for (base, len) in ranges {
        match super::memory::madvise(&target, base, len, advice) {
            Ok(_) => done += len,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// `process_mrelease(pidfd, flags)`: the memory of a process being killed is freed now. Here a
/// killed process's teardown frees it already, so the call answers as Linux 6.1 does: 0 for a
/// process that is exiting and still has its memory, `EINVAL` for one that is not exiting,
/// `ESRCH` for one whose memory is gone (a zombie) or that is reaped.
pub fn process_mrelease(p: &Process, fd: u64, flags: u64) -> Result<u64, Errno> {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let target = pidfd_target(p, fd)?;
    if target.done.load(Ordering::Acquire) || target.space().is_none() {
        return Err(Errno::ESRCH);
    }
    if target.exiting.load(Ordering::Acquire) { Ok(0) } else { Err(Errno::EINVAL) }
}

// ---- membarrier, rseq, capabilities --------------------------------------------------------------

/// What `MEMBARRIER_CMD_QUERY` answers: every command (no `nohz_full` CPU here).
const MEMBARRIER_COMMANDS: u64 = MEMBARRIER_CMD_GLOBAL
    | MEMBARRIER_CMD_GLOBAL_EXPEDITED
    | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED
    | MEMBARRIER_CMD_PRIVATE_EXPEDITED
    | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
    | MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE
    | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE
    | MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ
    | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ;
/// `MEMBARRIER_CMD_FLAG_CPU`: the RSEQ barrier on one CPU.
const MEMBARRIER_CMD_FLAG_CPU: u64 = 1;

/// `membarrier(cmd, flags, cpu_id)`, as Linux 6.1's: every barrier is an interrupt on each CPU
/// running a thread concerned, which executes a full barrier there and returns to user space
/// through a context synchronisation event (`irq::sync_cpus`): the global commands reach every
/// CPU running a program, the private ones those running a thread of this process (none when
/// it has one thread: the caller's own return is the barrier); a CPU that starts one later has
/// passed the scheduler's barrier (`sched::cpus_running`). A private command needs its
/// registration (`EPERM`).
pub fn membarrier(p: &Process, cmd: u64, flags: u64) -> Result<u64, Errno> {
    let cmd = u64::from(cmd as u32);
    let flags = u64::from(flags as u32);
    let flags_ok = if cmd == MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ {
        flags == 0 || flags == MEMBARRIER_CMD_FLAG_CPU
    } else {
        flags == 0
    };
    if !flags_ok {
        return Err(Errno::EINVAL);
    }
    let registered = |bit: u64| u64::from(p.posix.membarrier.load(Ordering::Acquire)) & bit != 0;
    let register = |bit: u64| {
        p.posix.membarrier.fetch_or(bit as u32, Ordering::AcqRel);
        Ok(0)
    };
    let private = |registration: u64| {
        if !registered(registration) {
            return Err(Errno::EPERM);
        }
        if p.threads.load(Ordering::Acquire) > 1 {
            crate::irq::sync_cpus(crate::sched::cpus_running(Some(crate::process::group_of(p))));
        }
        Ok(0)
    };
    match cmd {
        MEMBARRIER_CMD_QUERY => Ok(MEMBARRIER_COMMANDS),
        MEMBARRIER_CMD_GLOBAL | MEMBARRIER_CMD_GLOBAL_EXPEDITED => {
            crate::irq::sync_cpus(crate::sched::cpus_running(None));
            Ok(0)
        }
        MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED
        | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
        | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE
        | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ => register(cmd),
        MEMBARRIER_CMD_PRIVATE_EXPEDITED => private(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED),
        MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE => {
            private(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE)
        }
        MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ => private(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ),
        _ => Err(Errno::EINVAL),
    }
}

/// `rseq(rseq, rseq_len, flags, sig)`.
pub fn rseq(thread: &mut Thread, a: [u64; 6]) -> Result<u64, Errno> {
    crate::process::rseq::rseq(thread, a[0], a[1], a[2], a[3])
}

/// Reads a capability header's version; an unknown one is `EINVAL` with the kernel's version
/// written back (Linux's `cap_validate_magic`). The words per set.
fn cap_header(hdr: u64) -> Result<usize, Errno> {
    let mut b = [0u8; 4];
    copy_in(&mut b, hdr).map_err(|_| Errno::EFAULT)?;
    match cap_version::words(u32::from_le_bytes(b)) {
        Some(words) => Ok(words),
        None => {
            copy_out(hdr, &cap_version::V3.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
            Err(Errno::EINVAL)
        }
    }
}

/// The header's pid.
fn cap_pid(hdr: u64) -> Result<i32, Errno> {
    let mut b = [0u8; 4];
    copy_in(&mut b, hdr + 4).map_err(|_| Errno::EFAULT)?;
    Ok(i32::from_le_bytes(b))
}

/// `capget(hdr, data)`: the sets of the caller or of process `pid`, one `{effective, permitted,
/// inheritable}` triple of 32-bit words per word of the version. With no `data`, a version
/// query: 0 even for an unknown version (whose header then holds the kernel's).
pub fn capget(p: &Process, hdr: u64, data: u64) -> Result<u64, Errno> {
    let words = match cap_header(hdr) {
        Err(Errno::EINVAL) if data == 0 => return Ok(0),
        other => other?,
    };
    if data == 0 {
        return Ok(0);
    }
    let pid = cap_pid(hdr)?;
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    let sets = if pid == 0 || pid as u32 == p.pid {
        p.posix.cred()
    } else {
        crate::process::family::by_pid(pid as u32).map(|t| t.posix.cred()).ok_or(Errno::ESRCH)?
    };
    let mut out = [0u8; 24];
    for w in 0..words {
        let shift = 32 * w;
        let word = |set: u64| ((set >> shift) as u32).to_le_bytes();
        out[w * 12..w * 12 + 4].copy_from_slice(&word(sets.cap_effective));
        out[w * 12 + 4..w * 12 + 8].copy_from_slice(&word(sets.cap_permitted));
        out[w * 12 + 8..w * 12 + 12].copy_from_slice(&word(sets.cap_inheritable));
    }
    copy_out(data, &out[..words * 12]).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `capset(hdr, data)`: the caller's new sets (only its own: `EPERM` for another pid), as
/// `Credentials::set_caps` allows them.
pub fn capset(p: &Process, hdr: u64, data: u64) -> Result<u64, Errno> {
    let words = cap_header(hdr)?;
    let pid = cap_pid(hdr)?;
    if pid != 0 && pid as u32 != p.pid {
        return Err(Errno::EPERM);
    }
    let mut b = [0u8; 24];
    copy_in(&mut b[..words * 12], data).map_err(|_| Errno::EFAULT)?;
    let field = |w: usize, k: usize| {
        u64::from(u32::from_le_bytes(b[w * 12 + k * 4..w * 12 + k * 4 + 4].try_into().unwrap_or_default()))
            << (32 * w)
    };
    let (mut effective, mut permitted, mut inheritable) = (0, 0, 0);
    for w in 0..words {
        effective |= field(w, 0);
        permitted |= field(w, 1);
        inheritable |= field(w, 2);
    }
    let mut slot = p.posix.cred.lock();
    let new = slot.set_caps(effective, permitted, inheritable)?;
    *slot = fallible::arc(new).map_err(|_| Errno::ENOMEM)?;
    Ok(0)
}
