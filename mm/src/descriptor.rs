//! Stage-1 translation-table descriptors (VMSAv8-64): the build's format ([`Format::BUILD`]:
//! the 4 KiB granule with 48-bit addresses unless the features choose another), and through the
//! `*_in` constructors and accessors every [`Format`] (16 and 64 KiB granules, 52-bit
//! addresses). In an `lpa2` build the plain constructors write the LPA2 layout (`OA[51:50]` in
//! bits `[9:8]`, no SH field) and [`Descriptor::attributes`] gives back the shareability of the
//! memory type, which is all this crate ever writes there.
//!
//! Why one file: a descriptor is one bit layout (the table below), and every constructor and
//! accessor here is a few lines over the same private masks, which a split would have to open to
//! each part. The tests are in `descriptor/tests.rs` and `descriptor/format_tests.rs`.
//!
//! Why it is built this way: a descriptor is a plain `u64` newtype, and the attributes of a leaf
//! are a second newtype holding only the attribute bits. Everything here is `const` and free of
//! traits objects, statics and formatting, because the same code runs in early boot with the MMU
//! off, at a physical address different from the link address (the kernel's `boot::early_map`
//! builds its blocks with [`Descriptor::block_2m`] and [`Descriptor::table`], so the project has
//! one descriptor encoding). The constructors encode the
//! kernel's security rules once (kernel mappings are never executable at EL0, user mappings never
//! at EL1, the Access flag is always set, normal memory is Inner Shareable), so that the page-table
//! engine and its callers cannot forget them.
//!
//! Bit positions follow the Arm ARM (D8.3, "Translation table descriptor formats"):
//!
//! | Bits      | Leaf (block/page)                      | Table                              |
//! |-----------|----------------------------------------|------------------------------------|
//! | `[1:0]`   | `0b01` block (L1, L2), `0b11` page (L3) | `0b11` (L0 to L2)                 |
//! | `[4:2]`   | AttrIndx (MAIR index)                  | ignored                            |
//! | 5         | NS (kept 0)                            | ignored                            |
//! | `[7:6]`   | `AP[2:1]`                              | ignored                            |
//! | `[9:8]`   | SH                                     | ignored                            |
//! | 10        | AF                                     | ignored                            |
//! | 11        | nG                                     | ignored                            |
//! | `[47:12]` | output address                         | next-level table address           |
//! | 50        | GP (guarded page, FEAT_BTI)            | ignored                            |
//! | 51        | DBM (kept 0)                           | ignored                            |
//! | 52        | Contiguous                             | ignored                            |
//! | 53        | PXN                                    | ignored                            |
//! | 54        | UXN                                    | ignored                            |
//! | `[63:59]` | ignored                                | APTable, XNTable, NSTable (kept 0) |
//!
//! Other formats ([`crate::granule`]): the address field starts at the entry's size (bit 14 for
//! 16 KiB pages, 16 for 64 KiB); with `TCR_EL1.DS` (FEAT_LPA2, 4 and 16 KiB pages, 52 bits) it
//! runs to bit 49 and bits `[9:8]` hold `OA[51:50]` instead of SH (shareability then comes from
//! `TCR_EL1.SH0/SH1`, so the `*_in` constructors leave SH out); with 64 KiB pages and 52 bits,
//! bits `[15:12]` hold `OA[51:48]`. Blocks exist where
//! [`Format::block_size`] allows them (a level-0 block with 4 KiB pages and `DS`, a level-1
//! block with 16 KiB pages and `DS` or 64 KiB pages and 52 bits). The `*_in` forms return `None`
//! for what the format cannot express instead of dropping bits, so that no caller can build a
//! descriptor that maps somewhere else.

use crate::addr::PhysAddr;
use crate::granule::Format;

