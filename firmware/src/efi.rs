//! UEFI data the EFI stub reads, and what the kernel keeps of it.
//!
//! References: the UEFI Specification 2.10, §4.6 (EFI_CONFIGURATION_TABLE and the vendor-table
//! GUIDs), §7.2 (EFI_BOOT_SERVICES.GetMemoryMap: EFI_MEMORY_DESCRIPTOR, the memory types, and the
//! table "Memory Type Usage after ExitBootServices()"), §7.4 (ExitBootServices).
//!
//! The stub turns the firmware's memory map into a [`MemoryLayout`] before it leaves boot
//! services, because afterwards nothing may allocate and the map's buffer is only ordinary
//! memory the kernel is about to reuse. The layout is deliberately conservative:
//! - **usable**: the types the specification declares free for the OS after ExitBootServices
//!   (conventional memory, and loader and boot-services code and data), write-back cacheable.
//!   This is Linux's `is_usable_memory` (drivers/firmware/efi/efi-init.c) without persistent
//!   memory;
//! - **acpi**: ACPI reclaim memory holds the ACPI tables: RAM the kernel maps (to read them) but
//!   never allocates;
//! - everything else (runtime-services code and data, reserved, ACPI NVS, unusable, PAL code,
//!   persistent, unaccepted, unknown types, memory-mapped I/O) is left out of the kernel's RAM
//!   altogether: it is neither allocated nor put in the linear map, as Linux marks it `nomap`.
//!   The kernel never calls runtime services, so it never needs to map them.
//!
//! A layout that runs out of room loses usable memory, never a reservation: an ACPI range that
//! does not fit is left out of RAM as well.

use mm::phys::RegionSet;

/// A UEFI GUID in its in-memory form (the first three fields little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// The GUID `a-b-c-d[0..2]-d[2..8]` as the specification writes it.
    pub const fn new(a: u32, b: u16, c: u16, d: [u8; 8]) -> Guid {
        let a = a.to_le_bytes();
        let b = b.to_le_bytes();
        let c = c.to_le_bytes();
        Guid([a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    }
}

/// The flattened device tree's configuration table (`EFI_DTB_TABLE_GUID`, defined by the
/// UEFI-on-Arm conventions and used by edk2, U-Boot and Linux's `DEVICE_TREE_GUID`):
/// b1b621d5-f19c-41a5-830b-d9152c69aae0.
pub const DEVICE_TREE_GUID: Guid =
    Guid::new(0xb1b6_21d5, 0xf19c, 0x41a5, [0x83, 0x0b, 0xd9, 0x15, 0x2c, 0x69, 0xaa, 0xe0]);
/// The ACPI 2.0 RSDP (`EFI_ACPI_20_TABLE_GUID`, UEFI §4.6): 8868e871-e4f1-11d3-bc22-0080c73c8881.
pub const ACPI_20_TABLE_GUID: Guid =
    Guid::new(0x8868_e871, 0xe4f1, 0x11d3, [0xbc, 0x22, 0x00, 0x80, 0xc7, 0x3c, 0x88, 0x81]);

/// `EFI_LOADED_IMAGE_PROTOCOL_GUID` (UEFI §9.1): 5b1b31a1-9562-11d2-8e3f-00a0c969723b. Its
/// `LoadOptions` are the image's command line (edk2 passes QEMU's `-append` there).
pub const LOADED_IMAGE_PROTOCOL_GUID: Guid =
    Guid::new(0x5b1b_31a1, 0x9562, 0x11d2, [0x8e, 0x3f, 0x00, 0xa0, 0xc9, 0x69, 0x72, 0x3b]);

/// A UCS-2 command line (`LoadOptions`, `LoadOptionsSize` bytes) as ASCII into `out`: up to the
/// first NUL or `out`'s length, anything outside printable ASCII (a tab becomes a space) as `?`.
/// Returns the bytes written.
pub fn load_options_to_ascii(options: &[u16], out: &mut [u8]) -> usize {
    let mut n = 0;
    for (&c, slot) in options.iter().take_while(|&&c| c != 0).zip(out.iter_mut()) {
        *slot = match c {
            0x09 => b' ',
            0x20..=0x7e => c as u8,
            _ => b'?',
        };
        n += 1;
    }
    n
}

/// `EFI_MEMORY_TYPE` values (UEFI §7.2, `EFI_BOOT_SERVICES.AllocatePages`).
pub mod memory_type {
    /// EfiReservedMemoryType.
    pub const RESERVED: u32 = 0;
    /// EfiLoaderCode.
    pub const LOADER_CODE: u32 = 1;
    /// EfiLoaderData: what the stub allocates (the relocated Image).
    pub const LOADER_DATA: u32 = 2;
    /// EfiBootServicesCode.
    pub const BOOT_SERVICES_CODE: u32 = 3;
    /// EfiBootServicesData.
    pub const BOOT_SERVICES_DATA: u32 = 4;
    /// EfiRuntimeServicesCode.
    pub const RUNTIME_SERVICES_CODE: u32 = 5;
    /// EfiRuntimeServicesData.
    pub const RUNTIME_SERVICES_DATA: u32 = 6;
    /// EfiConventionalMemory.
    pub const CONVENTIONAL: u32 = 7;
    /// EfiACPIReclaimMemory: the ACPI tables.
    pub const ACPI_RECLAIM: u32 = 9;
    /// EfiMemoryMappedIO.
    pub const MMIO: u32 = 11;
}

/// `EFI_MEMORY_WB`: the range supports write-back caching (it is RAM).
pub const MEMORY_WB: u64 = 0x8;
/// `EFI_MEMORY_RUNTIME`: the firmware needs the range at run time.
pub const MEMORY_RUNTIME: u64 = 1 << 63;
/// UEFI pages are always 4 KiB (UEFI §7.2).
pub const EFI_PAGE_SIZE: u64 = 4096;
/// Bytes of an `EFI_MEMORY_DESCRIPTOR` as version 1 defines it; firmware may use a larger
/// stride (`DescriptorSize`), which is why the map is walked by that.
pub const DESCRIPTOR_V1_SIZE: usize = 40;

/// One `EFI_MEMORY_DESCRIPTOR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryDescriptor {
    /// `Type` (an [`memory_type`] value).
    pub kind: u32,
    /// `PhysicalStart`.
    pub start: u64,
    /// `NumberOfPages` (4 KiB each).
    pub pages: u64,
    /// `Attribute`.
    pub attribute: u64,
}

