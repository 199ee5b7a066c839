//! Instruction counts of other designs for the same invalidation, so that benchmarks can put
//! ours next to them (TLBI instructions per operation against the minimum).
//! These are reimplementations from the sources named on each function, not measurements.

use super::{TlbFeatures, TlbRequest, plan};
use crate::addr::VirtAddr;
use crate::granule::Format;

/// Linux's `MAX_TLBI_RANGE_PAGES` for the 4 KiB granule: `__TLBI_RANGE_PAGES(31, 3)` = 2^21.
pub const LINUX_MAX_TLBI_RANGE_PAGES: u64 = 32 << 16;
/// Linux's `MAX_DVM_OPS` (= `PTRS_PER_PTE`) for the 4 KiB granule.
pub const LINUX_MAX_DVM_OPS: u64 = 512;

/// Number of TLBI instructions Linux issues for `pages` 4 KiB pages at a stride of
/// `stride_pages` pages, with or without FEAT_TLBIRANGE: [`linux_plan_count_in`] for
/// [`Format::K4`] (no LPA2, so the start does not matter). KPTI would double every user-space
/// count (`tlbi_user`); not modelled.
pub fn linux_plan_count(pages: u64, stride_pages: u64, has_range: bool) -> u64 {
    linux_plan_count_in(Format::K4, VirtAddr(0), pages, stride_pages, has_range)
}

/// Number of TLBI instructions Linux issues for `pages` pages of `format` from `start` at a
/// stride of `stride_pages` pages, with or without FEAT_TLBIRANGE: `__flush_tlb_range_nosync()`
/// with the limit check of v6.10–v6.16 (`(!range && pages >= MAX_DVM_OPS * stride) || (range &&
/// pages > MAX_TLBI_RANGE_PAGES)` → one `flush_tlb_mm`/`flush_tlb_all`), with the granule's
/// `MAX_DVM_OPS` = `PTRS_PER_PTE` (512, 2048, 8192) and `MAX_TLBI_RANGE_PAGES` = 2^21 pages for
/// every granule; then the `__flush_tlb_range_op` loop: SCALE from 3 down, single ops for the
/// last page and, with LPA2 (`lpa2_is_enabled()`, i.e. `DS`), while the start is not 64
/// KiB-aligned.
pub fn linux_plan_count_in(
    format: Format,
    start: VirtAddr,
    pages: u64,
    stride_pages: u64,
    has_range: bool,
) -> u64 {
    let stride_pages = stride_pages.max(1);
    let page_shift = format.granule.shift();
    if pages == 0 {
        return 0;
    }
    let max_dvm_ops = format.granule.entries() as u64;
    if (!has_range && pages >= max_dvm_ops * stride_pages)
        || (has_range && pages > LINUX_MAX_TLBI_RANGE_PAGES)
    {
        return 1;
    }
    let lpa2 = format.ds();
    let mut addr = start.as_u64();
    let mut count = 0;
    let mut rem = pages;
    let mut scale: i32 = 3;
    while rem > 0 {
        if !has_range || rem == 1 || (lpa2 && !addr.is_multiple_of(64 << 10)) {
            count += 1;
            addr = addr.wrapping_add(stride_pages << page_shift);
            rem = rem.saturating_sub(stride_pages);
            continue;
        }
        // __TLBI_RANGE_NUM after e3ba51ab24fd: clamp to __TLBI_RANGE_PAGES(31, scale).
        let shift = 5 * scale as u32 + 1;
        let clamped = rem.min(32 << shift);
        let num = (clamped >> shift) as i64 - 1;
        if num >= 0 {
            count += 1;
            let covered = ((num as u64) + 1) << shift;
            addr = addr.wrapping_add(covered << page_shift);
            rem -= covered;
        }
        scale -= 1;
        if scale < 0 && rem > 1 {
            // Unreachable for pages <= MAX_TLBI_RANGE_PAGES; guards against a changed bound.
            break;
        }
    }
    count
}

/// Number of TLBI instructions of a planner that partitions the range into disjoint ops, the
/// best a partition can do (and what this planner's first version and Linux's
/// `__flush_tlb_range_op` issue below 2^20 pages): one range op per SCALE from 3 down for
/// `rem >> (5*SCALE+1)` units, then one single-page op for an odd count. At most 5.
pub fn partition_plan_count(pages: u64) -> u64 {
    let mut rem = pages;
    let mut count = 0;
    for scale in (0..4u32).rev() {
        let units = rem >> (5 * scale + 1);
        if units > 0 {
            count += 1;
            rem -= units << (5 * scale + 1);
        }
    }
    count + rem
}

/// Number of TLBI instructions of the "one per leaf" approach (google's `aarch64-paging`,
/// `Mapping::invalidate_range`: one `TLBI VAAE1IS` per leaf descriptor covering the range, no
/// upper bound) when the range `[start, end)` is mapped with leaves of `leaf_size` bytes.
pub fn one_per_leaf_count(start: VirtAddr, end: VirtAddr, leaf_size: u64) -> u64 {
    if end.as_u64() <= start.as_u64() {
        return 0;
    }
    let first = start.as_u64() / leaf_size;
    let last = (end.as_u64() - 1) / leaf_size;
    last - first + 1
}

/// Number of TLBI instructions of a plain page loop with no bound (FreeBSD's
/// `pmap_s1_invalidate_range` before D58708): one per 4 KiB page.
pub const fn one_per_page_count(pages: u64) -> u64 {
    pages
}

/// Number of TLBI instructions our planner issues for `req` (errata repeats excluded).
pub fn our_plan_count(req: &TlbRequest, features: TlbFeatures) -> u64 {
    plan(req, features).len() as u64
}
