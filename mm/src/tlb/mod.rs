//! TLB invalidation for the EL1&0 stage-1 regime: a pure **planner** that turns "these
//! translations changed" into a short list of `TLBI` instructions, and a small **issuer** that
//! executes such a list with the right barriers.
//!
//! # Layout
//! - [`op`]: the instructions as data ([`TlbiOp`], [`TlbInstr`]);
//! - [`operand`]: building and decoding the 64-bit `Xt` operands, field by field;
//! - [`plan`](mod@plan): the planner, [`plan()`] → [`TlbPlan`] (no allocation);
//! - [`issue`](mod@issue): [`TlbHardware`] (the only machine-touching seam), [`issue()`], [`TlbIssuer`],
//!   errata detection ([`repeat_tlbi_needed`]) and, on aarch64, the real `issue::Aarch64Tlb`;
//! - [`stats`]: counters of issued instructions ([`TlbStats`]);
//! - `model` (tests and the `testing` feature): a decoder that applies an instruction to a model
//!   TLB following the Arm rules, used by the tests here and by the page-table tests;
//! - `compare` (tests and the `testing` feature): instruction counts of other designs (Linux,
//!   one-per-leaf), for benchmarks (`tools/mm-bench`).
//!
//! # The planner
//! A request ([`TlbRequest`]) names a virtual range `[start, end)`, the stride at which entries
//! changed (4 KiB pages, or 2 MiB / 1 GiB blocks when only blocks changed), the scope
//! ([`Scope::Asid`] for a user address space, [`Scope::Global`] for kernel/global entries),
//! whether only leaf entries changed, and its reach ([`Reach`]: this CPU only, or every CPU). The
//! range is widened to whole strides first. With the machine's fixed features ([`TlbFeatures`])
//! the planner picks one of four shapes:
//!
//! - **nothing** for an empty range;
//! - **range ops** (FEAT_TLBIRANGE, `ID_AA64ISAR0_EL1.TLB == 2` on every CPU): one range op covers
//!   `(NUM+1) * 2^(5*SCALE+1)` pages (always an even number) from any page-aligned base, and
//!   invalidating an entry twice is harmless, so the ops of a plan may **overlap** as long as none
//!   leaves the range. The planner takes the largest op `m` that fits in the range's `n` pages
//!   and places `ceil(n / m)` of them, the last moved back to end at the range's end; one page is
//!   one single-page op. The largest op is always at least `n / 2`, so **at most 2
//!   instructions**, and that is the minimum: `k` ops of at most `m` pages cover at most `k * m`
//!   pages, so no cover has fewer than `ceil(n / m)`. (A partition into disjoint ops, which
//!   Linux's `__flush_tlb_range_op` and this planner's first version build, needs up to 5:
//!   511 pages are 448 + 62 + 1 disjointly, but 448 + 448 overlapping.) The tests check the cover
//!   with the Arm rules' decoder, page by page, and the count against that lower bound;
//! - **one op per stride step** without FEAT_TLBIRANGE, up to 511 steps (as Linux's
//!   `MAX_DVM_OPS - 1`: a bound against DVM storms and soft lock-ups on big machines);
//! - **one whole flush** above the bounds: `ASIDE1IS` for an ASID, `VMALLE1IS` for global
//!   entries. `ASIDE1IS` never removes global entries (Arm ARM C5.5), so it is never used for
//!   [`Scope::Global`].
//!
//! # The range bound: 2^20 − 1 pages (4 GiB − 4 KiB)
//! Linux allows range plans up to `MAX_TLBI_RANGE_PAGES` = 2^21 pages (8 GiB). We stop one power
//! of two earlier, so that no single range op reaches 4 GiB (at most NUM = 14 at SCALE 3):
//! QEMU 7.2 computes the length of a range op as `(num + 1) << (exponent + page_shift)` in a
//! 32-bit `unsigned`, so an op of 4 GiB or more wraps to a tiny or zero length and invalidates
//! nothing (measured here with probe ops of 4 and 8 GiB, which left their pages cached). Our QEMU
//! test matrix
//! would then see stale entries that real hardware would not have. Past 4 GiB a whole-ASID flush
//! is cheap anyway: the range is then a large part of any address space we run.
//!
//! # Granules and LPA2
//! The planner is written once for every translation format ([`crate::granule::Format`]):
//! [`plan_in`] takes the format, [`plan()`] is it with the build's (4 KiB pages, 48 bits). What
//! changes with the format, and why:
//! - **units**: range ops count pages of the granule, `TG` names it (0b01, 0b10, 0b11), and
//!   `BaseADDR` is the first VA in pages, except with `TCR_EL1.DS` (FEAT_LPA2, 52 bits with 4 or
//!   16 KiB pages), where it is in 64 KiB units (Arm ARM C5.5; Linux `__tlbi_range()` shifts by
//!   `lpa2 ? 16 : PAGE_SHIFT`, FreeBSD's `TLBI_RANGE_VA_SHIFT()` likewise). A range op then
//!   starts on a 64 KiB boundary: the pages before the first boundary get single ops (at most 15
//!   with 4 KiB pages, 3 with 16 KiB), as in Linux's `__flush_tlb_range_op`, and so does an odd
//!   last page (range ops cover an even count from an even page); between them one op if that
//!   part is one op's size, else the same two overlapping ops as above when it is a multiple of
//!   64 KiB, else a last SCALE 0 op that ends it from a 64 KiB boundary and one or two ops before
//!   it: at most 19 / 7 instructions ([`range_plan_ops_bound`]), never more than Linux issues
//!   (`compare::linux_plan_count_in`);
//! - **the range bound** stays 4 GiB less one page *in bytes*, because QEMU's 32-bit length is
//!   in bytes: 2^20 − 1, 2^18 − 1 and 2^16 − 1 pages ([`range_bound_pages`]); at SCALE 3 that
//!   leaves 15, 3 and no units, and with 64 KiB pages SCALE 2 stops at NUM 30. Two ops still
//!   cover every count up to the bound (the argument above only uses scales the bound reaches);
//! - **the per-step limit** without range ops stays 511 instructions ([`MAX_DVM_OPS`]), not
//!   Linux's `PTRS_PER_PTE` (2048, 8192): the cost it bounds is per broadcast instruction;
//! - **TTL**: never set by the planner; the model decodes the hint of every granule
//!   (`TTL[3:2]` = TG, `TTL[1:0]` = level, 0b00 reserved except for level 0 of 4 KiB with DS,
//!   [`crate::granule::Format::ttl`]) and treats a hint for another granule as no invalidation;
//! - **strides**: [`Stride::Block2M`] and [`Stride::Block1G`] are the format's level-2 and
//!   level-1 entries (32 MiB and 64 GiB with 16 KiB pages, 512 MiB and 4 TiB with 64 KiB).
//!
//! # Operands
//! Every field is masked before it is shifted into place, so no value spills into a neighbour:
//! a TTBR1 (kernel, `0xffff_…`) address shifted right by 12 still has its sign bits set, and
//! unmasked they would land in the TTL field of a non-range op (which makes hardware skip the
//! invalidation, as seen on the FVP by littlekernel) or in TTL/NUM/SCALE/TG of a range op. TTL
//! hints are never set (0 = "any level" is always legal).
//!
//! # Issuing
//! `DSB ISHST` (the table writes are visible to all walkers) → the TLBIs → `DSB ISH` (they are
//! complete everywhere) → `ISB` when kernel or executable mappings changed. Local plans use the
//! non-shareable forms and `DSB NSHST` / `DSB NSH`. CPUs with an erratum that needs every TLBI
//! repeated get `TLBI; DSB ISH; TLBI` for each instruction, as Linux's
//! `ARM64_WORKAROUND_REPEAT_TLBI`.

