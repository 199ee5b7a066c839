//! The nodes of [`super::VmaTree`]: a B+tree whose leaves hold up to [`LEAF`] mappings in
//! address order and whose branches hold up to [`FAN`] children, each child with its summary
//! (start of its first mapping, end of its last, largest free gap between two of its mappings)
//! kept in the parent, in arrays.
//!
//! Why one file: the node types and every operation that changes their arrays (insertion with
//! splits, removal with merges and refills, the finger's leaf edits, the summary fix-ups) keep the
//! same invariants (fill bounds, summaries, the second-largest gap) on the same private fields;
//! split apart, each part would need those fields opened to the others.
//!
//! Why this shape: every operation of the area map descends from the root, and a descent through
//! a binary tree of 50,000 mappings visits about 20 nodes (each a likely cache miss, each a few
//! branches); here it visits 4 or 5, and at each it scans one array of keys that shares its cache
//! lines with the next key. The summaries live in the parent so that a gap search decides which
//! children to enter without reading them (as Linux's maple tree keeps its gaps in the parent's
//! slots). A change fixes the summaries up its path only as far as they change, and a fix-up at a
//! branch reads its whole array only when the largest gap shrank below the second largest, which
//! each branch keeps.
//!
//! Memory: a node never comes from the heap here. Every node a change needs is taken from a
//! [`Pool`] that the tree filled fallibly beforehand, and a node a change frees goes back to it.

use alloc::boxed::Box;
use core::cmp::max;

use super::super::Vma;
use super::query::Hints;

/// Most mappings in a leaf.
pub const LEAF: usize = 16;
/// Most children of a branch.
pub const FAN: usize = 16;
/// Fewest mappings in a leaf that is not the root.
pub const LEAF_MIN: usize = LEAF / 2;
/// Fewest children of a branch that is not the root (the root branch has at least two).
pub const FAN_MIN: usize = FAN / 2;

pub type Link = Option<Box<Node>>;

/// What a parent knows of a child subtree (never empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sum {
    /// Start of its first mapping.
    pub lo: u64,
    /// End of its last mapping.
    pub hi: u64,
    /// Largest free gap between two consecutive mappings of the subtree (0 for one mapping).
    pub gap: u64,
}

pub struct Leaf {
    pub len: usize,
    pub v: [Vma; LEAF],
}

pub struct Branch {
    pub len: usize,
    pub lo: [u64; FAN],
    pub hi: [u64; FAN],
    pub gap: [u64; FAN],
    /// The largest free gap in child `i` or just below it (between it and child `i - 1`):
    /// `max(gap[i], lo[i] - hi[i - 1])`, `gap[0]` for the first. Kept with the bounds so that
    /// a scan passes over a child that cannot help with one comparison, and so that the
    /// branch's largest gap is the largest of one array.
    pub room: [u64; FAN],
    /// The slot of a largest `room` (0 when empty), and the largest `room` of the other
    /// children (0 if none): the branch's largest gap is `room[top]`, read in one step, and a
    /// change that shrinks it (every mmap placed top-down shrinks the largest gap of each level
    /// of its path, by the page it takes) rescans the array only when it falls below `second`.
    pub top: usize,
    pub second: u64,
    pub child: [Link; FAN],
}

// Every node is one pool slot that may become either kind (`Pool::take`), so both kinds have
// the size of the larger; boxing the variants would add a pointer chase to every level.
#[allow(clippy::large_enum_variant)]
pub enum Node {
    Leaf(Leaf),
    Branch(Branch),
}

impl Leaf {
    pub fn new() -> Self {
        Leaf { len: 0, v: [Vma::default(); LEAF] }
    }

    pub fn vmas(&self) -> &[Vma] {
        &self.v[..self.len]
    }

    /// The summary, from every mapping (the leaf is not empty).
    pub fn sum(&self) -> Sum {
        let v = self.vmas();
        let gap = v.windows(2).fold(0, |g, w| max(g, w[1].start - w[0].end));
        Sum { lo: v.first().map_or(0, |f| f.start), hi: v.last().map_or(0, |l| l.end), gap }
    }

    /// The slot of the last mapping starting at or below `addr` (0 if none). Every search in
    /// a node is a binary search: four steps over 16 entries, against eight on average for a
    /// scan.
    pub fn route(&self, addr: u64) -> usize {
        self.vmas().partition_point(|v| v.start <= addr).saturating_sub(1)
    }

    /// The slot where a mapping starting at `start` goes (the number of mappings below it).
    pub fn slot(&self, start: u64) -> usize {
        self.vmas().partition_point(|v| v.start < start)
    }
}

