//! Gap queries: what a placement asks of [`super::VmaTree`] (a domain, a length, an alignment,
//! a line not to cross, a range to avoid, a preferred end), how one free range answers it, and
//! the search that finds the first free range in address order (or in reverse) that does.
//!
//! Cost of a search: a subtree whose largest gap is shorter than the request is skipped from its
//! summary in the parent, unread. For page-aligned requests, a subtree that lies wholly inside
//! the domain (and outside the excluded range) and whose largest gap is at least `len` holds a
//! fit, so only the subtrees that straddle a domain edge are entered without success: O(log n)
//! nodes. A stronger alignment or the no-crossing filter is checked exactly on each candidate
//! gap; a gap that is large enough but fails that check costs one more step (Linux instead
//! searches for `len + align - page`, which is O(log n) but may miss an exactly aligned fit).

use core::cmp::max;

use super::super::PAGE;
use super::node::{Branch, Leaf, Node};

/// Which end of the domain a gap search prefers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// The lowest fitting address (bottom-up).
    Lowest,
    /// The highest fitting address (top-down).
    Highest,
}

/// One gap search: where, how big, and how the result must be aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GapQuery {
    /// The result satisfies `lo <= addr`.
    pub lo: u64,
    /// The result satisfies `addr + len <= hi`.
    pub hi: u64,
    /// Length in bytes (a non-zero multiple of the page size).
    pub len: u64,
    /// Alignment of the result (a power of two, at least a page).
    pub align: u64,
    /// If set, the result must not cross a multiple of this power of two (`addr / b` equals
    /// `(addr + len - 1) / b`). Ignored when `len` is larger than it.
    pub no_cross: Option<u64>,
    /// A range `[start, end)` the result must not overlap (the code window, for other mappings).
    pub exclude: Option<(u64, u64)>,
    /// Which end to prefer.
    pub dir: Dir,
}

impl GapQuery {
    /// A page-aligned query with no filter.
    pub fn new(lo: u64, hi: u64, len: u64, dir: Dir) -> Self {
        GapQuery { lo, hi, len, align: PAGE, no_cross: None, exclude: None, dir }
    }

    /// The best placement inside the free range `[g0, g1)`, or `None`.
    pub(super) fn place(&self, g0: u64, g1: u64) -> Option<u64> {
        let g0 = max(g0, self.lo);
        let g1 = g1.min(self.hi);
        if g1 <= g0 || g1 - g0 < self.len {
            return None;
        }
        match self.exclude {
            Some((x0, x1)) if x0 < g1 && g0 < x1 => {
                // Two pieces: [g0, x0) and [x1, g1); try them in the preferred order.
                let below = (g0 < x0).then_some((g0, x0));
                let above = (x1 < g1).then_some((x1, g1));
                let (first, second) = match self.dir {
                    Dir::Lowest => (below, above),
                    Dir::Highest => (above, below),
                };
                first
                    .and_then(|(a, b)| self.place_piece(a, b))
                    .or_else(|| second.and_then(|(a, b)| self.place_piece(a, b)))
            }
            _ => self.place_piece(g0, g1),
        }
    }

    fn place_piece(&self, g0: u64, g1: u64) -> Option<u64> {
        if g1 < g0 || g1 - g0 < self.len {
            return None;
        }
        let a = self.align;
        let cross = self.no_cross.filter(|&b| self.len <= b);
        match self.dir {
            Dir::Lowest => {
                let mut x = g0.checked_add(a - 1)? & !(a - 1);
                if let Some(b) = cross
                    && x / b != (x + self.len - 1) / b
                {
                    x = ((x + self.len - 1) & !(b - 1)).checked_add(a - 1)? & !(a - 1);
                }
                (x.checked_add(self.len)? <= g1).then_some(x)
            }
            Dir::Highest => {
                let mut x = (g1 - self.len) & !(a - 1);
                if let Some(b) = cross
                    && x / b != (x + self.len - 1) / b
                {
                    let line = (x + self.len - 1) & !(b - 1);
                    x = line.checked_sub(self.len)? & !(a - 1);
                }
                (x >= g0).then_some(x)
            }
        }
    }

