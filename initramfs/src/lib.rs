//! What the boot loader hands the first program, as logic the host can test:
//! - [`cmdline`]: the kernel command line, split and divided as Linux divides it between the
//!   kernel's own parameters, init's arguments and init's environment (`init/main.c`);
//! - [`cpio`]: the initramfs archive (cpio "newc"), read with every length and offset checked, so
//!   a truncated or hostile archive is an error, never a panic.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cmdline;
pub mod cpio;
