//! What UEFI firmware hands a kernel, as plain data: no firmware calls, no `unsafe`.
//!
//! The kernel's EFI stub (kernel/src/firmware/) calls the firmware; everything it does with the
//! answers that is logic lives here so it can be tested on the host against fixture bytes:
//! - [`efi`]: the configuration-table GUIDs, the memory-map descriptors, and their conversion
//!   into RAM, reservations and the hand-over record the stub leaves in the kernel image.
#![no_std]
#![deny(unsafe_code)]

pub mod efi;