/// The value to program into `MAIR_EL1`. Attribute index `i` (bits `[8i+7:8i]`) is the encoding
/// of [`MemoryType`] with discriminant `i`:
///
/// | Index | Type                  | Encoding |
/// |-------|-----------------------|----------|
/// | 0     | Normal, Write-Back RW-allocate, inner and outer | `0xff` |
/// | 1     | Normal, Non-cacheable | `0x44`   |
/// | 2     | Device-nGnRE          | `0x04`   |
/// | 3     | Device-nGnRnE         | `0x00`   |
/// | 4     | Normal Tagged (FEAT_MTE2), read here as index 0's Write-Back | `0xff` |
///
/// Index 4 holds plain Write-Back here because `0xf0` (Tagged Normal) is reserved on a CPU
/// without FEAT_MTE2; a kernel that finds the feature programs [`mair_el1_value`]`(true)`
/// instead, as Linux's `__cpu_setup` patches `MT_NORMAL_TAGGED` in when `ID_AA64PFR1_EL1.MTE`
/// says so. Nothing is mapped tagged before that, so the change needs no TLB maintenance.
pub const MAIR_EL1_VALUE: u64 = mair_el1_value(false);

/// The `MAIR_EL1` encoding of Normal Tagged memory: Inner and Outer Write-Back, Read and Write
/// allocate, with Allocation Tags (FEAT_MTE2).
pub const MAIR_NORMAL_TAGGED: u64 = 0xf0;

/// `MAIR_EL1` for a CPU with (`tagged`) or without FEAT_MTE2: index 4 ([`MemoryType::NormalTagged`])
/// is [`MAIR_NORMAL_TAGGED`] or plain Write-Back (`0xff`); indices 0 to 3 as [`MAIR_EL1_VALUE`].
pub const fn mair_el1_value(tagged: bool) -> u64 {
    let index4 = if tagged { MAIR_NORMAL_TAGGED } else { 0xff };
    0xff | (0x44 << 8) | (0x04 << 16) | (index4 << 32)
}

/// Bits `[47:12]`: the output address of a page or block, or the address of the next-level table
/// (the build's format, [`Format::oa_field_mask`]).
pub const OUTPUT_ADDRESS_MASK: u64 = Format::BUILD.oa_field_mask(Format::BUILD.granule.shift());

const VALID: u64 = 1 << 0;
const TYPE_TABLE_OR_PAGE: u64 = 1 << 1;
const ATTR_INDEX_SHIFT: u32 = 2;
const ATTR_INDEX_MASK: u64 = 0b111 << ATTR_INDEX_SHIFT;
const NS: u64 = 1 << 5;
const AP_SHIFT: u32 = 6;
const AP_MASK: u64 = 0b11 << AP_SHIFT;
const SH_SHIFT: u32 = 8;
const SH_MASK: u64 = 0b11 << SH_SHIFT;
const SH_OUTER: u64 = 0b10 << SH_SHIFT;
const SH_INNER: u64 = 0b11 << SH_SHIFT;
const AF: u64 = 1 << 10;
const NG: u64 = 1 << 11;
const GP: u64 = 1 << 50;
const DBM: u64 = 1 << 51;
const CONTIGUOUS: u64 = 1 << 52;
const PXN: u64 = 1 << 53;
const UXN: u64 = 1 << 54;

/// The bits [`Attributes`] may hold. The contiguous hint is not among them: the page-table
/// engine decides it, because it depends on the neighbouring entries.
const ATTRIBUTE_MASK: u64 = ATTR_INDEX_MASK | NS | AP_MASK | SH_MASK | AF | NG | GP | DBM | PXN | UXN;

/// Attribute bits a live valid leaf may change without break-before-make (Arm ARM D8.16.1): the
/// access permissions, the execute-never bits and the guarded-page bit (which, like them, only
/// says what an access or a branch may do, as Linux's `pte_modify` treats it). Anything else
/// (memory type, shareability, nG, output address, block size, contiguous hint) needs
/// break-before-make.
pub const BBM_FREE_MASK: u64 = AP_MASK | PXN | UXN | GP;

/// The number of entries of a contiguous run of pages (level 3) with the build's granule: 16,
/// 128 or 32 (for level 2 and other granules: [`crate::granule::Granule::contiguous_entries`]).
pub const CONTIGUOUS_ENTRIES: usize = match Format::BUILD.granule.contiguous_entries(3) {
    Some(n) => n as usize,
    None => panic!("every granule has contiguous pages"),
};

