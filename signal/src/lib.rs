//! Linux arm64 signals as plain data, so that every rule the kernel follows can be tested on the
//! build host: the numbers and flags (`include/uapi/asm-generic/signal.h`, `signal-defs.h`,
//! `siginfo.h`), signal sets and the mask arithmetic of `kernel/signal.c`, dispositions and
//! default actions, `siginfo_t`, `stack_t` and the sigaltstack rules, the pending queues, and the
//! arm64 signal frame (`arch/arm64/kernel/signal.c`, `arch/arm64/include/uapi/asm/sigcontext.h`)
//! byte for byte, both its construction and the validation `rt_sigreturn` does.
//!
//! The crate touches no memory but the byte buffers it is given: the kernel copies a frame to or
//! from user memory itself (with its checked user-copy routines) and calls [`frame::build`] or
//! [`frame::parse`] on the kernel-side copy.
//!
//! Module map:
//! - [`num`]: signal numbers, `sigaction` flags, `si_code` values, `sigprocmask` operations;
//! - [`set`]: [`set::SigSet`], the 64-bit signal mask;
//! - [`action`]: `struct sigaction` as arm64 Linux lays it out, dispositions, default actions;
//! - [`info`]: `siginfo_t` (128 bytes);
//! - [`stack`]: `stack_t` and the alternate signal stack;
//! - [`queue`]: pending signals (standard ones coalesce, real-time ones queue);
//! - [`frame`]: `struct rt_sigframe`: layout, build, parse;
//! - [`restart`]: what an interrupted system call returns once a signal is handled, and the
//!   restart class of every blocking call;
//! - [`signalfd`]: `struct signalfd_siginfo`, what a signalfd read returns for a signal;
//! - [`timer`]: interval and POSIX timers, their overruns and `RLIMIT_CPU`.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod action;
pub mod frame;
pub mod info;
pub mod num;
pub mod queue;
pub mod restart;
pub mod set;
pub mod signalfd;
pub mod stack;
pub mod timer;

/// Reads the little-endian `u64` at `at` in `b` (callers index inside fixed-size buffers).
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Reads the little-endian `u32` at `at` in `b`.
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Writes `v` little-endian at `at` in `b`.
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Writes `v` little-endian at `at` in `b`.
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
