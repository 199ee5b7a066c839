//! The planner: a pure function from a [`TlbRequest`] and the machine's [`TlbFeatures`] to the list of
//! TLB instructions that invalidates exactly the requested range (module documentation of
//! [`crate::tlb`] explains the shapes and the bounds). It allocates nothing: a plan is a small
//! `Copy` value, and the per-step loop (up to 511 ops) is generated lazily by its iterator, as
//! are the single ops that bring an LPA2 range to a 64 KiB boundary.
//!
//! The planner is written once for every [`Format`]: [`plan_in`] takes it, [`plan`] is
//! [`plan_in`] with [`Format::BUILD`], a constant, so the 4 KiB build folds the granule away.

use super::op::{TlbInstr, TlbiOp};
use super::operand::{RangeOperand, asid_operand, page_operand, range_pages};
use super::{FlushTarget, MAX_DVM_OPS, Scope, TlbFeatures, TlbRequest, range_bound_pages};
use crate::addr::VirtAddr;
use crate::granule::Format;

/// Room for the fixed instructions of a range plan: two range ops, and with `DS` one more range
/// op when the range ends off a 64 KiB boundary and one single op for an odd last page.
const MAX_FIXED_OPS: usize = 4;

/// The shape of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlanShape {
    /// Nothing to invalidate.
    Empty,
    /// Range ops (only with FEAT_TLBIRANGE): one single-page op, or one or two range ops of one
    /// size, possibly overlapping, at most [`super::MAX_RANGE_PLAN_OPS`]; with `DS` also up to 15
    /// (4 KiB) or 3 (16 KiB) single ops before the first 64 KiB boundary, a third range op when
    /// the range ends off a 64 KiB boundary and a single op for an odd last page
    /// ([`super::range_plan_ops_bound`]).
    Ranges,
    /// One single-VA op per stride step, at most `MAX_DVM_OPS - 1` (no FEAT_TLBIRANGE).
    PerStep,
    /// One `ASIDE1IS` (ASID scope) or `VMALLE1IS` (global scope), or their local forms.
    FullFlush,
}

/// `count` single-VA ops `op` at `start`, `start + stride`, …: a per-step loop, or the head of
/// an LPA2 range plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Steps {
    op: TlbiOp,
    asid: u16,
    start: u64,
    stride: u64,
    count: u32,
}

impl Steps {
    const NONE: Self = Self { op: TlbiOp::Vae1is, asid: 0, start: 0, stride: 0, count: 0 };

    fn instr(&self, i: u32) -> TlbInstr {
        TlbInstr {
            op: self.op,
            operand: page_operand(self.asid, VirtAddr(self.start.wrapping_add(u64::from(i) * self.stride))),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Body {
    Empty,
    /// One single-page op (shape `Ranges`): the flush of most faults and one-page changes, kept
    /// apart from `Fixed` so that planning and issuing it moves 16 bytes, not an array.
    One(TlbInstr),
    Fixed {
        head: Steps,
        ops: [TlbInstr; MAX_FIXED_OPS],
        len: u8,
        full: bool,
    },
    PerStep(Steps),
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
            Body::One(_) | Body::Fixed { full: false, .. } => PlanShape::Ranges,
            Body::Fixed { full: true, .. } => PlanShape::FullFlush,
            Body::PerStep { .. } => PlanShape::PerStep,
        }
    }

    /// Number of instructions (not counting errata repeats).
    pub const fn len(&self) -> usize {
        match self.body {
            Body::Empty => 0,
            Body::One(_) => 1,
            Body::Fixed { head, len, .. } => head.count as usize + len as usize,
            Body::PerStep(steps) => steps.count as usize,
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
    pub fn iter(&self) -> PlanIter<'_> {
        PlanIter { body: &self.body, next: 0 }
    }

    fn fixed(instrs: &[TlbInstr], full: bool, broadcast: bool) -> Self {
        Self::with_head(Steps::NONE, instrs, full, broadcast)
    }

    fn with_head(head: Steps, instrs: &[TlbInstr], full: bool, broadcast: bool) -> Self {
        let mut ops = [TlbInstr { op: TlbiOp::Vmalle1is, operand: 0 }; MAX_FIXED_OPS];
        ops[..instrs.len()].copy_from_slice(instrs);
        Self { body: Body::Fixed { head, ops, len: instrs.len() as u8, full }, broadcast }
    }
}

impl<'a> IntoIterator for &'a TlbPlan {
    type Item = TlbInstr;
    type IntoIter = PlanIter<'a>;
    fn into_iter(self) -> PlanIter<'a> {
        self.iter()
    }
}

/// Iterator over the instructions of a [`TlbPlan`]; generates the per-step loop lazily. It
/// borrows the plan: a copy of the body (some 100 bytes) for each flush cost more than the
/// single TLBI most flushes issue.
#[derive(Clone, Debug)]
pub struct PlanIter<'a> {
    body: &'a Body,
    next: u32,
}

