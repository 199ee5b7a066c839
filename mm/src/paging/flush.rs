//! The record of what an `unmap` or `protect` changed, for the TLB planner, and the table frames
//! that must outlive the invalidation.
//!
//! Why it is built this way: freeing a detached table before the TLB invalidation that covers it
//! has completed lets a walk cache keep pointing into a frame that is being reused. So the frames
//! travel inside the record and can only be freed by consuming it ([`PendingFlush::release`]),
//! after the flush. The list of frames is intrusive (threaded through word 0 of the frames
//! themselves, which no walker can reach any more) so that recording costs no allocation, even
//! in early boot. A link word is always an *invalid* descriptor (bit 0 clear), so a stale walk
//! that still reaches a detached table before the flush reads a fault, never a bogus mapping.

use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::Attributes;

use super::{Translation, VaRange};

/// The link word of the last frame of a list.
const LINK_END: u64 = 0;
/// Tag ORed into a link word: bit 1 set, bit 0 clear, so the word is an invalid descriptor and
/// never zero (a frame may sit at physical address 0).
const LINK_TAG: u64 = 0b10;

/// An intrusive singly linked list of table frames, linked through word 0 of each frame.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FrameList {
    head: Option<PhysAddr>,
    tail: Option<PhysAddr>,
    len: usize,
}

impl FrameList {
    /// An empty list.
    pub const fn new() -> Self {
        Self { head: None, tail: None, len: 0 }
    }

    /// Number of frames in the list.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn link_ptr<T: Translation>(pa: PhysAddr, translation: &T) -> *mut u64 {
        translation.table_ptr(pa).cast::<u64>().as_ptr()
    }

    fn write_link<T: Translation>(pa: PhysAddr, next: Option<PhysAddr>, translation: &T) {
        let word = match next {
            Some(next) => next.0 | LINK_TAG,
            None => LINK_END,
        };
        // SAFETY: `pa` is a table frame owned by the caller (allocated from `translation` and no
        // longer reachable from any live table entry), so by the `Translation` contract its word
        // 0 is valid for an aligned write.
        unsafe { Self::link_ptr(pa, translation).write_volatile(word) }
    }

    fn read_link<T: Translation>(pa: PhysAddr, translation: &T) -> Option<PhysAddr> {
        // SAFETY: as in `write_link`.
        let word = unsafe { Self::link_ptr(pa, translation).read_volatile() };
        if word == LINK_END { None } else { Some(PhysAddr(word & !LINK_TAG)) }
    }

    /// Adds the frame `pa` (owned by the caller, unreachable by any walker) at the head.
    pub(crate) fn push<T: Translation>(&mut self, pa: PhysAddr, translation: &T) {
        Self::write_link(pa, self.head, translation);
        if self.tail.is_none() {
            self.tail = Some(pa);
        }
        self.head = Some(pa);
        self.len += 1;
    }

    /// Removes the frame at the head.
    pub(crate) fn pop<T: Translation>(&mut self, translation: &T) -> Option<PhysAddr> {
        let head = self.head?;
        self.head = Self::read_link(head, translation);
        if self.head.is_none() {
            self.tail = None;
        }
        self.len -= 1;
        Some(head)
    }

    /// Moves every frame of `other` to the end of `self`.
    pub(crate) fn append<T: Translation>(&mut self, other: Self, translation: &T) {
        let Some(other_head) = other.head else { return };
        match self.tail {
            Some(tail) => Self::write_link(tail, Some(other_head), translation),
            None => self.head = Some(other_head),
        }
        self.tail = other.tail;
        self.len += other.len;
    }

    /// Returns every frame to `translation`.
    pub(crate) fn release<T: Translation>(mut self, translation: &mut T) {
        while let Some(pa) = self.pop(translation) {
            translation.deallocate_table(pa);
        }
    }
}

/// A range of virtual addresses whose translations changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushRange {
    /// First address (page aligned).
    pub start: VirtAddr,
    /// Length in bytes (a multiple of 4 KiB, at most 2^48).
    pub size: u64,
}