/// Whether the build's level-1 entries may be blocks (1 GiB with 4 KiB pages; the 16 and 64 KiB
/// granules have none with 48-bit addresses, so a block encoding there is reserved).
const LEVEL1_BLOCKS: bool = Format::BUILD.block_size(1).is_some();
/// Whether level-0 entries may be blocks (512 GiB, only with 4 KiB pages and `DS`).
const LEVEL0_BLOCKS: bool = Format::BUILD.block_size(0).is_some();
/// The build's format, for the plain constructors (they fold to the 48-bit masks without `DS`).
const BUILD: Format = Format::BUILD;

/// log2 of the span of an entry at `level` in the build's format.
const fn level_shift(level: u32) -> u32 {
    BUILD.granule.level_shift(level as i32)
}

/// Memory type of a mapping, i.e. its `AttrIndx` into [`MAIR_EL1_VALUE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MemoryType {
    /// Normal memory, Write-Back cacheable (index 0). RAM.
    NormalWriteBack = 0,
    /// Normal memory, Non-cacheable (index 1). Frame buffers, DMA buffers on non-coherent buses.
    NormalNonCacheable = 1,
    /// Device-nGnRE (index 2). Ordinary MMIO.
    DeviceNGnRE = 2,
    /// Device-nGnRnE (index 3). MMIO that needs non-posted writes.
    DeviceNGnRnE = 3,
    /// Normal memory, Write-Back, with Allocation Tags (index 4, FEAT_MTE2): user memory mapped
    /// `PROT_MTE`, and the kernel's linear map on a CPU with the feature (so that the kernel can
    /// zero and copy a frame's tags). Loads and stores through it are tag-checked as
    /// `SCTLR_EL1.TCF0`/`TCF` say; on a CPU without the feature [`mair_el1_value`]`(false)`
    /// makes it plain Write-Back.
    NormalTagged = 4,
}

impl MemoryType {
    /// The memory type with MAIR index `index`, or `None` if the index is not one of ours.
    pub const fn from_index(index: u64) -> Option<Self> {
        match index {
            0 => Some(Self::NormalWriteBack),
            1 => Some(Self::NormalNonCacheable),
            2 => Some(Self::DeviceNGnRE),
            3 => Some(Self::DeviceNGnRnE),
            4 => Some(Self::NormalTagged),
            _ => None,
        }
    }

    /// Whether this is a Device memory type.
    pub const fn is_device(self) -> bool {
        matches!(self, Self::DeviceNGnRE | Self::DeviceNGnRnE)
    }
}

/// Data access permission, the `AP[2:1]` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// EL1 read/write, no EL0 access (`AP = 0b00`).
    KernelRw,
    /// EL1 and EL0 read/write (`AP = 0b01`).
    UserRw,
    /// EL1 read-only, no EL0 access (`AP = 0b10`).
    KernelRo,
    /// EL1 and EL0 read-only (`AP = 0b11`).
    UserRo,
}

impl Access {
    const fn bits(self) -> u64 {
        (match self {
            Self::KernelRw => 0b00,
            Self::UserRw => 0b01,
            Self::KernelRo => 0b10,
            Self::UserRo => 0b11,
        }) << AP_SHIFT
    }

    const fn from_bits(bits: u64) -> Self {
        match (bits & AP_MASK) >> AP_SHIFT {
            0b00 => Self::KernelRw,
            0b01 => Self::UserRw,
            0b10 => Self::KernelRo,
            _ => Self::UserRo,
        }
    }

    /// Whether EL0 may access the data.
    pub const fn el0_accessible(self) -> bool {
        matches!(self, Self::UserRw | Self::UserRo)
    }

    /// Whether the data is writable (at every level that can access it).
    pub const fn writable(self) -> bool {
        matches!(self, Self::KernelRw | Self::UserRw)
    }
}

/// What a user (EL0) mapping allows. User mappings are never executable at EL1 (PXN) and are
/// always non-global (nG: tagged with the address space's ASID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserAccess {
    /// Read only.
    ReadOnly,
    /// Read and write.
    ReadWrite,
    /// Read and execute.
    ReadExecute,
    /// Read, write and execute. The descriptor can express it; the address-space policy (W^X)
    /// is what forbids it.
    ReadWriteExecute,
}

