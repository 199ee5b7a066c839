//! The translation granule and the address width, in one place: everything that differs between
//! the 4 KiB, 16 KiB and 64 KiB granules and between 48-bit and 52-bit addresses (page shift,
//! levels, index widths, block and contiguous-run sizes, the `TG` encodings of `TCR_EL1` and of
//! `TLBI` operands, the TTL hints, where a descriptor keeps its output address).
//!
//! Why it is built so: the numbers are facts of the architecture that several modules need (the
//! tables, the descriptors, the TLB planner and its model), and a fact written in two places
//! drifts. [`Granule`] is the page size alone; [`Format`] adds the address width, because some
//! facts (the level-0 block of the 4 KiB granule, the range-TLBI base unit, the descriptor
//! layout) depend on both. Everything is `const fn` on small `Copy` values, so that the build's
//! format ([`Format::BUILD`], the 4 KiB granule with 48-bit addresses) folds to the same
//! constants the crate used before (`PAGE_SHIFT` = 12 and so on) and costs nothing at run time,
//! while the tests can loop over [`Format::ALL`].
//!
//! Sources, checked number by number:
//! - Arm ARM (DDI 0487), D8.2 "Translation process" (levels, index widths, the "Properties of the
//!   address lookup levels" tables: block sizes per granule), D8.3 "Translation table descriptor
//!   formats" (output-address bits, the 52-bit layouts), D8.6.1 "The Contiguous bit" (run
//!   lengths), D19.2 `TCR_EL1` (`TG0`, `TG1`, `DS`), C5.5 `TLBI` (the `TTL` field `[47:44]` and
//!   the range operand's `TG [47:46]`, `BaseADDR [36:0]`);
//! - the pseudocode function `AArch64.BlockDescSupported()`, which QEMU's
//!   `lpae_block_desc_valid()` (target/arm/ptw.c) transcribes: 4 KiB blocks at level 0 only with
//!   `DS`, 16 KiB blocks at level 1 only with `DS`, 64 KiB blocks at level 1 only with a 52-bit PA;
//! - Linux arch/arm64/include/asm/pgtable-hwdef.h (`PTE_ADDR_HIGH` = `0x3 << 8` with
//!   `PTE_ADDR_HIGH_SHIFT` 42 for 4K/16K LPA2, `0xf << 12` with shift 36 for 64K; `TCR_TG0_*`,
//!   `TCR_TG1_*`), arch/arm64/Kconfig (`ARM64_CONT_PTE_SHIFT` 4/7/5, `ARM64_CONT_PMD_SHIFT`
//!   4/5/5) and arch/arm64/include/asm/tlbflush.h (`TLBI_TTL_TG_4K/16K/64K` = 1/2/3; the range
//!   base `addr >> (lpa2 ? 16 : PAGE_SHIFT)`).

/// A translation granule: the size of a page and of every translation table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Granule {
    /// 4 KiB pages, 512 entries (9 index bits) a table.
    K4,
    /// 16 KiB pages, 2048 entries (11 index bits) a table.
    K16,
    /// 64 KiB pages, 8192 entries (13 index bits) a table.
    K64,
}

impl Granule {
    /// The three granules, smallest first.
    pub const ALL: [Granule; 3] = [Granule::K4, Granule::K16, Granule::K64];

    /// log2 of the page size: 12, 14 or 16.
    #[inline]
    pub const fn shift(self) -> u32 {
        match self {
            Granule::K4 => 12,
            Granule::K16 => 14,
            Granule::K64 => 16,
        }
    }

    /// The page size in bytes.
    #[inline]
    pub const fn size(self) -> u64 {
        1 << self.shift()
    }

    /// Bits of VA one table level resolves: a table is one page of 8-byte descriptors, so
    /// `shift − 3` (9, 11, 13).
    #[inline]
    pub const fn index_bits(self) -> u32 {
        self.shift() - 3
    }