impl Branch {
    pub fn new() -> Self {
        Branch {
            len: 0,
            lo: [0; FAN],
            hi: [0; FAN],
            gap: [0; FAN],
            room: [0; FAN],
            top: 0,
            second: 0,
            child: [const { None }; FAN],
        }
    }

    pub fn child_sum(&self, i: usize) -> Sum {
        Sum { lo: self.lo[i], hi: self.hi[i], gap: self.gap[i] }
    }

    /// Records child `i`'s summary (child `i - 1`'s is recorded, if any) and the `room` of
    /// child `i` and of the next child, if any.
    fn set(&mut self, i: usize, s: Sum) {
        (self.lo[i], self.hi[i], self.gap[i]) = (s.lo, s.hi, s.gap);
        self.set_room(i, self.room_of(i));
        if i + 1 < self.len {
            self.set_room(i + 1, self.room_of(i + 1));
        }
    }

    /// Sets `room[j]` and keeps `top` and `second` true from what they were, rescanning only
    /// when the change may have taken away the value one of them held. Inside a structural
    /// change (a split, a merge, a shift of the arrays) they may be left wrong for a moment:
    /// every such change ends with [`Branch::rescan`].
    #[inline]
    fn set_room(&mut self, j: usize, new: u64) {
        let old = self.room[j];
        self.room[j] = new;
        if old == new {
            return;
        }
        let top = self.room[self.top];
        if j == self.top {
            if new < self.second {
                self.rescan();
            }
        } else if new > top {
            if old == self.second {
                self.rescan();
            } else {
                // `second` is held by a child other than `j` and the old top: the old top is
                // the new second largest.
                (self.top, self.second) = (j, top);
            }
        } else if new >= self.second {
            self.second = new;
        } else if old == self.second {
            self.rescan();
        }
    }

    /// Recomputes `top` and `second` from the whole `room` array.
    pub fn rescan(&mut self) {
        let n = self.len;
        let (mut top, mut best, mut second) = (0, 0, 0);
        for (j, &r) in self.room[..n].iter().enumerate() {
            if r > best {
                (top, best, second) = (j, r, best);
            } else if r > second {
                second = r;
            }
        }
        // A tie for the largest: `second` equals it (the first is `top`).
        (self.top, self.second) = (top, second);
    }

    /// `room[i]` from the bounds and gaps. Saturating: while two siblings trade an entry, the
    /// first is recorded before the second, whose old start may lie below the first's new end
    /// for a moment; recording the second sets both right.
    #[inline]
    fn room_of(&self, i: usize) -> u64 {
        match i.checked_sub(1) {
            Some(p) => max(self.gap[i], self.lo[i].saturating_sub(self.hi[p])),
            None => self.gap[0],
        }
    }

    /// The summary (the branch is not empty): the largest gap is the largest `room`, kept in
    /// `top`.
    pub fn sum(&self) -> Sum {
        let n = self.len;
        Sum { lo: self.lo[0], hi: self.hi[n.saturating_sub(1)], gap: self.room[self.top] }
    }

    /// Child `i` now has the summary `new`: records it and returns this branch's summary. The
    /// whole array is read only when the largest gap shrank below the second largest.
    fn update(&mut self, i: usize, new: Sum) -> Sum {
        self.set(i, new);
        self.sum()
    }

    /// What lies beside child `i`, from what lies beside this branch (`outer`): the summaries
    /// of its siblings.
    #[inline]
    fn beside(&self, i: usize, outer: Beside) -> Beside {
        Beside {
            prev_end: if i > 0 { Some(self.hi[i - 1]) } else { outer.prev_end },
            next_start: if i + 1 < self.len { Some(self.lo[i + 1]) } else { outer.next_start },
        }
    }

    /// The child holding the last mapping starting at or below `addr` (0 if none).
    pub fn route(&self, addr: u64) -> usize {
        self.lo[..self.len].partition_point(|&lo| lo <= addr).saturating_sub(1)
    }

    /// The number of children starting below `addr`.
    pub fn below(&self, addr: u64) -> usize {
        self.lo[..self.len].partition_point(|&lo| lo < addr)
    }

    /// The first child ending above `addr` (`len` if none).
    pub fn ending_after(&self, addr: u64) -> usize {
        self.hi[..self.len].partition_point(|&hi| hi <= addr)
    }

    /// Inserts child `c` with summary `s` at `i` (the branch has room).
    pub fn insert_at(&mut self, i: usize, s: Sum, c: Box<Node>) {
        let n = self.len;
        self.lo.copy_within(i..n, i + 1);
        self.hi.copy_within(i..n, i + 1);
        self.gap.copy_within(i..n, i + 1);
        self.room.copy_within(i..n, i + 1);
        self.child[i..=n].rotate_right(1);
        self.len += 1;
        self.set(i, s);
        self.child[i] = Some(c);
        self.rescan();
    }