    /// Whether the region `[r0, r1)` can be skipped without looking inside.
    pub(super) fn prune(&self, r0: u64, r1: u64) -> bool {
        r1 <= self.lo || r0 >= self.hi || self.exclude.is_some_and(|(x0, x1)| x0 <= r0 && r1 <= x1)
    }
}

/// A placement and the free range it was found in (`g0 <= at`, `at + len <= g1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    /// The placement.
    pub at: u64,
    /// The free range's start.
    pub g0: u64,
    /// The free range's end.
    pub g1: u64,
}

impl GapQuery {
    /// [`GapQuery::place`], with the free range it placed in.
    #[inline]
    pub(super) fn fit(&self, g0: u64, g1: u64) -> Option<Fit> {
        self.place(g0, g1).map(|at| Fit { at, g0, g1 })
    }

    /// Whether a search that answered this query has passed over every free range before its
    /// answer for being too short, so that the answer teaches a hint something: page-aligned,
    /// no line it must not cross shorter than itself, and the domain's edge it starts from
    /// page-aligned.
    fn plain(&self) -> bool {
        let edge = match self.dir {
            Dir::Highest => self.hi,
            Dir::Lowest => self.lo,
        };
        self.align == PAGE
            && self.no_cross.is_none_or(|b| self.len > b)
            && edge.is_multiple_of(PAGE)
            && self.len.is_multiple_of(PAGE)
    }
}

/// What the last top-down search learnt about the free space above its answer (Linux's old
/// `free_area_cache` with its `cached_hole_size`, made exact): every free range `[g0, g1)`
/// between two neighbouring mappings (or below the first, or above the last) whose part below
/// `hi` ends above `below` is at most `longest` long:
/// `min(g1, hi) > below` implies `min(g1, hi) - g0 <= longest`. And `[gap_lo, below)` is free
/// (empty when `gap_lo == below`).
///
/// Why: placements are top-down and mappings pile up downwards from `mmap_base`, so a search for
/// the highest fit crosses the same block of full subtrees every time, one spine and up to 16
/// children a level, before it reaches the gap below them. A request longer than `longest`
/// cannot fit in any range ending above `below` (such a fit would lie in one of them, which is
/// too short), so the search can take `below` as its domain's top; and when the free range
/// `[gap_lo, below)` just under that top holds the request, its highest fit there is the
/// answer, found without a descent. Unlike Linux's cache, which moved with every search and
/// unmap and could make the next search miss a hole (so placements depended on the history),
/// both claims are kept true: a change that frees space checks the free ranges it made, and
/// raises `below` above any that break it; a change that takes space lowers `below` under a
/// mapping that now covers it, or raises `gap_lo` above one inside the range.
/// [`super::VmaTree::check`] checks both against every free range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopDownHint {
    /// The top of the domain it speaks of (0: it says nothing).
    pub hi: u64,
    /// Where the free ranges it bounds end above.
    pub below: u64,
    /// The longest such range.
    pub longest: u64,
    /// The bottom of a free range ending at `below`.
    pub gap_lo: u64,
}

/// The bottom-up mirror of [`TopDownHint`], learnt from a search for the lowest fit (near
/// placement's search above its target, or a bottom-up mmap layout): every free range whose
/// part above `lo` starts below `above` is at most `longest` long:
/// `max(g0, lo) < above` implies `g1 - max(g0, lo) <= longest`. And `[above, gap_hi)` is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BottomUpHint {
    /// The bottom of the domain it speaks of (`u64::MAX`: it says nothing).
    pub lo: u64,
    /// Where the free ranges it bounds start below.
    pub above: u64,
    /// The longest such range.
    pub longest: u64,
    /// The top of a free range starting at `above`.
    pub gap_hi: u64,
}

impl Default for BottomUpHint {
    fn default() -> Self {
        Hints::NONE.up
    }
}

impl TopDownHint {
    /// `q` with its top lowered to `below` where the hint shows that no fit ends above it: a
    /// top-down query whose domain's top is at or below `hi` and that asks more than `longest`.
    /// With it, the free range just under the new top, if the hint knows one.
    #[inline]
    fn narrow(&self, q: &GapQuery) -> Option<(GapQuery, Option<(u64, u64)>)> {
        (q.dir == Dir::Highest && q.hi <= self.hi && q.len > self.longest && self.below < q.hi).then(|| {
            (
                GapQuery { hi: self.below, ..*q },
                (self.gap_lo < self.below).then_some((self.gap_lo, self.below)),
            )
        })
    }