/// Read/write/execute rights at one exception level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rwx {
    /// Loads are permitted.
    pub read: bool,
    /// Stores are permitted.
    pub write: bool,
    /// Instruction fetches are permitted.
    pub execute: bool,
}

/// The effective permissions of a leaf at EL1 and EL0, as the architecture derives them from
/// `AP`, `PXN` and `UXN` (with `SCTLR_EL1.WXN = 0` and ignoring PAN, which only affects EL1
/// data accesses to EL0-accessible pages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Permissions {
    /// What EL1 (the kernel) may do.
    pub el1: Rwx,
    /// What EL0 (user space) may do.
    pub el0: Rwx,
}

/// The attributes of a leaf (block or page) descriptor: memory type, access permission,
/// execute-never bits, global/non-global, shareability and the Access flag.
///
/// Build them with the named constructors ([`kernel_text`](Self::kernel_text),
/// [`kernel_rodata`](Self::kernel_rodata), [`kernel_data`](Self::kernel_data),
/// [`device`](Self::device), [`user`](Self::user)) and adjust with the `with_*` methods.
/// The contiguous hint is not an attribute: the page-table engine sets it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attributes(u64);

impl core::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Attributes")
            .field("memory", &self.memory_type())
            .field("access", &self.access())
            .field("pxn", &self.pxn())
            .field("uxn", &self.uxn())
            .field("global", &self.is_global())
            .finish()
    }
}

impl Attributes {
    /// Attributes for `memory` with data access `access`, never executable (PXN and UXN set),
    /// global, the Access flag set, and the shareability that fits the memory type: Inner
    /// Shareable for normal memory, Outer Shareable for device memory (the architecture treats
    /// Device and Normal Non-cacheable memory as Outer Shareable whatever SH says, so SH is only
    /// documentation there).
    pub const fn new(memory: MemoryType, access: Access) -> Self {
        let sh = if memory.is_device() { SH_OUTER } else { SH_INNER };
        Self(((memory as u64) << ATTR_INDEX_SHIFT) | access.bits() | sh | AF | PXN | UXN)
    }

    /// Kernel code: normal write-back memory, EL1 read-only and executable, UXN, global.
    pub const fn kernel_text() -> Self {
        Self::new(MemoryType::NormalWriteBack, Access::KernelRo).with_el1_execute(true)
    }

    /// Kernel read-only data: EL1 read-only, never executable, global.
    pub const fn kernel_rodata() -> Self {
        Self::new(MemoryType::NormalWriteBack, Access::KernelRo)
    }

    /// Kernel data (also the linear map of RAM, stacks): EL1 read/write, never executable,
    /// global.
    pub const fn kernel_data() -> Self {
        Self::new(MemoryType::NormalWriteBack, Access::KernelRw)
    }

    /// Device MMIO: Device-nGnRE, EL1 read/write, never executable (which also stops speculative
    /// instruction fetches from device memory), global.
    pub const fn device() -> Self {
        Self::new(MemoryType::DeviceNGnRE, Access::KernelRw)
    }

    /// Strongly ordered device MMIO: Device-nGnRnE, otherwise as [`device`](Self::device).
    pub const fn device_ngnrne() -> Self {
        Self::new(MemoryType::DeviceNGnRnE, Access::KernelRw)
    }

    /// User memory: normal write-back, EL0-accessible as `access` says, always PXN (never
    /// executable at EL1), non-global.
    pub const fn user(access: UserAccess) -> Self {
        let (ap, exec) = match access {
            UserAccess::ReadOnly => (Access::UserRo, false),
            UserAccess::ReadWrite => (Access::UserRw, false),
            UserAccess::ReadExecute => (Access::UserRo, true),
            UserAccess::ReadWriteExecute => (Access::UserRw, true),
        };
        Self::new(MemoryType::NormalWriteBack, ap).with_el0_execute(exec).with_global(false)
    }

