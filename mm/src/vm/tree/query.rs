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

/// What the last top-down search learnt about the free space above its answer (Linux's old
/// `free_area_cache` with its `cached_hole_size`, made exact): every free range `[g0, g1)`
/// between two neighbouring mappings (or below the first, or above the last) whose part below
/// `hi` ends above `below` is at most `longest` long:
/// `min(g1, hi) > below` implies `min(g1, hi) - g0 <= longest`.
///
/// Why: placements are top-down and mappings pile up downwards from `mmap_base`, so a search for
/// the highest fit crosses the same block of full subtrees every time, one spine and up to 16
/// children a level, before it reaches the gap below them. A request longer than `longest`
/// cannot fit in any range ending above `below` (such a fit would lie in one of them, which is
/// too short), so the search can take `below` as its domain's top and find the same answer
/// directly. Unlike Linux's cache, which moved with every search and unmap and could make the
/// next search miss a hole (so placements depended on the history), the claim is kept true: a
/// change that frees space checks the free ranges it made, and raises `below` above any that
/// break it; a change that only takes space cannot break it. [`super::VmaTree::check`] checks
/// it against every free range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopDownHint {
    /// The top of the domain it speaks of (0: it says nothing).
    pub hi: u64,
    /// Where the free ranges it bounds end above.
    pub below: u64,
    /// The longest such range.
    pub longest: u64,
}

impl TopDownHint {
    /// `q` with its top lowered to `below` where the hint shows that no fit ends above it: a
    /// top-down query whose domain's top is at or below `hi` and that asks more than `longest`.
    #[inline]
    pub fn narrow(&self, q: &GapQuery) -> GapQuery {
        if q.dir == Dir::Highest && q.hi <= self.hi && q.len > self.longest && self.below < q.hi {
            GapQuery { hi: self.below, ..*q }
        } else {
            *q
        }
    }

    /// The search `q` answered `x` (not narrowed by this hint, or narrowed and still longer than
    /// `longest`): remembers what its answer shows, when it shows it. A plain page-aligned
    /// top-down search that places `x` at the top of its gap has passed over every free range
    /// above for being too short, unless the excluded range cut one; so every range ending
    /// above `x + len` (below `q.hi`) is shorter than `len`. True before the mapping is made,
    /// and after (a mapping only takes space).
    pub fn learn(&mut self, q: &GapQuery, x: u64) {
        let plain = q.dir == Dir::Highest
            && q.align == PAGE
            && q.no_cross.is_none_or(|b| q.len > b)
            && q.hi.is_multiple_of(PAGE)
            && q.len.is_multiple_of(PAGE);
        let top = x.saturating_add(q.len);
        if plain && q.exclude.is_none_or(|(x0, x1)| x1 <= top || x0 >= q.hi) {
            *self = TopDownHint { hi: q.hi, below: top, longest: q.len - 1 };
        }
    }

    /// Whether the free range `[g0, g1)` keeps the claim.
    #[inline]
    pub fn holds(&self, g0: u64, g1: u64) -> bool {
        let top = g1.min(self.hi);
        top <= self.below || top.saturating_sub(g0) <= self.longest
    }

    /// The free range `[g0, g1)` may have grown: if it breaks the claim, the claim gives up
    /// the space below its top (raising `below` keeps every other range's part of it true).
    #[inline]
    pub fn freed(&mut self, g0: u64, g1: u64) {
        if !self.holds(g0, g1) {
            self.below = g1.min(self.hi);
        }
    }

    /// [`TopDownHint::freed`] on the two free ranges beside `v[j]` (`v` in order, with what lies
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

    /// [`TopDownHint::freed`] on every free range touching the mappings `v` (in order, with
    /// what lies beside them): after an edit that may have moved any of their bounds.
    pub fn freed_around(&mut self, v: &[super::super::Vma], prev_end: Option<u64>, next_start: Option<u64>) {
        if self.below >= self.hi {
            // It says nothing: nothing can break it.
            return;
        }
        // Only a range ending above `below` can break it: those ending at the starts from the
        // first mapping starting above `below` on, and the one above the last. Most of them
        // (in a run of mappings with nothing between them) are no longer than `longest`, which
        // one subtraction shows.
        let from = v.partition_point(|w| w.start <= self.below);
        let mut g0 = match from.checked_sub(1) {
            Some(k) => v[k].end,
            None => prev_end.unwrap_or(0),
        };
        for w in &v[from..] {
            if w.start - g0 > self.longest {
                self.freed(g0, w.start);
            }
            g0 = w.end;
        }
        self.freed(g0, next_start.unwrap_or(u64::MAX));
    }
}

/// The first fit of `q` in a free range strictly between two mappings of the subtree `node`,
/// in `q`'s order.
pub fn search(node: &Node, q: &GapQuery) -> Option<u64> {
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

fn search_leaf(l: &Leaf, q: &GapQuery) -> Option<u64> {
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
                    && let Some(x) = q.place(g0, g1)
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
                    && let Some(x) = q.place(g0, g1)
                {
                    return Some(x);
                }
            }
        }
    }
    None
}

fn search_branch(b: &Branch, q: &GapQuery) -> Option<u64> {
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
        if candidate(q, g0, g1) { q.place(g0, g1) } else { None }
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