    /// Takes child `i` out (returns its node).
    fn remove_at(&mut self, i: usize) -> Link {
        let n = self.len;
        self.lo.copy_within(i + 1..n, i);
        self.hi.copy_within(i + 1..n, i);
        self.gap.copy_within(i + 1..n, i);
        self.room.copy_within(i + 1..n, i);
        let c = self.child[i].take();
        self.child[i..n].rotate_left(1);
        self.len -= 1;
        // The child now at `i` has a new neighbour below.
        if i < self.len {
            self.room[i] = self.room_of(i);
        }
        self.rescan();
        c
    }
}

impl Node {
    pub fn sum(&self) -> Sum {
        match self {
            Node::Leaf(l) => l.sum(),
            Node::Branch(b) => b.sum(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Node::Leaf(l) => l.len,
            Node::Branch(b) => b.len,
        }
    }

    fn cap(&self) -> usize {
        match self {
            Node::Leaf(_) => LEAF,
            Node::Branch(_) => FAN,
        }
    }

    fn is_full(&self) -> bool {
        self.len() == self.cap()
    }

    fn underfull(&self) -> bool {
        match self {
            Node::Leaf(l) => l.len < LEAF_MIN,
            Node::Branch(b) => b.len < FAN_MIN,
        }
    }
}

/// Spare nodes, chained through the first child of a childless branch.
#[derive(Default)]
pub struct Pool {
    head: Link,
    /// Spare nodes held.
    pub n: usize,
    /// Nodes that left the tree through [`Pool::release`] since the owner last looked.
    pub released: usize,
}

impl Pool {
    pub const fn new() -> Self {
        Pool { head: None, n: 0, released: 0 }
    }

    /// Takes back a node that left the tree: kept as a spare while fewer than `cap` are, else
    /// freed.
    pub fn release(&mut self, node: Box<Node>, cap: usize) {
        self.released += 1;
        if self.n < cap {
            self.put(node);
        }
    }

    pub fn put(&mut self, mut node: Box<Node>) {
        let mut b = Branch::new();
        b.child[0] = self.head.take();
        *node = Node::Branch(b);
        self.head = Some(node);
        self.n += 1;
    }

    /// Frees spare nodes beyond `cap`.
    pub fn trim(&mut self, cap: usize) {
        while self.n > cap {
            let Some(mut spare) = self.head.take() else { return };
            if let Node::Branch(b) = &mut *spare {
                self.head = b.child[0].take();
            }
            self.n -= 1;
        }
    }