    /// Entries of a full table (512, 2048, 8192).
    #[inline]
    pub const fn entries(self) -> usize {
        1 << self.index_bits()
    }

    /// The lowest VA bit that indexes the table at `level` (−1..=3): `shift + index_bits × (3 −
    /// level)`. It is also log2 of the VA span of one entry at that level.
    #[inline]
    pub const fn level_shift(self, level: i32) -> u32 {
        self.shift() + self.index_bits() * (3 - level) as u32
    }

    /// The `TCR_EL1.TG0` encoding (bits `[15:14]`, for TTBR0): 0b00 4 KiB, 0b10 16 KiB, 0b01 64 KiB.
    #[inline]
    pub const fn tcr_tg0(self) -> u64 {
        match self {
            Granule::K4 => 0b00,
            Granule::K16 => 0b10,
            Granule::K64 => 0b01,
        }
    }

    /// The `TCR_EL1.TG1` encoding (bits `[31:30]`, for TTBR1): 0b10 4 KiB, 0b01 16 KiB, 0b11
    /// 64 KiB. (Not the same table as `TG0`.)
    #[inline]
    pub const fn tcr_tg1(self) -> u64 {
        match self {
            Granule::K4 => 0b10,
            Granule::K16 => 0b01,
            Granule::K64 => 0b11,
        }
    }

    /// The granule encoding of `TLBI` operands: the range operand's `TG` `[47:46]` and the upper
    /// half `TTL[3:2]` of a single-VA operand's TTL field: 0b01 4 KiB, 0b10 16 KiB, 0b11 64 KiB.
    /// 0b00 is reserved in a range operand (the op invalidates nothing that can be relied on) and
    /// means "no hint" in a TTL field.
    #[inline]
    pub const fn tlbi_tg(self) -> u64 {
        match self {
            Granule::K4 => 0b01,
            Granule::K16 => 0b10,
            Granule::K64 => 0b11,
        }
    }

    /// The granule a `TLBI` `TG` value names, `None` for the reserved 0b00.
    #[inline]
    pub const fn from_tlbi_tg(tg: u64) -> Option<Granule> {
        match tg & 0b11 {
            0b01 => Some(Granule::K4),
            0b10 => Some(Granule::K16),
            0b11 => Some(Granule::K64),
            _ => None,
        }
    }

    /// Entries in one contiguous run at `level`, the run `mm` builds: levels 3 (pages) and 2
    /// (blocks). 4 KiB: 16 and 16 (64 KiB, 32 MiB); 16 KiB: 128 and 32 (2 MiB, 1 GiB); 64 KiB:
    /// 32 and 32 (2 MiB, 16 GiB) (Arm ARM D8.6.1; Linux `CONT_PTE_SHIFT`/`CONT_PMD_SHIFT`). The
    /// architecture also defines a run of 16 level-1 blocks for the 4 KiB granule, which `mm`
    /// does not build, so it is `None` here as for every other level.
    #[inline]
    pub const fn contiguous_entries(self, level: i32) -> Option<u32> {
        match (self, level) {
            (Granule::K4, 3) | (Granule::K4, 2) => Some(16),
            (Granule::K16, 3) => Some(128),
            (Granule::K16, 2) | (Granule::K64, 3) | (Granule::K64, 2) => Some(32),
            _ => None,
        }
    }
}

/// A stage-1 translation format: the granule and whether addresses are 52 bits wide.
///
/// 52 bits means, for the 4 KiB and 16 KiB granules, FEAT_LPA2 with `TCR_EL1.DS = 1` (52-bit VA
/// and OA, an extra table level for 4 KiB, descriptors keep `OA[51:50]` in bits `[9:8]` and lose
/// their SH field), and for the 64 KiB granule FEAT_LVA with FEAT_LPA (52-bit VA and OA, no `DS`,
/// descriptors keep `OA[51:48]` in bits `[15:12]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    /// The page size.
    pub granule: Granule,
    /// 52-bit virtual and physical addresses instead of 48-bit.
    pub bits52: bool,
}

