//! `ppoll` and `pselect6`: what each descriptor is ready for (its file's `poll`), and the wait when
//! nothing is. A poll that must wait blocks on [`WaitFor::Poll`] until any kernel event (console
//! input, a pipe change) or its deadline, each of which restarts the call, so every answer (and
//! the sets written back) comes from this code; the deadline is kept in the thread across the
//! restarts. The entries and bitmaps are allocated fallibly (`ENOMEM`).
//!
//! The signal mask a call gives is the thread's while it waits, as Linux's
//! `set_user_sigmask` makes it ([`set_wait_mask`], shared with `epoll_pwait`): the old one is
//! kept in the thread's `saved_mask` across the restarts, put back when the call returns, and,
//! when a signal ends the wait (`EINTR`), put back by the signal code after the handler (its
//! frame saves the old mask), so a signal the call's mask lets in is handled inside it. The time
//! left is written back into the timeout when the call returns, as Linux does for both (glibc's
//! `select` passes it on).
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::layout::PollFd;
use linux_abi::poll;
use linux_abi::time::Timespec;
use signal::set::SigSet;

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::file::FdTable;
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::{Process, Thread};
use crate::sched::{Action, Wait, WaitFor};

/// Makes the signal mask at `umask` (`size` bytes; none when 0) the thread's for the wait,
/// keeping the old one in its `saved_mask` (left alone when a restarted call finds it there).
///
/// # Errors
/// `EINVAL` (a size other than 8), `EFAULT`.
pub(super) fn set_wait_mask(p: &Process, tid: u32, umask: u64, size: u64) -> Result<(), Errno> {
    if umask == 0 {
        return Ok(());
    }
    if size != 8 {
        return Err(Errno::EINVAL);
    }
    let mut b = [0u8; 8];
    copy_in(&mut b, umask).map_err(|_| Errno::EFAULT)?;
    let mask = SigSet(u64::from_le_bytes(b)).blockable();
    let mut st = p.signals.state.lock();
    let t = st.thread(tid).ok_or(Errno::ESRCH)?;
    if t.saved_mask.is_none() {
        t.saved_mask = Some(t.blocked);
        t.blocked = mask;
    }
    Ok(())
}

/// The call that set a wait mask ([`set_wait_mask`], `umask` not 0) returns: the old one is the
/// thread's again.
pub(super) fn restore_wait_mask(p: &Process, tid: u32, umask: u64) {
    if umask == 0 {
        return;
    }
    let mut st = p.signals.state.lock();
    if let Some(t) = st.thread(tid)
        && let Some(old) = t.saved_mask.take()
    {
        t.blocked = old;
    }
}

/// Writes the time left until `deadline` into the timeout at `tsp` (none when 0, or when the
/// timeout was zero), as Linux's `poll_select_finish` does; a failed write is ignored, as there.
fn write_time_left(tsp: u64, deadline: Option<u64>) {
    let (Some(deadline), true) = (deadline, tsp != 0) else { return };
    if super::time::read_timespec(tsp).is_ok_and(|t| t.to_ns() == 0) {
        return;
    }
    let left = deadline.saturating_sub(crate::arch::time::counter());
    let ns = linux_abi::time::ticks_to_ns(left, crate::arch::time::frequency());
    let _ = copy_out(tsp, &Timespec::from_ns(ns).to_bytes());
}

/// What a poll decided: return this many ready descriptors, or wait.
enum Outcome {
    Ready(u64),
    Wait { generation: u32, deadline: Option<u64> },
}

/// When a poll stops waiting (a counter value; `None`: never): the deadline its first run set,
/// kept in the thread (`kept`, taken from its `resume`) across the restarts that a wake-up or
/// the deadline itself causes, else `tsp`'s timeout from now.
fn poll_deadline(tsp: u64, kept: Option<u64>) -> Result<Option<u64>, Errno> {
    if kept.is_some() {
        return Ok(kept);
    }
    if tsp == 0 {
        return Ok(None);
    }
    let t = super::time::read_valid_timespec(tsp)?;
    Ok(Some(crate::wallclock::deadline_after(t.to_ns())))
}

/// Whether a poll with `deadline` must return now rather than wait.
fn poll_expired(deadline: Option<u64>) -> bool {
    deadline.is_some_and(|d| crate::arch::time::counter() >= d)
}

/// Runs a poll that decided `outcome`: the count goes back in x0 (the time left into the
/// timeout at `tsp`, the signal mask at `umask` undone), a wait blocks the thread.
fn finish(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    (tsp, deadline): (u64, Option<u64>),
    umask: u64,
    outcome: Result<Outcome, Errno>,
) -> Action {
    match outcome {
        Ok(Outcome::Wait { generation, deadline }) => {
            thread.poll_deadline = deadline;
            return Action::Block(Wait { what: WaitFor::Poll { generation }, deadline });
        }
        Ok(Outcome::Ready(_)) => write_time_left(tsp, deadline),
        Err(_) => {}
    }
    restore_wait_mask(&thread.process, thread.tid, umask);
    Action::reply(
        frame,
        outcome.map(|o| match o {
            Outcome::Ready(n) => n,
            Outcome::Wait { .. } => 0,
        }),
    )
}

