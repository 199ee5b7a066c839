//! `ppoll` and `pselect6`: what each descriptor is ready for (the console's line discipline, a
//! pipe end's buffer and ends), and the wait when nothing is. A poll that must wait blocks on
//! [`WaitFor::Poll`] until console input, a pipe change or its deadline, each of which restarts
//! the call, so every answer (and the sets written back) comes from this code; the deadline is
//! kept in the thread across the restarts. The entries and bitmaps are allocated fallibly
//! (`ENOMEM`).
use alloc::vec::Vec;

use linux_abi::layout::PollFd;
use linux_abi::poll;

use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::fallible;
use crate::process::Action;
use crate::process::Process;
use crate::process::posix::{FD_LIMIT, FileKind, OpenFile};
use crate::sched::{Wait, WaitFor};
use crate::syscall::errno::*;
use crate::syscall::files::{done, fail, file};
use crate::syscall::{copy_in, copy_out};

/// What the console is ready for now (POLLIN when a read would return, POLLOUT always).
fn console_ready() -> u16 {
    crate::fs::tty::poll_input();
    let input = if crate::fs::tty::readable() { poll::POLLIN | poll::POLLRDNORM } else { 0 };
    input | poll::POLLOUT | poll::POLLWRNORM
}

/// What `f` is ready for now: the console's state, or a pipe end's (`POLLHUP` for a read end
/// whose writers are gone, `POLLERR` for a write end whose readers are).
fn ready_of(f: &OpenFile) -> u16 {
    match &f.kind {
        FileKind::Console => console_ready(),
        // A regular file is always ready, as Linux's poll says for files without a poll method.
        FileKind::Listing(_) => poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM,
        FileKind::Pipe(end) => {
            let (readable, writable) = crate::fs::pipe::ready(end);
            let mut r = 0;
            if readable {
                r |= poll::POLLIN | poll::POLLRDNORM;
            }
            if writable {
                r |= poll::POLLOUT | poll::POLLWRNORM;
            }
            r | crate::fs::pipe::hangup(end)
        }
        // A regular file is always ready (Linux's DEFAULT_POLLMASK).
        FileKind::Memfd(_) => poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM,
    }
}

/// When a poll stops waiting (a counter value; `None`: never): the deadline its first run set,
/// kept in the thread (`kept`, taken from its `resume`) across the restarts that a wake-up or the deadline itself
/// causes, else `tsp`'s timeout from now.
fn poll_deadline(p: &Process, tsp: u64, kept: Option<u64>) -> Result<Option<u64>, i64> {
    if kept.is_some() {
        return Ok(kept);
    }
    if tsp == 0 {
        return Ok(None);
    }
    let t = crate::syscall::time::read_valid_timespec(p, tsp)?;
    Ok(Some(crate::wallclock::deadline_after(t.to_ns())))
}

/// Whether a poll with `deadline` must return now rather than wait.
fn poll_expired(deadline: Option<u64>) -> bool {
    deadline.is_some_and(|d| crate::arch::time::counter() >= d)
}

