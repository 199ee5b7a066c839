//! The 64-bit `Xt` operands of `TLBI`, built and taken apart field by field (Arm ARM C5.5.36 and
//! C5.5.60). Every field is masked to its width before it is shifted, so a value that is too big
//! (a sign-extended TTBR1 address, an ASID of the wrong width) can never spill into a neighbour.
//!
//! The granule shows in two places only: a range operand's `TG` field and the unit of its
//! `BaseADDR` (the page size, or 64 KiB with `TCR_EL1.DS`), both taken from a [`Format`]. A
//! single-VA operand holds `VA[55:12]` whatever the granule (Linux's `__TLBI_VADDR` shifts by 12
//! for every page size).

use crate::addr::VirtAddr;
use crate::granule::Format;

/// Width mask of the VA field of a non-range operand: bits `[43:0]` hold `VA[55:12]`.
pub const VA_FIELD_MASK: u64 = (1 << 44) - 1;
/// Width mask of the BaseADDR field of a range operand: bits `[36:0]` hold `VA[48:12]` (4 KiB),
/// `VA[50:14]` (16 KiB) or `VA[52:16]` (64 KiB, and every granule with `DS`).
pub const RANGE_BASE_MASK: u64 = (1 << 37) - 1;
/// Bit position of the ASID field (`[63:48]`) in every operand that has one.
pub const ASID_SHIFT: u32 = 48;

/// Value of the range operand's TG field for this build's granule ([`Format::BUILD`]): 0b01 for
/// 4 KiB, 0b10 for 16 KiB, 0b11 for 64 KiB ([`crate::granule::Granule::tlbi_tg`]). 0b00 is
/// reserved and makes the op do nothing.
pub const TG: u64 = Format::BUILD.granule.tlbi_tg();

/// Largest SCALE of a range op.
pub const MAX_SCALE: u32 = 3;
/// Largest NUM of a range op.
pub const MAX_NUM: u32 = 31;

/// Pages covered by one range op: `(NUM + 1) * 2^(5 * SCALE + 1)`, computed in 64 bits.
#[inline]
pub const fn range_pages(scale: u32, num: u32) -> u64 {
    ((num as u64) + 1) << (5 * scale + 1)
}

/// The ASID field of an operand.
#[inline]
pub fn asid_field(asid: u16) -> u64 {
    mutant!((asid as u64) << ASID_SHIFT, AsidOmitted => 0)
}

/// Operand of a single-VA op (`VAE1IS`, `VAAE1IS`, …): ASID in `[63:48]` (pass 0 for the all-ASID
/// forms), TTL `[47:44]` = 0 (no level hint), `VA[55:12]` in `[43:0]`. The mask on the VA field keeps
/// the sign extension of a TTBR1 address out of TTL.
#[inline]
pub fn page_operand(asid: u16, va: VirtAddr) -> u64 {
    let va_field = mutant!(
        (va.as_u64() >> 12) & VA_FIELD_MASK,
        TtlSignExtension => va.as_u64() >> 12,
    );
    asid_field(asid) | va_field
}

/// Operand of `ASIDE1IS` / `ASIDE1`.
#[inline]
pub fn asid_operand(asid: u16) -> u64 {
    asid_field(asid)
}

/// The VA carried by a single-VA operand: `VA[55:12]` sign-extended from `VA[55]`, so that a TTBR1
/// address comes back as `0xffff_…`.
#[inline]
pub const fn page_operand_va(operand: u64) -> VirtAddr {
    let field = operand & VA_FIELD_MASK;
    // Put VA[55] (operand bit 43) in bit 63, then shift back arithmetically.
    VirtAddr((((field << 20) as i64) >> 8) as u64)
}

/// The TTL field `[47:44]` of a single-VA operand.
#[inline]
pub const fn page_operand_ttl(operand: u64) -> u64 {
    (operand >> 44) & 0xf
}

