//! The address-space allocator: the set of mappings (VMAs) in an AVL tree augmented with the
//! largest free gap of every subtree.
//!
//! Why augmented: every placement question the kernel asks (lowest fit, highest fit, an aligned
//! fit, a fit that crosses no 1 GiB line, the fit nearest a target) is "the first free gap, in
//! address order or in reverse, that can hold the request inside a domain". With each node storing
//! the leftmost start, the rightmost end and the largest gap *between* the mappings of its subtree,
//! a search skips every subtree whose largest gap is too small, so it visits O(log n) nodes: the
//! idea of Linux's old `rb_subtree_gap` and of the maple tree's gap tracking. The gaps are kept
//! subtree-local (between two mappings of the same subtree) rather than "gap before this node", so
//! inserting or removing a mapping never has to fix its neighbour's value: rotations and the
//! ordinary path update keep everything exact.
//!
//! Cost of a search: for page-aligned requests, a subtree that lies wholly inside the domain (and
//! outside the excluded range) and whose largest gap is at least `len` is guaranteed to hold a fit,
//! so only the O(log n) subtrees that straddle a domain edge are entered without success:
//! O(log n). A stronger alignment or the no-crossing filter is checked exactly on each candidate
//! gap; a gap that is large enough but fails that check costs one more step (Linux instead
//! searches for `len + align - page`, which is O(log n) but may miss an exactly aligned fit).
//!
//! Memory: no operation here can panic for want of heap. A node comes from a small pool of spare
//! nodes ([`VmaTree::reserve`] fills it fallibly, a removal refills it), so a caller that must
//! change several mappings as one step reserves first and then cannot fail half-way; a plain
//! [`VmaTree::insert`] allocates fallibly. The in-order iterator keeps its path in a fixed array.

use alloc::boxed::Box;
use core::cmp::max;

use super::{Advice, Errno, PAGE, Prot, Vma, VmaFlags, fallible};

/// Most spare nodes kept after removals: twice what one [`super::VmMap`] call reserves, so
/// that a call using its whole reservation (a split: two new nodes) and the next giving the
/// nodes back (the merge that undoes it) neither allocate nor free in turn.
pub const SPARE_CAP: usize = 2 * super::map::SPARES;

/// Height bound of an AVL tree of at most 2^64 nodes (1.44 log2 n), for the iterator's path.
const MAX_HEIGHT: usize = 96;

type Link = Option<Box<Node>>;

struct Node {
    vma: Vma,
    height: u8,
    /// Start of the leftmost mapping of the subtree.
    lo: u64,
    /// End of the rightmost mapping of the subtree.
    hi: u64,
    /// Largest gap between two consecutive mappings of the subtree (0 for one mapping).
    gap: u64,
    left: Link,
    right: Link,
}

impl Node {
    const fn leaf(vma: Vma) -> Self {
        Node { lo: vma.start, hi: vma.end, gap: 0, height: 1, vma, left: None, right: None }
    }

    /// Recomputes the augmented values and the height from the children; returns whether any
    /// of them changed and the balance factor (left height less right height). Callers stop
    /// walking up as soon as nothing changed: the values of a node depend only on its record
    /// and its children's values.
    #[inline]
    fn update(&mut self) -> (bool, i32) {
        let (mut lo, mut hi, mut gap, mut hl, mut hr) = (self.vma.start, self.vma.end, 0, 0, 0);
        if let Some(l) = self.left.as_deref() {
            lo = l.lo;
            gap = max(l.gap, self.vma.start - l.hi);
            hl = l.height;
        }
        if let Some(r) = self.right.as_deref() {
            hi = r.hi;
            gap = max(gap, max(r.gap, r.lo - self.vma.end));
            hr = r.height;
        }
        let height = 1 + max(hl, hr);
        let changed = (lo, hi, gap, height) != (self.lo, self.hi, self.gap, self.height);
        (self.lo, self.hi, self.gap, self.height) = (lo, hi, gap, height);
        (changed, i32::from(hl) - i32::from(hr))
    }

    fn balance_factor(&self) -> i32 {
        let h = |l: &Link| l.as_ref().map_or(0, |n| i32::from(n.height));
        h(&self.left) - h(&self.right)
    }
}

