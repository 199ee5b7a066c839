//! The errno values of the non-memory system calls (asm-generic `errno-base.h`, `errno.h`); the
//! memory calls' values live with them in `mm::vm::Errno`, and the kernel's `syscall::errno`
//! gathers both.

/// No such file or directory.
pub const ENOENT: i64 = 2;
/// Too many open files.
pub const EMFILE: i64 = 24;
/// Not a typewriter (an ioctl the device does not know).
pub const ENOTTY: i64 = 25;
/// Illegal seek.
pub const ESPIPE: i64 = 29;
/// Result out of range (a buffer too small).
pub const ERANGE: i64 = 34;
/// File name too long.
pub const ENAMETOOLONG: i64 = 36;
