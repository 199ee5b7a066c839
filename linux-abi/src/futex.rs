//! The futex system call's numbers (`linux/futex.h`): commands, flags, the robust-futex word bits.

/// Wait while the word holds the expected value.
pub const FUTEX_WAIT: u32 = 0;
/// Wake waiters.
pub const FUTEX_WAKE: u32 = 1;
/// Wake some waiters, move the others to a second word.
pub const FUTEX_REQUEUE: u32 = 3;
/// `FUTEX_REQUEUE` if the word still holds the expected value.
pub const FUTEX_CMP_REQUEUE: u32 = 4;
/// Change a second word and wake waiters of both.
pub const FUTEX_WAKE_OP: u32 = 5;
/// Priority-inheritance lock.
pub const FUTEX_LOCK_PI: u32 = 6;
/// Priority-inheritance unlock.
pub const FUTEX_UNLOCK_PI: u32 = 7;
/// Priority-inheritance trylock.
pub const FUTEX_TRYLOCK_PI: u32 = 8;
/// `FUTEX_WAIT` with a bitset and an absolute timeout.
pub const FUTEX_WAIT_BITSET: u32 = 9;
/// `FUTEX_WAKE` with a bitset.
pub const FUTEX_WAKE_BITSET: u32 = 10;
/// The futex is not shared with another process.
pub const FUTEX_PRIVATE_FLAG: u32 = 128;
/// An absolute timeout is on CLOCK_REALTIME, not CLOCK_MONOTONIC.
pub const FUTEX_CLOCK_REALTIME: u32 = 256;
/// The command bits of the operation (Linux's `FUTEX_CMD_MASK`): all but the two flags.
pub const FUTEX_CMD_MASK: u32 = !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
/// The bitset of `FUTEX_WAIT` and `FUTEX_WAKE`: every bit.
pub const FUTEX_BITSET_MATCH_ANY: u32 = u32::MAX;
/// The robust futex word's owner-died bit.
pub const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
/// The robust futex word's waiters bit.
pub const FUTEX_WAITERS: u32 = 0x8000_0000;
/// The owner's thread id in a robust futex word.
pub const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// `futex_waitv`: the most futexes in one call.
pub const FUTEX_WAITV_MAX: usize = 128;
/// `futex_waitv` flag: the word is 32 bits.
pub const FUTEX_32: u32 = 2;