impl FlushRange {
    /// Number of 4 KiB pages in the range.
    pub const fn pages(&self) -> u64 {
        self.size / PAGE_SIZE
    }

    /// The first address past the range, or `None` when the range ends at the top of the
    /// address space (2^64).
    pub const fn end(&self) -> Option<VirtAddr> {
        self.start.checked_add(self.size)
    }

    /// The first address past the range, with the top of the address space (2^64) written as
    /// `VirtAddr(0)`: the convention of [`crate::tlb::TlbRequest::end`].
    pub const fn end_or_zero(&self) -> VirtAddr {
        self.start.wrapping_add(self.size)
    }

    /// Whether `va` lies in the range.
    pub const fn contains(&self, va: VirtAddr) -> bool {
        va.0 >= self.start.0 && va.0 - self.start.0 < self.size
    }
}

/// What a set of changed leaves tells the TLB planner, kept as bits so that adding a leaf costs
/// three bitwise operations and no test: the AND and the OR of the leaves' bits before the
/// change, and the AND of the bits they were given (`u64::MAX` if none). Only nG, PXN and UXN
/// are read, which sit at the same bits in a descriptor and in [`Attributes`] (read through
/// [`Attributes::from_descriptor_bits`]). Shared by the record and the engine's page runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeafBits {
    old_and: u64,
    old_or: u64,
    new_and: u64,
}

impl LeafBits {
    /// No leaf.
    pub(crate) const NONE: Self = Self { old_and: u64::MAX, old_or: 0, new_and: u64::MAX };

    /// One leaf removed whose bits (descriptor or [`Attributes`]) were `old`.
    #[inline(always)]
    pub(crate) const fn removed(old: u64) -> Self {
        Self { old_and: old, old_or: old, new_and: u64::MAX }
    }

    /// Leaves removed whose bits ANDed are `and` and ORed are `or` (`u64::MAX` and 0: none).
    #[inline(always)]
    pub(crate) const fn of(and: u64, or: u64) -> Self {
        Self { old_and: and, old_or: or, new_and: u64::MAX }
    }

    /// Adds a leaf whose bits were `old`, removed (`new == None`) or given the bits `new`.
    #[inline(always)]
    pub(crate) fn add(&mut self, old: u64, new: Option<u64>) {
        self.old_and &= old;
        self.old_or |= old;
        if let Some(new) = new {
            self.new_and &= new;
        }
    }

    /// Adds every leaf of `other`.
    #[inline(always)]
    pub(crate) fn absorb(&mut self, other: Self) {
        self.old_and &= other.old_and;
        self.old_or |= other.old_or;
        self.new_and &= other.new_and;
    }

    /// Some leaf was global: nG clear in the AND of the old bits (all ones with no leaf).
    fn has_global(&self) -> bool {
        Attributes::from_descriptor_bits(self.old_and).is_global()
    }

    /// Some leaf was non-global: nG set in the OR.
    fn has_non_global(&self) -> bool {
        !Attributes::from_descriptor_bits(self.old_or).is_global()
    }

    /// Some leaf was (or became) executable: PXN or UXN clear in an AND.
    fn has_executable(&self) -> bool {
        let and = Attributes::from_descriptor_bits(self.old_and & self.new_and);
        !and.pxn() || !and.uxn()
    }
}

/// What the TLB invalidation after an `unmap` or `protect` must cover, plus the table frames that
/// may be freed only after it has completed.
///
/// Turn it into a flush (the planner in [`crate::tlb`] takes the range, the leaf sizes and
/// whether table entries were removed), wait for it to complete, then call
/// [`release`](Self::release). Records of one operation over several mappings can be merged with
/// [`absorb`](Self::absorb) so that it ends with one flush.
///
/// Dropping a record that still holds table frames leaks them (the host tests treat it as a
/// failure).
#[must_use = "the TLB must be flushed and the record released, or table frames leak"]
#[derive(Debug)]
pub struct PendingFlush {
    va_range: VaRange,
    /// Lowest and one-past-highest changed offset from the range base; `lo >= hi` when empty.
    lo: u64,
    hi: u64,
    tables_removed: bool,
    min_leaf: u64,
    max_leaf: u64,
    leaves: u64,
    /// The changed leaves' bits, which `has_global`, `has_non_global` and `has_executable` read.
    bits: LeafBits,
    frames: FrameList,
}

