//! Firmware interfaces: booting as a UEFI application.
//!
//! [`efi_stub`] is the Image's PE/COFF entry point: it gathers what UEFI firmware knows (device
//! tree, ACPI RSDP, memory map; a device tree made from the ACPI tables when there is none),
//! leaves boot services and enters the raw-Image path. The logic
//! that needs no firmware (the memory-map conversion, the GUIDs, the hand-over record) is in the
//! host-tested `firmware` crate. docs/boot.md, "Booting through UEFI", describes the path.

pub mod efi_stub;