    /// The plain top-down search `q` answered `fit` (not narrowed by this hint, or narrowed
    /// and still longer than `longest`): it has passed over every free range above for being
    /// too short, unless the excluded range cut one; so every range ending above
    /// `fit.at + len` (below `q.hi`) is shorter than `len`. True before the mapping is made,
    /// and after (a mapping only takes space).
    fn learn(&mut self, q: &GapQuery, fit: Fit) {
        let top = fit.at.saturating_add(q.len);
        if q.dir == Dir::Highest && q.plain() && q.exclude.is_none_or(|(x0, x1)| x1 <= top || x0 >= q.hi) {
            *self = TopDownHint { hi: q.hi, below: top, longest: q.len - 1, gap_lo: fit.g0 };
        }
    }

    /// Whether the free range `[g0, g1)` keeps the claim.
    #[inline]
    pub fn holds(&self, g0: u64, g1: u64) -> bool {
        let top = g1.min(self.hi);
        top <= self.below || top.saturating_sub(g0) <= self.longest
    }

    /// The free range `[g0, g1)` (whole, between two neighbours) may have grown: if it breaks
    /// the claim, the claim gives up the space below its top (raising `below` keeps every other
    /// range's part of it true) and the range is the one under `below`; if it reaches the free
    /// range under `below` from beneath, that one now starts at `g0`.
    #[inline]
    fn freed(&mut self, g0: u64, g1: u64) {
        if !self.holds(g0, g1) {
            (self.below, self.gap_lo) = (g1.min(self.hi), g0);
        } else if g0 < self.gap_lo && g1 >= self.gap_lo {
            self.gap_lo = g0;
        }
    }

    /// `[s, e)` is mapped now. A mapping over `below` lowers it to the mapping's start (no
    /// free range ends inside a mapping, so the claim loses nothing) and the free range under
    /// it is unknown beyond the start; one inside `[gap_lo, below)` raises `gap_lo` to its end.
    #[inline]
    fn took(&mut self, s: u64, e: u64) {
        if s < self.below && e >= self.below {
            self.below = s;
            self.gap_lo = self.gap_lo.min(s);
        } else if s < self.below && e > self.gap_lo {
            self.gap_lo = e;
        }
    }
}

impl BottomUpHint {
    /// `q` with its bottom raised to `above` where the hint shows that no fit starts below it,
    /// and the free range starting there if the hint knows one ([`TopDownHint::narrow`]).
    #[inline]
    fn narrow(&self, q: &GapQuery) -> Option<(GapQuery, Option<(u64, u64)>)> {
        (q.dir == Dir::Lowest && q.lo >= self.lo && q.len > self.longest && self.above > q.lo).then(|| {
            (
                GapQuery { lo: self.above, ..*q },
                (self.above < self.gap_hi).then_some((self.above, self.gap_hi)),
            )
        })
    }

    /// The plain bottom-up search `q` answered `fit`: every free range whose part above `q.lo`
    /// starts below `fit.at` is shorter than `len` (a fit at its start would have been found
    /// first), unless the excluded range cut one.
    fn learn(&mut self, q: &GapQuery, fit: Fit) {
        if q.dir == Dir::Lowest && q.plain() && q.exclude.is_none_or(|(x0, x1)| x0 >= fit.at || x1 <= q.lo) {
            *self = BottomUpHint { lo: q.lo, above: fit.at, longest: q.len - 1, gap_hi: fit.g1 };
        }
    }

    /// Whether the free range `[g0, g1)` keeps the claim.
    #[inline]
    pub fn holds(&self, g0: u64, g1: u64) -> bool {
        let bottom = g0.max(self.lo);
        bottom >= self.above || g1.saturating_sub(bottom) <= self.longest
    }

    /// [`TopDownHint::freed`], mirrored.
    #[inline]
    fn freed(&mut self, g0: u64, g1: u64) {
        if !self.holds(g0, g1) {
            (self.above, self.gap_hi) = (g0.max(self.lo), g1);
        } else if g1 > self.gap_hi && g0 <= self.gap_hi {
            self.gap_hi = g1;
        }
    }