/// The fields of a range operand (`RVAE1IS` and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RangeOperand {
    /// ASID, bits `[63:48]` (RES0 for the all-ASID forms).
    pub asid: u16,
    /// Translation granule, bits `[47:46]`: 0b01 = 4 KiB, 0b10 = 16 KiB, 0b11 = 64 KiB.
    pub tg: u8,
    /// SCALE, bits `[45:44]`.
    pub scale: u8,
    /// NUM, bits `[43:39]`.
    pub num: u8,
    /// TTL level hint, bits `[38:37]`; 0 = any level.
    pub ttl: u8,
    /// BaseADDR, bits `[36:0]`: the first VA in units of [`Format::range_base_shift`].
    pub base: u64,
}

impl RangeOperand {
    /// The operand for `(num + 1) << (5 * scale + 1)` pages from `va`, with the build's format
    /// and no TTL hint.
    pub fn new(asid: u16, va: VirtAddr, scale: u32, num: u32) -> Self {
        Self::new_in(Format::BUILD, asid, va, scale, num)
    }

    /// The same for the pages of `format`: its `TG`, and `BaseADDR` in its unit (`va` must be a
    /// multiple of that unit, 64 KiB with `DS`; the bits below it are dropped).
    pub fn new_in(format: Format, asid: u16, va: VirtAddr, scale: u32, num: u32) -> Self {
        let shift = mutant!(
            format.range_base_shift(),
            BaseShift14 => 14,
            BaseShiftIgnoresDs => format.granule.shift(),
        );
        let tg = mutant!(
            format.granule.tlbi_tg() as u8,
            TgZero => 0,
            TgOfBuild => Format::BUILD.granule.tlbi_tg() as u8,
        );
        Self { asid, tg, scale: scale as u8, num: num as u8, ttl: 0, base: va.as_u64() >> shift }
    }

    /// Packs the fields, each masked to its width first.
    pub fn encode(self) -> u64 {
        let base = mutant!(self.base & RANGE_BASE_MASK, RangeBaseUnmasked => self.base);
        asid_field(self.asid)
            | ((self.tg as u64) & 0b11) << 46
            | ((self.scale as u64) & 0b11) << 44
            | ((self.num as u64) & 0x1f) << 39
            | ((self.ttl as u64) & 0b11) << 37
            | base
    }

    /// Splits an operand into its fields.
    pub const fn decode(operand: u64) -> Self {
        Self {
            asid: (operand >> ASID_SHIFT) as u16,
            tg: ((operand >> 46) & 0b11) as u8,
            scale: ((operand >> 44) & 0b11) as u8,
            num: ((operand >> 39) & 0x1f) as u8,
            ttl: ((operand >> 37) & 0b11) as u8,
            base: operand & RANGE_BASE_MASK,
        }
    }

    /// Number of pages the operand covers.
    #[inline]
    pub const fn pages(&self) -> u64 {
        range_pages(self.scale as u32, self.num as u32)
    }

    /// First VA covered with the build's format (see [`RangeOperand::start_in`]).
    #[inline]
    pub const fn start(&self) -> VirtAddr {
        self.start_in(Format::BUILD)
    }

    /// First VA covered, as the Arm `TLBIRange()` pseudocode computes it: `BaseADDR` shifted by
    /// the format's unit, and the bits above copies of `BaseADDR[36]` (so a TTBR1 range starts at
    /// `0xffff_…`). For the 4 KiB granule without `DS` BaseADDR is `VA[48:12]`.
    #[inline]
    pub const fn start_in(&self, format: Format) -> VirtAddr {
        let base = self.base & RANGE_BASE_MASK;
        let shift = format.range_base_shift();
        // BaseADDR[36] to bit 63, then arithmetic shift back to bit 36 + shift.
        VirtAddr((((base << 27) as i64) >> (27 - shift)) as u64)
    }

    /// Bytes covered with the pages of `format`.
    #[inline]
    pub const fn bytes_in(&self, format: Format) -> u128 {
        (self.pages() as u128) << format.granule.shift()
    }
}