impl Format {
    /// 4 KiB pages, 48-bit addresses, levels 0 to 3: what `mm` has always built.
    pub const K4: Format = Format { granule: Granule::K4, bits52: false };
    /// 4 KiB pages, FEAT_LPA2 (`DS = 1`), levels −1 to 3.
    pub const K4_LPA2: Format = Format { granule: Granule::K4, bits52: true };
    /// 16 KiB pages, 48-bit addresses, a 2-entry level 0 then levels 1 to 3.
    pub const K16: Format = Format { granule: Granule::K16, bits52: false };
    /// 16 KiB pages, FEAT_LPA2 (`DS = 1`), a 32-entry level 0 then levels 1 to 3.
    pub const K16_LPA2: Format = Format { granule: Granule::K16, bits52: true };
    /// 64 KiB pages, 48-bit addresses, levels 1 (64 entries) to 3.
    pub const K64: Format = Format { granule: Granule::K64, bits52: false };
    /// 64 KiB pages, FEAT_LVA and FEAT_LPA: levels 1 (1024 entries) to 3.
    pub const K64_52: Format = Format { granule: Granule::K64, bits52: true };
    /// Every format, for the tests that must hold for each.
    pub const ALL: [Format; 6] =
        [Format::K4, Format::K4_LPA2, Format::K16, Format::K16_LPA2, Format::K64, Format::K64_52];
    /// The format this build of the crate uses for its tables and its TLB plans: chosen per
    /// build by the cargo features `granule-16k` and `granule-64k` (48-bit addresses), the
    /// 4 KiB granule otherwise; `lpa2` adds FEAT_LPA2 (52 bits, `DS`) to the 4 KiB or 16 KiB
    /// granule (see [`crate::paging::lpa2`] for why this is a build choice). A constant rather than a type parameter, so that every table walk
    /// folds to the granule's numbers (shifts, masks, loop bounds) as the 4 KiB code always did.
    #[cfg(not(any(feature = "granule-16k", feature = "granule-64k", feature = "lpa2")))]
    pub const BUILD: Format = Format::K4;
    /// The format this build of the crate uses (the `lpa2` feature: 4 KiB pages, `DS`).
    #[cfg(all(feature = "lpa2", not(any(feature = "granule-16k", feature = "granule-64k"))))]
    pub const BUILD: Format = Format::K4_LPA2;
    /// The format this build of the crate uses (the `granule-16k` feature).
    #[cfg(all(feature = "granule-16k", not(feature = "granule-64k"), not(feature = "lpa2")))]
    pub const BUILD: Format = Format::K16;
    /// The format this build of the crate uses (the `granule-16k` and `lpa2` features).
    #[cfg(all(feature = "granule-16k", not(feature = "granule-64k"), feature = "lpa2"))]
    pub const BUILD: Format = Format::K16_LPA2;
    /// The format this build of the crate uses (the `granule-64k` feature).
    #[cfg(feature = "granule-64k")]
    pub const BUILD: Format = Format::K64;

