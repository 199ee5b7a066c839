//! The primitive mutations of [`VmMap`]: the only code that changes the tree of areas, so the
//! byte counters (mapped, data, code-window use) stay exact whatever the call.
//!
//! Each system call reserves [`SPARES`] tree nodes before its first change; from there on an
//! insertion takes a spare (a removal gives one back), so no change fails half-way. The common
//! edits (a range cut off one end of a mapping, a mapping joining a neighbour) are done in one
//! descent through [`VmaTree::edit_leaf`]; everything else takes the general path.

use super::{Pieces, SPARES, VmMap, is_data, overlap_len};
use crate::vm::tree::{Around, Edit};
use crate::vm::{Errno, Vma};

impl VmMap {
    /// Reserves the nodes one call may need (`ENOMEM` before any change).
    pub(super) fn reserve(&mut self) -> Result<(), Errno> {
        self.tree.reserve(SPARES)
    }

    /// Adds (`sign` true) or subtracts `v`'s bytes to or from the counters (mapped, data, code
    /// window, its name's): a mapping's contribution depends on its bounds and attributes only, so pieces
    /// may be counted apart from the records that hold them.
    pub(super) fn count(&mut self, v: &Vma, add: bool) {
        let data = if is_data(v.prot, v.flags) { v.len() } else { 0 };
        let window = self.window_range().map_or(0, |w| overlap_len((v.start, v.end), w));
        self.names.count(v.name, v.len(), add);
        if add {
            self.mapped += v.len();
            self.data += data;
            self.window.used += window;
        } else {
            self.mapped -= v.len();
            self.data -= data;
            self.window.used -= window;
        }
    }

    /// Links a record whose bytes are already counted (a piece split off another).
    pub(super) fn link(&mut self, v: Vma) {
        // Cannot fail: the spare nodes are there (the reservation bounds what a call inserts).
        let inserted = self.tree.insert(v);
        debug_assert!(inserted.is_ok(), "insertion without its reserved nodes: {v:?}");
    }

    /// Rewrites the record starting at `start` in place (bounds between its neighbours).
    pub(super) fn edit(&mut self, start: u64, v: Vma) {
        let found = self.tree.replace(start, v);
        debug_assert!(found, "no mapping at {start:#x}");
    }

    /// Removes the mapping starting at `start` (callers only name mappings they just found).
    pub(super) fn take(&mut self, start: u64) -> Option<Vma> {
        let v = self.tree.remove(start)?;
        self.count(&v, false);
        Some(v)
    }

    /// Adds `v` (free space), merged with a neighbour that touches it and has the same
    /// attributes. A merge extends the neighbour's record in place (and joining two neighbours
    /// removes one), so only a mapping that joins nothing takes a new node.
    pub(super) fn add_merge(&mut self, v: Vma) {
        self.count(&v, true);
        // One descent decides and does it when both neighbours are in the leaf (or the free
        // space beside the leaf shows that the one outside does not touch `v`).
        let fast = self.tree.edit_leaf(v.start, |vs, beside| {
            let k = vs.partition_point(|w| w.start < v.start);
            let prev = match k.checked_sub(1) {
                Some(j) => Some(vs[j].end == v.start && vs[j].merges_with(&v)),
                None => (beside.prev_end != Some(v.start)).then_some(false),
            };
            let next = match vs.get(k) {
                Some(n) => Some(n.start == v.end && n.merges_with(&v)),
                None => (beside.next_start != Some(v.end)).then_some(false),
            };
            match (prev, next) {
                (Some(true), Some(false)) => {
                    vs[k - 1].end = v.end;
                    (Some(true), Edit::Took(k - 1))
                }
                (Some(false), Some(true)) => {
                    vs[k].start = v.start;
                    (Some(true), Edit::Took(k))
                }
                (Some(false), Some(false)) => (Some(false), Edit::Kept),
                _ => (None, Edit::Kept),
            }
        });
        match fast {
            Some(true) => return,
            Some(false) => return self.link(v),
            None => {}
        }
        let (prev, next) = self.tree.neighbours(v.start);
        let prev = prev.copied().filter(|p| p.end == v.start && p.merges_with(&v));
        let next = next.copied().filter(|n| n.start == v.end && n.merges_with(&v));
        match (prev, next) {
            (Some(p), Some(n)) => {
                self.tree.remove(n.start);
                self.edit(p.start, Vma { end: n.end, ..p });
            }
            (Some(p), None) => self.edit(p.start, Vma { end: v.end, ..p }),
            (None, Some(n)) => self.edit(n.start, Vma { start: v.start, ..n }),
            (None, None) => self.link(v),
        }
    }

