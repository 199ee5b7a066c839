//! `futex`, `set_robust_list`, `get_robust_list`, and the robust-list cleanup at thread exit
//! (Linux `kernel/futex/syscalls.c`, `waitwake.c`, `requeue.c`; the queue logic is
//! `futex::op`, the blocking is `sched`).
//!
//! Every futex is private to its process here (no memory is shared between processes), so
//! `FUTEX_PRIVATE_FLAG` changes nothing. Timeouts: `FUTEX_WAIT` takes a relative one (measured on
//! CLOCK_MONOTONIC), `FUTEX_WAIT_BITSET` an absolute one on CLOCK_MONOTONIC, or on
//! CLOCK_REALTIME with `FUTEX_CLOCK_REALTIME`. The checks come in Linux's order: the clock flag
//! (ENOSYS), the timeout (EFAULT, EINVAL), the bitset (EINVAL), the alignment (EINVAL), the word
//! (EFAULT, then EAGAIN when it differs).
use ::futex::op::{Op, WakeOp};
use ::futex::robust;
use linux_abi::futex as f;

use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::{Action, Thread};
use crate::sched::{Wait, WaitFor};
use crate::syscall::time::read_valid_timespec;
use crate::wallclock;
use linux_abi::Errno;

fn read_word(uaddr: u64) -> Result<u32, Errno> {
    let mut word = [0u8; 4];
    copy_in(&mut word, uaddr).map_err(|_| Errno::EFAULT)?;
    Ok(u32::from_le_bytes(word))
}

/// `futex(uaddr, op, val, timeout_or_val2, uaddr2, val3)`.
pub fn futex(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let [uaddr, op, val, timeout, uaddr2, val3] = a;
    match futex_op(thread, uaddr, op as u32, val as u32, timeout, uaddr2, val3 as u32) {
        Ok(Outcome::Block(wait)) => Action::Block(wait),
        Ok(Outcome::Done(n)) => Action::reply(frame, Ok(n)),
        Err(errno) => Action::reply(frame, Err(errno)),
    }
}

/// A timed `FUTEX_WAIT(_BITSET)` resumed by `restart_syscall` (a signal interrupted it and no
/// handler ran): the word is checked again (EAGAIN if it changed), and the wait keeps its
/// deadline, as Linux's `futex_wait_restart`.
pub fn wait_again(frame: &mut TrapFrame, uaddr: u64, val: u32, bitset: u32, deadline: u64) -> Action {
    match read_word(uaddr) {
        Ok(v) if v == val => Action::Block(Wait {
            what: WaitFor::Futex { uaddr, expected: val, bitset },
            deadline: Some(deadline),
        }),
        Ok(_) => Action::reply(frame, Err(Errno::EAGAIN)),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// What a futex operation comes to.
enum Outcome {
    /// The thread waits.
    Block(Wait),
    /// The call returns this count.
    Done(u64),
}

/// Runs one futex operation.
fn futex_op(
    thread: &mut Thread,
    uaddr: u64,
    op: u32,
    val: u32,
    timeout: u64,
    uaddr2: u64,
    val3: u32,
) -> Result<Outcome, Errno> {
    let p = thread.process.clone();
    let op = Op::decode(op);
    if !op.clock_allowed() {
        return Err(Errno::ENOSYS);
    }
    let result = match op.cmd {
        f::FUTEX_WAIT | f::FUTEX_WAIT_BITSET => {
            let deadline = if timeout == 0 {
                None
            } else {
                let t = read_valid_timespec(timeout)?.to_ns();
                Some(if !op.absolute_timeout() {
                    wallclock::deadline_after(t)
                } else if op.realtime {
                    wallclock::deadline_at_monotonic(t.saturating_sub(wallclock::realtime_offset_ns()))
                } else {
                    wallclock::deadline_at_monotonic(t)
                })
            };
            let bitset = if op.cmd == f::FUTEX_WAIT { f::FUTEX_BITSET_MATCH_ANY } else { val3 };
            if bitset == 0 || !uaddr.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            if read_word(uaddr)? != val {
                return Err(Errno::EAGAIN);
            }
            return Ok(Outcome::Block(Wait {
                what: WaitFor::Futex { uaddr, expected: val, bitset },
                deadline,
            }));
        }
        f::FUTEX_WAKE | f::FUTEX_WAKE_BITSET => {
            let bitset = if op.cmd == f::FUTEX_WAKE { f::FUTEX_BITSET_MATCH_ANY } else { val3 };
            if bitset == 0 || !uaddr.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            crate::sched::futex_wake(crate::process::futex_key(&p), uaddr, bitset, u64::from(val))
        }
        f::FUTEX_REQUEUE | f::FUTEX_CMP_REQUEUE => {
            // val and val2 are ints: negative counts are EINVAL (Linux `futex_requeue`).
            let nrequeue = timeout as u32;
            if (val as i32) < 0 || (nrequeue as i32) < 0 {
                return Err(Errno::EINVAL);
            }
            if !uaddr.is_multiple_of(4) || !uaddr2.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            // Fault both words in first: the comparison runs under the wait list's lock, where
            // demand paging cannot.
            read_word(uaddr)?;
            read_word(uaddr2)?;
            let expected = (op.cmd == f::FUTEX_CMP_REQUEUE).then_some(val3);
            crate::sched::futex_requeue(
                crate::process::futex_key(&p),
                uaddr,
                uaddr2,
                u64::from(val),
                u64::from(nrequeue),
                expected,
            )?
        }
        f::FUTEX_WAKE_OP => {
            let wake_op = WakeOp::decode(val3).ok_or(Errno::ENOSYS)?;
            if !uaddr.is_multiple_of(4) || !uaddr2.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            let old = read_word(uaddr2)?;
            // Make the page present and writable before the locked read-modify-write.
            copy_out(uaddr2, &old.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
            let nwake2 = u64::from(timeout as u32);
            crate::sched::futex_wake_op(
                crate::process::futex_key(&p),
                uaddr,
                uaddr2,
                u64::from(val),
                nwake2,
                wake_op,
            )?
        }
        _ => return Err(Errno::ENOSYS), // the PI operations and FUTEX_WAIT_REQUEUE_PI
    };
    Ok(Outcome::Done(result))
}

/// `set_robust_list(head, len)`: `len` must be the 64-bit head's size.
pub fn set_robust_list(thread: &mut Thread, head: u64, len: u64) -> Result<u64, Errno> {
    if len != robust::HEAD_SIZE {
        return Err(Errno::EINVAL);
    }
    thread.posix.robust_list = head;
    Ok(0)
}

/// `get_robust_list(pid, head_ptr, len_ptr)` for the calling thread (pid 0 or its own tid).
pub fn get_robust_list(thread: &Thread, pid: u64, head_ptr: u64, len_ptr: u64) -> Result<u64, Errno> {
    if pid != 0 && pid != u64::from(thread.tid) {
        return Err(Errno::ESRCH);
    }
    if copy_out(head_ptr, &thread.posix.robust_list.to_le_bytes()).is_err()
        || copy_out(len_ptr, &robust::HEAD_SIZE.to_le_bytes()).is_err()
    {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}