    /// A spare node, turned into `node`.
    pub fn take(&mut self, node: Node) -> Option<Box<Node>> {
        let mut spare = self.head.take()?;
        if let Node::Branch(b) = &mut *spare {
            self.head = b.child[0].take();
        }
        *spare = node;
        self.n -= 1;
        Some(spare)
    }
}

/// How many nodes inserting a mapping starting at `start` takes at most: the full nodes at the
/// bottom of its path that split, plus a new root if the whole path is full. A full child whose
/// sibling has room passes an entry to it instead of splitting ([`shift_out`]); only the first
/// such pass on the path is foreseen here, since it moves the subtree below to a parent whose
/// other children differ (below it a full node is counted as splitting).
pub fn nodes_needed(mut node: &Node, start: u64) -> usize {
    let (mut run, mut depth, mut shifts, mut shifted) = (0, 0, false, false);
    loop {
        depth += 1;
        run = if node.is_full() && !shifts { run + 1 } else { 0 };
        match node {
            Node::Leaf(_) => break,
            Node::Branch(b) => {
                let i = b.route(start);
                let Some(c) = b.child[i].as_deref() else { break };
                shifts = !shifted && c.is_full() && shift_target(b, i).is_some();
                shifted |= shifts;
                node = c;
            }
        }
    }
    if run == depth { run + 1 } else { run }
}

/// Inserts `v` into the subtree `node`: returns its new summary and, if it split, the new right
/// sibling with its summary. Takes its nodes from `pool`, which holds at least [`nodes_needed`]
/// of them.
pub fn insert(node: &mut Node, v: Vma, pool: &mut Pool) -> (Sum, Option<(Sum, Box<Node>)>) {
    match node {
        Node::Leaf(l) => {
            let k = l.slot(v.start);
            if l.len < LEAF {
                l.v.copy_within(k..l.len, k + 1);
                l.v[k] = v;
                l.len += 1;
                return (l.sum(), None);
            }
            // Split 9 / 8 after placing `v` among the 17.
            let mut all = [Vma::default(); LEAF + 1];
            all[..k].copy_from_slice(&l.v[..k]);
            all[k] = v;
            all[k + 1..].copy_from_slice(&l.v[k..]);
            let keep = LEAF / 2 + 1;
            let mut right = Leaf::new();
            right.len = LEAF + 1 - keep;
            right.v[..right.len].copy_from_slice(&all[keep..]);
            l.v[..keep].copy_from_slice(&all[..keep]);
            l.len = keep;
            let rs = right.sum();
            let split = pool.take(Node::Leaf(right)).map(|n| (rs, n));
            debug_assert!(split.is_some(), "the pool held the nodes an insertion needs");
            (l.sum(), split)
        }
        Node::Branch(b) => {
            let mut i = b.route(v.start);
            // A full child passes one entry to a sibling with room instead of splitting, so
            // that mappings placed one after another (top-down mmap) fill their nodes rather
            // than leave every node half full: fewer levels for the same count.
            if b.child[i].as_deref().is_some_and(Node::is_full) && shift_out(b, i) {
                i = b.route(v.start);
            }
            let Some(c) = b.child[i].as_deref_mut() else { return (b.sum(), None) };
            let (cs, split) = insert(c, v, pool);
            let Some((ss, sn)) = split else {
                return (b.update(i, cs), None);
            };
            b.set(i, cs);
            if b.len < FAN {
                b.insert_at(i + 1, ss, sn);
                return (b.sum(), None);
            }
            // Split 9 / 8 after placing the new child at i + 1 among the 17.
            let mut sums = [Sum { lo: 0, hi: 0, gap: 0 }; FAN + 1];
            let mut links: [Link; FAN + 1] = [const { None }; FAN + 1];
            let mut sn = Some(sn);
            let mut from = 0;
            for (j, (s, l)) in sums.iter_mut().zip(links.iter_mut()).enumerate() {
                if j == i + 1 {
                    (*s, *l) = (ss, sn.take());
                } else {
                    (*s, *l) = (b.child_sum(from), b.child[from].take());
                    from += 1;
                }
            }
            let keep = FAN / 2 + 1;
            let mut right = Branch::new();
            b.len = 0;
            for (j, (s, l)) in sums.into_iter().zip(links).enumerate() {
                let half = if j < keep { &mut *b } else { &mut right };
                half.set(half.len, s);
                half.child[half.len] = l;
                half.len += 1;
            }
            b.rescan();
            right.rescan();
            let rs = right.sum();
            let split = pool.take(Node::Branch(right)).map(|n| (rs, n));
            debug_assert!(split.is_some(), "the pool held the nodes an insertion needs");
            (b.sum(), split)
        }
    }
}

/// Where [`shift_out`] would move an entry of child `i` of `b`: the left one of the pair of
/// siblings, and whether to the right; `None` if neither sibling has room for two.
fn shift_target(b: &Branch, i: usize) -> Option<(usize, bool)> {
    let room = |j: usize| b.child[j].as_deref().is_some_and(|c| c.len() + 2 <= c.cap());
    if i + 1 < b.len && room(i + 1) {
        Some((i, true))
    } else if i > 0 && room(i - 1) {
        Some((i - 1, false))
    } else {
        None
    }
}

/// Child `i` of `b` is full: moves its last entry to the front of the next sibling, or its
/// first to the end of the previous one, whichever has room for two (so that the insertion
/// that follows finds room wherever it lands). Returns whether it moved one. The branch's own
/// summary is unchanged (the same mappings, the same gaps between them).
fn shift_out(b: &mut Branch, i: usize) -> bool {
    let Some((a, to_right)) = shift_target(b, i) else { return false };
    let (left, right) = b.child.split_at_mut(a + 1);
    let (Some(ln), Some(rn)) = (left[a].as_deref_mut(), right[0].as_deref_mut()) else { return false };
    match (ln, rn) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            if to_right {
                r.v.copy_within(0..r.len, 1);
                r.v[0] = l.v[l.len - 1];
                r.len += 1;
                l.len -= 1;
            } else {
                l.v[l.len] = r.v[0];
                l.len += 1;
                r.v.copy_within(1..r.len, 0);
                r.len -= 1;
            }
        }
        (Node::Branch(l), Node::Branch(r)) => {
            if to_right {
                let s = l.child_sum(l.len - 1);
                if let Some(c) = l.remove_at(l.len - 1) {
                    r.insert_at(0, s, c);
                }
            } else {
                let s = r.child_sum(0);
                if let Some(c) = r.remove_at(0) {
                    l.insert_at(l.len, s, c);
                }
            }
        }
        _ => return false,
    }
    let (Some(ln), Some(rn)) = (left[a].as_deref(), right[0].as_deref()) else { return false };
    let (ls, rs) = (ln.sum(), rn.sum());
    b.set(a, ls);
    b.set(a + 1, rs);
    true
}

