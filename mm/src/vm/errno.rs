//! The memory calls' errors are Linux's errno values, defined once in `linux_abi::errno`; this
//! module only names that type where `mm` uses it, so that a system-call layer returns
//! `-(errno as i64)` unchanged and a program sees what it would see on Linux.
pub use linux_abi::Errno;
