//! `mprotect`: the mapped prefix of the range changes, area by area, until the first hole or
//! the first area Linux's `mprotect_fixup` would refuse; what changed is returned for the
//! user-memory layer to apply to the tables.

use super::{VmMap, enough_memory, is_data, page_up};
use crate::vm::prot::*;
use crate::vm::tree::Edit;
use crate::vm::{Errno, PAGE, Prot, Vma, VmaFlags, fallible};

/// One protection change `mprotect` made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProtChange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Rights before.
    pub old: Prot,
    /// Rights after.
    pub new: Prot,
    /// The area's flags (whether it maps an object privately decides whether its pages may
    /// become writable at once: the table layer need not look the area up again).
    pub flags: VmaFlags,
}

/// What `mprotect` did. Like Linux, it changes the mapped prefix of the range and fails at the
/// first hole: the kernel applies `changes`, then returns `error` if there is one, else 0.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Protected {
    /// Ranges whose rights changed, in address order (ranges already at the new rights are left
    /// out).
    pub changes: fallible::List<ProtChange, 2>,
    /// `ENOMEM` when the range had a hole (after changing what precedes it).
    pub error: Option<Errno>,
}

impl VmMap {
    /// `mprotect(addr, len, prot)`. Changes the mapped prefix of the range (Linux's behaviour)
    /// and reports a hole as [`Protected::error`].
    ///
    /// # Errors
    /// Before any change: `EINVAL` both `PROT_GROWSDOWN` and `PROT_GROWSUP`, unaligned `addr`, or
    /// unknown `prot` bits; `ENOMEM` range overflowing or no mapping at `addr` (with
    /// `PROT_GROWSDOWN`: none in the range); `EINVAL` `PROT_GROWSDOWN` on a mapping that does not
    /// grow down (the change then reaches down to its start), `PROT_GROWSUP`; `EACCES` writable and executable
    /// (W^X), or adding `PROT_EXEC` outside the code window in strict mode. `len == 0` succeeds
    /// with no change.
    pub fn mprotect(&mut self, addr: u64, len: u64, prot: u64) -> Result<Protected, Errno> {
        let mut out = Protected::default();
        self.mprotect_into(addr, len, prot, &mut out)?;
        Ok(out)
    }

