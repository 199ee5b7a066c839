//! FEAT_LPA2: 52-bit virtual and physical addresses with the 4 KiB and 16 KiB granules
//! (`TCR_EL1.DS = 1`), as the `lpa2` build feature selects it ([`Format::K4_LPA2`],
//! [`Format::K16_LPA2`]).
//!
//! What changes with `DS` (Arm ARM D8.3, D19.2 `TCR_EL1`, C5.5 `TLBI`; the numbers are those of
//! [`crate::granule`]):
//! - descriptors hold `OA[51:50]` in bits `[9:8]`, where the SH field was; shareability comes
//!   from `TCR_EL1.SH0`/`SH1` instead ([`crate::descriptor`] encodes it so for the build);
//! - a walk resolves up to 52 bits of VA: with 4 KiB pages that takes one more table, at level
//!   −1 (16 entries, one per 2^48 bytes), with 16 KiB pages the level-0 table grows from 2 to
//!   32 entries; blocks appear at level 0 (512 GiB, 4 KiB pages) and level 1 (64 GiB, 16 KiB);
//! - a range `TLBI`'s `BaseADDR` counts 64 KiB units rather than pages, so a range op must start
//!   on a 64 KiB boundary; the planner's [`Format::range_base_shift`] handles it (as Linux's
//!   `__flush_tlb_range_op()` does with `lpa2_is_enabled()`).
//!
//! How the trees are laid out: a [`PageTable`](super::PageTable) is a tree whose root is at level
//! 0 or below ([`crate::addr::VA_BITS`] bits). With 16 KiB pages that root is the whole 52-bit
//! tree. With 4 KiB pages a 52-bit TTBR points at a level −1 table, each of whose 16 entries is a
//! table descriptor pointing at the root of a 48-bit tree; this module builds that table
//! ([`level_minus_one_entry`], [`level_minus_one_index`]). The kernel's TTBR1 half then has one
//! populated entry, the last one, whose tree is the usual upper range `0xffff_0000_0000_0000..`,
//! so the kernel's link address and layout do not move. User space stays 48-bit, as on Linux
//! (`DEFAULT_MAP_WINDOW`): `TCR_EL1.T0SZ` = 16 with 4 KiB pages, so TTBR0 walks start at level
//! 0 in a plain 48-bit tree with LPA2 descriptors; with 16 KiB pages the 52-bit tree is used with
//! the task size of [`crate::addr::USER_VA_BITS`].
//!
//! Why a build feature rather than a run-time choice of `DS` (which is what Linux does: one
//! kernel image folds the extra level away and reads bits `[9:8]` as SH when the CPU lacks LPA2):
//! the whole crate is built on the build's [`Format::BUILD`] as a constant (the shifts, masks and
//! loop bounds of every table walk fold to the granule's numbers, and the host benchmarks measure
//! that code), so a run-time descriptor layout would put a branch or a loaded mask into every
//! descriptor access of every build to serve one configuration. An `lpa2` kernel instead refuses
//! at boot, with a message, on a CPU whose `ID_AA64MMFR0_EL1` does not report LPA2 for its
//! granule ([`cpu_supports_lpa2`]); the default 48-bit build runs everywhere.

use crate::addr::{PhysAddr, VirtAddr};
use crate::descriptor::Descriptor;
use crate::granule::{Format, Granule};

/// Whether the build's 52-bit TTBR needs a level −1 table above its trees: 4 KiB pages with
/// `lpa2` (the 16 KiB granule's 52-bit tree starts at level 0).
pub const LEVEL_MINUS_ONE: bool = Format::BUILD.start_level() < 0;

/// Entries of the level −1 table of a 52-bit tree with 4 KiB pages: `2^(52 − 48)`.
pub const LEVEL_MINUS_ONE_ENTRIES: usize = 1 << (52 - 48);

/// `TCR_EL1.DS` (bit 59): the 52-bit descriptor and `TLBI` layouts of FEAT_LPA2.
pub const TCR_DS: u64 = 1 << 59;

/// `TCR_EL1.IPS` for a 52-bit intermediate physical address size (`0b110`).
pub const TCR_IPS_52: u64 = 0b110;

/// Whether the CPU whose `ID_AA64MMFR0_EL1` reads `mmfr0` implements 52-bit addresses with the
/// granule of `format` (FEAT_LPA2). The fields are read raw, as the architecture defines them:
/// `TGran4` `[31:28]` (signed: 0b0000 4 KiB pages with 48 bits, 0b0001 with 52 bits, 0b1111 no
/// 4 KiB pages) and `TGran16` `[23:20]` (unsigned: 0b0000 none, 0b0001 48 bits, 0b0010 52 bits).
/// Always false for the 64 KiB granule, whose 52 bits are FEAT_LVA/FEAT_LPA, not this feature.
pub const fn cpu_supports_lpa2(format: Format, mmfr0: u64) -> bool {
    match format.granule {
        Granule::K4 => (mmfr0 >> 28) & 0xf == 0b0001,
        Granule::K16 => (mmfr0 >> 20) & 0xf == 0b0010,
        Granule::K64 => false,
    }
}

/// `TCR_EL1.T1SZ` for a 52-bit kernel half: `64 − 52`.
pub const T1SZ_52: u64 = 64 - 52;

/// `TCR_EL1.T0SZ` for the user half of the build: `64 − VA_BITS` (16 with 4 KiB pages, where
/// TTBR0 walks a 48-bit tree; 12 with 16 KiB pages and LPA2, a 52-bit tree).
pub const T0SZ: u64 = 64 - crate::addr::VA_BITS as u64;

/// The index in a level −1 table of the 48-bit tree translating `va`: `VA[51:48]`.
#[inline]
pub const fn level_minus_one_index(va: VirtAddr) -> usize {
    Format::K4_LPA2.table_index(va.0, -1)
}

/// The level −1 entry that points at the root of a 48-bit tree at `root` (a table descriptor,
/// the same encoding at every level). `None` if `root` is not page-aligned or beyond 52 bits.
#[inline]
pub const fn level_minus_one_entry(root: PhysAddr) -> Option<Descriptor> {
    Descriptor::table_in(Format::K4_LPA2, root)
}

#[cfg(test)]
mod tests;
