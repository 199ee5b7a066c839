//! Traps: what the kernel does with an exception.
pub mod user;
