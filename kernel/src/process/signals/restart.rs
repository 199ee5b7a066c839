//! Interrupted system calls: what a blocking call that a signal ends leaves behind, by its restart
//! class (`signal::restart::BLOCKING`, the one table of them), and the restart block that
//! `restart_syscall` resumes from.
//!
//! The system-call table records the call a thread blocks in ([`Blocked`]: its number, arguments
//! and deadline). When a signal ends the wait, the scheduler takes the thread out of the wait list
//! and marks it interrupted (`Task::interrupted`). As the thread resumes, with its address space
//! live, [`finish`] turns the wait into its class's code, writes what a relative sleep or a poll
//! had left where the call returns it (Linux writes it whether or not the call is restarted), and
//! for `ERESTART_RESTARTBLOCK` keeps a [`RestartBlock`]. Delivery then decides, as Linux's
//! `do_signal` does (`signal::restart::resume`): `EINTR`, or the call again (x0 and the pc put
//! back; for `ERESTART_RESTARTBLOCK`, x8 becomes `restart_syscall`, which resumes the block: a
//! relative sleep keeps its end, so a stop and continue does not lengthen it).
use linux_abi::Errno;
use linux_abi::futex::{FUTEX_BITSET_MATCH_ANY, FUTEX_CMD_MASK, FUTEX_PRIVATE_FLAG, FUTEX_WAIT};
use linux_abi::nr;
use linux_abi::time::{Timespec, ticks_to_ns};
use signal::restart::{Class, class_of};

use crate::memory::uaccess::copy_out;

/// The call a thread is blocked in, as the system-call table recorded it.
#[derive(Clone, Copy, Debug)]
pub struct Blocked {
    /// Its number.
    pub nr: u64,
    /// Its arguments as it was made (x0..x5).
    pub args: [u64; 6],
    /// When its wait ends anyway (a counter value).
    pub deadline: Option<u64>,
}

/// What `restart_syscall` resumes (Linux's `restart_block`): the part of an interrupted call
/// that must not start over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartBlock {
    /// A relative `nanosleep` or `clock_nanosleep`: sleep until `deadline` (a counter value),
    /// writing what is left to `rem` (0: nowhere) if interrupted again.
    Sleep {
        /// The sleep's end.
        deadline: u64,
        /// Where the time left goes.
        rem: u64,
    },
    /// A `FUTEX_WAIT(_BITSET)` with a timeout: wait on `uaddr` while it holds `val`, for wakes
    /// meeting `bitset`, until `deadline`.
    Futex {
        /// The word.
        uaddr: u64,
        /// The value expected.
        val: u32,
        /// Which wakes reach it.
        bitset: u32,
        /// Named without `FUTEX_PRIVATE_FLAG` (a word of shared memory is keyed by its frame).
        shared: bool,
        /// The wait's end.
        deadline: u64,
    },
}

/// What a thread keeps of the blocking call it is in.
#[derive(Clone, Debug, Default)]
pub struct CallState {
    /// The words of the `futex_waitv` it is in (room kept from one call to the next).
    pub futexv: alloc::vec::Vec<crate::sched::VectorWord>,
    /// The call it blocked in (recorded by the system-call table; stale once it returned).
    pub blocked: Option<Blocked>,
    /// A signal ended its wait (set by the scheduler, taken as it resumes).
    pub interrupted: bool,
    /// What `restart_syscall` resumes.
    pub restart_block: Option<RestartBlock>,
    /// It stopped (job control) as it resumed: when continued, its signals are looked at again
    /// even if none is queued, so that an interrupted call's restart code is finished.
    pub stopped_in_call: bool,
}

/// Counter ticks left until `deadline`.
fn left_until(deadline: u64) -> u64 {
    deadline.saturating_sub(crate::arch::time::counter())
}

/// Writes the time left until `deadline` at `at` (a `struct timespec`), as Linux writes `rem`.
/// A fault is ignored, as Linux's `nanosleep_copyout` failing only changes the return value to
/// EFAULT, which the restart code then hides.
fn write_left(at: u64, deadline: u64) {
    if at == 0 {
        return;
    }
    let ns = ticks_to_ns(left_until(deadline), crate::arch::time::frequency());
    let _ = copy_out(at, &Timespec::from_ns(ns).to_bytes());
}

/// The restart block a timed wait of call `b` leaves, if its class is `ERESTART_RESTARTBLOCK`.
fn block_of(b: &Blocked, kept: Option<RestartBlock>) -> Option<RestartBlock> {
    let deadline = b.deadline?;
    let a = &b.args;
    match b.nr {
        nr::NANOSLEEP => Some(RestartBlock::Sleep { deadline, rem: a[1] }),
        nr::CLOCK_NANOSLEEP => Some(RestartBlock::Sleep { deadline, rem: a[3] }),
        nr::FUTEX => {
            let bitset =
                if a[1] as u32 & FUTEX_CMD_MASK == FUTEX_WAIT { FUTEX_BITSET_MATCH_ANY } else { a[5] as u32 };
            let shared = a[1] as u32 & FUTEX_PRIVATE_FLAG == 0;
            Some(RestartBlock::Futex { uaddr: a[0], val: a[2] as u32, bitset, shared, deadline })
        }
        // A resumed wait keeps the block it resumed (its handler put it back before blocking).
        nr::RESTART_SYSCALL => kept,
        _ => None,
    }
}

/// Finishes the wait of `call`, which a signal interrupted (its x0 is `-EINTR`): returns the x0
/// its class leaves (a restart code, or `-EINTR`) and, for a restart code, the x0 a restart puts
/// back (its first argument). Runs with the thread's address space live, so it can write what a
/// sleep or a poll had left.
pub fn finish(call: &mut CallState) -> (u64, Option<u64>) {
    let eintr = Errno::EINTR.as_ret() as u64;
    let Some(b) = call.blocked.take() else { return (eintr, None) };
    // A call missing from the table would be a kernel bug; it ends with EINTR, as before the
    // table existed.
    let class = class_of(b.nr, &b.args).unwrap_or(Class::Intr);
    match class {
        Class::Intr => return (eintr, None),
        Class::RestartBlock => {
            call.restart_block = block_of(&b, call.restart_block.take());
            if let Some(RestartBlock::Sleep { deadline, rem }) = call.restart_block {
                write_left(rem, deadline);
            }
        }
        Class::NoHand => {
            // ppoll and pselect6 write back what is left of their timeout (Linux's
            // `poll_select_finish`), which a restart then reads: a stop and continue does not
            // lengthen the wait. A zero timeout is left alone.
            let tsp = match b.nr {
                nr::PPOLL => b.args[2],
                nr::PSELECT6 => b.args[4],
                _ => 0,
            };
            if let Some(deadline) = b.deadline {
                write_left(tsp, deadline);
            }
        }
        Class::Sys | Class::NoIntr => {}
    }
    (class.code().as_ret() as u64, Some(b.args[0]))
}