    /// [`TopDownHint::took`], mirrored.
    #[inline]
    fn took(&mut self, s: u64, e: u64) {
        if e > self.above && s <= self.above {
            self.above = e;
            self.gap_hi = self.gap_hi.max(e);
        } else if e > self.above && s < self.gap_hi {
            self.gap_hi = s;
        }
    }
}

/// Both hints, kept true together by every change to the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    /// What the last plain top-down search learnt.
    pub down: TopDownHint,
    /// What the last plain bottom-up search learnt.
    pub up: BottomUpHint,
}

impl Hints {
    /// Hints that say nothing.
    pub const NONE: Hints = Hints {
        down: TopDownHint { hi: 0, below: 0, longest: 0, gap_lo: 0 },
        up: BottomUpHint { lo: u64::MAX, above: u64::MAX, longest: 0, gap_hi: u64::MAX },
    };

    /// `q` narrowed by the hint of its direction, and a free range at the narrowed edge whose
    /// fit, if it has one, is the answer; `q` itself when the hint says nothing of it.
    #[inline]
    pub fn narrow(&self, q: &GapQuery) -> (GapQuery, Option<(u64, u64)>) {
        match q.dir {
            Dir::Highest => self.down.narrow(q),
            Dir::Lowest => self.up.narrow(q),
        }
        .unwrap_or((*q, None))
    }

    /// The search `q` (plain, not narrowed below what the hint of its direction covers)
    /// answered `fit`: the hint of its direction remembers what that shows.
    pub fn learn(&mut self, q: &GapQuery, fit: Fit) {
        match q.dir {
            Dir::Highest => self.down.learn(q, fit),
            Dir::Lowest => self.up.learn(q, fit),
        }
    }

    /// Whether the free range `[g0, g1)` keeps both claims.
    #[inline]
    pub fn holds(&self, g0: u64, g1: u64) -> bool {
        self.down.holds(g0, g1) && self.up.holds(g0, g1)
    }

    /// The free range `[g0, g1)` (whole, between two neighbours) may have grown.
    #[inline]
    pub fn freed(&mut self, g0: u64, g1: u64) {
        self.down.freed(g0, g1);
        self.up.freed(g0, g1);
    }

    /// The mapping `[s, e)` is new or has grown into free space.
    #[inline]
    pub fn took(&mut self, s: u64, e: u64) {
        self.down.took(s, e);
        self.up.took(s, e);
    }

    /// [`Hints::freed`] on the two free ranges beside `v[j]` (`v` in order, with what lies
    /// beside them): after `v[j]` shrank.
    #[inline]
    pub fn freed_beside(
        &mut self,
        v: &[super::super::Vma],
        j: usize,
        prev_end: Option<u64>,
        next_start: Option<u64>,
    ) {
        let below = match j.checked_sub(1) {
            Some(k) => v[k].end,
            None => prev_end.unwrap_or(0),
        };
        let above = v.get(j + 1).map(|n| n.start).or(next_start).unwrap_or(u64::MAX);
        self.freed(below, v[j].start);
        self.freed(v[j].end, above);
    }

    /// Whether both hints are true of the mappings `v` (in order, with what lies beside them):
    /// every free range touching them keeps both claims, and neither hint's free range holds
    /// any of them. Test builds check every leaf edit with it.
    pub fn true_of(&self, v: &[super::super::Vma], prev_end: Option<u64>, next_start: Option<u64>) -> bool {
        let mut g0 = prev_end.unwrap_or(0);
        for w in v {
            if !self.holds(g0, w.start) {
                return false;
            }
            g0 = w.end;
        }
        let outside = |w: &super::super::Vma, (a, b): (u64, u64)| a >= b || w.end <= a || w.start >= b;
        self.holds(g0, next_start.unwrap_or(u64::MAX))
            && v.iter().all(|w| {
                outside(w, (self.down.gap_lo, self.down.below)) && outside(w, (self.up.above, self.up.gap_hi))
            })
    }
}

/// The first fit of `q` in a free range strictly between two mappings of the subtree `node`,
/// in `q`'s order.
pub fn search(node: &Node, q: &GapQuery) -> Option<Fit> {
    match node {
        Node::Leaf(l) => search_leaf(l, q),
        Node::Branch(b) => search_branch(b, q),
    }
}