    /// Short name, e.g. `"16K-LPA2"` (for test messages and reports).
    pub const fn name(self) -> &'static str {
        match (self.granule, self.bits52) {
            (Granule::K4, false) => "4K",
            (Granule::K4, true) => "4K-LPA2",
            (Granule::K16, false) => "16K",
            (Granule::K16, true) => "16K-LPA2",
            (Granule::K64, false) => "64K",
            (Granule::K64, true) => "64K-52",
        }
    }

    /// Bits of VA one TTBR translates: 48 or 52.
    #[inline]
    pub const fn va_bits(self) -> u32 {
        if self.bits52 { 52 } else { 48 }
    }

    /// Bits of output address a descriptor can hold: 48 or 52.
    #[inline]
    pub const fn pa_bits(self) -> u32 {
        if self.bits52 { 52 } else { 48 }
    }

    /// Whether `TCR_EL1.DS` is set: 52 bits with the 4 KiB or 16 KiB granule (FEAT_LPA2). The
    /// 64 KiB granule reaches 52 bits without it.
    #[inline]
    pub const fn ds(self) -> bool {
        self.bits52 && !matches!(self.granule, Granule::K64)
    }

    /// The level the walk starts at: `4 − ceil((va_bits − shift) / index_bits)`. 4K: 0 (−1 with
    /// 52 bits); 16K: 0; 64K: 1.
    #[inline]
    pub const fn start_level(self) -> i32 {
        let g = self.granule;
        let levels = (self.va_bits() - g.shift()).div_ceil(g.index_bits());
        4 - levels as i32
    }

    /// Number of table levels a walk visits (4, 5, 4, 4, 3, 3 for the formats of [`Format::ALL`]).
    #[inline]
    pub const fn levels(self) -> u32 {
        (4 - self.start_level()) as u32
    }

    /// Entries of the top-level table: `2^(va_bits − level_shift(start))`. 4K: 512 (16 with 52
    /// bits); 16K: 2 (32); 64K: 64 (1024).
    #[inline]
    pub const fn top_entries(self) -> usize {
        1 << (self.va_bits() - self.granule.level_shift(self.start_level()))
    }

    /// Entries of the table at `level`: the top table may be smaller than a full one.
    #[inline]
    pub const fn entries(self, level: i32) -> usize {
        if level == self.start_level() { self.top_entries() } else { self.granule.entries() }
    }

    /// Index into the table at `level` for `va` (bits above `va_bits` are ignored).
    #[inline]
    pub const fn table_index(self, va: u64, level: i32) -> usize {
        ((va >> self.granule.level_shift(level)) as usize) & (self.entries(level) - 1)
    }

    /// Bytes one entry at `level` maps.
    #[inline]
    pub const fn entry_span(self, level: i32) -> u64 {
        1 << self.granule.level_shift(level)
    }

    /// The size of a block (a leaf above level 3) at `level`, or `None` where the architecture
    /// allows none (`AArch64.BlockDescSupported()`): 4K: 1 GiB at level 1, 2 MiB at level 2,
    /// 512 GiB at level 0 with `DS`; 16K: 32 MiB at level 2, 64 GiB at level 1 with `DS`; 64K:
    /// 512 MiB at level 2, 4 TiB at level 1 with a 52-bit OA.
    #[inline]
    pub const fn block_size(self, level: i32) -> Option<u64> {
        let allowed = match (self.granule, level) {
            (Granule::K4, 1) | (Granule::K4, 2) | (Granule::K16, 2) | (Granule::K64, 2) => true,
            (Granule::K4, 0) | (Granule::K16, 1) => self.ds(),
            (Granule::K64, 1) => self.bits52,
            _ => false,
        };
        if allowed { Some(self.entry_span(level)) } else { None }
    }

    /// Whether a leaf may sit at `level`: a page at level 3, a block where [`Format::block_size`]
    /// allows one.
    #[inline]
    pub const fn leaf_allowed(self, level: i32) -> bool {
        level == 3 || self.block_size(level).is_some()
    }

    /// The `TTL` hint (`[47:44]` of a single-VA `TLBI` operand) for a leaf at `level`:
    /// `TG << 2 | level`, or `None` where no hint can name the level (level 0 is only nameable
    /// for the 4 KiB granule with `DS`, where 0b0100 means level 0; elsewhere `TTL[1:0]` = 0b00
    /// with a granule set is reserved). A range operand's 2-bit `TTL [38:37]` is the same level
    /// without the granule, and cannot name level 0 at all.
    #[inline]
    pub const fn ttl(self, level: i32) -> Option<u64> {
        let nameable = match level {
            1..=3 => true,
            0 => self.ds() && matches!(self.granule, Granule::K4),
            _ => false,
        };
        if nameable { Some(self.granule.tlbi_tg() << 2 | level as u64) } else { None }
    }

    /// log2 of the unit of a range `TLBI`'s `BaseADDR`: the page size, or 16 (64 KiB) with `DS`
    /// (Arm ARM C5.5: with `TCR_ELx.DS = 1` BaseADDR holds `VA[52:16]`; Linux
    /// `__tlbi_range()` shifts by `lpa2 ? 16 : PAGE_SHIFT`; FreeBSD's pmap `TLBI_RANGE_VA_SHIFT()`).
    /// A range op's first VA must then be a multiple of 64 KiB.
    #[inline]
    pub const fn range_base_shift(self) -> u32 {
        if self.ds() { 16 } else { self.granule.shift() }
    }

    /// The descriptor bits that hold the output address (or the next table's address) of an
    /// entry mapping `2^align_shift` bytes (`align_shift` ≥ the page shift): bits
    /// `[47:align_shift]` with 48 bits; with `DS`, `[49:align_shift]` and `[9:8]` (`OA[51:50]`);
    /// for 64 KiB with 52 bits, `[47:align_shift]` and `[15:12]` (`OA[51:48]`).
    #[inline]
    pub const fn oa_field_mask(self, align_shift: u32) -> u64 {
        let low_top = if self.ds() { 50 } else { 48 };
        let low = ((1u64 << low_top) - 1) & !((1u64 << align_shift) - 1);
        low | self.oa_high_mask()
    }

    /// The descriptor bits holding the top output-address bits of a 52-bit format, 0 with 48 bits.
    #[inline]
    const fn oa_high_mask(self) -> u64 {
        match (self.ds(), self.bits52) {
            (true, _) => 0b11 << 8,
            (false, true) => 0xf << 12,
            (false, false) => 0,
        }
    }

    /// Where `OA[51:..]` moves to in a descriptor: right by 42 (`OA[51:50]` → `[9:8]`) with `DS`,
    /// by 36 (`OA[51:48]` → `[15:12]`) for 64 KiB with 52 bits.
    #[inline]
    const fn oa_high_shift(self) -> u32 {
        if self.ds() { 42 } else { 36 }
    }

    /// Whether `pa` can be an output address of an entry mapping `2^align_shift` bytes: aligned
    /// to it and below `2^pa_bits`.
    #[inline]
    pub const fn oa_fits(self, pa: u64, align_shift: u32) -> bool {
        pa & ((1 << align_shift) - 1) == 0 && pa >> self.pa_bits() == 0
    }

    /// The descriptor bits for output address `pa` (bits outside the address and below
    /// `align_shift` are dropped; check [`Format::oa_fits`] first where that matters).
    #[inline]
    pub const fn encode_oa(self, pa: u64, align_shift: u32) -> u64 {
        let low_top = if self.ds() { 50 } else { 48 };
        let low = pa & ((1u64 << low_top) - 1) & !((1u64 << align_shift) - 1);
        let high = if self.bits52 { (pa >> self.oa_high_shift()) & self.oa_high_mask() } else { 0 };
        low | high
    }

    /// The `TTBRn_EL1` bits that name the translation table at physical address `table` (the
    /// register's `BADDR` field; the ASID and `CnP` bits are left 0). With 48-bit addresses the
    /// address itself, bits `[47:1]`. With a 52-bit output address (FEAT_LPA2 with `DS`, or the
    /// 64 KiB granule with FEAT_LPA) the register has no bits `[51:48]`: they move to `[5:2]`,
    /// and the table must be aligned to at least 64 bytes, which frees those bits (Arm ARM
    /// D19.2, `TTBR0_EL1`/`TTBR1_EL1` "BADDR"; Linux `phys_to_ttbr()`,
    /// arch/arm64/include/asm/pgtable.h and assembler.h: `(addr | addr >> 46) &
    /// TTBR_BADDR_MASK_52`). Address bits the register cannot hold are dropped: a table address
    /// must be below `2^pa_bits` and aligned as said. Every TTBR write goes through this.
    #[inline]
    pub const fn ttbr_baddr(self, table: u64) -> u64 {
        if self.bits52 {
            (table & TTBR_BADDR_LOW_52) | ((table >> 48) & 0xf) << 2
        } else {
            table & TTBR_BADDR_48
        }
    }

    /// The physical address of the table a `TTBRn_EL1` value names: [`Format::ttbr_baddr`]
    /// undone, the ASID and `CnP` ignored.
    #[inline]
    pub const fn ttbr_table(self, ttbr: u64) -> u64 {
        if self.bits52 {
            (ttbr & TTBR_BADDR_LOW_52) | ((ttbr >> 2) & 0xf) << 48
        } else {
            ttbr & TTBR_BADDR_48
        }
    }

    /// The output address held by `descriptor` for an entry mapping `2^align_shift` bytes.
    #[inline]
    pub const fn decode_oa(self, descriptor: u64, align_shift: u32) -> u64 {
        let field = descriptor & self.oa_field_mask(align_shift);
        let high = field & self.oa_high_mask();
        (field & !self.oa_high_mask()) | high << self.oa_high_shift()
    }
}

