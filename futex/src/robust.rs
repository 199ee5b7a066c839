//! Robust futexes: what the kernel does to a thread's robust list when the thread exits
//! (Linux `kernel/futex/core.c`, `exit_robust_list` and `handle_futex_death`).
//!
//! A thread registers `struct robust_list_head { next; long futex_offset; list_op_pending; }` with
//! `set_robust_list`. Each entry of the circular list is a lock; its futex word sits
//! `futex_offset` bytes from the entry, and bit 0 of a `next` pointer marks a PI futex. At exit,
//! every word still holding the thread's id gets `FUTEX_OWNER_DIED` (keeping `FUTEX_WAITERS`) and
//! one waiter is woken, so the next locker sees `EOWNERDEAD` instead of waiting forever. The entry
//! being locked or unlocked at the time (`list_op_pending`) is treated the same way. The walk stops
//! after 2048 entries (Linux's `ROBUST_LIST_LIMIT`), so a looping list cannot hang the kernel.
use linux_abi::futex::{FUTEX_OWNER_DIED, FUTEX_TID_MASK, FUTEX_WAITERS};

/// Entries walked at most.
pub const LIST_LIMIT: usize = 2048;
/// `sizeof(struct robust_list_head)` on a 64-bit kernel: what `set_robust_list` insists on.
pub const HEAD_SIZE: u64 = 24;

/// User memory as the walk needs it; `None` is a fault, which ends the walk (as in Linux).
pub trait UserWords {
    /// Reads a 64-bit word.
    fn read_u64(&mut self, addr: u64) -> Option<u64>;
    /// Reads a 32-bit word.
    fn read_u32(&mut self, addr: u64) -> Option<u32>;
    /// Writes a 32-bit word.
    fn write_u32(&mut self, addr: u64, value: u32) -> Option<()>;
}

/// Marks the futexes `tid` still holds on the list at `head` as owner-died; `wake(uaddr)` is
/// called for each word whose waiters must be told. Returns the number of words marked.
pub fn release(mem: &mut impl UserWords, head: u64, tid: u32, mut wake: impl FnMut(u64)) -> usize {
    let Some(first) = mem.read_u64(head) else { return 0 };
    let Some(offset) = mem.read_u64(head.wrapping_add(8)) else { return 0 };
    let Some(pending) = mem.read_u64(head.wrapping_add(16)) else { return 0 };
    let (pending, pending_pi) = (pending & !1, pending & 1 != 0);
    let mut marked = 0;
    let (mut entry, mut pi) = (first & !1, first & 1 != 0);
    let mut limit = LIST_LIMIT;
    while entry != head {
        let next = mem.read_u64(entry);
        if entry != pending && death(mem, entry.wrapping_add(offset), tid, pi, false, &mut wake) {
            marked += 1;
        }
        let Some(next) = next else { return marked };
        (entry, pi) = (next & !1, next & 1 != 0);
        limit -= 1;
        if limit == 0 {
            break;
        }
    }
    if pending != 0 && death(mem, pending.wrapping_add(offset), tid, pending_pi, true, &mut wake) {
        marked += 1;
    }
    marked
}

