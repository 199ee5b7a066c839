//! The address-space allocator: the set of mappings (VMAs) in a B+tree whose every child
//! summary carries the largest free gap of the child's subtree.
//!
//! Why one file: it is [`VmaTree`]'s public operations, each a short descent over the nodes
//! (`tree/node.rs`) or a gap search ([`query`]), and the invariant checker (`VmaTree::check`) that
//! reads every node kind; the parts they are built from are already files of their own.
//!
//! Why augmented: every placement question the kernel asks (lowest fit, highest fit, an aligned
//! fit, a fit that crosses no 1 GiB line, the fit nearest a target) is "the first free gap, in
//! address order or in reverse, that can hold the request inside a domain". With each child's
//! summary (its first start, its last end, the largest gap between two of its mappings) in its
//! parent, a search skips every subtree whose largest gap is too small without reading it, so it
//! visits O(log n) nodes ([`query`]): the idea of Linux's maple tree, which keeps the gaps of an
//! allocation tree in the parent's slots (lib/maple_tree.c, `mas_empty_area`).
//!
//! Why a B-tree rather than a binary tree: each operation descends from the root once or twice,
//! and the number of nodes it visits is what grows with the number of mappings. With 16 entries
//! a node (`tree/node.rs`) a tree of 50,000 mappings is 4 or 5 levels deep instead of about 20, and the
//! keys a descent compares at one level share cache lines. Summaries are fixed up a path only as
//! far as they change, so an edit that moves no free edge (an `mprotect` of a whole mapping)
//! touches one leaf.
//!
//! Top-down placement (mmap's) also has a memory: [`TopDownHint`], what the last plain top-down
//! search showed about the free ranges above its answer, kept true by every change, so that the
//! next search starts below the block of mappings the last one crossed instead of crossing it
//! again (Linux's old `free_area_cache`, made exact: it never changes an answer), and the free
//! range just below that, from which the next placement usually comes without a descent.
//! [`BottomUpHint`] is the same for searches of the lowest fit (near placement's above its
//! target). And the last leaf edit leaves a finger (`node::Finger`): the slots of its path, so
//! that the next edit of the same leaf (the munmap cutting the mapping the mmap just merged)
//! follows them instead of searching each level.
//!
//! Memory: no operation here can panic for want of heap. Nodes come from a small pool of spare
//! nodes: [`VmaTree::reserve`] fills it fallibly for the worst case of the next few insertions
//! (each may split its path), and a merge after a removal gives a node back, so a caller that
//! must change several mappings as one step reserves first and then cannot fail half-way; a
//! plain [`VmaTree::insert`] allocates what it lacks fallibly before changing anything. The
//! in-order iterator keeps its path in a fixed array.

mod node;
pub mod query;
#[cfg(test)]
mod tests;

use super::{Errno, PAGE, Vma, fallible};
pub use node::{Beside, Edit, Outside};
use node::{Branch, FAN_MIN, Finger, LEAF_MIN, Leaf, Link, Node, Pool, Sum, first, last};
pub use query::{BottomUpHint, Dir, Fit, GapQuery, Hints, TopDownHint};

/// Insertions that split each node at most once (see `VmaTree::worst_case`): the one that
/// splits a node, and as many more as cannot bring a half `LEAF_MIN - 1` entries at two each.
const SMALL_RUN: usize = 1 + (if LEAF_MIN < FAN_MIN { LEAF_MIN } else { FAN_MIN } - 2) / 2;

/// What [`VmaTree::around`] finds: [`prev`](Self::prev), [`at`](Self::at) and
/// [`next`](Self::next).
///
/// Kept as three areas and a mask rather than three `Option<Vma>`: an `Option<Vma>` keeps its tag
/// in the byte `Advice` leaves free, so building one copied the other 23 bytes through a call to
/// the byte-wise `memcpy` of a strict-alignment target, twelve times per `mprotect` pair
/// (docs/benchmark-notes.md §9i); a whole `Vma` is copied as three words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Around {
    v: [Vma; 3],
    /// Bit `i` set: `v[i]` is there.
    present: u8,
}