/// `TTBRn_EL1.BADDR` with 48-bit addresses: bits `[47:1]`.
const TTBR_BADDR_48: u64 = 0x0000_ffff_ffff_fffe;
/// The address bits a 52-bit `TTBRn_EL1` keeps in place: `[47:6]` (the table is 64-byte
/// aligned; `[5:2]` hold `BADDR[51:48]`).
const TTBR_BADDR_LOW_52: u64 = 0x0000_ffff_ffff_ffc0;

/// Refuses to compile unless this build of `mm` uses the translation format named (a
/// [`Format`] constant: `K4`, `K4_LPA2`, `K16`, `K16_LPA2` or `K64`).
///
/// Why it exists: the format is chosen by the features `granule-16k`, `granule-64k` and `lpa2`,
/// and Cargo unifies features over a build. If any crate of a build enables one, every crate of
/// that build that depends on `mm` gets it: [`crate::addr::PAGE_SIZE`],
/// [`crate::paging::ENTRIES_PER_TABLE`], every table and every `TLBI` operand change, silently
/// (the crate still compiles, and what is computed from its constants changes with it). A
/// crate that relies on a format — the kernel, for its link script, its `TCR_EL1` and its
/// Image header — names it here, and a build that got another one fails with the reason
/// instead of running with another page size:
///
/// ```
/// // In the crate that chose the page size (a kernel that forwards its own `granule-16k`,
/// // `granule-64k` and `lpa2` features to mm's): the build has the format it asked for.
/// #[cfg(not(any(feature = "granule-16k", feature = "granule-64k", feature = "lpa2")))]
/// mm::assert_build_format!(K4);
/// #[cfg(all(feature = "granule-16k", not(feature = "lpa2")))]
/// mm::assert_build_format!(K16);
/// #[cfg(feature = "granule-64k")]
/// mm::assert_build_format!(K64);
/// ```
///
/// A format the build does not have fails to compile ("mm is built for another translation
/// format than K64_52 (its format is chosen by …)"); no feature set selects this one:
///
/// ```compile_fail
/// mm::assert_build_format!(K64_52);
/// ```
#[macro_export]
macro_rules! assert_build_format {
    ($format:ident) => {
        const _: () = ::core::assert!(
            ::core::matches!($crate::granule::Format::BUILD, $crate::granule::Format::$format),
            ::core::concat!(
                "mm is built for another translation format than ",
                ::core::stringify!($format),
                " (its format is chosen by mm's features granule-16k, granule-64k and lpa2, which \
                 Cargo enables for every user of mm once any crate of the build enables one)"
            )
        );
    };
}

#[cfg(test)]
mod tests;
