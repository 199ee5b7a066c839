//! `fork` and copy-on-write, as Linux does them (`dup_mmap` and `copy_present_pte` in
//! kernel/fork.c and mm/memory.c, `do_wp_page` in mm/memory.c), with the TLB work a memory
//! manager should do and no more:
//! - the child gets the parent's areas (`VmMap::fork_copy`) and every present page of them,
//!   the same frames mapped in its own table (invalid to valid: no TLBI), private ones
//!   read-only on both sides: pages a last-level table's worth at a time, in one loop that
//!   takes the frame's reference, makes the parent's entry read-only in place (a permission
//!   change needs no break-before-make) and writes the same entry into the child, as Linux's
//!   `copy_pte_range` does (`ForkCopy::share_pages`); blocks joined where physically contiguous
//!   and mapped in one call, so 2 MiB blocks and runs of them stay blocks and runs in the child,
//!   and made read-only in the parent through the engine after the last area (with a
//!   contiguous run an area boundary cuts, whose hint must go first);
//! - every change to the parent goes into ONE flush for the whole address space
//!   (`AddressSpace::fork_copy`), aimed where its [`FlushTargets`] says at that moment (its
//!   ASID, local or broadcast by its CPU set), on failure too: a failed fork leaves the pages it
//!   made read-only so (as Linux does), and the first write makes each writable again in place;
//! - a write fault on such a page copies it into a new frame, replacing the entry with
//!   break-before-make (a new output address for a valid entry), or, when the frame has become
//!   the last reference, makes it writable in place; a 2 MiB block or a contiguous run is split
//!   only then, and kept whole when every frame of it is the last reference.
//!
//! Frames are reference counted by the provider ([`UserFrames::share`]); `free` drops one
//! reference, always after the flush that removed the translation it stood for.
//! `MADV_DONTFORK` areas are not given to the child, `MADV_WIPEONFORK` ones are given empty; the
//! guard markers of the others are copied (`super::guard`).
//! `MAP_SHARED|MAP_ANONYMOUS` areas are populated in the parent at fork (so both sides hold the
//! same frames) and never copied: a write fault there only makes the page writable. Mappings of
//! a shared memory object (`super::object`) need no populating: the child finds the pages the
//! parent has not touched in the object, as the parent does.

use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Access as Ap, Attributes};
use crate::paging::{Constraints, Leaf, PageTable, Translation};
use crate::space::FlushTargets;
use crate::tlb::{TlbFeatures, TlbHardware, TlbIssuer};
use crate::vm::{Errno, VmaFlags};

use super::{Fault, UserFrames, UserMemory, user_attrs};
use crate::vm::Prot;

/// `attrs` without write permission (what fork leaves in the parent and gives the child for a
/// private writable page).
pub(super) const fn write_protected(attrs: Attributes) -> Attributes {
    match attrs.access() {
        Ap::UserRw => attrs.with_access(Ap::UserRo),
        Ap::KernelRw => attrs.with_access(Ap::KernelRo),
        _ => attrs,
    }
}

