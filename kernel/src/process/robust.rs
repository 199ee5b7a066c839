//! Robust futexes at thread exit (Linux `exit_robust_list`): every futex the exiting thread still
//! holds on its registered list is marked `FUTEX_OWNER_DIED` and one waiter of each is woken. The
//! walk is `futex::robust`'s (host-tested); this is the thread's side.
use ::futex::robust::{self, UserWords};
use linux_abi::futex as f;

use super::Thread;
use crate::memory::uaccess::{copy_in, copy_out, read_u32};

/// User memory of the exiting thread's process (its space is still current), for the walk.
struct Words;

impl UserWords for Words {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        copy_in(&mut b, addr).ok()?;
        Some(u64::from_le_bytes(b))
    }
    fn read_u32(&mut self, addr: u64) -> Option<u32> {
        read_u32(addr).ok()
    }
    fn write_u32(&mut self, addr: u64, value: u32) -> Option<()> {
        copy_out(addr, &value.to_le_bytes()).ok()
    }
}

/// At thread exit: every robust futex the thread still holds is marked `FUTEX_OWNER_DIED` and one
/// waiter of each is woken.
pub fn release_robust_list(thread: &Thread) {
    if thread.posix.robust_list == 0 {
        return;
    }
    let p = &thread.process;
    // Linux wakes a dead owner's waiters with a shared-kind wake (the word may be in shared
    // memory, as a robust mutex between processes is).
    robust::release(&mut Words, thread.posix.robust_list, thread.tid, |uaddr| {
        crate::sched::futex_wake(super::futex_word_key(p, uaddr, true), f::FUTEX_BITSET_MATCH_ANY, 1);
    });
}