    /// Removes `[s, e)` from the map; returns the removed pieces (clipped). A mapping cut at one
    /// end is shrunk in place; one punched in the middle keeps its lower part in place and its
    /// upper part takes a node. Needs the call's reservation; the list is allocated before
    /// anything changes.
    pub(super) fn remove_range(&mut self, s: u64, e: u64) -> Result<Pieces, Errno> {
        // The common case in one descent: the range within one mapping, cut at one end (or
        // nothing mapped there).
        let fast = self.tree.edit_leaf(s, |vs, beside| {
            let k = vs.partition_point(|w| w.start <= s);
            match k.checked_sub(1).map(|j| (j, vs[j])).filter(|(_, w)| w.end > s) {
                Some((j, w)) if w.end >= e => match (w.start < s, w.end > e) {
                    (false, true) => {
                        vs[j].start = e;
                        (Cut::Piece(w), Edit::Freed(j))
                    }
                    (true, false) => {
                        vs[j].end = s;
                        (Cut::Piece(w), Edit::Freed(j))
                    }
                    (false, false) => (Cut::Whole(w), Edit::Kept),
                    (true, true) => (Cut::Slow, Edit::Kept),
                },
                Some(_) => (Cut::Slow, Edit::Kept),
                None => {
                    let next = vs.get(k).map(|n| n.start).or(beside.next_start);
                    (if next.is_none_or(|n| n >= e) { Cut::Nothing } else { Cut::Slow }, Edit::Kept)
                }
            }
        });
        match fast {
            Cut::Nothing => return Ok(Pieces::new()),
            Cut::Piece(w) => {
                let piece = w.clip(s, e);
                self.count(&piece, false);
                return Ok(Pieces::one(piece));
            }
            Cut::Whole(w) => {
                self.take(w.start);
                return Ok(Pieces::one(w));
            }
            Cut::Slow => {}
        }
        let mut pieces = self.tree.overlapping(s, e)?;
        for v in pieces.iter_mut() {
            let piece = v.clip(s, e);
            match (v.start < s, v.end > e) {
                (false, false) => {
                    self.take(v.start);
                }
                (true, false) => {
                    self.edit(v.start, Vma { end: s, ..*v });
                    self.count(&piece, false);
                }
                (false, true) => {
                    self.edit(v.start, Vma { start: e, ..*v });
                    self.count(&piece, false);
                }
                (true, true) => {
                    self.edit(v.start, Vma { end: s, ..*v });
                    self.link(Vma { start: e, ..*v });
                    self.count(&piece, false);
                }
            }
            *v = piece;
        }
        Ok(pieces)
    }

    /// The mapped pieces of `[s, e)` (clipped), and whether there is a hole. With
    /// `stop_at_hole`, only the contiguous mapped prefix starting at `s` is returned.
    pub(super) fn select(&self, s: u64, e: u64, stop_at_hole: bool) -> Result<(Pieces, bool), Errno> {
        let mut out = Pieces::new();
        let mut cursor = s;
        let mut hole = false;
        for v in self.tree.iter_from(s).take_while(|v| v.start < e) {
            if v.start > cursor {
                hole = true;
                if stop_at_hole {
                    return Ok((out, true));
                }
            }
            out.push(v.clip(s, e))?;
            cursor = v.end;
        }
        Ok((out, hole || cursor < e))
    }