/// What a descent knows of the mappings beside the leaf it reaches, from the summaries of the
/// siblings it passed: the end of the last mapping before the leaf and the start of the first
/// after it (`None`: no mapping on that side).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Beside {
    /// End of the nearest mapping below the leaf.
    pub prev_end: Option<u64>,
    /// Start of the nearest mapping above the leaf.
    pub next_start: Option<u64>,
}

/// The mappings just outside a leaf: the last one before it and the first one after it (what
/// [`Beside`] gives the bounds of). Kept as two areas and a mask rather than two `Option<Vma>`,
/// which the strict-alignment target copies byte by byte (see `Around`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outside {
    v: [Vma; 2],
    /// Bit `i` set: `v[i]` is there.
    present: u8,
}

impl Outside {
    /// Nothing outside (a tree of one leaf).
    pub const NONE: Outside = Outside { v: [Vma::EMPTY; 2], present: 0 };

    fn of(prev: Option<&Vma>, next: Option<&Vma>) -> Self {
        let slot = |v: Option<&Vma>| match v {
            Some(v) => *v,
            None => Vma::EMPTY,
        };
        Outside {
            v: [slot(prev), slot(next)],
            present: u8::from(prev.is_some()) | u8::from(next.is_some()) << 1,
        }
    }

    /// The last mapping before the leaf.
    pub fn prev(&self) -> Option<&Vma> {
        (self.present & 1 != 0).then(|| &self.v[0])
    }

    /// The first mapping after the leaf.
    pub fn next(&self) -> Option<&Vma> {
        (self.present & 2 != 0).then(|| &self.v[1])
    }
}

/// What an edit of a leaf's mappings ([`super::VmaTree::edit_leaf`]) did to their bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// No bound moved (attributes may have changed).
    Kept,
    /// The mapping at this slot grew into free space (and no other bound moved): no free range
    /// grew.
    Took(usize),
    /// The mapping at this slot shrank (and no other bound moved): the free ranges on either
    /// side of it grew.
    Freed(usize),
}

/// Branches a path from the root to a leaf can pass: a tree of `h` levels holds at least
/// `2 * LEAF_MIN * FAN_MIN^(h - 2)` mappings (every node but the root at least half full, the
/// root branch with two children), and there are at most 2^52 (page-aligned, non-empty,
/// disjoint mappings in 2^64 bytes, pages of 4 KiB at least), so `h <= 18`.
const PATH: usize = 24;

/// Where a leaf is: the child slots from the root down to it, and what lies beside it. Kept by
/// the tree after each leaf edit (its finger), so that the next edit of the same leaf follows
/// the slots instead of searching each level; valid until the tree's shape or another leaf's
/// bounds change (the tree drops it then).
///
/// It also keeps the mappings just outside the leaf ([`Outside`]). They stay true while it
/// names the leaf: a change of any other leaf either drops the finger (a change of bounds or
/// shape) or moves it there (an edit of attributes, which goes through the finger), and an
/// edit of this leaf changes nothing outside it. Test builds check every use of the finger
/// against a fresh descent, these copies included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finger {
    /// Whether it names a leaf.
    valid: bool,
    depth: usize,
    path: [u8; PATH],
    beside: Beside,
    outside: Outside,
}

impl Default for Finger {
    fn default() -> Self {
        Finger::NONE
    }
}

impl Finger {
    /// A finger that names no leaf.
    pub const NONE: Finger = Finger {
        valid: false,
        depth: 0,
        path: [0; PATH],
        beside: Beside { prev_end: None, next_start: None },
        outside: Outside::NONE,
    };

    /// Forgets the leaf (the tree's shape or another leaf's bounds may have changed).
    #[inline]
    pub fn forget(&mut self) {
        self.valid = false;
    }

    /// Whether a descent by `addr` ends in `leaf`, the leaf this finger names: `addr` lies
    /// from the leaf's first start (from 0 for the first leaf) to the next leaf's first start.
    /// At every level the path's child starts at or below the leaf and the next child at or
    /// above the next leaf, so the binary search of each level would pick the path's slot.
    #[inline]
    fn routes(&self, leaf: &Leaf, addr: u64) -> bool {
        let Some(first) = leaf.vmas().first() else { return false };
        (self.beside.prev_end.is_none() || first.start <= addr)
            && self.beside.next_start.is_none_or(|n| addr < n)
    }

    /// Whether it names a leaf and `addr` routes there.
    #[inline(always)]
    fn hits(&self, root: &Node, addr: u64) -> bool {
        self.valid
            && matches!(node_at(root, &self.path[..self.depth]), Some(Node::Leaf(l)) if self.routes(l, addr))
    }