impl PendingFlush {
    /// An empty record for a table translating `va_range`.
    pub const fn new(va_range: VaRange) -> Self {
        Self {
            va_range,
            lo: u64::MAX,
            hi: 0,
            tables_removed: false,
            min_leaf: 0,
            max_leaf: 0,
            leaves: 0,
            bits: LeafBits::NONE,
            frames: FrameList::new(),
        }
    }

    /// Records that the leaf of `size` bytes at offset `off` with attributes `old` was removed
    /// (`new == None`) or given attributes `new`.
    pub(crate) fn add_leaf(&mut self, off: u64, size: u64, old: Attributes, new: Option<Attributes>) {
        self.lo = self.lo.min(off);
        self.hi = self.hi.max(off + size);
        self.min_leaf = if self.leaves == 0 { size } else { self.min_leaf.min(size) };
        self.max_leaf = self.max_leaf.max(size);
        self.leaves += 1;
        self.bits.add(old.bits(), new.map(Attributes::bits));
    }

    /// Records that `count` consecutive leaves of `size` bytes from offset `off`, all with
    /// attributes `old`, were removed (`new == None`) or given attributes `new`.
    pub(crate) fn add_run(
        &mut self,
        off: u64,
        count: u64,
        size: u64,
        old: Attributes,
        new: Option<Attributes>,
    ) {
        if count == 0 {
            return;
        }
        self.add_leaf(off, size, old, new);
        if count > 1 {
            self.add_leaf(off + (count - 1) * size, size, old, new);
            self.leaves += count - 2;
        }
    }

    /// Records that `count` pages (4 KiB leaves) covering offsets `[lo, hi)` at least (the first
    /// and last changed page bound it) were changed, with `bits` their bits. `count == 0`
    /// records nothing.
    #[inline(always)]
    pub(crate) fn add_pages(&mut self, lo: u64, hi: u64, count: u64, bits: LeafBits) {
        if count == 0 {
            return;
        }
        self.lo = self.lo.min(lo);
        self.hi = self.hi.max(hi);
        self.min_leaf = if self.leaves == 0 { PAGE_SIZE } else { self.min_leaf.min(PAGE_SIZE) };
        self.max_leaf = self.max_leaf.max(PAGE_SIZE);
        self.leaves += count;
        self.bits.absorb(bits);
    }

    /// Records that the guard markers (`guard.rs`) of `[lo, hi)` were cleared: no TLB holds a
    /// marker, but the table holding them may be detached by the same operation, and the
    /// invalidation must then reach the walk-cache entries that pointed at it, so the range
    /// covers them (no leaf is counted).
    pub(crate) fn cover(&mut self, lo: u64, hi: u64) {
        mutant!(
            {
                self.lo = self.lo.min(lo);
                self.hi = self.hi.max(hi);
            },
            GuardClearUncovered => {}
        );
    }

    /// Records that a table entry was removed or replaced without handing its frame to the
    /// record (the staged operations free such frames themselves, after the flush).
    pub(crate) fn note_table_removed(&mut self) {
        self.tables_removed = true;
    }

    /// Records that the table frame `pa` was detached from the tree.
    pub(crate) fn detach_table<T: Translation>(&mut self, pa: PhysAddr, translation: &T) {
        self.tables_removed = true;
        self.frames.push(pa, translation);
    }