/// `ppoll(fds, nfds, tsp, sigmask, sigsetsize)`: the mask is the thread's while it waits
/// ([`set_wait_mask`]); a poll that finds nothing ready blocks until a kernel event or its
/// deadline ([`WaitFor::Poll`]), each of which restarts it (the deadline kept in the thread), so
/// the answer always comes from this code.
pub fn ppoll(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let kept = thread.poll_deadline.take();
    let [_, _, tsp, sigmask, sigsetsize, _] = a;
    let generation = crate::sched::event_generation();
    let p = thread.process.clone();
    let (mut umask, mut deadline) = (0, None);
    let outcome = (|| {
        deadline = poll_deadline(tsp, kept)?;
        set_wait_mask(&p, thread.tid, sigmask, sigsetsize)?;
        umask = sigmask;
        ppoll_outcome(&p.posix.files, a, deadline, generation)
    })();
    finish(thread, frame, (tsp, deadline), umask, outcome)
}

fn ppoll_outcome(
    files: &spin::Mutex<FdTable>,
    a: [u64; 6],
    deadline: Option<u64>,
    generation: u32,
) -> Result<Outcome, Errno> {
    let [fds, nfds, ..] = a;
    if nfds > files.lock().limit() as u64 {
        return Err(Errno::EINVAL);
    }
    let mut entries = Vec::new();
    fallible::reserve(&mut entries, nfds as usize)?;
    for i in 0..nfds {
        let mut b = [0u8; 8];
        copy_in(&mut b, fds.wrapping_add(i * 8)).map_err(|_| Errno::EFAULT)?;
        entries.push(PollFd::from_bytes(b)); // within the room reserved above
    }
    let mut ready = 0;
    for e in &mut entries {
        e.revents = if e.fd < 0 {
            0
        } else {
            let file = files.lock().file(e.fd as u64);
            match file {
                Err(_) => poll::POLLNVAL,
                Ok(f) => PollFd::answer(e.events, f.file.poll().0),
            }
        };
        ready += u64::from(e.revents != 0);
    }
    for (i, e) in entries.iter().enumerate() {
        copy_out(fds.wrapping_add(i as u64 * 8), &e.to_bytes()).map_err(|_| Errno::EFAULT)?;
    }
    if ready > 0 || poll_expired(deadline) {
        return Ok(Outcome::Ready(ready));
    }
    Ok(Outcome::Wait { generation, deadline })
}

/// `pselect6(nfds, readfds, writefds, exceptfds, tsp, sig)`: descriptor sets of `nfds` bits,
/// written back only when the call returns (a wait restarts it, reading them again, as
/// [`ppoll`]); `sig` points at the mask's address and size (`{ sigset_t *ss; size_t ss_len }`).
pub fn pselect6(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let kept = thread.poll_deadline.take();
    let [nfds, _, _, _, tsp, sig] = a;
    let generation = crate::sched::event_generation();
    let p = thread.process.clone();
    let (mut umask, mut deadline) = (0, None);
    let outcome = (|| {
        if nfds as i64 > p.posix.files.lock().limit() as i64 || (nfds as i64) < 0 {
            return Err(Errno::EINVAL);
        }
        deadline = poll_deadline(tsp, kept)?;
        if sig != 0 {
            let mut b = [0u8; 16];
            copy_in(&mut b, sig).map_err(|_| Errno::EFAULT)?;
            let ss = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
            set_wait_mask(&p, thread.tid, ss, len)?;
            umask = ss;
        }
        pselect6_outcome(&p.posix.files, a, deadline, generation)
    })();
    finish(thread, frame, (tsp, deadline), umask, outcome)
}

fn pselect6_outcome(
    files: &spin::Mutex<FdTable>,
    a: [u64; 6],
    deadline: Option<u64>,
    generation: u32,
) -> Result<Outcome, Errno> {
    let [nfds, sets @ .., _, _] = a;
    let words = nfds.div_ceil(64) as usize;
    // The three sets as read and as answered, one allocation (Linux's `fds` bitmaps).
    let mut bitmaps = fallible::zeroed::<u64>(6 * words)?;
    let (bits, out) = bitmaps.split_at_mut(3 * words);
    let mut raw = [0u8; 8];
    for (k, &set) in sets.iter().enumerate() {
        if set == 0 {
            continue;
        }
        for w in 0..words {
            copy_in(&mut raw, set.wrapping_add(w as u64 * 8)).map_err(|_| Errno::EFAULT)?;
            bits[k * words + w] = u64::from_le_bytes(raw);
        }
    }
    let mut count = 0u64;
    for fd in 0..nfds {
        let (w, m) = ((fd / 64) as usize, 1u64 << (fd % 64));
        let asked: [bool; 3] = core::array::from_fn(|k| sets[k] != 0 && bits[k * words + w] & m != 0);
        if !asked.iter().any(|&a| a) {
            continue;
        }
        let file = files.lock().file(fd)?;
        let ready_now = file.file.poll().0;
        let got = [
            ready_now & (poll::POLLIN | poll::POLLHUP) != 0,
            ready_now & (poll::POLLOUT | poll::POLLERR) != 0,
            false,
        ];
        for k in 0..3 {
            if asked[k] && got[k] {
                out[k * words + w] |= m;
                count += 1;
            }
        }
    }
    if count == 0 && !poll_expired(deadline) {
        return Ok(Outcome::Wait { generation, deadline });
    }
    // Written back when the call returns: at its deadline, 0 with every set empty.
    for (k, &set) in sets.iter().enumerate() {
        if set == 0 {
            continue;
        }
        for w in 0..words {
            copy_out(set.wrapping_add(w as u64 * 8), &out[k * words + w].to_le_bytes())
                .map_err(|_| Errno::EFAULT)?;
        }
    }
    Ok(Outcome::Ready(count))
}