/// `handle_futex_death` for one word; true if it was marked.
fn death(
    mem: &mut impl UserWords,
    uaddr: u64,
    tid: u32,
    pi: bool,
    pending: bool,
    wake: &mut impl FnMut(u64),
) -> bool {
    if !uaddr.is_multiple_of(4) {
        return false;
    }
    let Some(value) = mem.read_u32(uaddr) else { return false };
    // A lock operation that had not yet stored the owner: a waiter may still need waking.
    if pending && !pi && value == 0 {
        wake(uaddr);
        return false;
    }
    if value & FUTEX_TID_MASK != tid {
        return false;
    }
    if mem.write_u32(uaddr, (value & FUTEX_WAITERS) | FUTEX_OWNER_DIED).is_none() {
        return false;
    }
    if !pi && value & FUTEX_WAITERS != 0 {
        wake(uaddr);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use std::collections::BTreeMap;

    /// Sparse memory of 32-bit cells; absent cells fault.
    #[derive(Default)]
    struct Mem(BTreeMap<u64, u32>);

    impl Mem {
        fn put64(&mut self, addr: u64, v: u64) {
            self.0.insert(addr, v as u32);
            self.0.insert(addr + 4, (v >> 32) as u32);
        }
    }

    impl UserWords for Mem {
        fn read_u64(&mut self, addr: u64) -> Option<u64> {
            Some(u64::from(*self.0.get(&addr)?) | u64::from(*self.0.get(&(addr + 4))?) << 32)
        }
        fn read_u32(&mut self, addr: u64) -> Option<u32> {
            self.0.get(&addr).copied()
        }
        fn write_u32(&mut self, addr: u64, value: u32) -> Option<()> {
            *self.0.get_mut(&addr)? = value;
            Some(())
        }
    }

    const HEAD: u64 = 0x1000;
    const OFFSET: u64 = 16; // the word sits 16 bytes after each entry's `next`

    /// A list HEAD -> entries... -> HEAD with the given words; returns the memory.
    fn robust_list(words: &[u32], pending: u64) -> Mem {
        let mut m = Mem::default();
        let entries: Vec<u64> = (0..words.len() as u64).map(|i| 0x2000 + i * 0x100).collect();
        m.put64(HEAD, *entries.first().unwrap_or(&HEAD));
        m.put64(HEAD + 8, OFFSET);
        m.put64(HEAD + 16, pending);
        for (i, &e) in entries.iter().enumerate() {
            m.put64(e, *entries.get(i + 1).unwrap_or(&HEAD));
            m.0.insert(e + OFFSET, words[i]);
        }
        m
    }

    #[test]
    fn words_held_by_the_thread_get_owner_died_and_their_waiters_a_wake() {
        let mut m = robust_list(&[42, 42 | FUTEX_WAITERS, 7, 7 | FUTEX_WAITERS], 0);
        let mut woken = vec![];
        assert_eq!(release(&mut m, HEAD, 42, |a| woken.push(a)), 2);
        assert_eq!(m.read_u32(0x2000 + OFFSET), Some(FUTEX_OWNER_DIED));
        assert_eq!(m.read_u32(0x2100 + OFFSET), Some(FUTEX_OWNER_DIED | FUTEX_WAITERS));
        assert_eq!(m.read_u32(0x2200 + OFFSET), Some(7), "another thread's lock is untouched");
        assert_eq!(m.read_u32(0x2300 + OFFSET), Some(7 | FUTEX_WAITERS));
        assert_eq!(woken, vec![0x2100 + OFFSET]);
    }

    #[test]
    fn the_pending_entry_is_handled_once_and_an_unowned_pending_word_wakes_a_waiter() {
        let mut m = robust_list(&[42], 0x2000);
        let mut woken = vec![];
        assert_eq!(release(&mut m, HEAD, 42, |a| woken.push(a)), 1);
        assert_eq!(m.read_u32(0x2000 + OFFSET), Some(FUTEX_OWNER_DIED));
        let mut m = robust_list(&[], 0x5000);
        m.0.insert(0x5000 + OFFSET, 0);
        assert_eq!(release(&mut m, HEAD, 42, |a| woken.push(a)), 0);
        assert_eq!(woken, vec![0x5000 + OFFSET]);
    }

    #[test]
    fn an_empty_list_a_faulting_head_and_a_fault_mid_list_end_quietly() {
        let mut m = robust_list(&[], 0);
        assert_eq!(release(&mut m, HEAD, 42, |_| panic!("no wake")), 0);
        assert_eq!(release(&mut Mem::default(), HEAD, 42, |_| panic!("no wake")), 0);
        let mut m = robust_list(&[42, 42], 0);
        m.0.remove(&0x2000); // the first entry's `next` faults: its word is still handled
        assert_eq!(release(&mut m, HEAD, 42, |_| {}), 1);
        assert_eq!(m.read_u32(0x2100 + OFFSET), Some(42));
    }

    #[test]
    fn a_list_that_loops_without_reaching_the_head_stops_at_the_limit() {
        let mut m = robust_list(&[42, 42], 0);
        m.put64(0x2100, 0x2000); // 0x2000 -> 0x2100 -> 0x2000 -> ...
        assert_eq!(release(&mut m, HEAD, 42, |_| {}), 2);
    }

    #[test]
    fn misaligned_words_and_pi_bits_are_handled_as_linux_does() {
        let mut m = robust_list(&[42 | FUTEX_WAITERS], 0);
        m.put64(HEAD, 0x2000 | 1); // PI: marked, but no wake (the PI code would hand it over)
        assert_eq!(release(&mut m, HEAD, 42, |_| panic!("no wake for PI")), 1);
        let mut m = robust_list(&[42], 0);
        m.put64(HEAD + 8, OFFSET + 1);
        assert_eq!(release(&mut m, HEAD, 42, |_| {}), 0);
    }
}