impl Around {
    fn get(&self, i: usize) -> Option<&Vma> {
        (self.present & (1 << i) != 0).then(|| &self.v[i])
    }

    /// Nothing around (an empty tree).
    pub const NONE: Around = Around { v: [Vma::EMPTY; 3], present: 0 };

    /// `prev`, `at` and `next` (each slot written once: no zeroing of the whole array first).
    fn of(prev: Option<&Vma>, at: Option<&Vma>, next: Option<&Vma>) -> Self {
        let slot = |v: Option<&Vma>| match v {
            Some(v) => *v,
            None => Vma::default(),
        };
        let present = u8::from(prev.is_some()) | u8::from(at.is_some()) << 1 | u8::from(next.is_some()) << 2;
        Self { v: [slot(prev), slot(at), slot(next)], present }
    }

    /// What lies around `addr` in the leaf holding `v` (the leaf a descent by `addr` reaches),
    /// the mappings just outside it asked of `before` and `after` only when needed.
    #[inline(always)]
    fn in_leaf<'a>(
        v: &'a [Vma],
        addr: u64,
        before: impl FnOnce() -> Option<&'a Vma>,
        after: impl FnOnce() -> Option<&'a Vma>,
    ) -> Self {
        // `k`: the slot of the first mapping starting above `addr`.
        let k = v.partition_point(|w| w.start <= addr);
        let at = k.checked_sub(1).and_then(|j| v.get(j)).filter(|a| addr < a.end);
        let j = if at.is_some() { k.checked_sub(2) } else { k.checked_sub(1) };
        let prev = match j {
            Some(j) => v.get(j),
            None => before(),
        };
        Around::of(prev, at, v.get(k).or_else(after))
    }

    /// The mapping before `at` (before the address when `at` is `None`).
    pub fn prev(&self) -> Option<&Vma> {
        self.get(0)
    }

    /// The mapping containing the address.
    pub fn at(&self) -> Option<&Vma> {
        self.get(1)
    }

    /// The mapping after `at` (at or after the address when `at` is `None`).
    pub fn next(&self) -> Option<&Vma> {
        self.get(2)
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
    /// The root's summary (meaningless when empty).
    sum: Option<Sum>,
    /// Levels (0 when empty, 1 when the root is a leaf).
    height: usize,
    count: usize,
    /// Nodes in the tree.
    nodes: usize,
    spare: Pool,
    /// What the last top-down and bottom-up searches learnt, kept true by every change (see
    /// [`TopDownHint`], [`BottomUpHint`]).
    hint: Hints,
    /// The leaf the last [`VmaTree::edit_leaf`] edited (forgotten once any other change may
    /// have moved it or its neighbours): the next edit there follows its slots.
    finger: Finger,
}

impl VmaTree {
    /// An empty tree.
    pub const fn new() -> Self {
        VmaTree {
            root: None,
            sum: None,
            height: 0,
            count: 0,
            nodes: 0,
            spare: Pool::new(),
            hint: Hints::NONE,
            finger: Finger::NONE,
        }
    }

    /// Spare nodes the next `insertions` insertions may take at most. Each takes the full nodes
    /// at the bottom of its path and a new root if the whole path is full. A node that split
    /// holds at least [`LEAF_MIN`] entries and needs `LEAF_MIN - 1` more before it can split
    /// again; one insertion brings a node at most two (an entry a full sibling passes to it,
    /// `node::shift_out`, and the insertion or the split below it), so the few insertions
    /// after a split cannot fill its halves: up to [`SMALL_RUN`] insertions split each node of
    /// the tree at most once, and only the old root can add a level: `min(k * height, nodes) +
    /// 1`. Beyond, each insertion may split its whole path, one level more each time.
    fn worst_case(&self, insertions: usize) -> usize {
        let k = insertions;
        if k == 0 {
            0
        } else if k <= SMALL_RUN {
            k.saturating_mul(self.height).min(self.nodes) + 1
        } else {
            k.saturating_mul(self.height).saturating_add(k.saturating_mul(k + 1) / 2)
        }
    }