    /// [`VmMap::mprotect`], its answer written to `out` (emptied first): the kernel's system
    /// call reads it in place, where returning the 88-byte [`Protected`] in a `Result` is a call
    /// to `memcpy` on its strict-alignment target.
    ///
    /// # Errors
    /// As [`VmMap::mprotect`]; `out` is then empty.
    pub fn mprotect_into(
        &mut self,
        addr: u64,
        len: u64,
        prot: u64,
        out: &mut Protected,
    ) -> Result<(), Errno> {
        out.changes.truncate(0);
        out.error = None;
        let grows = prot & (PROT_GROWSDOWN | PROT_GROWSUP);
        let prot = prot & !(PROT_GROWSDOWN | PROT_GROWSUP);
        if grows == PROT_GROWSDOWN | PROT_GROWSUP || addr & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let end =
            page_up(len).and_then(|l| addr.checked_add(l)).filter(|&e| e > addr).ok_or(Errno::ENOMEM)?;
        if prot & !(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM | PROT_BTI | PROT_MTE) != 0 {
            return Err(Errno::EINVAL);
        }
        let new = Prot::from_bits_truncate(prot);
        // PROT_GROWSDOWN: the change reaches down to the start of the mapping that grows down
        // at (or just above) `addr`, as Linux's `do_mprotect_pkey` extends it.
        let addr = if grows == PROT_GROWSDOWN {
            let v = self.tree.first_ending_after(addr).copied();
            match v {
                Some(v) if v.start < end && v.flags.contains(VmaFlags::GROWSDOWN) => v.start,
                Some(v) if v.start < end => return Err(Errno::EINVAL),
                _ => return Err(Errno::ENOMEM),
            }
        } else {
            addr
        };
        // One visit of the leaf does the common case whole. Otherwise one look (by the finger
        // that visit left, without a descent) serves the checks on the first mapping and, when
        // the range lies in it, the selection and the neighbours its rewrite needs.
        if grows == 0 && self.protect_whole_area(addr, end, new, out) {
            return Ok(());
        }
        let around = self.tree.around(addr);
        let Some(&first) = around.at() else { return Err(Errno::ENOMEM) };
        if grows == PROT_GROWSUP {
            // No mapping grows up on arm64.
            return Err(Errno::EINVAL);
        }
        if new.write() && new.exec() && self.refuses_wx() {
            return Err(Errno::EACCES);
        }
        // The common case, a range inside one mapping, is that mapping's piece, borrowed: a
        // list of pieces in place is 48 bytes that the strict-alignment target moves by `memcpy`.
        let (single, selected);
        let (mut pieces, hole): (&[Vma], bool) = if first.end >= end {
            single = first.clip(addr, end);
            (core::slice::from_ref(&single), false)
        } else {
            let hole;
            (selected, hole) = self.select(addr, end, true)?;
            (selected.as_slice(), hole)
        };
        // An area that may never be writable (Linux's VM_MAYWRITE clear) refuses PROT_WRITE.
        if new.write() && pieces.iter().any(|p| p.flags.contains(VmaFlags::NOMAYWRITE)) {
            return Err(Errno::EACCES);
        }
        let gains_x_outside =
            new.exec() && pieces.iter().any(|p| !p.prot.exec() && !self.inside_window(p.start, p.end));
        if gains_x_outside && self.window.strict {
            return Err(Errno::EACCES);
        }
        // Linux's mprotect_fixup, area by area: the areas before the first refusal change, and
        // the call then fails. For each area: EACCES where MDWE refuses an area that gains
        // PROT_EXEC (`map_deny_write_exec`, checked first), EPERM for a sealed area (even one
        // already at the new rights: `mseal`), else ENOMEM.
        let gains_exec =
            if self.mdwe != 0 { pieces.iter().position(|p| new.exec() && !p.prot.exec()) } else { None };
        let sealed =
            if self.sealed { pieces.iter().position(|p| p.flags.contains(VmaFlags::SEALED)) } else { None };
        let refused = self.mprotect_refusal(pieces, new);
        // The first area refused stops the call; of two refusals of one area, the order above
        // decides its errno (a later one replaces an earlier only at a lower index).
        let mut stop: Option<(usize, Errno)> = None;
        for (i, errno) in [(gains_exec, Errno::EACCES), (sealed, Errno::EPERM), (refused, Errno::ENOMEM)] {
            if let Some(i) = i
                && stop.is_none_or(|(j, _)| i < j)
            {
                stop = Some((i, errno));
            }
        }
        if let Some((i, _)) = stop {
            pieces = &pieces[..i];
        }
        for p in pieces.iter().filter(|p| p.prot != new.kept_from(p.prot)) {
            let new = new.kept_from(p.prot);
            let change = ProtChange { start: p.start, end: p.end, old: p.prot, new, flags: p.flags };
            if let Err(e) = out.changes.push(change) {
                out.changes.truncate(0);
                return Err(e);
            }
        }
        if !pieces.is_empty()
            && let Err(e) = self.reserve()
        {
            out.changes.truncate(0);
            return Err(e);
        }
        self.rewrite_from(pieces, Some(&around), |p| Vma { prot: new.kept_from(p.prot), ..*p });
        if gains_x_outside && !pieces.is_empty() {
            self.window.placed_outside += 1;
        }
        out.error = match stop {
            Some((_, errno)) => Some(errno),
            None => hole.then_some(Errno::ENOMEM),
        };
        Ok(())
    }

    /// How many new areas rewriting piece `p` (of one mapping) as `changed` creates: one per end
    /// of `p` strictly inside its mapping, unless, as Linux's `vma_merge` does first, the piece
    /// reaches the mapping's other end and joins the neighbour there (the boundary moves).
    pub(super) fn splits_needed(&self, p: &Vma, changed: &Vma) -> usize {
        let around = self.tree.around(p.start);
        let Some(whole) = around.at() else { return 0 };
        let joins_prev = p.start == whole.start
            && around.prev().is_some_and(|v| v.end == p.start && v.merges_with(changed));
        let joins_next =
            p.end == whole.end && around.next().is_some_and(|v| v.start == p.end && v.merges_with(changed));
        usize::from(whole.start < p.start && !joins_next) + usize::from(p.end < whole.end && !joins_prev)
    }

    /// The index of the first piece Linux's `mprotect_fixup` would refuse with `ENOMEM`: a split
    /// at `vm.max_map_count` (`split_vma`), becoming data past `RLIMIT_AS`/`RLIMIT_DATA`, or
    /// becoming writable (charged) while larger than RAM (the heuristic overcommit).
    fn mprotect_refusal(&self, pieces: &[Vma], new: Prot) -> Option<usize> {
        let (mut count, mut data) = (self.tree.len(), self.data);
        let max = self.layout.max_map_count;
        let rules = self.write_rules();
        // Each piece splits at most twice: far from the limit, no split can pass it, and the
        // descent that counts a piece's splits is not needed.
        let roomy = count.saturating_add(pieces.len().saturating_mul(2)) <= max;
        for (i, p) in pieces.iter().enumerate() {
            let new = new.kept_from(p.prot);
            if p.prot == new {
                continue;
            }
            let splits = if roomy { 0 } else { self.splits_needed(p, &Vma { prot: new, ..*p }) };
            if splits > 0 && count + splits > max {
                return Some(i);
            }
            count += splits;
            if rules.refuses(p, new, data) {
                return Some(i);
            }
            let (was, becomes) = (is_data(p.prot, p.flags), is_data(new, p.flags));
            if becomes && !was {
                data += p.len();
            } else if was && !becomes {
                data -= p.len();
            }
        }
        None
    }
}