    /// The range whose translations changed (the smallest range covering every changed leaf),
    /// or `None` if nothing changed. When tables were detached, the range also covers every
    /// walk-cache entry that pointed to them: a table is detached only when a leaf inside it was
    /// removed, or a guard marker inside it cleared (`cover`), by the same
    /// operation, so the non-leaf invalidation of any address in it drops the cached table
    /// entries of every level.
    pub fn range(&self) -> Option<FlushRange> {
        if self.lo >= self.hi {
            return None;
        }
        Some(FlushRange { start: VirtAddr(self.va_range.base().0 | self.lo), size: self.hi - self.lo })
    }

    /// The half of the address space the record belongs to.
    pub fn va_range(&self) -> VaRange {
        self.va_range
    }

    /// Whether any table entry was removed: if so the leaf-only TLBI forms (`VALE1IS`,
    /// `RVALE1IS`, `VAALE1IS`) must not be used.
    pub fn tables_removed(&self) -> bool {
        self.tables_removed
    }

    /// Whether the leaf-only TLBI forms suffice.
    pub fn leaf_only(&self) -> bool {
        !self.tables_removed
    }

    /// The smallest size of a changed leaf (4 KiB, 2 MiB or 1 GiB); 0 if no leaf changed.
    pub fn min_leaf_size(&self) -> u64 {
        self.min_leaf
    }

    /// The largest size of a changed leaf; 0 if no leaf changed.
    pub fn max_leaf_size(&self) -> u64 {
        self.max_leaf
    }

    /// Number of leaves changed.
    pub fn leaves_changed(&self) -> u64 {
        self.leaves
    }

    /// Whether a changed leaf was global (nG clear): its TLB entries match every ASID, so an
    /// ASID-based invalidation does not remove them.
    pub fn has_global(&self) -> bool {
        self.bits.has_global()
    }

    /// Whether a changed leaf was non-global (tagged with an ASID).
    pub fn has_non_global(&self) -> bool {
        self.bits.has_non_global()
    }

    /// Whether a changed leaf was, or became, executable at EL0 or EL1 (the issuer then ends
    /// with an `ISB`, and I-cache maintenance may be due).
    pub fn has_executable(&self) -> bool {
        self.bits.has_executable()
    }

    /// Number of detached table frames held by the record.
    pub fn detached_tables(&self) -> usize {
        self.frames.len()
    }

    /// Whether the record asks for any TLB invalidation.
    pub fn needs_flush(&self) -> bool {
        self.lo < self.hi || self.tables_removed
    }

    /// Merges `other` (a record for the same table) into `self`: the range becomes the smallest
    /// one covering both, the flags are ORed, the frames joined. `translation` is the one the
    /// frames came from.
    pub fn absorb<T: Translation>(&mut self, mut other: Self, translation: &T) {
        debug_assert_eq!(self.va_range, other.va_range);
        self.lo = self.lo.min(other.lo);
        self.hi = self.hi.max(other.hi);
        self.tables_removed |= other.tables_removed;
        if other.leaves != 0 {
            self.min_leaf = if self.leaves == 0 { other.min_leaf } else { self.min_leaf.min(other.min_leaf) };
            self.max_leaf = self.max_leaf.max(other.max_leaf);
        }
        self.leaves += other.leaves;
        self.bits.absorb(other.bits);
        let frames = core::mem::take(&mut other.frames);
        self.frames.append(frames, translation);
    }

    /// Frees the detached table frames.
    ///
    /// Call it only after the TLB invalidation covering [`range`](Self::range) (non-leaf forms
    /// if [`tables_removed`](Self::tables_removed)) has completed on every CPU that may have
    /// cached the table (`DSB ISH` done), or if the table was never live.
    pub fn release<T: Translation>(mut self, translation: &mut T) {
        let frames = core::mem::take(&mut self.frames);
        frames.release(translation);
    }
}

#[cfg(test)]
impl Drop for PendingFlush {
    fn drop(&mut self) {
        assert!(
            std::thread::panicking() || self.frames.is_empty(),
            "PendingFlush dropped while holding table frames: flush the TLB, then call release()"
        );
    }
}