fn rotate_right(mut n: Box<Node>) -> Box<Node> {
    let Some(mut l) = n.left.take() else { return n };
    n.left = l.right.take();
    n.update();
    l.right = Some(n);
    l.update();
    l
}

fn rotate_left(mut n: Box<Node>) -> Box<Node> {
    let Some(mut r) = n.right.take() else { return n };
    n.right = r.left.take();
    n.update();
    r.left = Some(n);
    r.update();
    r
}

/// Restores the node in `link` after a change below it: its values, and the AVL balance by one
/// or two rotations. Returns whether the subtree's values (or its root) changed, so that the
/// caller above knows whether to look at itself.
#[inline]
fn fix(link: &mut Link) -> bool {
    let Some(n) = link.as_deref_mut() else { return false };
    let (changed, bf) = n.update();
    if (-1..=1).contains(&bf) {
        return changed;
    }
    rotate(link, bf);
    true
}

/// The rotations of [`fix`], out of line: most fixes need none.
#[cold]
#[inline(never)]
fn rotate(link: &mut Link, bf: i32) {
    let Some(mut n) = link.take() else { return };
    if bf > 1 {
        if n.left.as_ref().is_some_and(|l| l.balance_factor() < 0) {
            n.left = n.left.take().map(rotate_left);
        }
        *link = Some(rotate_right(n));
    } else {
        if n.right.as_ref().is_some_and(|r| r.balance_factor() > 0) {
            n.right = n.right.take().map(rotate_right);
        }
        *link = Some(rotate_left(n));
    }
}

/// Links the leaf `new` (a fresh node with no children) into the subtree; returns whether the
/// subtree's values changed.
fn insert(link: &mut Link, new: Box<Node>) -> bool {
    let Some(n) = link.as_deref_mut() else {
        *link = Some(new);
        return true;
    };
    let child = if new.vma.start < n.vma.start { &mut n.left } else { &mut n.right };
    insert(child, new) && fix(link)
}

/// Unlinks the leftmost node of a non-empty subtree and returns it (children detached).
fn take_min(link: &mut Link) -> Option<Box<Node>> {
    let n = link.as_deref_mut()?;
    if n.left.is_some() {
        let min = take_min(&mut n.left);
        fix(link);
        return min;
    }
    let mut min = link.take()?;
    *link = min.right.take();
    Some(min)
}

/// Unlinks the node starting at `start`; it comes back in `out` (children detached). Returns
/// whether the subtree's values changed.
fn remove(link: &mut Link, start: u64, out: &mut Link) -> bool {
    let Some(n) = link.as_deref_mut() else { return false };
    if start != n.vma.start {
        let child = if start < n.vma.start { &mut n.left } else { &mut n.right };
        return remove(child, start, out) && fix(link);
    }
    let Some(mut node) = link.take() else { return false };
    *link = match (node.left.take(), node.right.take()) {
        (None, r) => r,
        (l, None) => l,
        (l, Some(r)) => {
            let mut rest = Some(r);
            let successor = take_min(&mut rest);
            let mut sub = successor.map(|mut m| {
                m.left = l;
                m.right = rest;
                m
            });
            fix(&mut sub);
            sub
        }
    };
    *out = Some(node);
    true
}

/// Replaces the record of the node starting at `start` by `vma` (same order, no overlap: the
/// caller's promise), fixing the values up the path only as far as they change. Returns `None`
/// when no node starts at `start`, else whether the subtree's values changed.
fn replace(link: &mut Link, start: u64, vma: Vma) -> Option<bool> {
    let n = link.as_deref_mut()?;
    if start != n.vma.start {
        let child = if start < n.vma.start { &mut n.left } else { &mut n.right };
        return Some(replace(child, start, vma)? && n.update().0);
    }
    let moved = (n.vma.start, n.vma.end) != (vma.start, vma.end);
    n.vma = vma;
    Some(moved && n.update().0)
}

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
    fn place(&self, g0: u64, g1: u64) -> Option<u64> {
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
    fn prune(&self, r0: u64, r1: u64) -> bool {
        r1 <= self.lo || r0 >= self.hi || self.exclude.is_some_and(|(x0, x1)| x0 <= r0 && r1 <= x1)
    }
}

