//! The logic behind the kernel's Linux system-call ABI that can be tested on the host: what the
//! kernel command line means, the initramfs (cpio newc) format, futex wait queues, robust-list
//! cleanup, the tty line discipline, the byte layouts of the structures programs read, and the
//! system-call name table.
//!
//! Everything here is plain data and algorithms over byte slices and small traits; the kernel
//! (`kernel/src/process/`) supplies user memory, the clock and the console. Keeping it apart makes
//! each rule testable with `cargo test -p linux-abi`, where a kernel test would need a QEMU boot.
//! The reference is Linux's behaviour: each module names the Linux source it follows.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cmdline;
pub mod cpio;
pub mod errno;
pub mod futex;
pub mod layout;
pub mod names;
pub mod robust;
pub mod time;
pub mod tty;