// Test scaffolding, not part of the design: built for this crate's tests and, with the `testing`
// feature, for the benchmarks and other crates' tests.
#[cfg(any(test, feature = "testing"))]
pub mod compare;
pub mod issue;
#[cfg(any(test, feature = "testing"))]
pub mod model;
pub mod op;
pub mod operand;
pub mod plan;
pub mod stats;

#[cfg(test)]
mod check;
#[cfg(test)]
mod mutant_tests;
#[cfg(test)]
pub(crate) mod mutation;
#[cfg(test)]
pub(crate) mod test_caps;
#[cfg(test)]
mod tests;

pub use issue::{Errata, TlbHardware, TlbIssuer, issue, repeat_tlbi_needed};
pub use op::{OpKind, TlbInstr, TlbiOp};
pub use plan::{PlanIter, PlanShape, TlbPlan, plan, plan_in};
pub use stats::TlbStats;

use crate::addr::{PAGE_SHIFT, VirtAddr};
use crate::granule::Format;

/// Largest page count planned with range ops with the build's format: 2^20 − 1 pages (4 GiB −
/// 4 KiB). From 2^20 pages the plan is one whole flush. See the module documentation for why it
/// is not Linux's 2^21, and [`range_bound_pages`] for the other granules.
pub const RANGE_BOUND_PAGES: u64 = range_bound_pages(Format::BUILD);