fn search(link: &Link, r0: u64, r1: u64, q: &GapQuery) -> Option<u64> {
    let Some(n) = link else { return q.place(r0, r1) };
    if q.prune(r0, r1) {
        return None;
    }
    // The free edges of the region count only as far as they lie inside the query's domain.
    let edges = max(n.lo.saturating_sub(max(r0, q.lo)), r1.min(q.hi).saturating_sub(n.hi));
    let biggest = max(n.gap, edges);
    if biggest < q.len {
        return None;
    }
    match q.dir {
        Dir::Lowest => search(&n.left, r0, n.vma.start, q).or_else(|| search(&n.right, n.vma.end, r1, q)),
        Dir::Highest => search(&n.right, n.vma.end, r1, q).or_else(|| search(&n.left, r0, n.vma.start, q)),
    }
}

/// The set of mappings: sorted by address, pairwise disjoint, with the free gaps between them
/// indexed for O(log n) searches.
///
/// This level does no merging and no policy: [`super::VmMap`] does both. All addresses are
/// page-aligned and every mapping is non-empty.
#[derive(Default)]
pub struct VmaTree {
    root: Link,
    count: usize,
    /// Spare nodes, chained through `left`.
    spare: Link,
    spares: usize,
}

impl VmaTree {
    /// An empty tree.
    pub const fn new() -> Self {
        VmaTree { root: None, count: 0, spare: None, spares: 0 }
    }

    /// Makes sure the next `nodes` insertions need no allocation: allocates the missing spare
    /// nodes now, fallibly.
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold them (the tree is unchanged; spares already made stay).
    pub fn reserve(&mut self, nodes: usize) -> Result<(), Errno> {
        let filler =
            Vma { start: 0, end: 0, prot: Prot::NONE, flags: VmaFlags::empty(), advice: Advice::Normal };
        while self.spares < nodes {
            let node = fallible::boxed(Node::leaf(filler)).ok_or(Errno::ENOMEM)?;
            self.put_spare(node);
        }
        Ok(())
    }

    /// Spare nodes available (each insertion uses one, each removal gives one back).
    pub fn spares(&self) -> usize {
        self.spares
    }

    fn put_spare(&mut self, mut node: Box<Node>) {
        node.right = None;
        node.left = self.spare.take();
        self.spare = Some(node);
        self.spares += 1;
    }

    fn take_spare(&mut self) -> Option<Box<Node>> {
        let mut node = self.spare.take()?;
        self.spare = node.left.take();
        self.spares -= 1;
        Some(node)
    }

    /// Number of mappings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there is no mapping.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Inserts a mapping, in a spare node if there is one, else in a new one. The caller
    /// guarantees it overlaps none (checked in debug builds).
    ///
    /// # Errors
    /// `ENOMEM` when there is no spare node and the heap cannot hold a new one (nothing changed).
    pub fn insert(&mut self, vma: Vma) -> Result<(), Errno> {
        debug_assert!(vma.start < vma.end && vma.start.is_multiple_of(PAGE) && vma.end.is_multiple_of(PAGE));
        debug_assert!(self.first_overlap(vma.start, vma.end).is_none(), "overlapping insert {vma:?}");
        let node = match self.take_spare() {
            Some(mut node) => {
                *node = Node::leaf(vma);
                node
            }
            None => fallible::boxed(Node::leaf(vma)).ok_or(Errno::ENOMEM)?,
        };
        insert(&mut self.root, node);
        self.count += 1;
        Ok(())
    }

    /// Removes the mapping that starts at `start`, if any; its node becomes a spare (up to a few).
    pub fn remove(&mut self, start: u64) -> Option<Vma> {
        let mut out = None;
        remove(&mut self.root, start, &mut out);
        let node = out?;
        self.count -= 1;
        let vma = node.vma;
        if self.spares < SPARE_CAP {
            self.put_spare(node);
        }
        Some(vma)
    }

    /// Rewrites the mapping that starts at `start` as `vma` in place: its attributes, and its
    /// bounds as long as it stays between its neighbours (the caller guarantees that; checked in
    /// debug builds). No node is allocated, freed or moved; the augmented values are fixed up the
    /// path only as far as they change (not at all when the bounds stay). Returns whether a
    /// mapping started at `start`.
    pub fn replace(&mut self, start: u64, vma: Vma) -> bool {
        debug_assert!(vma.start < vma.end && vma.start.is_multiple_of(PAGE) && vma.end.is_multiple_of(PAGE));
        debug_assert!(
            self.last_starting_before(start).is_none_or(|p| p.end <= vma.start)
                && self
                    .first_ending_after(start)
                    .filter(|n| n.start > start)
                    .is_none_or(|n| vma.end <= n.start),
            "in-place rewrite of {start:#x} as {vma:?} overlaps a neighbour"
        );
        replace(&mut self.root, start, vma).is_some()
    }