impl MemoryDescriptor {
    /// Decodes the descriptor at the start of `bytes` (at least [`DESCRIPTOR_V1_SIZE`] long).
    pub fn parse(bytes: &[u8]) -> Option<MemoryDescriptor> {
        let u64_at =
            |at: usize| -> Option<u64> { Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?)) };
        Some(MemoryDescriptor {
            kind: u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?),
            start: u64_at(8)?,
            pages: u64_at(24)?,
            attribute: u64_at(32)?,
        })
    }

    /// `[start, end)`, or `None` when the range wraps or is not page-aligned.
    pub fn range(&self) -> Option<(u64, u64)> {
        let len = self.pages.checked_mul(EFI_PAGE_SIZE)?;
        let end = self.start.checked_add(len)?;
        self.start.is_multiple_of(EFI_PAGE_SIZE).then_some((self.start, end))
    }

    /// What the kernel does with it.
    pub fn class(&self) -> MemoryClass {
        use memory_type::*;
        let ram = self.attribute & MEMORY_WB != 0;
        match self.kind {
            LOADER_CODE | LOADER_DATA | BOOT_SERVICES_CODE | BOOT_SERVICES_DATA | CONVENTIONAL
                if ram && self.attribute & MEMORY_RUNTIME == 0 =>
            {
                MemoryClass::Usable
            }
            ACPI_RECLAIM if ram => MemoryClass::AcpiTables,
            _ => MemoryClass::Firmware,
        }
    }
}

/// How the kernel treats a memory-map entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryClass {
    /// Free for the kernel after ExitBootServices.
    Usable,
    /// ACPI tables: mapped, never allocated.
    AcpiTables,
    /// The firmware's, or not RAM: neither mapped nor allocated.
    Firmware,
}

/// What the kernel keeps of the memory map.
#[derive(Clone, Debug)]
pub struct MemoryLayout {
    /// RAM the kernel may allocate (the Image and the device tree still have to be taken out).
    pub usable: RegionSet<64>,
    /// RAM holding the ACPI tables: in the linear map, reserved.
    pub acpi: RegionSet<16>,
    /// Bytes of firmware-owned or non-RAM ranges, for the boot report.
    pub firmware_bytes: u64,
    /// Descriptors in the map.
    pub descriptors: u32,
    /// Descriptors left out: malformed (misaligned or wrapping), or with no room left in their
    /// set (usable memory lost, never a reservation dropped).
    pub dropped: u32,
}

