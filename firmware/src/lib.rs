//! What UEFI firmware hands a kernel, as plain data: no firmware calls, no `unsafe`.
//!
//! The kernel's EFI stub (kernel/src/firmware/) calls the firmware; everything it does with the
//! answers that is logic lives here so it can be tested on the host against fixture bytes:
//! - [`efi`]: the configuration-table GUIDs, the memory-map descriptors, and their conversion
//!   into RAM, reservations and the hand-over record the stub leaves in the kernel image;
//! - [`acpi`]: the ACPI tables read when there is no device tree (RSDP, XSDT, FADT, MADT, GTDT,
//!   SPCR), validated; [`acpi_dt`] describes what they say as a device tree, written by
//!   [`fdt_writer`], so the kernel has one discovery path.
#![no_std]
#![deny(unsafe_code)]

pub mod acpi;
pub mod acpi_dt;
pub mod efi;
pub mod fdt_edit;
pub mod fdt_writer;
