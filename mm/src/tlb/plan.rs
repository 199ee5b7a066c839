//! The planner: a pure function from a [`TlbRequest`] and the machine's [`TlbFeatures`] to the list of
//! TLB instructions that invalidates exactly the requested range (module documentation of
//! [`crate::tlb`] explains the shapes and the bounds). It allocates nothing: a plan is a small
//! `Copy` value, and the per-step loop (up to 511 ops) is generated lazily by its iterator.

use super::op::{TlbInstr, TlbiOp};
use super::operand::{RangeOperand, asid_operand, page_operand, range_pages};
use super::{
    FlushTarget, MAX_DVM_OPS, MAX_RANGE_PLAN_OPS, RANGE_BOUND_PAGES, Scope, TlbFeatures, TlbRequest,
};
use crate::addr::{PAGE_SHIFT, VirtAddr};

/// The shape of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlanShape {
    /// Nothing to invalidate.
    Empty,
    /// Up to [`MAX_RANGE_PLAN_OPS`] instructions: one single-page op, or one or two range ops of
    /// one size, possibly overlapping (only with FEAT_TLBIRANGE).
    Ranges,
    /// One single-VA op per stride step, at most `MAX_DVM_OPS - 1` (no FEAT_TLBIRANGE).
    PerStep,
    /// One `ASIDE1IS` (ASID scope) or `VMALLE1IS` (global scope), or their local forms.
    FullFlush,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Body {
    Empty,
    Fixed { ops: [TlbInstr; MAX_RANGE_PLAN_OPS], len: u8, full: bool },
    PerStep { op: TlbiOp, asid: u16, start: u64, stride: u64, count: u32 },
}

/// A planned invalidation: a short list of [`TlbInstr`], iterated with [`TlbPlan::iter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlbPlan {
    body: Body,
    broadcast: bool,
}

impl TlbPlan {
    /// The plan that does nothing.
    pub const EMPTY: Self = Self { body: Body::Empty, broadcast: true };

    /// Shape of the plan.
    pub const fn shape(&self) -> PlanShape {
        match self.body {
            Body::Empty => PlanShape::Empty,
            Body::Fixed { full: true, .. } => PlanShape::FullFlush,
            Body::Fixed { full: false, .. } => PlanShape::Ranges,
            Body::PerStep { .. } => PlanShape::PerStep,
        }
    }

    /// Number of instructions (not counting errata repeats).
    pub const fn len(&self) -> usize {
        match self.body {
            Body::Empty => 0,
            Body::Fixed { len, .. } => len as usize,
            Body::PerStep { count, .. } => count as usize,
        }
    }

    /// Whether the plan has no instruction.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the plan is one whole-ASID or whole-TLB flush.
    pub const fn is_full_flush(&self) -> bool {
        matches!(self.shape(), PlanShape::FullFlush)
    }

    /// Whether the plan uses the broadcast (inner-shareable) forms, and so needs `DSB ISH*`
    /// rather than `DSB NSH*`.
    pub const fn is_broadcast(&self) -> bool {
        self.broadcast
    }

    /// The instructions, in issue order.
    pub fn iter(&self) -> PlanIter {
        PlanIter { body: self.body, next: 0 }
    }

    fn fixed(instrs: &[TlbInstr], full: bool, broadcast: bool) -> Self {
        let mut ops = [TlbInstr { op: TlbiOp::Vmalle1is, operand: 0 }; MAX_RANGE_PLAN_OPS];
        ops[..instrs.len()].copy_from_slice(instrs);
        Self { body: Body::Fixed { ops, len: instrs.len() as u8, full }, broadcast }
    }
}

impl IntoIterator for &TlbPlan {
    type Item = TlbInstr;
    type IntoIter = PlanIter;
    fn into_iter(self) -> PlanIter {
        self.iter()
    }
}

/// Iterator over the instructions of a [`TlbPlan`]; generates the per-step loop lazily.
#[derive(Clone, Debug)]
pub struct PlanIter {
    body: Body,
    next: u32,
}

impl Iterator for PlanIter {
    type Item = TlbInstr;