    /// Most spare nodes kept: what a reservation for one [`super::VmMap`] call asks at the
    /// current height and a little more, so that a call using its reservation and the next one
    /// giving the nodes back (the merge that undoes a split) neither allocate nor free in turn.
    pub fn spare_cap(&self) -> usize {
        super::map::SPARES * (self.height + 1) + 3
    }

    /// Makes sure the next `nodes` insertions need no allocation: allocates the missing spare
    /// nodes now, fallibly.
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold them (the tree is unchanged; spares already made stay).
    pub fn reserve(&mut self, nodes: usize) -> Result<(), Errno> {
        self.fill(self.worst_case(nodes))
    }

    fn fill(&mut self, want: usize) -> Result<(), Errno> {
        while self.spare.n < want {
            let node = fallible::boxed(Node::Leaf(Leaf::new())).ok_or(Errno::ENOMEM)?;
            self.spare.put(node);
        }
        Ok(())
    }

    /// Spare nodes available (insertions that split take them, merges give them back).
    pub fn spares(&self) -> usize {
        self.spare.n
    }

    /// Number of mappings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there is no mapping.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Levels of the tree (0 when empty).
    pub fn height(&self) -> usize {
        self.height
    }

    /// Inserts a mapping. The caller guarantees it overlaps none (checked in debug builds).
    ///
    /// # Errors
    /// `ENOMEM` when the insertion needs more nodes than there are spares and the heap cannot
    /// hold them (nothing changed).
    pub fn insert(&mut self, vma: Vma) -> Result<(), Errno> {
        self.finger.forget();
        debug_assert!(vma.start < vma.end && vma.start.is_multiple_of(PAGE) && vma.end.is_multiple_of(PAGE));
        debug_assert!(self.first_overlap(vma.start, vma.end).is_none(), "overlapping insert {vma:?}");
        let Some(root) = self.root.as_deref_mut() else {
            self.fill(1)?;
            let mut leaf = Leaf::new();
            leaf.v[0] = vma;
            leaf.len = 1;
            self.root = self.spare.take(Node::Leaf(leaf));
            self.sum = Some(Sum { lo: vma.start, hi: vma.end, gap: 0 });
            (self.height, self.count, self.nodes) = (1, 1, 1);
            self.hint.took(vma.start, vma.end);
            return Ok(());
        };
        if self.spare.n <= self.height {
            let need = node::nodes_needed(root, vma.start);
            if self.spare.n < need {
                self.fill(need)?;
            }
        }
        let Some(root) = self.root.as_deref_mut() else { return Ok(()) };
        let before = self.spare.n;
        let (s, split) = node::insert(root, vma, &mut self.spare);
        self.sum = Some(s);
        if let Some((rs, right)) = split {
            // The root split: a new root over the two halves.
            let mut top = Branch::new();
            if let Some(old) = self.root.take() {
                top.insert_at(0, s, old);
            }
            top.insert_at(1, rs, right);
            self.sum = Some(top.sum());
            self.root = self.spare.take(Node::Branch(top));
            debug_assert!(self.root.is_some(), "the pool held the nodes an insertion needs");
            self.height += 1;
        }
        self.nodes += before - self.spare.n;
        self.count += 1;
        self.hint.took(vma.start, vma.end);
        Ok(())
    }

    /// Removes the mapping that starts at `start`, if any.
    pub fn remove(&mut self, start: u64) -> Option<Vma> {
        self.finger.forget();
        let cap = self.spare_cap();
        let (root, sum) = (self.root.as_deref_mut()?, self.sum?);
        let (v, s) = node::remove(root, sum, start, &mut self.spare, cap, Beside::default(), &mut self.hint)?;
        self.count -= 1;
        self.sum = s;
        // A root branch of one child gives way to the child; an empty root leaf goes.
        loop {
            let next = match self.root.as_deref_mut() {
                Some(Node::Branch(b)) if b.len == 1 => b.child[0].take(),
                Some(Node::Leaf(l)) if l.len == 0 => None,
                _ => break,
            };
            if let Some(old) = self.root.take() {
                self.spare.release(old, cap);
            }
            self.height -= 1;
            self.root = next;
            // A lower tree needs fewer spares.
            self.spare.trim(self.spare_cap());
        }
        self.nodes -= core::mem::take(&mut self.spare.released);
        Some(v)
    }