    /// The attribute bits, as they appear in a leaf descriptor (the contiguous hint excluded).
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Attributes from the bits of a leaf descriptor; the address, type and contiguous bits and
    /// any bit this type does not model are dropped.
    pub const fn from_descriptor_bits(bits: u64) -> Self {
        Self(bits & ATTRIBUTE_MASK)
    }

    /// The memory type. An `AttrIndx` outside 0..=4 (never produced by this crate) reads as
    /// Device-nGnRnE, the most conservative type.
    pub const fn memory_type(self) -> MemoryType {
        match MemoryType::from_index((self.0 & ATTR_INDEX_MASK) >> ATTR_INDEX_SHIFT) {
            Some(m) => m,
            None => MemoryType::DeviceNGnRnE,
        }
    }

    /// The data access permission (`AP[2:1]`).
    pub const fn access(self) -> Access {
        Access::from_bits(self.0)
    }

    /// Whether PXN (privileged execute-never) is set.
    pub const fn pxn(self) -> bool {
        self.0 & PXN != 0
    }

    /// Whether UXN (unprivileged execute-never) is set.
    pub const fn uxn(self) -> bool {
        self.0 & UXN != 0
    }

    /// Whether the page is guarded (GP: with FEAT_BTI, an indirect branch into it must land on a
    /// BTI instruction).
    pub const fn guarded(self) -> bool {
        self.0 & GP != 0
    }

    /// The same attributes, guarded or not (sets or clears GP). Only meaningful for executable
    /// EL0 mappings on a CPU with FEAT_BTI; without it the bit is RES0, so the caller sets it only
    /// where the CPU has the feature (Linux's `arm64_calc_vm_prot_bits`).
    pub const fn with_guarded(self, guarded: bool) -> Self {
        if guarded { Self(self.0 | GP) } else { Self(self.0 & !GP) }
    }

    /// Whether the mapping is global (nG clear): its TLB entries match every ASID.
    pub const fn is_global(self) -> bool {
        self.0 & NG == 0
    }

    /// Whether the Access flag is set (always, for attributes built by this crate).
    pub const fn accessed(self) -> bool {
        self.0 & AF != 0
    }

    /// The same attributes, tagged or not: [`MemoryType::NormalTagged`] for `tagged`, else
    /// Write-Back, for Normal Write-Back memory (user memory with or without `PROT_MTE`); other
    /// memory types are kept (Linux: `VM_MTE` only ever applies to Normal memory).
    pub const fn with_tagged(self, tagged: bool) -> Self {
        match (self.memory_type(), tagged) {
            (MemoryType::NormalWriteBack, true) => self.with_memory_type(MemoryType::NormalTagged),
            (MemoryType::NormalTagged, false) => self.with_memory_type(MemoryType::NormalWriteBack),
            _ => self,
        }
    }

    /// Whether the memory type is [`MemoryType::NormalTagged`].
    pub const fn tagged(self) -> bool {
        matches!(self.memory_type(), MemoryType::NormalTagged)
    }

    /// The same attributes with another memory type (and the shareability that goes with it).
    pub const fn with_memory_type(self, memory: MemoryType) -> Self {
        let sh = if memory.is_device() { SH_OUTER } else { SH_INNER };
        Self((self.0 & !(ATTR_INDEX_MASK | SH_MASK)) | ((memory as u64) << ATTR_INDEX_SHIFT) | sh)
    }

    /// The same attributes with another data access permission.
    pub const fn with_access(self, access: Access) -> Self {
        Self((self.0 & !AP_MASK) | access.bits())
    }

    /// The same attributes, executable at EL1 or not (clears or sets PXN).
    pub const fn with_el1_execute(self, execute: bool) -> Self {
        if execute { Self(self.0 & !PXN) } else { Self(self.0 | PXN) }
    }

    /// The same attributes, executable at EL0 or not (clears or sets UXN).
    pub const fn with_el0_execute(self, execute: bool) -> Self {
        if execute { Self(self.0 & !UXN) } else { Self(self.0 | UXN) }
    }

    /// The same attributes, global or not (clears or sets nG).
    pub const fn with_global(self, global: bool) -> Self {
        if global { Self(self.0 & !NG) } else { Self(self.0 | NG) }
    }

