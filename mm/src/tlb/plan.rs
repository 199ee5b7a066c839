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
    /// Up to [`MAX_RANGE_PLAN_OPS`] instructions: range ops, at most one per SCALE, then at most
    /// one single-page op (only with FEAT_TLBIRANGE).
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

/// Plans the invalidation of `req` on a machine with `features`.
///
/// Pure and allocation-free. Properties (all checked by the tests, exhaustively for small
/// ranges): the decoded ops cover every stride step of the rounded range exactly once and
/// nothing outside it; with range ops there are at most 5 instructions below
/// [`RANGE_BOUND_PAGES`] and no single op reaches 4 GiB; without them at most 511; above the
/// bounds exactly one whole flush of the right kind.
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
        let mut ops = [TlbInstr { op: TlbiOp::Vmalle1is, operand: 0 }; MAX_RANGE_PLAN_OPS];
        let mut n = 0;
        let mut va = start;
        let mut rem = pages;
        // Largest scale first: after scale s+1 fewer than 2^(5(s+1)+1) pages remain, so at scale
        // s at most 31 units are left and NUM (units - 1) fits its 5 bits.
        let scales: &[u32] = mutant!(
            &[3, 2, 1, 0],
            ScaleAscending => &[0, 1, 2, 3],
            ScaleStartsAt2 => &[2, 1, 0],
        );
        for &scale in scales {
            let shift = 5 * scale + 1;
            let units = mutant!(rem >> shift, LinuxNumMask => (rem >> shift) & 0x1f);
            if units == 0 {
                continue;
            }
            let num = mutant!(units - 1, NumOffByOne => units);
            let operand = RangeOperand::new(asid, VirtAddr(va), scale, num as u32).encode();
            ops[n] = TlbInstr { op: range_op, operand };
            n += 1;
            let covered = range_pages(scale, (units - 1) as u32);
            va = va.wrapping_add(covered << PAGE_SHIFT);
            rem -= covered;
        }
        // Range ops cover an even number of pages: an odd count leaves one page, done last.
        if mutant!(rem == 1, OddPageDropped => false) {
            ops[n] = TlbInstr {
                op: TlbiOp::page(all_asids, leaf_only, b),
                operand: page_operand(asid, VirtAddr(va)),
            };
            n += 1;
        }
        return TlbPlan::fixed(&ops[..n], false, b);
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