    /// The neighbours of the free position `addr`: the highest mapping starting below it and
    /// the lowest starting at or above it, in one descent.
    pub fn neighbours(&self, addr: u64) -> (Option<&Vma>, Option<&Vma>) {
        let mut cur = &self.root;
        let (mut prev, mut next) = (None, None);
        while let Some(n) = cur {
            if n.vma.start < addr {
                prev = Some(&n.vma);
                cur = &n.right;
            } else {
                next = Some(&n.vma);
                cur = &n.left;
            }
        }
        (prev, next)
    }

    /// The mapping containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Vma> {
        let mut cur = &self.root;
        while let Some(n) = cur {
            if addr < n.vma.start {
                cur = &n.left;
            } else if addr >= n.vma.end {
                cur = &n.right;
            } else {
                return Some(&n.vma);
            }
        }
        None
    }

    /// The lowest mapping that ends above `addr` (the one containing it, or the next one).
    pub fn first_ending_after(&self, addr: u64) -> Option<&Vma> {
        let mut cur = &self.root;
        let mut best = None;
        while let Some(n) = cur {
            if n.vma.end > addr {
                best = Some(&n.vma);
                cur = &n.left;
            } else {
                cur = &n.right;
            }
        }
        best
    }

    /// The highest mapping that starts below `addr`.
    pub fn last_starting_before(&self, addr: u64) -> Option<&Vma> {
        let mut cur = &self.root;
        let mut best = None;
        while let Some(n) = cur {
            if n.vma.start < addr {
                best = Some(&n.vma);
                cur = &n.right;
            } else {
                cur = &n.left;
            }
        }
        best
    }

    /// The lowest mapping overlapping `[start, end)`.
    pub fn first_overlap(&self, start: u64, end: u64) -> Option<&Vma> {
        self.first_ending_after(start).filter(|v| v.start < end)
    }

    /// Whether `[start, end)` is wholly free.
    pub fn is_free(&self, start: u64, end: u64) -> bool {
        self.first_overlap(start, end).is_none()
    }

    /// The mappings overlapping `[start, end)`, in address order (O(log n + k)).
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold the list.
    pub fn overlapping(&self, start: u64, end: u64) -> Result<fallible::List<Vma, 2>, Errno> {
        let mut out = fallible::List::new();
        for v in self.iter_from(start).take_while(|v| v.start < end) {
            out.push(*v)?;
        }
        Ok(out)
    }

    /// Every mapping, in address order.
    pub fn iter(&self) -> Iter<'_> {
        let mut it = Iter { stack: [None; MAX_HEIGHT], depth: 0 };
        it.push_left(&self.root);
        it
    }

    /// The mappings that end above `addr`, in address order (O(log n) to start).
    pub fn iter_from(&self, addr: u64) -> Iter<'_> {
        // The path to the first node ending above `addr`: every node where the walk went left is
        // still to be visited (it and its right subtree come after what lies to its left).
        let mut it = Iter { stack: [None; MAX_HEIGHT], depth: 0 };
        let mut cur = &self.root;
        while let Some(n) = cur {
            if n.vma.end > addr {
                it.push(n);
                cur = &n.left;
            } else {
                cur = &n.right;
            }
        }
        it
    }

    /// The free placement `q` asks for, in one O(log n) walk (see the module comment).
    pub fn find_gap(&self, q: &GapQuery) -> Option<u64> {
        if q.len == 0 || q.hi <= q.lo || q.hi - q.lo < q.len {
            return None;
        }
        search(&self.root, 0, u64::MAX, q)
    }

    /// Checks every invariant: order, disjointness, alignment, balance and the augmented values.
    /// Panics with a description on the first violation.
    pub fn check(&self) {
        fn walk(l: &Link, prev_end: &mut Option<u64>, count: &mut usize) -> (u8, u64, u64, u64) {
            let Some(n) = l else { return (0, 0, 0, 0) };
            let (hl, lol, hil, gl) = walk(&n.left, prev_end, count);
            let v = &n.vma;
            assert!(v.start < v.end, "empty mapping {v:?}");
            assert!(v.start % PAGE == 0 && v.end % PAGE == 0, "unaligned {v:?}");
            if let Some(pe) = *prev_end {
                assert!(pe <= v.start, "overlap or disorder at {v:?}");
            }
            *prev_end = Some(v.end);
            *count += 1;
            let (hr, lor, hir, gr) = walk(&n.right, prev_end, count);
            let lo = if n.left.is_some() { lol } else { v.start };
            let hi = if n.right.is_some() { hir } else { v.end };
            let mut gap = 0;
            if n.left.is_some() {
                gap = max(gl, v.start - hil);
            }
            if n.right.is_some() {
                gap = max(gap, max(gr, lor - v.end));
            }
            assert_eq!((n.lo, n.hi, n.gap), (lo, hi, gap), "augmented values at {v:?}");
            assert!(hl.abs_diff(hr) <= 1, "unbalanced at {v:?}");
            assert_eq!(n.height, 1 + max(hl, hr), "height at {v:?}");
            (n.height, lo, hi, gap)
        }
        let mut count = 0;
        walk(&self.root, &mut None, &mut count);
        assert_eq!(count, self.count, "count");
    }
}