    fn next(&mut self) -> Option<TlbInstr> {
        let i = self.next;
        let item = match &self.body {
            Body::Empty => None,
            Body::Fixed { ops, len, .. } => ops[..*len as usize].get(i as usize).copied(),
            Body::PerStep { op, asid, start, stride, count } => (i < *count).then(|| TlbInstr {
                op: *op,
                operand: page_operand(*asid, VirtAddr(start.wrapping_add(u64::from(i) * stride))),
            }),
        };
        if item.is_some() {
            self.next += 1;
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let total = match &self.body {
            Body::Empty => 0,
            Body::Fixed { len, .. } => *len as usize,
            Body::PerStep { count, .. } => *count as usize,
        };
        let left = total.saturating_sub(self.next as usize);
        (left, Some(left))
    }
}

impl ExactSizeIterator for PlanIter {}

/// The whole-flush plan for `target`: `ASIDE1IS` for an ASID, `VMALLE1IS` for global entries
/// (`ASIDE1IS` does not remove global entries); the local forms for [`Reach::Local`](super::Reach::Local).
pub fn full_flush(target: FlushTarget) -> TlbPlan {
    let scope = target.scope;
    let b = target.reach.is_broadcast();
    let aside = if b { TlbiOp::Aside1is } else { TlbiOp::Aside1 };
    let vmall = if b { TlbiOp::Vmalle1is } else { TlbiOp::Vmalle1 };
    let instr = match scope {
        Scope::Asid(asid) => TlbInstr { op: aside, operand: asid_operand(asid) },
        Scope::Global => mutant!(
            TlbInstr { op: vmall, operand: 0 },
            AsideForGlobal => TlbInstr { op: aside, operand: 0 },
        ),
    };
    TlbPlan::fixed(&[instr], true, b)
}

/// The rounded extent of a request: `(first byte, length in bytes)` with both ends on the
/// stride, or `None` for an empty request. The length is at most 2^64, so it is a `u128`.
fn extent(req: &TlbRequest) -> Option<(u64, u128)> {
    if req.start == req.end {
        return None;
    }
    let stride = req.stride.bytes();
    let start = req.start.align_down(stride).as_u64();
    let end: u128 = if req.end.as_u64() == 0 {
        1 << 64
    } else {
        (u128::from(req.end.as_u64()) + u128::from(stride) - 1) & !(u128::from(stride) - 1)
    };
    let start128 = u128::from(start);
    debug_assert!(end > start128, "TLB request with end below start: {req:?}");
    // Release builds: a reversed range is a caller bug; treat it as the whole address space so
    // that the plan over-invalidates rather than under-invalidates.
    let len = if end > start128 { end - start128 } else { 1 << 64 };
    Some((start, len))
}

/// The largest range op of at most `pages` pages (`pages >= 2`) that stays below 4 GiB, as
/// `(SCALE, units)`: the op covers `units * 2^(5*SCALE+1)` pages, `1 <= units <= 32` (NUM =
/// units − 1), at SCALE 3 at most 15 units (15 × 2^16 pages = 3.75 GiB; 16 would be 4 GiB,
/// which QEMU 7.2 ignores, see the module documentation).
///
/// It is at least half of `pages` below [`RANGE_BOUND_PAGES`]: for `pages` in `[2^(5s+1),
/// 2^(5s+6))` the op at SCALE `s` is `pages` rounded down to a multiple of `2^(5s+1)`, more than
/// `pages − 2^(5s+1)` and at least `2^(5s+1)`, so at least `pages / 2`; at SCALE 3 the cap of 15
/// units is 983,040 pages, more than half of 2^20. Hence two ops always suffice.
fn largest_range_op(pages: u64) -> (u32, u64) {
    let mut best = (0, 0, 0u64);
    let scales: &[u32] = mutant!(&[3, 2, 1, 0], ScaleCappedAt2 => &[2, 1, 0]);
    for &scale in scales {
        let shift = 5 * scale + 1;
        let cap = if scale == 3 { mutant!(15, LinuxRangeBound => 32) } else { 32 };
        let units = mutant!((pages >> shift).min(cap), LinuxNumMask => (pages >> shift) & 0x1f);
        let covered = units << shift;
        if covered > best.2 {
            best = (scale, units, covered);
        }
    }
    (best.0, best.1)
}

/// Plans the invalidation of `req` on a machine with `features`.
///
/// Pure and allocation-free. Properties (all checked by the tests, exhaustively for small
/// ranges): the decoded ops cover every stride step of the rounded range at least once and
/// nothing outside it; with range ops there are at most 2 instructions below
/// [`RANGE_BOUND_PAGES`] — the minimum over all covers whose ops may overlap but stay inside the
/// range — and no single op reaches 4 GiB; without them one per stride step, at most 511; above
/// the bounds exactly one whole flush of the right kind.
pub fn plan(req: &TlbRequest, features: TlbFeatures) -> TlbPlan {
    let b = req.reach.is_broadcast();
    let Some((start, len)) = extent(req) else {
        return TlbPlan { body: Body::Empty, broadcast: b };
    };
    let (asid, all_asids) = match req.scope {
        Scope::Asid(asid) => (asid, false),
        Scope::Global => (0, true),
    };
    let leaf_only = mutant!(req.leaf_only, LeafFormsAlways => true);
    let whole = FlushTarget { scope: req.scope, reach: req.reach };

    if features.range {
        let bound = mutant!(
            RANGE_BOUND_PAGES,
            RangeBoundOffByOne => RANGE_BOUND_PAGES + 1,
            LinuxRangeBound => 1 << 21,
            LinuxNumMask => 1 << 21,
        );
        let pages = len >> PAGE_SHIFT;
        if pages > u128::from(bound) {
            return full_flush(whole);
        }
        let pages = pages as u64;
        let range_op = mutant!(
            TlbiOp::range(all_asids, leaf_only, b),
            RangeOpWithoutRPrefix => TlbiOp::page(all_asids, leaf_only, b),
        );
        if pages == 1 {
            // Range ops cover an even number of pages: one page is one single-page op.
            let one = TlbInstr {
                op: TlbiOp::page(all_asids, leaf_only, b),
                operand: page_operand(asid, VirtAddr(start)),
            };
            let plan = mutant!(&[one][..], SinglePageDropped => &[][..]);
            return TlbPlan::fixed(plan, false, b);
        }
        // The largest single op that fits: then ceil(pages / m) ops, which is at most 2 (see
        // `largest_range_op`), cover the range, the last one moved back so that it ends at the
        // end: the two may overlap, never leave the range.
        let (scale, units) = largest_range_op(pages);
        if units == 0 {
            // Only a planted bug gets here (NUM masked to 5 bits): it invalidates nothing, as
            // Linux did before e3ba51ab24fd.
            return TlbPlan::fixed(&[], false, b);
        }
        let m = range_pages(scale, (units - 1) as u32);
        let count = pages.div_ceil(m).min(MAX_RANGE_PLAN_OPS as u64);
        let num = mutant!(units - 1, NumOffByOne => units);
        let mut ops = [TlbInstr { op: TlbiOp::Vmalle1is, operand: 0 }; MAX_RANGE_PLAN_OPS];
        for (i, slot) in ops.iter_mut().enumerate().take(count as usize) {
            let first = mutant!((i as u64 * m).min(pages - m), SecondOpNotClamped => i as u64 * m);
            let va = VirtAddr(start.wrapping_add(first << PAGE_SHIFT));
            *slot =
                TlbInstr { op: range_op, operand: RangeOperand::new(asid, va, scale, num as u32).encode() };
        }
        return TlbPlan::fixed(&ops[..count as usize], false, b);
    }

    let stride = req.stride.bytes();
    let steps = len / u128::from(stride);
    let limit = mutant!(MAX_DVM_OPS, DvmLimitOffByOne => MAX_DVM_OPS + 1);
    if steps >= u128::from(limit) {
        return full_flush(whole);
    }
    TlbPlan {
        body: Body::PerStep {
            op: TlbiOp::page(all_asids, leaf_only, b),
            asid,
            start,
            stride,
            count: steps as u32,
        },
        broadcast: b,
    }
}
