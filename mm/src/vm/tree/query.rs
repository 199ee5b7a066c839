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
    // between them is passed over at a few instructions a pair.
    let pairs = l.vmas().windows(2);
    let gap = |w: &[super::super::Vma]| (w[0].end, w[1].start);
    match q.dir {
        Dir::Lowest => {
            for (g0, g1) in pairs.map(gap) {
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
            for (g0, g1) in pairs.rev().map(gap) {
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
    // The quick test first: most children (a run of mappings with no gap of `len` between
    // them) hold no gap of `len` and have none on the side scanned next, and are passed over
    // with three comparisons instead of the closures' checks.
    let n = b.len;
    let (lo, hi, gap) = (&b.lo[..n], &b.hi[..n], &b.gap[..n]);
    match q.dir {
        Dir::Lowest => {
            for i in 0..n {
                if gap[i] < q.len && lo[i] < q.hi && (i == 0 || lo[i] - hi[i - 1] < q.len) {
                    continue;
                }
                if b.lo[i] >= q.hi {
                    // Only the range below this child can still be in the domain.
                    return if i > 0 { between(i) } else { None };
                }
                if let Some(x) = (i > 0).then(|| between(i)).flatten().or_else(|| inside(i)) {
                    return Some(x);
                }
            }
        }
        Dir::Highest => {
            for i in (0..n).rev() {
                if gap[i] < q.len && hi[i] > q.lo && (i + 1 == n || lo[i + 1] - hi[i] < q.len) {
                    continue;
                }
                if b.hi[i] <= q.lo {
                    return if i + 1 < b.len { between(i + 1) } else { None };
                }
                if let Some(x) = (i + 1 < b.len).then(|| between(i + 1)).flatten().or_else(|| inside(i)) {
                    return Some(x);
                }
            }
        }
    }
    None
}