/// In-order iterator over a [`VmaTree`]; its path lives in a fixed array (no allocation).
pub struct Iter<'a> {
    stack: [Option<&'a Node>; MAX_HEIGHT],
    depth: usize,
}

impl<'a> Iter<'a> {
    fn push(&mut self, n: &'a Node) {
        // An AVL tree's height stays below MAX_HEIGHT for any node count a u64 can hold.
        if let Some(slot) = self.stack.get_mut(self.depth) {
            *slot = Some(n);
            self.depth += 1;
        }
    }

    fn push_left(&mut self, mut l: &'a Link) {
        while let Some(n) = l {
            self.push(n);
            l = &n.left;
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Vma;
    fn next(&mut self) -> Option<&'a Vma> {
        self.depth = self.depth.checked_sub(1)?;
        let n = self.stack[self.depth].take()?;
        self.push_left(&n.right);
        Some(&n.vma)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{Advice, Prot, VmaFlags};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    fn vma(s: u64, e: u64) -> Vma {
        Vma {
            start: s * PAGE,
            end: e * PAGE,
            prot: Prot::READ,
            flags: VmaFlags::empty(),
            advice: Advice::Normal,
        }
    }

    /// Brute force over a sorted model: every page-aligned `x` in order, first that fits.
    fn oracle(model: &BTreeMap<u64, u64>, q: &GapQuery) -> Option<u64> {
        let free = |s: u64, e: u64| model.iter().all(|(&a, &b)| b <= s || a >= e);
        let ok = |x: u64| {
            x.is_multiple_of(q.align)
                && x >= q.lo
                && x + q.len <= q.hi
                && q.no_cross.is_none_or(|b| q.len > b || x / b == (x + q.len - 1) / b)
                && q.exclude.is_none_or(|(x0, x1)| x + q.len <= x0 || x >= x1)
                && free(x, x + q.len)
        };
        let pages = (q.lo / PAGE)..=(q.hi / PAGE);
        match q.dir {
            Dir::Lowest => pages.map(|p| p * PAGE).find(|&x| ok(x)),
            Dir::Highest => pages.rev().map(|p| p * PAGE).find(|&x| ok(x)),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn gap_search_matches_brute_force(
            ops in proptest::collection::vec((0u64..200, 1u64..8, any::<bool>()), 1..60),
            lo in 0u64..200, span in 1u64..220, len in 1u64..12,
            align_log in 0u32..4, cross in proptest::option::of(2u32..5),
            excl in proptest::option::of((0u64..200, 1u64..40)), highest in any::<bool>(),
        ) {
            let mut t = VmaTree::new();
            let mut model = BTreeMap::new();
            for (s, l, del) in ops {
                if del {
                    if let Some(v) = t.first_ending_after(s * PAGE).copied() {
                        t.remove(v.start);
                        model.remove(&v.start);
                    }
                } else if t.is_free(s * PAGE, (s + l) * PAGE) {
                    t.insert(vma(s, s + l)).unwrap();
                    model.insert(s * PAGE, (s + l) * PAGE);
                }
                t.check();
            }
            let listed: Vec<_> = t.iter().map(|v| (v.start, v.end)).collect();
            let expected: Vec<_> = model.iter().map(|(&a, &b)| (a, b)).collect();
            prop_assert_eq!(listed, expected);
            let q = GapQuery {
                lo: lo * PAGE, hi: (lo + span) * PAGE, len: len * PAGE, align: PAGE << align_log,
                no_cross: cross.map(|c| PAGE << c),
                exclude: excl.map(|(a, l)| (a * PAGE, (a + l) * PAGE)),
                dir: if highest { Dir::Highest } else { Dir::Lowest },
            };
            prop_assert_eq!(t.find_gap(&q), oracle(&model, &q));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// In-place rewrites (bounds moved within the neighbours, attributes changed) keep the
        /// order, the balance and every augmented value exact, and `neighbours` agrees with a
        /// sorted model.
        #[test]
        fn in_place_rewrites_keep_every_invariant(
            starts in proptest::collection::vec((0u64..300, 1u64..6), 1..60),
            edits in proptest::collection::vec((0u64..300, 0u64..8, 0u64..8, any::<bool>()), 1..40),
            probes in proptest::collection::vec(0u64..310, 1..10),
        ) {
            let mut t = VmaTree::new();
            let mut model = BTreeMap::new();
            for (s, l) in starts {
                if t.is_free(s * PAGE, (s + l) * PAGE) {
                    t.insert(vma(s, s + l)).unwrap();
                    model.insert(s * PAGE, (s + l) * PAGE);
                }
            }
            for (at, lo_shift, hi_shift, write) in edits {
                let Some(v) = t.first_ending_after(at * PAGE).copied() else { continue };
                let floor = t.last_starting_before(v.start).map_or(0, |p| p.end);
                let ceil = t.first_ending_after(v.end).map_or(400 * PAGE, |n| n.start);
                // Some start in [floor, end), some end in (start, ceil].
                let start = v.start.saturating_sub(lo_shift * PAGE).max(floor).min(v.end - PAGE);
                let start = if lo_shift % 2 == 1 { (start + lo_shift * PAGE).min(v.end - PAGE) } else { start };
                let end = (v.end + hi_shift * PAGE).min(ceil).max(start + PAGE);
                let prot = if write { Prot::RW } else { Prot::READ };
                let edited = t.replace(v.start, Vma { start, end, prot, ..v });
                prop_assert!(edited);
                model.remove(&v.start);
                model.insert(start, end);
                t.check();
                prop_assert_eq!(t.find(start).map(|f| f.prot), Some(prot));
            }
            let listed: Vec<_> = t.iter().map(|v| (v.start, v.end)).collect();
            let expected: Vec<_> = model.iter().map(|(&a, &b)| (a, b)).collect();
            prop_assert_eq!(listed, expected);
            prop_assert!(!t.replace(401 * PAGE, vma(401, 402)), "no mapping starts there");
            for p in probes {
                let a = p * PAGE;
                let (prev, next) = t.neighbours(a);
                let want_prev = model.range(..a).next_back().map(|(&s, &e)| (s, e));
                let want_next = model.range(a..).next().map(|(&s, &e)| (s, e));
                prop_assert_eq!(prev.map(|v| (v.start, v.end)), want_prev);
                prop_assert_eq!(next.map(|v| (v.start, v.end)), want_next);
            }
        }
    }

    #[test]
    fn edges_of_the_address_space_do_not_overflow() {
        let mut t = VmaTree::new();
        let top = !(PAGE - 1);
        t.insert(Vma { start: top - 3 * PAGE, end: top - PAGE, ..vma(1, 2) }).unwrap();
        t.check();
        let q = GapQuery::new(top - 8 * PAGE, top, PAGE, Dir::Highest);
        assert_eq!(t.find_gap(&q), Some(top - PAGE));
        let q = GapQuery::new(0, 4 * PAGE, 4 * PAGE, Dir::Lowest);
        assert_eq!(t.find_gap(&q), Some(0));
        let q = GapQuery { align: 1 << 63, ..GapQuery::new(1, u64::MAX, PAGE, Dir::Lowest) };
        assert_eq!(t.find_gap(&q), Some(1 << 63));
    }
}