    /// Rewrites the mapping that starts at `start` as `vma` in place: its attributes, and its
    /// bounds as long as it stays between its neighbours (the caller guarantees that; checked in
    /// debug builds). No node is allocated, freed or moved; the summaries are fixed up the path
    /// only as far as they change (not at all when the bounds stay). Returns whether a mapping
    /// started at `start`.
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
        self.finger.forget();
        let (Some(root), Some(sum)) = (self.root.as_deref_mut(), self.sum) else { return false };
        match node::replace(root, sum, start, vma, Beside::default(), &mut self.hint) {
            Some(s) => {
                self.sum = Some(s);
                true
            }
            None => false,
        }
    }

    /// Rewrites the attributes of the mapping that starts at `start` (same bounds: no summary
    /// changes, so one descent without recursion, or none when the finger names the leaf, and
    /// nothing on the way back). Returns whether a mapping with those bounds started there.
    pub fn replace_attrs(&mut self, start: u64, vma: Vma) -> bool {
        // By the finger when the last edit was in this leaf (an mprotect pair of one mapping),
        // which this change keeps true: it moves no bound.
        let Some(root) = self.root.as_deref_mut() else { return false };
        let Some(l) = self.finger.leaf_for(root, start) else { return false };
        let k = l.route(start);
        match l.v[..l.len].get_mut(k) {
            Some(v) if (v.start, v.end) == (start, vma.end) && vma.start == start => {
                *v = vma;
                true
            }
            _ => false,
        }
    }

    /// Runs `f` on the mappings of one leaf, in one descent: the leaf holding the last mapping
    /// starting at or below `addr` (the first leaf if none does), so that the mapping containing
    /// `addr`, or the two around the free position `addr`, are in it or at its edges, where
    /// [`Beside`] tells how far the mappings outside it reach. `f` may rewrite the mappings in
    /// place: attributes, and bounds as long as the order stays and no mapping comes to overlap
    /// another or those beside the leaf (the caller's duty; [`VmaTree::check`] finds a breach).
    /// It returns its answer and what it did to the bounds ([`Edit`]: nothing, only took free
    /// space, or shrank one mapping); if it moved any, the summaries are fixed up the path as far
    /// as they change, and the top-down hint checks the free ranges a shrunk mapping left (the
    /// account must be true: test builds check the whole leaf against it). An empty tree gives
    /// `f` no mappings.
    ///
    /// Why: the common edits (a new mapping joining a neighbour, an unmap cutting one end of a
    /// mapping) need the neighbours and the change in the same place, and a lookup followed by
    /// a rewrite descends twice.
    pub fn edit_leaf<R>(&mut self, addr: u64, f: impl FnOnce(&mut [Vma], Beside) -> (R, Edit)) -> R {
        self.edit_leaf_outside(addr, |vs, beside, _| f(vs, beside))
    }

    /// [`VmaTree::edit_leaf`], `f` also told the mappings just outside the leaf ([`Outside`]):
    /// for an edit that must know whether a mapping at the leaf's edge joins its neighbour,
    /// whose attributes [`Beside`] does not hold. The tree's finger keeps them, found when it
    /// names the leaf, so that a repeated edit of one leaf reads them without a descent.
    pub fn edit_leaf_outside<R>(
        &mut self,
        addr: u64,
        f: impl FnOnce(&mut [Vma], Beside, &Outside) -> (R, Edit),
    ) -> R {
        let (Some(root), Some(sum)) = (self.root.as_deref_mut(), self.sum) else {
            return f(&mut [], Beside::default(), &Outside::NONE).0;
        };
        let (r, s) = node::edit_leaf(root, sum, addr, &mut self.hint, &mut self.finger, f);
        self.sum = Some(s);
        r
    }

    /// The neighbours of the free position `addr`: the highest mapping starting below it and
    /// the lowest starting at or above it, in one descent.
    pub fn neighbours(&self, addr: u64) -> (Option<&Vma>, Option<&Vma>) {
        let mut cur = self.root.as_deref();
        // The subtree right of the path nearest the leaf: where `next` is if not in the leaf.
        let mut right: Option<&Node> = None;
        while let Some(n) = cur {
            match n {
                Node::Branch(b) => {
                    let i = b.below(addr).saturating_sub(1);
                    if i + 1 < b.len {
                        right = b.child[i + 1].as_deref();
                    }
                    cur = b.child[i].as_deref();
                }
                Node::Leaf(l) => {
                    let v = l.vmas();
                    let k = l.slot(addr);
                    let prev = k.checked_sub(1).and_then(|p| v.get(p));
                    let next = v.get(k).or_else(|| right.and_then(first));
                    return (prev, next);
                }
            }
        }
        (None, None)
    }

    /// The mapping containing `addr` and the mappings just before and just after it, in one
    /// descent (the neighbours of a piece being changed, which decide whether it merges): with
    /// no mapping at `addr`, the highest mapping starting below it and the lowest starting at
    /// or above it.
    pub fn around(&self, addr: u64) -> Around {
        // The leaf the finger names, when `addr` routes there (the call that looks again at
        // the leaf an edit just visited): no descent, and what lies outside it is kept there.
        if let Some(root) = self.root.as_deref()
            && let Some((l, outside)) = self.finger.seen(root, addr)
        {
            let a = Around::in_leaf(l.vmas(), addr, || outside.prev(), || outside.next());
            #[cfg(debug_assertions)]
            debug_assert_eq!(a, self.around_by_descent(addr), "the finger's leaf says otherwise");
            return a;
        }
        self.around_by_descent(addr)
    }

    /// [`VmaTree::around`] by a descent from the root.
    fn around_by_descent(&self, addr: u64) -> Around {
        let mut cur = self.root.as_deref();
        // The subtrees beside the path nearest the leaf: where the neighbours are if the leaf
        // has none on that side.
        let (mut left, mut right): (Option<&Node>, Option<&Node>) = (None, None);
        while let Some(n) = cur {
            match n {
                Node::Branch(b) => {
                    let i = b.route(addr);
                    if i > 0 {
                        left = b.child[i - 1].as_deref();
                    }
                    if i + 1 < b.len {
                        right = b.child[i + 1].as_deref();
                    }
                    cur = b.child[i].as_deref();
                }
                Node::Leaf(l) => {
                    return Around::in_leaf(l.vmas(), addr, || left.and_then(last), || right.and_then(first));
                }
            }
        }
        Around::NONE
    }

    /// The leaf holding the last mapping starting at or below `addr` (the first leaf if none).
    fn leaf_at(&self, addr: u64) -> Option<&Leaf> {
        let mut cur = self.root.as_deref()?;
        loop {
            match cur {
                Node::Branch(b) => cur = b.child[b.route(addr)].as_deref()?,
                Node::Leaf(l) => return Some(l),
            }
        }
    }

    /// The mapping containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Vma> {
        let l = self.leaf_at(addr)?;
        l.vmas().get(l.route(addr)).filter(|v| v.start <= addr && addr < v.end)
    }

    /// The lowest mapping that ends above `addr` (the one containing it, or the next one).
    pub fn first_ending_after(&self, addr: u64) -> Option<&Vma> {
        let mut cur = self.root.as_deref()?;
        loop {
            match cur {
                Node::Branch(b) => cur = b.child.get(b.ending_after(addr))?.as_deref()?,
                Node::Leaf(l) => {
                    let v = l.vmas();
                    return v.get(v.partition_point(|v| v.end <= addr));
                }
            }
        }
    }

    /// The highest mapping that starts below `addr`.
    pub fn last_starting_before(&self, addr: u64) -> Option<&Vma> {
        let l = self.leaf_at(addr.checked_sub(1)?)?;
        l.slot(addr).checked_sub(1).and_then(|k| l.vmas().get(k))
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
        self.iter_from(0)
    }

    /// The mappings that end above `addr`, in address order (O(log n) to start).
    pub fn iter_from(&self, addr: u64) -> Iter<'_> {
        let (leaf, at) = self.leaf_ending_after(addr);
        Iter { tree: self, leaf, at }
    }

    /// The leaf holding the first mapping that ends above `addr`, and its slot.
    fn leaf_ending_after(&self, addr: u64) -> (Option<&Leaf>, usize) {
        let mut cur = self.root.as_deref();
        while let Some(n) = cur {
            match n {
                Node::Branch(b) => cur = b.child.get(b.ending_after(addr)).and_then(Option::as_deref),
                Node::Leaf(l) => return (Some(l), l.vmas().partition_point(|v| v.end <= addr)),
            }
        }
        (None, 0)
    }

    /// The free placement `q` asks for, in one O(log n) walk (see [`query`]). A query the hint
    /// of its direction covers searches only beyond the hint's edge ([`Hints::narrow`]), and not
    /// at all when the free range the hint knows at that edge holds it.
    pub fn find_gap(&self, q: &GapQuery) -> Option<u64> {
        self.find_fit(q).map(|f| f.at)
    }

    /// [`VmaTree::find_gap`], with the free range the answer lies in (what
    /// [`VmaTree::learn`] takes).
    pub fn find_fit(&self, q: &GapQuery) -> Option<Fit> {
        let (q, known) = self.hint.narrow(q);
        let q = &q;
        if q.len == 0 || q.hi <= q.lo || q.hi - q.lo < q.len {
            return None;
        }
        // The best fit in the domain lies in the free range at its edge if one does: the
        // domain ends there and the range is free.
        if let Some((g0, g1)) = known
            && let Some(f) = q.fit(g0, g1)
        {
            return Some(f);
        }
        let (Some(root), Some(s)) = (self.root.as_deref(), self.sum) else { return q.fit(0, u64::MAX) };
        let inside = || (s.gap >= q.len && !q.prune(s.lo, s.hi)).then(|| query::search(root, q)).flatten();
        match q.dir {
            Dir::Lowest => q.fit(0, s.lo).or_else(inside).or_else(|| q.fit(s.hi, u64::MAX)),
            Dir::Highest => q.fit(s.hi, u64::MAX).or_else(inside).or_else(|| q.fit(0, s.lo)),
        }
    }

    /// [`VmaTree::find_gap`], remembering what the answer shows about the free space before
    /// it in the query's order ([`Hints::learn`]), so that the next search in that direction,
    /// once this one's mapping is made, starts just beyond it instead of crossing the mappings
    /// before it again, and finds its answer without a descent when the free range there holds
    /// it.
    pub fn find_gap_and_learn(&mut self, q: &GapQuery) -> Option<u64> {
        let f = self.find_fit(q)?;
        self.hint.learn(q, f);
        Some(f.at)
    }

    /// Remembers what `fit`, the answer [`VmaTree::find_fit`] gave to `q` with no change to the
    /// tree since, shows ([`VmaTree::find_gap_and_learn`] in two steps, for a caller that asks
    /// more than one question before it knows which answer it learns from).
    pub fn learn(&mut self, q: &GapQuery, fit: Fit) {
        debug_assert_eq!(self.find_fit(q), Some(fit), "learning from an answer the tree did not give");
        self.hint.learn(q, fit);
    }

    /// The hint the top-down searches share (for tests and measurements).
    pub fn hint(&self) -> TopDownHint {
        self.hint.down
    }

    /// Both hints (for tests and measurements).
    pub fn hints(&self) -> Hints {
        self.hint
    }

    /// Checks every invariant: order, disjointness, alignment, every leaf at the same depth,
    /// the fill of every node, every summary, the counts. Panics with a description on the
    /// first violation.
    pub fn check(&self) {
        struct Walk {
            prev_end: Option<u64>,
            count: usize,
            nodes: usize,
        }
        fn walk(n: &Node, depth: usize, height: usize, root: bool, w: &mut Walk) -> Sum {
            w.nodes += 1;
            match n {
                Node::Leaf(l) => {
                    assert_eq!(depth + 1, height, "a leaf at depth {depth} of {height} levels");
                    assert!(
                        l.len >= if root { 1 } else { LEAF_MIN } && l.len <= node::LEAF,
                        "leaf of {}",
                        l.len
                    );
                    for v in l.vmas() {
                        assert!(v.start < v.end, "empty mapping {v:?}");
                        assert!(v.start % PAGE == 0 && v.end % PAGE == 0, "unaligned {v:?}");
                        if let Some(pe) = w.prev_end {
                            assert!(pe <= v.start, "overlap or disorder at {v:?}");
                        }
                        w.prev_end = Some(v.end);
                        w.count += 1;
                    }
                    l.sum()
                }
                Node::Branch(b) => {
                    assert!(
                        b.len >= if root { 2 } else { FAN_MIN } && b.len <= node::FAN,
                        "branch of {}",
                        b.len
                    );
                    for i in 0..b.len {
                        let c = b.child[i].as_deref().expect("a child in every used slot");
                        let s = walk(c, depth + 1, height, false, w);
                        assert_eq!(s, b.child_sum(i), "summary of child {i} at depth {depth}");
                        let below = if i > 0 { b.lo[i] - b.hi[i - 1] } else { 0 };
                        assert_eq!(b.room[i], s.gap.max(below), "room of child {i} at depth {depth}");
                    }
                    let room = &b.room[..b.len];
                    let best = room.iter().copied().max().unwrap_or(0);
                    assert!(b.top < b.len && room[b.top] == best, "top {} of {room:?}", b.top);
                    let second = room.iter().enumerate().filter(|&(j, _)| j != b.top).map(|(_, &r)| r).max();
                    assert_eq!(
                        b.second,
                        second.unwrap_or(0),
                        "second largest room of {room:?} (top {})",
                        b.top
                    );
                    assert!(b.child[b.len..].iter().all(Option::is_none), "a child past the end");
                    b.sum()
                }
            }
        }
        let mut w = Walk { prev_end: None, count: 0, nodes: 0 };
        match self.root.as_deref() {
            None => assert_eq!(self.height, 0, "height of an empty tree"),
            Some(r) => {
                let s = walk(r, 0, self.height, true, &mut w);
                assert_eq!(Some(s), self.sum, "the root's summary");
            }
        }
        let mut g0 = 0;
        for v in self.iter() {
            assert!(
                self.hint.holds(g0, v.start),
                "hint {:?} broken by the free range [{g0:#x}, {:#x})",
                self.hint,
                v.start
            );
            g0 = v.end;
        }
        assert!(self.hint.holds(g0, u64::MAX), "hint {:?} broken by the free range from {g0:#x}", self.hint);
        let (down, up) = (self.hint.down, self.hint.up);
        assert!(
            down.gap_lo <= down.below || down.hi == 0,
            "top-down hint {down:?}: its free range is reversed"
        );
        assert!(
            down.gap_lo >= down.below || self.is_free(down.gap_lo, down.below),
            "top-down hint {down:?}: its free range holds a mapping"
        );
        assert!(up.above <= up.gap_hi, "bottom-up hint {up:?}: its free range is reversed");
        assert!(
            up.above >= up.gap_hi || self.is_free(up.above, up.gap_hi),
            "bottom-up hint {up:?}: its free range holds a mapping"
        );
        assert_eq!(w.count, self.count, "count");
        assert_eq!(w.nodes, self.nodes, "nodes");
        assert!(
            self.spare.n <= self.spare_cap().max(self.worst_case(super::map::SPARES)),
            "spare nodes held"
        );
    }
}

/// In-order iterator over a [`VmaTree`]: a leaf and a slot. It keeps no path (three words, so
/// that making and moving one costs nothing); the next leaf is found by a descent from the root
/// to the first mapping ending above the current leaf's last, once per 8 to 16 mappings.
pub struct Iter<'a> {
    tree: &'a VmaTree,
    leaf: Option<&'a Leaf>,
    at: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Vma;
    fn next(&mut self) -> Option<&'a Vma> {
        let l = self.leaf?;
        if let Some(v) = l.vmas().get(self.at) {
            self.at += 1;
            return Some(v);
        }
        let last = l.vmas().last()?;
        (self.leaf, self.at) = self.tree.leaf_ending_after(last.end);
        let v = self.leaf?.vmas().get(self.at)?;
        self.at += 1;
        Some(v)
    }
}