impl Iterator for PlanIter<'_> {
    type Item = TlbInstr;

    fn next(&mut self) -> Option<TlbInstr> {
        let i = self.next;
        let item = match self.body {
            Body::Empty => None,
            Body::One(op) => (i == 0).then_some(*op),
            Body::Fixed { head, ops, len, .. } => {
                if i < head.count {
                    Some(head.instr(i))
                } else {
                    ops[..*len as usize].get((i - head.count) as usize).copied()
                }
            }
            Body::PerStep(steps) => (i < steps.count).then(|| steps.instr(i)),
        };
        if item.is_some() {
            self.next += 1;
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let total = match self.body {
            Body::Empty => 0,
            Body::One(_) => 1,
            Body::Fixed { head, len, .. } => head.count as usize + *len as usize,
            Body::PerStep(steps) => steps.count as usize,
        };
        let left = total.saturating_sub(self.next as usize);
        (left, Some(left))
    }
}

impl ExactSizeIterator for PlanIter<'_> {}

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
fn extent(req: &TlbRequest, format: Format) -> Option<(u64, u128)> {
    if req.start == req.end {
        return None;
    }
    let stride = req.stride.bytes_in(format);
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
/// units − 1), and at each SCALE at most as many units as stay below 4 GiB
/// ([`range_bound_pages`]: 15 at SCALE 3 with 4 KiB pages, 3 with 16 KiB, none with 64 KiB,
/// where SCALE 2 stops at 31).
///
/// It is at least half of `pages` up to the range bound: for `pages` in `[2^(5s+1), 2^(5s+6))`
/// the op at SCALE `s` is `pages` rounded down to a multiple of `2^(5s+1)`, more than `pages −
/// 2^(5s+1)` and at least `2^(5s+1)`, so at least `pages / 2`; the 4 GiB cap only cuts units
/// that `pages` below the bound does not reach, except at SCALE 3 with 4 KiB pages, where 15
/// units (983,040 pages) are more than half of 2^20. Hence two ops always suffice. From 64 pages
/// on it is a multiple of 64 pages, so of 64 KiB: an op of that size from a 64 KiB boundary ends
/// on one (what `DS` needs).
fn largest_range_op(format: Format, pages: u64) -> (u32, u64) {
    let bound = range_bound_pages(format);
    let mut best = (0, 0, 0u64);
    let scales: &[u32] = mutant!(&[3, 2, 1, 0], ScaleCappedAt2 => &[2, 1, 0]);
    for &scale in scales {
        let shift = 5 * scale + 1;
        let cap = mutant!((bound >> shift).min(32), LinuxRangeBound => 32);
        let units = mutant!((pages >> shift).min(cap), LinuxNumMask => (pages >> shift) & 0x1f);
        let covered = units << shift;
        if covered > best.2 {
            best = (scale, units, covered);
        }
    }
    (best.0, best.1)
}

/// Plans the invalidation of `req` on a machine with `features`, for the build's format
/// ([`Format::BUILD`]); see [`plan_in`].
#[inline]
pub fn plan(req: &TlbRequest, features: TlbFeatures) -> TlbPlan {
    plan_in(Format::BUILD, req, features)
}

/// Plans the invalidation of `req` on a machine with `features` whose tables use `format`.
///
/// Pure and allocation-free. Properties (all checked by the tests, exhaustively for small
/// ranges, for every format): the decoded ops cover every stride step of the rounded range at
/// least once and nothing outside it; with range ops there are at most 2 instructions up to
/// [`range_bound_pages`] without `DS` — the minimum over all covers whose ops may overlap but
/// stay inside the range — and no single op reaches 4 GiB; with `DS` the single ops before the
/// first 64 KiB boundary (which no range op can reach: its BaseADDR is in 64 KiB units), one
/// range op if the rest is one op's size, two if it is a multiple of 64 KiB, at most three
/// otherwise, and one single op for an odd last page (no range op can end there: they start on
/// even pages and cover even counts); without range ops one per stride
/// step, at most 511; above the bounds exactly one whole flush of the right kind.
pub fn plan_in(format: Format, req: &TlbRequest, features: TlbFeatures) -> TlbPlan {
    let b = req.reach.is_broadcast();
    let Some((start, len)) = extent(req, format) else {
        return TlbPlan { body: Body::Empty, broadcast: b };
    };
    let (asid, all_asids) = match req.scope {
        Scope::Asid(asid) => (asid, false),
        Scope::Global => (0, true),
    };
    let leaf_only = mutant!(req.leaf_only, LeafFormsAlways => true);
    let whole = FlushTarget { scope: req.scope, reach: req.reach };
    let page_shift = format.granule.shift();
    let page_op = TlbiOp::page(all_asids, leaf_only, b);

    if features.range {
        let bound = mutant!(
            range_bound_pages(format),
            RangeBoundOffByOne => range_bound_pages(format) + 1,
            LinuxRangeBound => 1 << 21,
            LinuxNumMask => 1 << 21,
        );
        let pages = len >> page_shift;
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
            let one = TlbInstr { op: page_op, operand: page_operand(asid, VirtAddr(start)) };
            return mutant!(
                TlbPlan { body: Body::One(one), broadcast: b },
                SinglePageDropped => TlbPlan::fixed(&[], false, b),
            );
        }
        // Pages per BaseADDR unit: 1, or 16 / 4 with DS (64 KiB units). Range ops start on a unit
        // boundary; the pages before the first boundary get single ops.
        let align = mutant!(1u64 << (format.range_base_shift() - page_shift), Lpa2UnalignedRangeStart => 1);
        let first_page = start >> page_shift;
        let head = ((align - first_page % align) % align).min(pages);
        let rest = pages - head;
        // With DS every range op starts and ends on an even page, so an odd last page is a single.
        let odd = if align > 1 { rest % 2 } else { 0 };
        let body = rest - odd;
        let body_start = start.wrapping_add(head << page_shift);
        let mut ops = [TlbInstr { op: TlbiOp::Vmalle1is, operand: 0 }; MAX_FIXED_OPS];
        let mut n = 0;
        let mut place = |first: u64, scale: u32, units: u64| {
            let num = mutant!(units - 1, NumOffByOne => units);
            let va = VirtAddr(body_start.wrapping_add(first << page_shift));
            let operand = RangeOperand::new_in(format, asid, va, scale, num as u32).encode();
            ops[n] = TlbInstr { op: range_op, operand };
            n += 1;
        };
        if body > 0 {
            // The largest single op that fits, m: one op if it is the whole body; else two ops of
            // m pages (at least half the body, see `largest_range_op`), the second moved back to
            // end at the end: they may overlap, never leave the range. With DS both must start on
            // a unit boundary, which holds when the body is a multiple of the unit (m is one of
            // 64 pages from 64 pages on, and below 64 the body is itself an op).
            let (scale, units) = largest_range_op(format, body);
            if units == 0 {
                // Only a planted bug gets here (NUM masked to 5 bits): it invalidates nothing, as
                // Linux did before e3ba51ab24fd.
                return TlbPlan::fixed(&[], false, b);
            }
            let m = range_pages(scale, (units - 1) as u32);
            if m == body {
                place(0, scale, units);
            } else if body.is_multiple_of(align) {
                place(0, scale, units);
                place(mutant!(body - m, SecondOpNotClamped => m), scale, units);
            } else {
                // DS, and the body ends off a unit boundary: the last op is the largest SCALE 0 op
                // that ends there from a boundary (≤ 64 pages, as long as the body modulo the
                // unit); the part before it is a multiple of the unit, covered by the first op if
                // that reaches it, else by the two ops above for that part. At most three.
                let r = body % align;
                let last = r + align * ((64 - r) / align);
                let before = body - last;
                if before <= m {
                    place(0, scale, units);
                } else {
                    let (s2, u2) = largest_range_op(format, before);
                    if u2 == 0 {
                        return TlbPlan::fixed(&[], false, b);
                    }
                    let m2 = range_pages(s2, (u2 - 1) as u32);
                    place(0, s2, u2);
                    if m2 < before {
                        place(before - m2, s2, u2);
                    }
                }
                place(before, 0, last / 2);
            }
        }
        if odd > 0 {
            let va = VirtAddr(body_start.wrapping_add(body << page_shift));
            ops[n] = TlbInstr { op: page_op, operand: page_operand(asid, va) };
            n += 1;
        }
        let head = Steps { op: page_op, asid, start, stride: 1 << page_shift, count: head as u32 };
        return TlbPlan::with_head(head, &ops[..n], false, b);
    }

    let stride = req.stride.bytes_in(format);
    let steps = len / u128::from(stride);
    let limit = mutant!(MAX_DVM_OPS, DvmLimitOffByOne => MAX_DVM_OPS + 1);
    if steps >= u128::from(limit) {
        return full_flush(whole);
    }
    TlbPlan {
        body: Body::PerStep(Steps { op: page_op, asid, start, stride, count: steps as u32 }),
        broadcast: b,
    }
}