/// Whether the free range `[g0, g1)` is worth a closer look (long enough, meets the domain).
#[inline]
fn candidate(q: &GapQuery, g0: u64, g1: u64) -> bool {
    g1 - g0 >= q.len && g1 > q.lo && g0 < q.hi
}

fn search_leaf(l: &Leaf, q: &GapQuery) -> Option<Fit> {
    // Over the pairs of neighbours, without an index: a leaf of a run of mappings with no gap
    // between them is passed over at a few instructions a pair. The scan starts at the domain's
    // edge, found by a binary search: the pairs beyond it cannot hold a fit, and a top-down
    // search restricted by the hint ([`TopDownHint`]) often starts in the middle of a leaf.
    let v = l.vmas();
    let gap = |w: &[super::super::Vma]| (w[0].end, w[1].start);
    match q.dir {
        Dir::Lowest => {
            // The first pair whose gap ends above `lo`: the one after the last mapping
            // starting at or below it.
            let from = v.partition_point(|w| w.start <= q.lo).saturating_sub(1);
            for (g0, g1) in v[from..].windows(2).map(gap) {
                if g1 - g0 < q.len {
                    continue;
                }
                if g0 >= q.hi {
                    break;
                }
                if candidate(q, g0, g1)
                    && let Some(x) = q.fit(g0, g1)
                {
                    return Some(x);
                }
            }
        }
        Dir::Highest => {
            // The pairs whose gap starts below `hi`: up to the first mapping ending at or
            // above it.
            let to = (v.partition_point(|w| w.end < q.hi) + 1).min(v.len());
            for (g0, g1) in v[..to].windows(2).rev().map(gap) {
                if g1 - g0 < q.len {
                    continue;
                }
                if g1 <= q.lo {
                    break;
                }
                if candidate(q, g0, g1)
                    && let Some(x) = q.fit(g0, g1)
                {
                    return Some(x);
                }
            }
        }
    }
    None
}

fn search_branch(b: &Branch, q: &GapQuery) -> Option<Fit> {
    // Child `i`'s own gaps, entered only if its largest could hold the request.
    let inside = |i: usize| {
        if b.gap[i] < q.len || q.prune(b.lo[i], b.hi[i]) {
            return None;
        }
        b.child[i].as_deref().and_then(|c| search(c, q))
    };
    // The free range between children `i - 1` and `i`.
    let between = |i: usize| {
        let (g0, g1) = (b.hi[i - 1], b.lo[i]);
        if candidate(q, g0, g1) { q.fit(g0, g1) } else { None }
    };
    // Only the children from the first ending above `lo` to the last starting below `hi` can
    // hold a fit, with the gaps below them and the one above the last. A binary search finds
    // where the scan starts; the far edge is checked on the children that could hold the
    // request. Between, one comparison a child (`room`: the largest gap in it or just below
    // it) passes over those with no gap of `len`, most of a run of mappings with nothing
    // between them.
    let n = b.len;
    let room = &b.room[..n];
    match q.dir {
        Dir::Lowest => {
            let first = b.ending_after(q.lo);
            for (i, &r) in (first..).zip(&room[first..]) {
                if r < q.len {
                    continue;
                }
                if b.lo[i] >= q.hi {
                    // Only the range below this child can still reach into the domain.
                    return if i > 0 { between(i) } else { None };
                }
                if let Some(x) = (i > 0).then(|| between(i)).flatten().or_else(|| inside(i)) {
                    return Some(x);
                }
            }
        }
        Dir::Highest => {
            let top = b.below(q.hi);
            // The gap above the last child starting below `hi` may reach into the domain.
            if top > 0
                && top < n
                && let Some(x) = between(top)
            {
                return Some(x);
            }
            for i in (0..top).rev() {
                if room[i] < q.len {
                    continue;
                }
                if b.hi[i] <= q.lo {
                    // This child and the gap below it lie below the domain, and so does the rest.
                    return None;
                }
                if let Some(x) = inside(i).or_else(|| (i > 0).then(|| between(i)).flatten()) {
                    return Some(x);
                }
            }
        }
    }
    None
}