    /// `self` with the permission bits (AP, PXN, UXN, GP) of `other`: what `mprotect` does.
    pub const fn with_permissions_of(self, other: Self) -> Self {
        Self((self.0 & !BBM_FREE_MASK) | (other.0 & BBM_FREE_MASK))
    }

    /// Whether a live valid leaf with attributes `self` may be rewritten in place with `new`
    /// (same output address and size) without break-before-make: only AP, PXN, UXN and GP differ.
    pub const fn may_change_in_place_to(self, new: Self) -> bool {
        (self.0 ^ new.0) & !BBM_FREE_MASK == 0
    }

    /// The effective permissions at EL1 and EL0. A page writable at EL0 is never executable at
    /// EL1, whatever PXN says (Arm ARM D8.4.1.2).
    pub const fn permissions(self) -> Permissions {
        let access = self.access();
        let el0_write = matches!(access, Access::UserRw);
        Permissions {
            el1: Rwx { read: true, write: access.writable(), execute: !self.pxn() && !el0_write },
            el0: Rwx { read: access.el0_accessible(), write: el0_write, execute: !self.uxn() },
        }
    }
}

/// What a descriptor is, which depends on the level of the table holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DescriptorKind {
    /// Bit 0 clear: translation faults.
    Invalid,
    /// A pointer to a next-level table (levels 0 to 2, bits `[1:0] = 0b11`).
    Table,
    /// A block mapping (bits `[1:0] = 0b01` at level 2, and at level 1 with 4 KiB pages).
    Block,
    /// A page mapping (level 3, bits `[1:0] = 0b11`).
    Page,
    /// An encoding that is reserved at this level (a block at level 0 or 3, or at level 1 with
    /// 16 or 64 KiB pages): faults, and is never written by this crate.
    Reserved,
}

/// A stage-1 translation-table descriptor.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Descriptor(u64);

impl core::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Descriptor({:#018x})", self.0)
    }
}

impl Descriptor {
    /// The invalid descriptor (all zeros).
    pub const INVALID: Self = Self(0);

