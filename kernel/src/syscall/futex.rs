//! `futex`, `set_robust_list`, `get_robust_list`, and the robust-list cleanup at thread exit
//! (Linux `kernel/futex/syscalls.c`, `waitwake.c`, `requeue.c`; the queue logic is
//! `futex::op`, the blocking is `sched`).
//!
//! A word is keyed by its process's address space and address, except a word of shared memory
//! (`MAP_SHARED`, a memfd) named without `FUTEX_PRIVATE_FLAG`, which is keyed by its frame so
//! that processes sharing it meet (`process::futex_word_key`). `futex_waitv` waits on up to 128
//! words at once and returns the index of the one woken. Timeouts: `FUTEX_WAIT` takes a relative one (measured on
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
use crate::sched::{VectorWord, Wait, WaitFor};
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
pub fn wait_again(
    thread: &Thread,
    frame: &mut TrapFrame,
    block: (u64, u32, u32, bool),
    deadline: u64,
) -> Action {
    let (uaddr, val, bitset, shared) = block;
    match read_word(uaddr) {
        Ok(v) if v == val => {
            let key = crate::process::futex_word_key(&thread.process, uaddr, shared);
            let what = WaitFor::Futex { key, uaddr, expected: val, bitset };
            Action::Block(Wait { what, deadline: Some(deadline) })
        }
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
            let key = crate::process::futex_word_key(&p, uaddr, !op.private);
            return Ok(Outcome::Block(Wait {
                what: WaitFor::Futex { key, uaddr, expected: val, bitset },
                deadline,
            }));
        }
        f::FUTEX_WAKE | f::FUTEX_WAKE_BITSET => {
            let bitset = if op.cmd == f::FUTEX_WAKE { f::FUTEX_BITSET_MATCH_ANY } else { val3 };
            if bitset == 0 || !uaddr.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            // A shared word's key is its frame: the page must be present to be found.
            if !op.private {
                read_word(uaddr)?;
            }
            crate::sched::futex_wake(
                crate::process::futex_word_key(&p, uaddr, !op.private),
                bitset,
                u64::from(val),
            )
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
            let from = crate::process::futex_word_key(&p, uaddr, !op.private);
            let to = crate::process::futex_word_key(&p, uaddr2, !op.private);
            crate::sched::futex_requeue(from, uaddr, to, u64::from(val), u64::from(nrequeue), expected)?
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
            if !op.private {
                read_word(uaddr)?;
            }
            let key1 = crate::process::futex_word_key(&p, uaddr, !op.private);
            let key2 = crate::process::futex_word_key(&p, uaddr2, !op.private);
            crate::sched::futex_wake_op(key1, key2, uaddr2, u64::from(val), nwake2, wake_op)?
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

/// `futex_waitv(waiters, nr_futexes, flags, timeout, clockid)`, as Linux 6.1's: in its order,
/// EINVAL for flags, for no or more than 128 words, for a clock other than CLOCK_MONOTONIC or
/// CLOCK_REALTIME (with a timeout, which is absolute), EFAULT for the timeout, EINVAL for an
/// invalid one; ENOMEM for the list; then each `struct futex_waitv` (EFAULT; EINVAL for unknown
/// flags, a word not marked `FUTEX_32`, a nonzero reserved field, a misaligned address); EAGAIN
/// if a word does not hold its value. Returns the index of the word woken.
pub fn futex_waitv(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    match waitv(thread, a) {
        Ok(deadline) => Action::Block(Wait { what: WaitFor::FutexVector, deadline }),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

fn waitv(thread: &mut Thread, a: [u64; 6]) -> Result<Option<u64>, Errno> {
    use linux_abi::time::{CLOCK_MONOTONIC, CLOCK_REALTIME};
    let [waiters, count, flags, timeout, clock, _] = a;
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let count = count as u32 as usize;
    if count == 0 || count > f::FUTEX_WAITV_MAX || waiters == 0 {
        return Err(Errno::EINVAL);
    }
    let deadline = if timeout == 0 {
        None
    } else {
        let clock = clock as i32;
        if clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC {
            return Err(Errno::EINVAL);
        }
        let t = read_valid_timespec(timeout)?.to_ns();
        let monotonic =
            if clock == CLOCK_REALTIME { t.saturating_sub(wallclock::realtime_offset_ns()) } else { t };
        Some(wallclock::deadline_at_monotonic(monotonic))
    };
    let words = &mut thread.call.futexv;
    words.clear();
    words.try_reserve(count).map_err(|_| Errno::ENOMEM)?;
    // struct futex_waitv { u64 val; u64 uaddr; u32 flags; u32 __reserved; }
    const WAITER_MASK: u32 = f::FUTEX_32 | f::FUTEX_PRIVATE_FLAG;
    // Bit i: word i was named with FUTEX_PRIVATE_FLAG (count is at most 128).
    let mut private = 0u128;
    for i in 0..count {
        let mut b = [0u8; 24];
        copy_in(&mut b, waiters.wrapping_add(i as u64 * 24)).map_err(|_| Errno::EFAULT)?;
        let field = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let (val, uaddr, wflags, reserved) = (field(0), field(8), field(16) as u32, (field(16) >> 32) as u32);
        if wflags & !WAITER_MASK != 0
            || reserved != 0
            || wflags & f::FUTEX_32 == 0
            || !uaddr.is_multiple_of(4)
        {
            return Err(Errno::EINVAL);
        }
        if wflags & f::FUTEX_PRIVATE_FLAG != 0 {
            private |= 1 << i;
        }
        words.push(VectorWord { key: (0, 0), uaddr, val: val as u32 });
    }
    // The words faulted in and compared (EFAULT, EAGAIN), then keyed (a shared word's key is
    // its frame, present now); the scheduler compares them again under its lock.
    let p = thread.process.clone();
    for (i, w) in thread.call.futexv.iter_mut().enumerate() {
        if read_word(w.uaddr)? != w.val {
            return Err(Errno::EAGAIN);
        }
        w.key = crate::process::futex_word_key(&p, w.uaddr, private & (1 << i) == 0);
    }
    Ok(deadline)
}