    /// Replaces each selected piece by `f(piece)` (same bounds, new attributes), one piece at a
    /// time, editing records in place: a whole mapping changes its record (or joins a touching
    /// neighbour with the new attributes, whose record grows), a piece at one end moves the
    /// boundary (or takes one node), a piece in the middle takes two. A rewritten piece may join
    /// the next, still unrewritten mapping; that mapping then already has the new attributes,
    /// so its own piece changes nothing.
    pub(super) fn rewrite(&mut self, pieces: &[Vma], f: impl FnMut(&Vma) -> Vma) {
        self.rewrite_from(pieces, None, f);
    }

    /// [`VmMap::rewrite`], where `first` (if given) is what [`VmaTree::around`] says of the first
    /// piece's start now: the caller looked already.
    /// The caller's answer is borrowed, not moved: a move of the 72-byte [`Around`] is a call to
    /// `memcpy` on a strict-alignment target.
    pub(super) fn rewrite_from(
        &mut self,
        pieces: &[Vma],
        mut first: Option<&Around>,
        mut f: impl FnMut(&Vma) -> Vma,
    ) {
        for p in pieces {
            let looked;
            let around = match first.take() {
                Some(a) => a,
                None => {
                    looked = self.tree.around(p.start);
                    &looked
                }
            };
            let Some(&whole) = around.at() else { continue };
            let new = f(p);
            debug_assert!((new.start, new.end) == (p.start, p.end) && whole.end >= p.end);
            if new.same_attrs(&whole) {
                continue;
            }
            self.count(&Vma { start: p.start, end: p.end, ..whole }, false);
            self.count(&new, true);
            let (keeps_below, keeps_above) = (whole.start < p.start, p.end < whole.end);
            let prev =
                around.prev().filter(|v| !keeps_below && v.end == p.start && v.merges_with(&new)).copied();
            let next =
                around.next().filter(|v| !keeps_above && v.start == p.end && v.merges_with(&new)).copied();
            match (keeps_below, keeps_above) {
                (false, false) => match (prev, next) {
                    (Some(a), Some(b)) => {
                        self.tree.remove(whole.start);
                        self.tree.remove(b.start);
                        self.edit(a.start, Vma { end: b.end, ..a });
                    }
                    (Some(a), None) => {
                        self.tree.remove(whole.start);
                        self.edit(a.start, Vma { end: p.end, ..a });
                    }
                    (None, Some(b)) => {
                        self.tree.remove(whole.start);
                        self.edit(b.start, Vma { start: p.start, ..b });
                    }
                    (None, None) => {
                        // The same bounds: only the attributes change, in place.
                        let found = self.tree.replace_attrs(whole.start, new);
                        debug_assert!(found, "no mapping at {:#x}", whole.start);
                    }
                },
                (false, true) => {
                    self.edit(whole.start, Vma { start: p.end, ..whole });
                    match prev {
                        Some(a) => self.edit(a.start, Vma { end: p.end, ..a }),
                        None => self.link(new),
                    }
                }
                (true, false) => {
                    self.edit(whole.start, Vma { end: p.start, ..whole });
                    match next {
                        Some(b) => self.edit(b.start, Vma { start: p.start, ..b }),
                        None => self.link(new),
                    }
                }
                (true, true) => {
                    self.edit(whole.start, Vma { end: p.start, ..whole });
                    self.link(Vma { start: p.end, ..whole });
                    self.link(new);
                }
            }
        }
    }
}

/// What [`VmMap::remove_range`] found in its first descent.
enum Cut {
    /// Nothing is mapped in the range.
    Nothing,
    /// The range was one end of this mapping, now cut off it.
    Piece(Vma),
    /// The range is exactly this mapping (still to be removed).
    Whole(Vma),
    /// Anything else: the general path.
    Slow,
}