    /// The leaf this finger names and what lies outside it, if `addr` routes there: for a
    /// look that needs no descent after an edit of that leaf.
    #[inline(always)]
    pub fn seen<'a>(&'a self, root: &'a Node, addr: u64) -> Option<(&'a Leaf, &'a Outside)> {
        if !self.valid {
            return None;
        }
        match node_at(root, &self.path[..self.depth])? {
            Node::Leaf(l) if self.routes(l, addr) => Some((l, &self.outside)),
            _ => None,
        }
    }

    /// The leaf where `addr` routes, for writing: by the slots when this finger names it,
    /// else by a descent, which this finger then names. Only a change that moves no bound
    /// may follow (it keeps the finger true). Always inlined: every leaf edit goes through it,
    /// and left to the compiler it was called out of line, about 35 instructions an edit more.
    #[inline(always)]
    pub fn leaf_for<'a>(&mut self, root: &'a mut Node, addr: u64) -> Option<&'a mut Leaf> {
        if !self.hits(root, addr) {
            self.locate(root, addr);
        }
        #[cfg(debug_assertions)]
        self.check(root, addr);
        match node_at_mut(root, &self.path[..self.depth])? {
            Node::Leaf(l) => Some(l),
            Node::Branch(_) => None,
        }
    }

    /// Test builds: that this finger names the leaf a descent by `addr` finds.
    #[cfg(debug_assertions)]
    fn check(&self, root: &Node, addr: u64) {
        let mut fresh = Finger::NONE;
        fresh.locate(root, addr);
        debug_assert_eq!(*self, fresh, "the finger names another leaf than the descent finds");
    }

    /// Names the leaf where `addr` routes, found by a binary search at each level.
    fn locate(&mut self, root: &Node, addr: u64) {
        // The whole path, so that slots past the depth (from a deeper tree) compare equal.
        (self.valid, self.depth, self.path, self.beside) = (true, 0, [0; PATH], Beside::default());
        // The subtrees beside the path nearest the leaf: where the mappings outside it are.
        let (mut left, mut right): (Option<&Node>, Option<&Node>) = (None, None);
        let mut cur = root;
        while let Node::Branch(b) = cur {
            let i = b.route(addr);
            self.beside = b.beside(i, self.beside);
            if i > 0 {
                left = b.child[i - 1].as_deref();
            }
            if i + 1 < b.len {
                right = b.child[i + 1].as_deref();
            }
            // In bounds: no tree has `PATH` levels (see `PATH`). `i < FAN <= 255`.
            self.path[self.depth] = i as u8;
            self.depth += 1;
            match b.child[i].as_deref() {
                Some(c) => cur = c,
                None => break,
            }
        }
        self.outside = Outside::of(left.and_then(last), right.and_then(first));
    }
}

/// The last mapping of a subtree.
pub(super) fn last(mut n: &Node) -> Option<&Vma> {
    loop {
        match n {
            Node::Branch(b) => n = b.child[b.len.checked_sub(1)?].as_deref()?,
            Node::Leaf(l) => return l.vmas().last(),
        }
    }
}

/// The first mapping of a subtree.
pub(super) fn first(mut n: &Node) -> Option<&Vma> {
    loop {
        match n {
            Node::Branch(b) => n = b.child[0].as_deref()?,
            Node::Leaf(l) => return l.vmas().first(),
        }
    }
}

/// The node reached from `node` through the child slots `path`.
#[inline(always)]
fn node_at<'a>(mut node: &'a Node, path: &[u8]) -> Option<&'a Node> {
    for &i in path {
        node = match node {
            Node::Branch(b) => b.child[usize::from(i)].as_deref()?,
            Node::Leaf(_) => return None,
        };
    }
    Some(node)
}

/// [`node_at`], for writing.
#[inline(always)]
fn node_at_mut<'a>(mut node: &'a mut Node, path: &[u8]) -> Option<&'a mut Node> {
    for &i in path {
        node = match node {
            Node::Branch(b) => b.child[usize::from(i)].as_deref_mut()?,
            Node::Leaf(_) => return None,
        };
    }
    Some(node)
}