/// Largest page count planned with range ops for `format`: 4 GiB less one page, in its pages
/// (2^20 − 1 with 4 KiB pages, 2^18 − 1 with 16 KiB, 2^16 − 1 with 64 KiB). The bound is in
/// bytes because the reason for it is: QEMU 7.2 computes a range op's length in bytes in 32
/// bits, so no single op may reach 4 GiB, whatever the page size (module documentation).
#[inline]
pub const fn range_bound_pages(format: Format) -> u64 {
    (1 << (32 - format.granule.shift())) - 1
}

/// Number of stride steps from which a plan without range ops becomes one whole flush: at most
/// 511 single ops are issued, for every granule. Linux's `MAX_DVM_OPS` is `PTRS_PER_PTE`, 512
/// with 4 KiB pages but 2048 and 8192 with 16 and 64 KiB; we keep 512 because what the bound
/// guards against (a DVM storm, a soft lock-up on a big machine) grows with the number of
/// broadcast instructions, not with the bytes they cover.
pub const MAX_DVM_OPS: u64 = 512;

/// Most instructions in a range plan without `DS`: two range ops (the largest op that fits is at
/// least half the range, see the planner). [`range_plan_ops_bound`] gives the bound with `DS`.
pub const MAX_RANGE_PLAN_OPS: usize = 2;

/// Most instructions in a range plan for `format`: [`MAX_RANGE_PLAN_OPS`] without `DS`; with it
/// also the single ops before the first 64 KiB boundary (15 with 4 KiB pages, 3 with 16 KiB),
/// a third range op when the range ends off a 64 KiB boundary and one single op for an odd last
/// page: 19 and 7.
#[inline]
pub const fn range_plan_ops_bound(format: Format) -> usize {
    let per_unit = 1usize << (format.range_base_shift() - format.granule.shift());
    if per_unit > 1 { per_unit - 1 + MAX_RANGE_PLAN_OPS + 2 } else { MAX_RANGE_PLAN_OPS }
}

/// Which TLB entries a request concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Non-global entries of one user address space (TTBR0), tagged with this ASID. With 8-bit
    /// ASIDs the upper 8 bits must be zero.
    Asid(u16),
    /// Global entries (the kernel's TTBR1 half, nG = 0), whatever ASID is current. Planned with
    /// the all-ASID forms (`VAAE1IS`, `RVAAE1IS`, …) and `VMALLE1IS`.
    Global,
}

/// The step at which entries changed: the planner issues at most one non-range op per step.
/// The names are the sizes with the 4 KiB granule; with another granule the steps are its page
/// and its level-2 and level-1 entries ([`Stride::bytes_in`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stride {
    /// Pages (or a mix of pages and blocks).
    Page,
    /// Only level-2 blocks changed: 2 MiB (4 KiB granule), 32 MiB (16 KiB), 512 MiB (64 KiB).
    Block2M,
    /// Only level-1 entries changed: 1 GiB (4 KiB granule), 64 GiB (16 KiB), 4 TiB (64 KiB).
    Block1G,
}

impl Stride {
    /// Size of one step in bytes, with the build's format.
    #[inline]
    pub const fn bytes(self) -> u64 {
        self.bytes_in(Format::BUILD)
    }

    /// Size of one step in bytes with `format`.
    #[inline]
    pub const fn bytes_in(self, format: Format) -> u64 {
        match self {
            Stride::Page => format.granule.size(),
            Stride::Block2M => format.entry_span(2),
            Stride::Block1G => format.entry_span(1),
        }
    }

    /// Size of one step in pages.
    #[inline]
    pub const fn pages(self) -> u64 {
        self.bytes() >> PAGE_SHIFT
    }
}

/// What the CPUs of the system can do: fixed features, decided once at boot from the sanitised
/// (minimum over all CPUs) ID registers, see [`TlbFeatures::combine`]. How far one invalidation
/// must reach is not a feature of the machine but a property of each operation: [`Reach`], part
/// of the [`TlbRequest`] (and of the [`FlushTarget`] an address space asks for at flush time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlbFeatures {
    /// FEAT_TLBIRANGE on every CPU: range ops (`RVAE1IS`, …) may be planned.
    pub range: bool,
    /// CPU errata that the issuer works around.
    pub errata: Errata,
}