impl MemoryLayout {
    /// An empty layout.
    pub const fn new() -> MemoryLayout {
        MemoryLayout {
            usable: RegionSet::new(),
            acpi: RegionSet::new(),
            firmware_bytes: 0,
            descriptors: 0,
            dropped: 0,
        }
    }

    /// Reads the map GetMemoryMap wrote: `map` is its buffer (`MemoryMapSize` bytes),
    /// `descriptor_size` its `DescriptorSize`.
    ///
    /// # Errors
    /// [`MapError::DescriptorSize`] when `descriptor_size` is below the version-1 descriptor or not
    /// a multiple of 8 (the specification's descriptors are 8-byte aligned); nothing is read then.
    pub fn from_memory_map(map: &[u8], descriptor_size: usize) -> Result<MemoryLayout, MapError> {
        if descriptor_size < DESCRIPTOR_V1_SIZE || !descriptor_size.is_multiple_of(8) {
            return Err(MapError::DescriptorSize(descriptor_size));
        }
        let mut layout = MemoryLayout::new();
        for bytes in map.chunks_exact(descriptor_size) {
            layout.descriptors += 1;
            let Some(d) = MemoryDescriptor::parse(bytes) else { continue };
            let Some((start, end)) = d.range() else {
                layout.dropped += 1;
                continue;
            };
            let fits = match d.class() {
                MemoryClass::Usable => layout.usable.add(start, end).is_ok(),
                MemoryClass::AcpiTables => layout.acpi.add(start, end).is_ok(),
                MemoryClass::Firmware => {
                    layout.firmware_bytes = layout.firmware_bytes.saturating_add(end - start);
                    true
                }
            };
            if !fits {
                layout.dropped += 1;
            }
        }
        // A firmware map may list a range twice under two types (it should not): the stricter
        // wins, so nothing reserved is handed out.
        let acpi = layout.acpi.clone();
        for &(start, end) in acpi.ranges() {
            if layout.usable.remove(start, end).is_err() {
                layout.dropped += 1;
            }
        }
        Ok(layout)
    }
}

impl Default for MemoryLayout {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a memory map was not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// The `DescriptorSize` GetMemoryMap returned.
    DescriptorSize(usize),
}

/// Marks a [`Handoff`] the stub filled in ("EFISTUB" and a version digit).
pub const HANDOFF_MAGIC: u64 = u64::from_le_bytes(*b"EFISTUB1");

/// What the EFI stub leaves for the kernel, in a static of the Image it starts (so nothing but
/// x0 crosses the arm64 boot protocol, which wants x1..x3 zero). A raw-Image boot finds it as
/// linked: `magic` 0.
#[derive(Clone, Debug)]
pub struct Handoff {
    /// [`HANDOFF_MAGIC`] when the stub filled it in.
    pub magic: u64,
    /// Physical address of the device tree from the configuration table (also in x0), or 0.
    pub fdt: u64,
    /// Physical address of the ACPI 2.0 RSDP from the configuration table, or 0.
    pub rsdp: u64,
    /// The exception level the firmware ran the stub at.
    pub firmware_el: u64,
    /// Bytes of the image's UEFI load options the stub made `/chosen/bootargs` of (0: none were
    /// given, or they did not fit, and the tree's own `bootargs` stand).
    pub load_options: u64,
    /// The memory map, as the kernel keeps it.
    pub memory: MemoryLayout,
}

impl Handoff {
    /// The value a raw-Image boot sees.
    pub const fn empty() -> Handoff {
        Handoff { magic: 0, fdt: 0, rsdp: 0, firmware_el: 0, load_options: 0, memory: MemoryLayout::new() }
    }

    /// Whether the stub filled this in.
    pub fn is_valid(&self) -> bool {
        self.magic == HANDOFF_MAGIC
    }
}

/// Finds the table with `guid` in an EFI configuration table given as `(guid, table)` pairs.
pub fn find_table(entries: impl IntoIterator<Item = (Guid, u64)>, guid: Guid) -> Option<u64> {
    entries.into_iter().find(|(g, _)| *g == guid).map(|(_, t)| t)
}

#[cfg(test)]
mod tests;