/// Runs `f` on the mappings of the leaf where `addr` routes and what lies beside it; `f`
/// returns its answer and what it did to the bounds. The summaries of the tree under `root`
/// (whose summary was `old`) are fixed up the path only as far as they change, and `hint` is
/// told of the free ranges that grew or shrank; returns the answer and the new summary.
///
/// `finger` names the leaf of the last edit, unless it was forgotten (the tree changed since):
/// when `addr` routes to that leaf, the edit follows its slots instead of searching each level
/// (an mmap's merge into a mapping and the munmap that cuts it again are in one leaf);
/// otherwise it descends. It is left naming the leaf edited, with what
/// lies beside it, which `f` cannot change. A tree of one leaf does without it.
///
/// Why not recursive: the common mmap and munmap each make one such edit, and a recursive
/// descent passed `f` and returned the answer through every level. The finger keeps the slots
/// in a fixed array, and the fix-up finds each branch again from the root by them
/// (a few pointer steps: the tree is 4 or 5 levels deep with 50,000 mappings), stopping at the
/// first branch whose child's summary came out unchanged.
pub fn edit_leaf<R, F>(
    root: &mut Node,
    old: Sum,
    addr: u64,
    hint: &mut Hints,
    finger: &mut Finger,
    f: F,
) -> (R, Sum)
where
    F: FnOnce(&mut [Vma], Beside, &Outside) -> (R, Edit),
{
    // A tree of one leaf needs no finger.
    if let Node::Leaf(l) = root {
        let (r, edit) = edit_in(l, Beside::default(), &Outside::NONE, hint, f);
        return (r, if edit == Edit::Kept { old } else { l.sum() });
    }
    if !finger.hits(root, addr) {
        finger.locate(root, addr);
    }
    #[cfg(debug_assertions)]
    finger.check(root, addr);
    let (path, depth, beside) = (&finger.path, finger.depth, finger.beside);
    let Some(Node::Leaf(l)) = node_at_mut(root, &path[..depth]) else {
        finger.forget();
        return (f(&mut [], beside, &Outside::NONE).0, old);
    };
    let (r, edit) = edit_in(l, beside, &finger.outside, hint, f);
    if edit == Edit::Kept {
        return (r, old);
    }
    let mut s = l.sum();
    for d in (0..depth).rev() {
        let Some(b) = branch_at(root, &path[..d]) else { break };
        let i = usize::from(path[d]);
        if b.child_sum(i) == s {
            // Unchanged from here up.
            return (r, old);
        }
        s = b.update(i, s);
    }
    (r, s)
}

/// Runs the edit `f` on leaf `l` (with what lies beside it) and tells `hint` what it did to the
/// bounds, by its own account.
#[inline]
fn edit_in<R, F>(l: &mut Leaf, beside: Beside, outside: &Outside, hint: &mut Hints, f: F) -> (R, Edit)
where
    F: FnOnce(&mut [Vma], Beside, &Outside) -> (R, Edit),
{
    let (r, edit) = f(&mut l.v[..l.len], beside, outside);
    match edit {
        Edit::Freed(j) => hint.freed_beside(l.vmas(), j, beside.prev_end, beside.next_start),
        Edit::Took(j) => hint.took(l.v[j].start, l.v[j].end),
        Edit::Kept => {}
    }
    // The edit's own account decides what the hints check: make sure, in test builds, that it
    // left them true of the whole leaf.
    debug_assert!(
        hint.true_of(l.vmas(), beside.prev_end, beside.next_start),
        "an edit reported as {edit:?} left {hint:?} false of {:?}",
        l.vmas()
    );
    (r, edit)
}

/// The branch reached from `node` through the child slots `path`. The walk of [`node_at_mut`]
/// written out again: the fix-up of every leaf edit calls this once a level, and the generic
/// walk followed by a match cost about 20 guest instructions more per mmap + munmap.
#[inline]
fn branch_at<'a>(mut node: &'a mut Node, path: &[u8]) -> Option<&'a mut Branch> {
    for &i in path {
        node = match node {
            Node::Branch(b) => b.child[usize::from(i)].as_deref_mut()?,
            Node::Leaf(_) => return None,
        };
    }
    match node {
        Node::Branch(b) => Some(b),
        Node::Leaf(_) => None,
    }
}

/// Rewrites the mapping starting at `start` as `v` (same place in the order) in the subtree
/// whose summary was `old`; returns the new summary, or `None` if no mapping starts there.
/// `hint` is told of the free ranges beside it if it shrank.
pub fn replace(
    node: &mut Node,
    old: Sum,
    start: u64,
    v: Vma,
    beside: Beside,
    hint: &mut Hints,
) -> Option<Sum> {
    match node {
        Node::Leaf(l) => {
            let k = l.route(start);
            if k >= l.len || l.v[k].start != start {
                return None;
            }
            let was = l.v[k];
            let moved = (was.start, was.end) != (v.start, v.end);
            l.v[k] = v;
            // What it took first: the hints' free ranges are then free again, as the extension
            // of one by a freed range beside it assumes.
            if v.start < was.start || v.end > was.end {
                hint.took(v.start, v.end);
            }
            if v.start > was.start || v.end < was.end {
                hint.freed_beside(l.vmas(), k, beside.prev_end, beside.next_start);
            }
            Some(if moved { l.sum() } else { old })
        }
        Node::Branch(b) => {
            let i = b.route(start);
            let beside = b.beside(i, beside);
            let child_old = b.child_sum(i);
            let c = b.child[i].as_deref_mut()?;
            let cs = replace(c, child_old, start, v, beside, hint)?;
            Some(if cs == child_old { old } else { b.update(i, cs) })
        }
    }
}

