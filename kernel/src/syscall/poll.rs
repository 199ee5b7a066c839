//! `ppoll` and `pselect6`: what each descriptor is ready for (its file's `poll`), and the wait when
//! nothing is. A poll that must wait blocks on [`WaitFor::Poll`] until any kernel event (console
//! input, a pipe change) or its deadline, each of which restarts the call, so every answer (and
//! the sets written back) comes from this code; the deadline is kept in the thread across the
//! restarts. The entries and bitmaps are allocated fallibly (`ENOMEM`).
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::layout::PollFd;
use linux_abi::poll;

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::file::FdTable;
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Process;
use crate::sched::{Action, Wait, WaitFor};

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

/// Runs a poll that decided `outcome`: the count goes back in x0, a wait blocks the thread.
fn finish(frame: &mut TrapFrame, resume: &mut Option<u64>, outcome: Result<Outcome, Errno>) -> Action {
    match outcome {
        Ok(Outcome::Ready(n)) => Action::reply(frame, Ok(n)),
        Ok(Outcome::Wait { generation, deadline }) => {
            *resume = deadline;
            Action::Block(Wait { what: WaitFor::Poll { generation }, deadline })
        }
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// `ppoll(fds, nfds, tsp, sigmask, sigsetsize)`. The signal mask is ignored; a poll that finds
/// nothing ready blocks until a kernel event or its deadline ([`WaitFor::Poll`]), each of which
/// restarts it (the deadline kept in `resume`), so the answer always comes from this code.
pub fn ppoll(p: &Process, frame: &mut TrapFrame, resume: &mut Option<u64>, a: [u64; 6]) -> Action {
    let kept = resume.take();
    let outcome = ppoll_outcome(&p.posix.files, a, kept);
    finish(frame, resume, outcome)
}

fn ppoll_outcome(files: &spin::Mutex<FdTable>, a: [u64; 6], kept: Option<u64>) -> Result<Outcome, Errno> {
    let [fds, nfds, tsp, sigmask, sigsetsize, _] = a;
    let generation = crate::sched::event_generation();
    if nfds > files.lock().limit() as u64 {
        return Err(Errno::EINVAL);
    }
    let deadline = poll_deadline(tsp, kept)?;
    if sigmask != 0 && sigsetsize != 8 {
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

/// `pselect6(nfds, readfds, writefds, exceptfds, tsp, sigmask)`: descriptor sets of `nfds` bits,
/// written back only when the call returns (a wait restarts it, reading them again, as
/// [`ppoll`]); the remaining time is not written back.
pub fn pselect6(p: &Process, frame: &mut TrapFrame, resume: &mut Option<u64>, a: [u64; 6]) -> Action {
    let kept = resume.take();
    let outcome = pselect6_outcome(&p.posix.files, a, kept);
    finish(frame, resume, outcome)
}

fn pselect6_outcome(files: &spin::Mutex<FdTable>, a: [u64; 6], kept: Option<u64>) -> Result<Outcome, Errno> {
    let [nfds, sets @ .., tsp, _] = a;
    let generation = crate::sched::event_generation();
    if nfds as i64 > files.lock().limit() as i64 || (nfds as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let deadline = poll_deadline(tsp, kept)?;
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