    /// A descriptor from its raw bits.
    #[inline]
    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }

    /// The raw bits.
    #[inline]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// A table descriptor pointing at the next-level table at `table` (4 KiB aligned; lower bits
    /// are dropped). The hierarchical attributes (APTable, XNTable) are left clear.
    #[inline]
    pub const fn table(table: PhysAddr) -> Self {
        Self(BUILD.encode_oa(table.0, BUILD.granule.shift()) | TYPE_TABLE_OR_PAGE | VALID)
    }

    /// A leaf at `level`: a block at levels 1 and 2, a page at level 3, mapping `pa` (aligned to
    /// the leaf size; lower bits are dropped) with `attrs`, and the contiguous hint if
    /// `contiguous`.
    ///
    /// # Panics
    ///
    /// In debug builds, if `level` is not 1, 2 or 3 (there are no level-0 blocks with the
    /// 4 KiB granule and 48-bit output addresses).
    pub const fn leaf(level: u32, pa: PhysAddr, attrs: Attributes, contiguous: bool) -> Self {
        debug_assert!(level >= 1 && level <= 3);
        let ty = if level == 3 { TYPE_TABLE_OR_PAGE | VALID } else { VALID };
        let cont = if contiguous { CONTIGUOUS } else { 0 };
        Self(BUILD.encode_oa(pa.0, level_shift(level)) | attributes_bits_in(BUILD, attrs) | cont | ty)
    }

    /// A level-2 block (2 MiB with 4 KiB pages, 32 MiB with 16 KiB, 512 MiB with 64 KiB) mapping `pa` (lower bits dropped) with `attrs`, without
    /// the contiguous hint: the same encoding as `leaf(2, pa, attrs, false)`, without its
    /// level check. Early boot builds its blocks with this, with the MMU off and at a physical
    /// address other than the link address, where no panic may be reachable (a panic message is
    /// formatted through pointers that hold link addresses).
    #[inline]
    pub const fn block_2m(pa: PhysAddr, attrs: Attributes) -> Self {
        Self(BUILD.encode_oa(pa.0, level_shift(2)) | attributes_bits_in(BUILD, attrs) | VALID)
    }

    /// A level-3 page mapping `pa` (lower bits dropped) with `attrs`, without the contiguous
    /// hint: `leaf(3, pa, attrs, false)` without its level check, for the same reason as
    /// [`Descriptor::block_2m`] (the early map of the 16 KiB and 64 KiB builds is made of pages).
    ///
    /// ```
    /// use mm::addr::{PAGE_SIZE, PhysAddr};
    /// use mm::descriptor::{Attributes, Descriptor};
    /// let (pa, attrs) = (PhysAddr(0x4000_0000 + 3 * PAGE_SIZE), Attributes::kernel_data());
    /// assert_eq!(Descriptor::page(pa, attrs), Descriptor::leaf(3, pa, attrs, false));
    /// assert_eq!(Descriptor::page(pa, attrs).output_address(), pa);
    /// ```
    #[inline]
    pub const fn page(pa: PhysAddr, attrs: Attributes) -> Self {
        Self(
            BUILD.encode_oa(pa.0, level_shift(3))
                | attributes_bits_in(BUILD, attrs)
                | TYPE_TABLE_OR_PAGE
                | VALID,
        )
    }

    /// Whether bit 0 (valid) is set.
    #[inline]
    pub const fn is_valid(self) -> bool {
        self.0 & VALID != 0
    }

    /// The kind of descriptor this is in a table at `level` (0..=3).
    #[inline]
    pub const fn kind(self, level: u32) -> DescriptorKind {
        if !self.is_valid() {
            DescriptorKind::Invalid
        } else if self.0 & TYPE_TABLE_OR_PAGE != 0 {
            if level == 3 { DescriptorKind::Page } else { DescriptorKind::Table }
        } else if (level == 1 && LEVEL1_BLOCKS) || level == 2 || (level == 0 && LEVEL0_BLOCKS) {
            DescriptorKind::Block
        } else {
            DescriptorKind::Reserved
        }
    }

    /// Whether this is a valid leaf (block or page) at `level`.
    pub const fn is_leaf(self, level: u32) -> bool {
        matches!(self.kind(level), DescriptorKind::Block | DescriptorKind::Page)
    }

    /// Whether this is a table descriptor at `level`.
    #[inline]
    pub const fn is_table(self, level: u32) -> bool {
        matches!(self.kind(level), DescriptorKind::Table)
    }

    /// The output address (bits `[47:12]`): the mapped address of a leaf, or the next-level
    /// table of a table descriptor.
    #[inline]
    pub const fn output_address(self) -> PhysAddr {
        PhysAddr(BUILD.decode_oa(self.0, BUILD.granule.shift()))
    }

    /// The leaf attributes (meaningless for a table or invalid descriptor).
    pub const fn attributes(self) -> Attributes {
        let attrs = Attributes::from_descriptor_bits(self.0);
        // With `DS` bits [9:8] are address bits, and shareability comes from `TCR_EL1`; the
        // crate's attributes always carry the shareability of their memory type, so it is put
        // back, and the attributes read equal those written.
        if BUILD.ds() { attrs.with_memory_type(attrs.memory_type()) } else { attrs }
    }

    /// Whether the contiguous hint (bit 52) is set.
    pub const fn is_contiguous(self) -> bool {
        self.0 & CONTIGUOUS != 0
    }

    /// The same descriptor with the contiguous hint set or cleared.
    pub const fn with_contiguous(self, contiguous: bool) -> Self {
        if contiguous { Self(self.0 | CONTIGUOUS) } else { Self(self.0 & !CONTIGUOUS) }
    }

    /// The same leaf with other attributes (output address, type and contiguous hint kept).
    pub const fn with_attributes(self, attrs: Attributes) -> Self {
        self.with_attributes_in(BUILD, attrs)
    }
}

/// The span of one entry of a table at `level` (0..=3): 512 GiB, 1 GiB, 2 MiB, 4 KiB (the
/// build's format, [`Format::entry_span`]).
pub const fn level_size(level: u32) -> u64 {
    Format::BUILD.entry_span(level as i32)
}

