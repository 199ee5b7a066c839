//! Test-only mutation switch: the planted bugs that the `mutant!` hooks in the planner, the
//! operand builders, the issuer and the flush decisions (the ASID allocator's reach, the
//! address space's flush target) can turn on, one at a time, on the current thread.

use std::cell::Cell;

/// A planted bug. Each is a mistake that Linux's history or FreeBSD's review (D58708) names, or
/// one this planner could make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// NUM = units instead of units − 1 (covers one unit too many).
    NumOffByOne,
    /// SCALE 3 never considered: big ranges need more ops than the plan has room for.
    ScaleCappedAt2,
    /// A one-page request plans nothing.
    SinglePageDropped,
    /// The second op is not moved back to end at the range's end: it covers pages beyond it.
    SecondOpNotClamped,
    /// Range bound `>` off by one: 2^20 pages (one 4 GiB op) still planned as ranges.
    RangeBoundOffByOne,
    /// Linux's bound, 2^21 pages: ops of 4 GiB and 8 GiB, which QEMU 7.2 ignores.
    LinuxRangeBound,
    /// Linux before e3ba51ab24fd: NUM from `(pages >> shift) & 0x1f`, bound 2^21; exactly
    /// 2^21 pages give NUM = −1 at every scale.
    LinuxNumMask,
    /// Without range ops, 512 single ops before falling back.
    DvmLimitOffByOne,
    /// `ASIDE1IS` for global entries (it keeps them).
    AsideForGlobal,
    /// Last-level forms even when table entries changed.
    LeafFormsAlways,
    /// Range operands issued with the non-range instruction (the dropped `r` prefix).
    RangeOpWithoutRPrefix,
    /// The VA of a non-range operand not masked to 44 bits: TTBR1 sign bits land in TTL.
    TtlSignExtension,
    /// BaseADDR not masked to 37 bits: TTBR1 sign bits land in TTL/NUM/SCALE/TG/ASID.
    RangeBaseUnmasked,
    /// TG = 0 (reserved: the op does nothing).
    TgZero,
    /// BaseADDR computed with `>> 14` instead of `>> 12`.
    BaseShift14,
    /// BaseADDR in pages even with `TCR_EL1.DS`, where it is in 64 KiB units (the FreeBSD review's
    /// `TLBI_RANGE_VA_SHIFT()`: 16 with LPA2, `PAGE_SHIFT` otherwise).
    BaseShiftIgnoresDs,
    /// TG always the 4 KiB encoding: the 16 KiB and 64 KiB arms of the encoder dead again.
    TgOfBuild,
    /// With `DS`, range ops placed at starts that are not multiples of 64 KiB (BaseADDR drops the
    /// low bits, so the op starts below the range; Linux issues single ops until it is aligned).
    Lpa2UnalignedRangeStart,
    /// ASID left out of the operands.
    AsidOmitted,
    /// The final `DSB ISH` is missing.
    MissingFinalDsb,
    /// The repeated-TLBI erratum is ignored.
    IgnoreRepeatErratum,
    /// Flush decisions (caught by the multi-CPU model in `mm/src/model`, not by the planner's
    /// battery): the reach of an invalidation looks only at the CPUs that run the address space
    /// now, ignoring one it ran on before a migration, whose TLB may still hold its entries.
    ReachIgnoresMigration,
    /// A fault that folds or promotes flushes with a target decided long before (ASID 0 and the
    /// local forms, where a new process's space had been aimed), not the provider's answer now.
    FaultFlushIgnoresTarget,
    /// A switch after an ASID rollover does not ask for the CPU's full local flush, so a
    /// recycled ASID meets the entries its previous owner left.
    RolloverFlushSkipped,
    /// `fork` write-protects the parent's pages in the tables without the flush, so CPUs keep
    /// writable entries for frames now shared with the child (planted in
    /// `AddressSpace::fork_copy`).
    ForkWithoutFlush,
    /// `mremap`'s move takes the pages out of the source range without the flush, so CPUs keep
    /// entries for the old addresses, which the tables no longer map (planted in
    /// `AddressSpace::move_pages`).
    MoveWithoutFlush,
    /// A read fault maps the shared zero frame with the area's protection, writable where the
    /// area is: a write through it changes the zero page every process reads. (This one and the
    /// next are planted in `user`, so they exist only with the `alloc` feature.)
    #[cfg(feature = "alloc")]
    ZeroEntryWritable,
    /// An unmap hands the shared zero frame back as if it were the page's own frame.
    #[cfg(feature = "alloc")]
    ZeroFreedAtUnmap,
    /// `mprotect` to a writable protection makes a private file mapping's pages writable in
    /// place, page-cache frames included: a write through one reaches the file.
    #[cfg(feature = "alloc")]
    ObjectPageWritableAtMprotect,
    /// A read fault that maps a whole run or block of the shared zero region maps it with the
    /// area's protection, writable where the area is.
    #[cfg(feature = "alloc")]
    ZeroBlockWritable,
    /// An unmap knows only the zero region's first page: the other pages of a zero block or run
    /// (or of one split into pages) are handed back as if they were the pages' own frames.
    #[cfg(feature = "alloc")]
    ZeroBlockPageFreed,
    /// A shrink of a shared memory object unmaps the pages past the end from the tables and
    /// frees them without the flush, so CPUs keep entries for frames now free.
    #[cfg(feature = "alloc")]
    TruncateWithoutFlush,
    /// A one-page remap reserves no table frame even where the unmap empties (and frees) the
    /// page's last-level table, so the map after the flush needs a frame it may not get.
    RemapBoundIgnoresEmptiedTable,
    /// Clearing guard markers does not widen the flush record over their pages, so a table that
    /// held only markers is detached and freed while walk caches still point at it.
    GuardClearUncovered,
}

impl Mutation {
    /// Every mutation of the planner, the operands and the issuer (the planner's battery
    /// catches each of them).
    pub(crate) const ALL: [Mutation; 21] = [
        Mutation::NumOffByOne,
        Mutation::ScaleCappedAt2,
        Mutation::SinglePageDropped,
        Mutation::SecondOpNotClamped,
        Mutation::RangeBoundOffByOne,
        Mutation::LinuxRangeBound,
        Mutation::LinuxNumMask,
        Mutation::DvmLimitOffByOne,
        Mutation::AsideForGlobal,
        Mutation::LeafFormsAlways,
        Mutation::RangeOpWithoutRPrefix,
        Mutation::TtlSignExtension,
        Mutation::RangeBaseUnmasked,
        Mutation::TgZero,
        Mutation::BaseShift14,
        Mutation::BaseShiftIgnoresDs,
        Mutation::TgOfBuild,
        Mutation::Lpa2UnalignedRangeStart,
        Mutation::AsidOmitted,
        Mutation::MissingFinalDsb,
        Mutation::IgnoreRepeatErratum,
    ];
}

std::thread_local! {
    static ACTIVE: Cell<Option<Mutation>> = const { Cell::new(None) };
}

/// Whether `m` is active on this thread.
pub(crate) fn active(m: Mutation) -> bool {
    ACTIVE.with(|a| a.get() == Some(m))
}

/// Runs `f` with `m` active on this thread.
pub(crate) fn with<R>(m: Mutation, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(None));
        }
    }
    ACTIVE.with(|a| a.set(Some(m)));
    let _reset = Reset;
    f()
}