/// A run of pages the child is given in one call: virtually and physically contiguous, uniform.
#[derive(Clone, Copy)]
struct Extent {
    va: u64,
    pa: u64,
    len: u64,
    attrs: Attributes,
}

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// `fork`: a child memory over `table` (a fresh lower-half table; the child's own ASID comes
    /// with `targets`) holding this memory's areas and sharing every private page copy-on-write
    /// (module documentation). The parent's writable pages become read-only with one flush.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the child's areas, its table frames or a frame's reference count cannot be
    /// had; then the child is destroyed (every reference it took dropped) and the parent keeps
    /// its areas, contents, frames and references; pages it had already made read-only stay so,
    /// and the first write makes each writable again in place (module documentation).
    pub fn fork(
        &mut self,
        table: PageTable<T>,
        issuer: TlbIssuer<H>,
        features: TlbFeatures,
        targets: P,
        frames: D,
    ) -> Result<Self, Errno> {
        // Shared memory is one object for parent and child: its pages must exist before the
        // fork to be the same frames in both (there is no shared page cache to find them in
        // later), so the parent's are populated first.
        let mut cursor = 0;
        while let Some(area) = self.vm.tree().first_ending_after(cursor).copied() {
            cursor = area.end;
            // An object's pages are found in the object later (`object_fault`).
            let fork_shared = area.flags.contains(VmaFlags::SHARED)
                && !area.flags.contains(VmaFlags::DONTFORK)
                && !area.flags.contains(VmaFlags::OBJECT);
            if fork_shared && super::allows(area.prot, super::Access::Read) {
                self.populate(area.start, area.end, super::Access::Read).map_err(|_| Errno::ENOMEM)?;
            }
        }
        let vm = self.vm.fork_copy()?;
        let backings = self.backings.try_clone()?;
        let mut child = Self::new(table, issuer, features, targets, frames, *self.vm.layout());
        child.vm = vm;
        child.backings = backings;
        child.large = self.large;
        child.forked = true;
        // One pass over the areas, the parent's changes flushed once at the end (on error too:
        // the pages write-protected so far stay so, as a failed fork leaves them on Linux; the
        // first write makes each writable again in place).
        let Self { space, frames, .. } = self;
        let result = space.fork_copy(|copy| {
            // The span of the areas whose blocks or cut runs the page copy left writable.
            let mut rest: Option<(u64, u64)> = None;
            let mut cursor = 0;
            while let Some(area) = child.vm.tree().first_ending_after(cursor).copied() {
                cursor = area.end;
                if area.flags.contains(VmaFlags::WIPEONFORK) {
                    continue;
                }
                let private = !area.flags.contains(VmaFlags::SHARED);
                let cow = |a: Attributes| if private { write_protected(a) } else { a };
                // Blocks: physically contiguous ones joined into one map, which keeps the runs
                // and their contiguous hints whole in the child.
                let mut result = Ok(());
                let (mut run, mut blocks): (Option<Extent>, bool) = (None, false);
                let _ = copy.table().walk_blocks(VirtAddr(area.start), area.len(), |leaf| {
                    blocks = true;
                    if result.is_err() {
                        return;
                    }
                    let start = leaf.va.0.max(area.start);
                    let end = (leaf.va.0 + leaf.size).min(area.end);
                    let pa = leaf.translate(VirtAddr(start)).0;
                    let attrs = cow(leaf.attrs);
                    match &mut run {
                        Some(r) if r.va + r.len == start && r.pa + r.len == pa && r.attrs == attrs => {
                            r.len += end - start;
                        }
                        _ => {
                            if let Some(r) = run.take() {
                                result = child.adopt(frames, r);
                            }
                            run = Some(Extent { va: start, pa, len: end - start, attrs });
                        }
                    }
                });
                if let (Ok(()), Some(r)) = (result, run) {
                    result = child.adopt(frames, r);
                }
                // Pages: a last-level table's worth at a time, a reference taken for each frame
                // but the shared zero region's, the parent's entry made read-only in the same
                // pass.
                if result.is_ok() {
                    let zero = child.zero;
                    let mut zeros = 0;
                    let copied =
                        copy.share_pages(&mut child.space, VirtAddr(area.start), area.len(), cow, |pa| {
                            if zero.is_some_and(|z| z.contains(pa)) {
                                zeros += 1;
                                true
                            } else {
                                frames.share(pa)
                            }
                        });
                    match copied {
                        // The parent's blocks, and a contiguous run the area cuts, are made
                        // read-only after the last area is copied (below).
                        Ok(c) => {
                            child.zero_pages += zeros;
                            child.data_frames += c.pages - zeros;
                            if private && (blocks || c.cut_runs_left) {
                                rest = Some(rest.map_or((area.start, area.end), |(s, _)| (s, area.end)));
                            }
                        }
                        Err(_) => result = Err(Errno::ENOMEM),
                    }
                }
                // The guard markers, as Linux's copy of the page tables copies them.
                let _ = copy.table().guards_in(VirtAddr(area.start), area.len(), |va, len| {
                    if result.is_ok() && child.space.install_guards(va, len).is_err() {
                        result = Err(Errno::ENOMEM);
                    }
                });
                result?;
            }
            // Through the engine, which clears a cut run's hint first (break-before-make, staged
            // into the one flush), and only now: staging that run would leave its entries in the
            // next area invalid until the flush, and the next area's copy would miss them. The
            // span may hold areas between (shared ones made read-only too: a write fault there
            // makes the page writable again) and pages already read-only (nothing to do).
            if let Some((start, end)) = rest {
                copy.protect_with(VirtAddr(start), end - start, write_protected)
                    .map_err(|_| Errno::ENOMEM)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            let _ = child.destroy();
            return Err(e);
        }
        self.forked = true;
        // The pages are shared now: their frees are cancelled (Linux does not discard a
        // lazily freed page mapped twice either), and the child has none.
        self.lazy = super::lazy::PageRanges::new();
        Ok(child)
    }

    /// Maps `r` in this (child) memory, one more reference to each of its frames taken from the
    /// parent's provider. On error nothing of `r` stays.
    fn adopt(&mut self, frames: &mut D, r: Extent) -> Result<(), Errno> {
        let pages = r.len / PAGE_SIZE;
        // The pages of the shared zero region take no reference (they are never freed); an
        // extent of physically contiguous frames may hold them and data frames beside them.
        // (One comparison per extent when no zero page is in it, the common case.)
        let zero = self.zero.filter(|_| self.covers_zero(r.pa, r.len));
        let counted = |i: u64| !zero.is_some_and(|z| z.contains(PhysAddr(r.pa + i * PAGE_SIZE)));
        for i in 0..pages {
            if counted(i) && !frames.share(PhysAddr(r.pa + i * PAGE_SIZE)) {
                for j in (0..i).filter(|&j| counted(j)) {
                    frames.free(PhysAddr(r.pa + j * PAGE_SIZE));
                }
                return Err(Errno::ENOMEM);
            }
        }
        if self.space.map(VirtAddr(r.va), PhysAddr(r.pa), r.len, r.attrs, Constraints::NONE).is_err() {
            for i in (0..pages).filter(|&i| counted(i)) {
                frames.free(PhysAddr(r.pa + i * PAGE_SIZE));
            }
            return Err(Errno::ENOMEM);
        }
        let zeros = self.zero_pages_in(r.pa, r.len);
        self.zero_pages += zeros;
        self.data_frames += pages - zeros;
        Ok(())
    }

    /// A write to the present, read-only page `page` (translated by `leaf`, the fault's own
    /// lookup) of a writable area `[vstart, vend)`: copy-on-write (module documentation).
    pub(super) fn write_fault(
        &mut self,
        page: u64,
        leaf: &Leaf,
        (vstart, vend): (u64, u64),
        prot: Prot,
        shared_area: bool,
    ) -> Result<(), Fault> {
        let attrs = user_attrs(prot).ok_or(Fault::Protection { prot })?;
        let start = leaf.va.0.max(vstart);
        let end = (leaf.va.0 + leaf.size).min(vend);
        let first = leaf.translate(VirtAddr(start)).0;
        if self.is_zero_page(leaf.translate(VirtAddr(page))) {
            return self.zero_write_fault(page, attrs, prot);
        }
        // The shared zero region is never this memory's alone (a leaf joining it with other
        // frames is never made writable whole).
        let last_reference = |m: &Self, from: u64, len: u64| {
            !m.covers_zero(from, len)
                && (0..len / PAGE_SIZE).all(|i| !m.frames.is_shared(PhysAddr(from + i * PAGE_SIZE)))
        };
        // Shared memory is never copied; a private leaf all of whose frames are this memory's
        // alone is reused whole (a block stays a block).
        let (reuse_va, reuse_len) = if shared_area || last_reference(self, first, end - start) {
            (start, end - start)
        } else if last_reference(self, leaf.translate(VirtAddr(page)).0, PAGE_SIZE) {
            (page, PAGE_SIZE)
        } else {
            (0, 0)
        };
        if reuse_len != 0 {
            // Written (or made writable with the page written): not free any more.
            self.forget_free(reuse_va, reuse_va + reuse_len);
            self.space
                .protect_with(VirtAddr(reuse_va), reuse_len, |a| a.with_permissions_of(attrs))
                .map_err(|_| Fault::OutOfMemory)?;
            self.cow_reuses += 1;
            self.faults += 1;
            return Ok(());
        }
        let old = leaf.translate(VirtAddr(page));
        let new = self.frames.alloc_copy_of(old).ok_or(Fault::OutOfMemory)?;
        if prot.exec() {
            self.frames.sync_icache(new);
        }
        let frames = &mut self.frames;
        // A new output address for a valid entry: break-before-make, one flush; the old frame's
        // reference is dropped after it.
        let replaced = self.space.remap(VirtAddr(page), new, PAGE_SIZE, attrs, Constraints::NONE, |u| {
            for i in 0..u.size / PAGE_SIZE {
                frames.free(PhysAddr(u.pa.0 + i * PAGE_SIZE));
            }
        });
        if replaced.is_err() {
            self.frames.free(new);
            return Err(Fault::OutOfMemory);
        }
        self.cancel_free(page);
        self.cow_copies += 1;
        self.faults += 1;
        Ok(())
    }

    /// A write to the page `page` that maps a page of the shared zero region (read-only): a
    /// zeroed frame of its own replaces it (Linux's `wp_page_copy` on the zero pfn: nothing to
    /// copy), with break-before-make and one flush, as any copy-on-write fault. A zero block or
    /// run is split for it in the same break-before-make (the rest stays mapped to the region's
    /// pages), as Linux ≥ 5.8 splits its huge zero PMD and faults the written page alone
    /// (`do_huge_pmd_wp_page`): a program that reads a large range and writes a little of it
    /// holds the pages it wrote, not the blocks. The zero page is not freed.
    fn zero_write_fault(&mut self, page: u64, attrs: Attributes, prot: Prot) -> Result<(), Fault> {
        let new = self.frames.alloc_zeroed().ok_or(Fault::OutOfMemory)?;
        if prot.exec() {
            self.frames.sync_icache(new);
        }
        let replaced = self.space.remap(VirtAddr(page), new, PAGE_SIZE, attrs, Constraints::NONE, |_| {});
        if replaced.is_err() {
            self.frames.free(new);
            return Err(Fault::OutOfMemory);
        }
        self.zero_pages -= 1;
        self.data_frames += 1;
        self.cancel_free(page);
        self.faults += 1;
        Ok(())
    }
}