/// Descriptors of any [`Format`]. The build's format has the plain constructors above, which
/// these equal for it (tested).
impl Descriptor {
    /// A table descriptor for `format` pointing at the next-level table at `table`, or `None` if
    /// `table` is not page-aligned or beyond the format's output-address bits.
    pub const fn table_in(format: Format, table: PhysAddr) -> Option<Self> {
        let shift = format.granule.shift();
        if !format.oa_fits(table.0, shift) {
            return None;
        }
        Some(Self(format.encode_oa(table.0, shift) | TYPE_TABLE_OR_PAGE | VALID))
    }

    /// A leaf of `format` at `level` (a page at level 3, a block where the format allows one)
    /// mapping `pa` with `attrs`, and the contiguous hint if `contiguous`. `None` if the format
    /// has no leaf at `level`, `pa` is not aligned to the leaf's size or beyond the output-address
    /// bits, or `contiguous` is asked where `mm` builds no contiguous runs
    /// ([`crate::granule::Granule::contiguous_entries`]). With `DS` the SH bits of `attrs` are
    /// left out: bits `[9:8]` hold `OA[51:50]`.
    pub const fn leaf_in(
        format: Format,
        level: i32,
        pa: PhysAddr,
        attrs: Attributes,
        contiguous: bool,
    ) -> Option<Self> {
        if !format.leaf_allowed(level) {
            return None;
        }
        if contiguous && format.granule.contiguous_entries(level).is_none() {
            return None;
        }
        let shift = format.granule.level_shift(level);
        if !format.oa_fits(pa.0, shift) {
            return None;
        }
        let ty = if level == 3 { TYPE_TABLE_OR_PAGE | VALID } else { VALID };
        let cont = if contiguous { CONTIGUOUS } else { 0 };
        Some(Self(format.encode_oa(pa.0, shift) | attributes_bits_in(format, attrs) | cont | ty))
    }

    /// The kind of descriptor this is in a table of `format` at `level`: a block encoding is a
    /// block only where [`Format::block_size`] allows one (`AArch64.BlockDescSupported()`), and
    /// reserved elsewhere.
    pub const fn kind_in(self, format: Format, level: i32) -> DescriptorKind {
        if !self.is_valid() {
            DescriptorKind::Invalid
        } else if self.0 & TYPE_TABLE_OR_PAGE != 0 {
            if level == 3 { DescriptorKind::Page } else { DescriptorKind::Table }
        } else if format.block_size(level).is_some() {
            DescriptorKind::Block
        } else {
            DescriptorKind::Reserved
        }
    }

    /// The output address in `format` of this descriptor at `level`: the mapped address of a
    /// page or block (bits below the block size ignored), or the next-level table of a table
    /// descriptor.
    pub const fn output_address_in(self, format: Format, level: i32) -> PhysAddr {
        let shift = match self.kind_in(format, level) {
            DescriptorKind::Block => format.granule.level_shift(level),
            _ => format.granule.shift(),
        };
        PhysAddr(format.decode_oa(self.0, shift))
    }

    /// The leaf attributes in `format` (with `DS` the SH field is not there, and reads as 0).
    pub const fn attributes_in(self, format: Format) -> Attributes {
        Attributes(attributes_bits_in(format, Attributes::from_descriptor_bits(self.0)))
    }

    /// The same leaf of `format` with other attributes (output address, type and contiguous hint
    /// kept; with `DS` the address bits `[9:8]` too).
    pub const fn with_attributes_in(self, format: Format, attrs: Attributes) -> Self {
        let mask = if format.ds() { ATTRIBUTE_MASK & !SH_MASK } else { ATTRIBUTE_MASK };
        Self((self.0 & !mask) | attributes_bits_in(format, attrs))
    }
}

/// The descriptor bits of `attrs` in `format`: all of them, or without SH with `DS`.
const fn attributes_bits_in(format: Format, attrs: Attributes) -> u64 {
    if format.ds() { attrs.0 & !SH_MASK } else { attrs.0 }
}

#[cfg(test)]
mod format_tests;

#[cfg(test)]
mod tests;
