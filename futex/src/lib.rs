//! Futexes as the kernel implements them, as logic the host can test (Linux `kernel/futex/`):
//! - [`op`]: the `futex_op` word split into command and flags, and `FUTEX_WAKE_OP`'s packed
//!   operation;
//! - [`wait_list`]: the one list every blocked thread sits in (futex words, deadlines, console
//!   input, polls, signals), which never allocates once room is reserved;
//! - [`robust`]: what a thread's robust list gets when the thread exits.
//!
//! The kernel supplies user memory and the clock; the numbers are Linux's, from `linux_abi::futex`.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod op;
pub mod robust;
pub mod wait_list;