impl TlbFeatures {
    /// No range ops, no errata: valid on every ARMv8.0 CPU.
    pub const BASELINE: Self = Self { range: false, errata: Errata::NONE };

    /// Decodes the features of one CPU: FEAT_TLBIRANGE from `ID_AA64ISAR0_EL1.TLB` (bits
    /// `[59:56]`; 0 = none, 1 = outer-shareable ops only, 2 = outer-shareable and range ops) and
    /// the repeated-TLBI errata from `MIDR_EL1`.
    pub const fn from_id_registers(id_aa64isar0: u64, midr: u64) -> Self {
        let tlb = (id_aa64isar0 >> 56) & 0xf;
        Self { range: tlb >= 2, errata: Errata::from_midr(midr) }
    }

    /// The features of a system made of CPUs `self` and `other`: range ops only if both have
    /// them, every workaround that either needs.
    pub const fn combine(self, other: Self) -> Self {
        Self {
            range: self.range && other.range,
            errata: Errata { repeat_tlbi: self.errata.repeat_tlbi || other.errata.repeat_tlbi },
        }
    }
}

/// Which CPUs' TLBs one invalidation must reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reach {
    /// Only the CPU that issues it: the non-shareable forms (`VAE1`, `ASIDE1`, …) with
    /// `DSB NSHST` / `DSB NSH`. Correct only when no other CPU may hold usable entries of the
    /// scope (the ASID allocator knows: [`crate::asid::AsidAllocator::reach`]).
    Local,
    /// Every CPU of the inner-shareable domain: the `…IS` forms with `DSB ISHST` / `DSB ISH`.
    Broadcast,
}

impl Reach {
    /// Whether this is [`Reach::Broadcast`].
    pub const fn is_broadcast(self) -> bool {
        matches!(self, Reach::Broadcast)
    }
}

/// Where one flush goes: which entries ([`Scope`]) on which CPUs ([`Reach`]). An address space
/// asks for it at the moment it flushes ([`crate::space::FlushTargets`]), never keeps one from an
/// earlier call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushTarget {
    /// The entries: one ASID's, or the global ones.
    pub scope: Scope,
    /// The CPUs.
    pub reach: Reach,
}

impl FlushTarget {
    /// The global (kernel) entries on every CPU.
    pub const GLOBAL: Self = Self { scope: Scope::Global, reach: Reach::Broadcast };

    /// The entries of `asid`, on the CPUs `reach` says.
    pub const fn asid(asid: u16, reach: Reach) -> Self {
        Self { scope: Scope::Asid(asid), reach }
    }
}

/// A request to invalidate the translations of `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlbRequest {
    /// First byte of the range (rounded down to the stride).
    pub start: VirtAddr,
    /// One past the last byte (rounded up to the stride). `end == start` is an empty range;
    /// `end == VirtAddr(0)` with a non-zero `start` means "up to the top of the address space"
    /// (2^64). A range whose end is below its start is a caller bug: debug builds panic, release
    /// builds plan a whole flush.
    pub end: VirtAddr,
    /// Step at which entries changed.
    pub stride: Stride,
    /// ASID or global entries.
    pub scope: Scope,
    /// `true` when only leaf entries changed (no table entry was removed or changed), so the
    /// last-level forms (`VALE1IS`, `RVALE1IS`, `VAALE1IS`, `RVAALE1IS`) suffice; `false` also
    /// drops cached table (walk-cache) entries.
    pub leaf_only: bool,
    /// The CPUs it must reach: local or broadcast forms.
    pub reach: Reach,
}

impl TlbRequest {
    /// A page-stride, non-leaf-only, broadcast request: the safe default.
    pub const fn new(start: VirtAddr, end: VirtAddr, scope: Scope) -> Self {
        Self { start, end, stride: Stride::Page, scope, leaf_only: false, reach: Reach::Broadcast }
    }

    /// The same request with another reach.
    pub const fn with_reach(self, reach: Reach) -> Self {
        Self { reach, ..self }
    }

    /// The same request with another stride.
    pub const fn with_stride(self, stride: Stride) -> Self {
        Self { stride, ..self }
    }

    /// The same request with `leaf_only` set as given.
    pub const fn with_leaf_only(self, leaf_only: bool) -> Self {
        Self { leaf_only, ..self }
    }
}