/// What decides whether an area may become writable, read from the map once per call: a Copy
/// of counters and limits, so that a check made inside a leaf edit borrows nothing of the map.
#[derive(Clone, Copy, Debug)]
struct WriteRules {
    /// Bytes mapped.
    mapped: u64,
    /// `RLIMIT_AS` and `RLIMIT_DATA`, soft.
    as_cur: u64,
    data_cur: u64,
    /// Pages of RAM, for the heuristic overcommit.
    ram_pages: u64,
}

impl WriteRules {
    /// Whether Linux's `mprotect_fixup` refuses piece `p` becoming `new` (`ENOMEM`), `data`
    /// bytes of data mappings counted before it: with `new` writable, becoming data past
    /// `RLIMIT_AS`/`RLIMIT_DATA` where it fitted before, or a private area becoming writable
    /// (charged) while larger than RAM (`__vm_enough_memory`'s guess).
    fn refuses(&self, p: &Vma, new: Prot, data: u64) -> bool {
        if !new.write() {
            return false;
        }
        let (was, becomes) = (is_data(p.prot, p.flags), is_data(new, p.flags));
        let fits = |d: bool| {
            self.mapped.saturating_add(p.len()) <= self.as_cur
                && (!d || data.saturating_add(p.len()) <= self.data_cur)
        };
        let charged = !p.prot.write() && !p.flags.contains(VmaFlags::SHARED);
        (!fits(becomes) && fits(was)) || (charged && !enough_memory(self.ram_pages, p.len()))
    }
}

impl VmMap {
    fn write_rules(&self) -> WriteRules {
        WriteRules {
            mapped: self.mapped,
            as_cur: self.as_limit.cur,
            data_cur: self.data_limit.cur,
            ram_pages: self.layout.ram_pages,
        }
    }

    /// The common `mprotect`, decided and done in one visit of one leaf (by the tree's finger,
    /// without a descent, when the last edit was there: the second call of a pair): `[addr,
    /// end)` is one whole mapping, it gains no `PROT_EXEC`, no mapping was ever sealed, nothing
    /// refuses it and it joins neither neighbour (at the leaf's edge, the neighbour is the one
    /// the finger keeps outside it). Its attributes change in place and its change goes to
    /// `out`; `true` when done. Anything else (a piece of a mapping, a merge, any refusal)
    /// returns `false` having changed nothing, for the general path, which decides it and
    /// gives the errno.
    fn protect_whole_area(&mut self, addr: u64, end: u64, new: Prot, out: &mut Protected) -> bool {
        if self.sealed || (new.write() && new.exec() && self.refuses_wx()) {
            return false;
        }
        let (rules, data) = (self.write_rules(), self.data);
        let changes = &mut out.changes;
        let done = self.tree.edit_leaf_outside(addr, |vs, _, outside| {
            let k = vs.partition_point(|v| v.start <= addr);
            let Some(at) = k.checked_sub(1).map(|j| vs[j]) else { return (None, Edit::Kept) };
            let wanted = Vma { prot: new.kept_from(at.prot), ..at };
            let prev = if k >= 2 { Some(&vs[k - 2]) } else { outside.prev() };
            let next = if k < vs.len() { Some(&vs[k]) } else { outside.next() };
            if (at.start, at.end) != (addr, end)
                || (new.exec() && !at.prot.exec())
                || (new.write() && at.flags.contains(VmaFlags::NOMAYWRITE))
                || rules.refuses(&at, wanted.prot, data)
                || prev.is_some_and(|p| p.end == addr && p.merges_with(&wanted))
                || next.is_some_and(|n| n.start == end && n.merges_with(&wanted))
            {
                return (None, Edit::Kept);
            }
            if wanted.prot != at.prot {
                let change = ProtChange { start: addr, end, old: at.prot, new: wanted.prot, flags: at.flags };
                if changes.push(change).is_err() {
                    return (None, Edit::Kept);
                }
                vs[k - 1] = wanted;
            }
            (Some((at, wanted)), Edit::Kept)
        });
        let Some((was, now)) = done else { return false };
        if was.prot != now.prot {
            self.count(&was, false);
            self.count(&now, true);
        }
        true
    }
}