/// Removes the mapping starting at `start` from the subtree; returns it and the subtree's new
/// summary (`None` if it became empty, only possible for a root leaf). Merged nodes go to
/// `pool`. A child left with too few entries borrows from a sibling or merges with it. `hint`
/// is told of the free range the mapping leaves (`beside`: what lies beside the subtree).
pub fn remove(
    node: &mut Node,
    old: Sum,
    start: u64,
    pool: &mut Pool,
    cap: usize,
    beside: Beside,
    hint: &mut Hints,
) -> Option<(Vma, Option<Sum>)> {
    match node {
        Node::Leaf(l) => {
            let k = l.route(start);
            if k >= l.len || l.v[k].start != start {
                return None;
            }
            let v = l.v[k];
            l.v.copy_within(k + 1..l.len, k);
            l.len -= 1;
            let below = if k > 0 { l.v[k - 1].end } else { beside.prev_end.unwrap_or(0) };
            let above = if k < l.len { l.v[k].start } else { beside.next_start.unwrap_or(u64::MAX) };
            hint.freed(below, above);
            Some((v, (l.len > 0).then(|| l.sum())))
        }
        Node::Branch(b) => {
            let i = b.route(start);
            let child_old = b.child_sum(i);
            let beside = b.beside(i, beside);
            let c = b.child[i].as_deref_mut()?;
            let (v, cs) = remove(c, child_old, start, pool, cap, beside, hint)?;
            let under = c.underfull();
            let Some(cs) = cs else {
                // An empty child: only a leaf of a branch of one child (never kept), but stay exact.
                if let Some(n) = b.remove_at(i) {
                    pool.release(n, cap);
                }
                return Some((v, (b.len > 0).then(|| b.sum())));
            };
            if !under {
                return Some((v, Some(if cs == child_old { old } else { b.update(i, cs) })));
            }
            b.set(i, cs);
            if b.len > 1 {
                refill(b, i, pool, cap);
            }
            Some((v, Some(b.sum())))
        }
    }
}

/// Child `i` of `b` is under its minimum: it takes an entry from a sibling that can spare one,
/// or merges with it (the right one of the pair goes to `pool`).
fn refill(b: &mut Branch, i: usize, pool: &mut Pool, cap: usize) {
    let a = if i + 1 < b.len { i } else { i - 1 };
    let (left, right) = b.child.split_at_mut(a + 1);
    let (Some(ln), Some(rn)) = (left[a].as_deref_mut(), right[0].as_deref_mut()) else { return };
    let merge = ln.len() + rn.len() <= ln.cap();
    match (ln, rn) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            if merge {
                l.v[l.len..l.len + r.len].copy_from_slice(&r.v[..r.len]);
                l.len += r.len;
                r.len = 0;
            } else if l.len < r.len {
                l.v[l.len] = r.v[0];
                l.len += 1;
                r.v.copy_within(1..r.len, 0);
                r.len -= 1;
            } else {
                r.v.copy_within(0..r.len, 1);
                r.v[0] = l.v[l.len - 1];
                r.len += 1;
                l.len -= 1;
            }
        }
        (Node::Branch(l), Node::Branch(r)) => {
            if merge {
                for j in 0..r.len {
                    let s = r.child_sum(j);
                    l.set(l.len, s);
                    l.child[l.len] = r.child[j].take();
                    l.len += 1;
                }
                l.rescan();
                r.len = 0;
            } else if l.len < r.len {
                let s = r.child_sum(0);
                if let Some(c) = r.remove_at(0) {
                    l.insert_at(l.len, s, c);
                }
            } else {
                let s = l.child_sum(l.len - 1);
                if let Some(c) = l.remove_at(l.len - 1) {
                    r.insert_at(0, s, c);
                }
            }
        }
        _ => return,
    }
    let (Some(ln), Some(rn)) = (left[a].as_deref(), right[0].as_deref()) else { return };
    let ls = ln.sum();
    let rs = (rn.len() > 0).then(|| rn.sum());
    b.set(a, ls);
    match rs {
        Some(rs) => b.set(a + 1, rs),
        None => {
            if let Some(n) = b.remove_at(a + 1) {
                pool.release(n, cap);
            }
        }
    }
}