/// `ppoll(fds, nfds, tsp, sigmask, sigsetsize)`. The signal mask is ignored; a poll that finds
/// nothing ready blocks until console input, a pipe change or its deadline ([`WaitFor::Poll`]),
/// each of which restarts it (the deadline kept in `resume`), so the answer always comes from
/// this code.
pub fn ppoll(p: &Process, frame: &mut TrapFrame, resume: &mut Option<u64>, a: [u64; 6]) -> Action {
    let [fds, nfds, tsp, sigmask, sigsetsize, _] = a;
    let generation = crate::sched::event_generation();
    let kept = resume.take();
    if nfds > FD_LIMIT as u64 {
        return fail(frame, EINVAL);
    }
    let deadline = match poll_deadline(p, tsp, kept) {
        Ok(t) => t,
        Err(e) => return fail(frame, e),
    };
    if sigmask != 0 && sigsetsize != 8 {
        return fail(frame, EINVAL);
    }
    let mut entries = Vec::new();
    if fallible::reserve(&mut entries, nfds as usize).is_err() {
        return fail(frame, ENOMEM);
    }
    for i in 0..nfds {
        let mut b = [0u8; 8];
        if copy_in(p, &mut b, fds.wrapping_add(i * 8)).is_err() {
            return fail(frame, EFAULT);
        }
        entries.push(PollFd::from_bytes(b)); // within the room reserved above
    }
    let mut ready = 0;
    for e in &mut entries {
        e.revents = if e.fd < 0 {
            0
        } else {
            match file(p, e.fd as u64) {
                Err(_) => poll::POLLNVAL,
                Ok(f) => PollFd::answer(e.events, ready_of(&f)),
            }
        };
        ready += u64::from(e.revents != 0);
    }
    for (i, e) in entries.iter().enumerate() {
        if copy_out(p, fds.wrapping_add(i as u64 * 8), &e.to_bytes()).is_err() {
            return fail(frame, EFAULT);
        }
    }
    if ready > 0 || poll_expired(deadline) {
        return done(frame, ready as i64);
    }
    block_for_poll(generation, deadline, resume)
}

fn block_for_poll(generation: u32, deadline: Option<u64>, resume: &mut Option<u64>) -> Action {
    *resume = deadline;
    Action::Block(Wait { what: WaitFor::Poll { generation }, deadline })
}

/// `pselect6(nfds, readfds, writefds, exceptfds, tsp, sigmask)`: descriptor sets of `nfds` bits,
/// written back only when the call returns (a wait restarts it, reading them again, as
/// [`ppoll`]); the remaining time is not written back.
pub fn pselect6(p: &Process, frame: &mut TrapFrame, resume: &mut Option<u64>, a: [u64; 6]) -> Action {
    let [nfds, sets @ .., tsp, _] = a;
    let generation = crate::sched::event_generation();
    let kept = resume.take();
    if nfds as i64 > FD_LIMIT as i64 || (nfds as i64) < 0 {
        return fail(frame, EINVAL);
    }
    let deadline = match poll_deadline(p, tsp, kept) {
        Ok(t) => t,
        Err(e) => return fail(frame, e),
    };
    let words = nfds.div_ceil(64) as usize;
    // The three sets as read and as answered, one allocation (Linux's `fds` bitmaps).
    let Ok(mut bitmaps) = fallible::zeroed::<u64>(6 * words) else { return fail(frame, ENOMEM) };
    let (bits, out) = bitmaps.split_at_mut(3 * words);
    let mut raw = [0u8; 8];
    for (k, &set) in sets.iter().enumerate() {
        if set == 0 {
            continue;
        }
        for w in 0..words {
            if copy_in(p, &mut raw, set.wrapping_add(w as u64 * 8)).is_err() {
                return fail(frame, EFAULT);
            }
            bits[k * words + w] = u64::from_le_bytes(raw);
        }
    }
    let mut count = 0i64;
    for fd in 0..nfds {
        let (w, m) = ((fd / 64) as usize, 1u64 << (fd % 64));
        let asked: [bool; 3] = core::array::from_fn(|k| sets[k] != 0 && bits[k * words + w] & m != 0);
        if !asked.iter().any(|&a| a) {
            continue;
        }
        let ready_now = match file(p, fd) {
            Ok(f) => ready_of(&f),
            Err(_) => return fail(frame, EBADF),
        };
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
        return block_for_poll(generation, deadline, resume);
    }
    // Written back when the call returns: at its deadline, 0 with every set empty.
    for (k, &set) in sets.iter().enumerate() {
        if set == 0 {
            continue;
        }
        for w in 0..words {
            if copy_out(p, set.wrapping_add(w as u64 * 8), &out[k * words + w].to_le_bytes()).is_err() {
                return fail(frame, EFAULT);
            }
        }
    }
    done(frame, count)
}
