//! [`VmMap`]: one process's user address space as Linux's memory system calls see it, plus this
//! kernel's two extensions (the code window and near placement) and W^X.
//!
//! Why here and not in the kernel: every rule below is decided from the set of mappings alone, so
//! the whole errno contract can be tested on the host against the man pages. Each call returns
//! what the kernel must then do to the page tables (the pieces a `MAP_FIXED` replaced, the ranges
//! whose protection changed, the pages `MADV_DONTNEED` drops), and the kernel applies it.
//!
//! Policy (docs/mm.md §8; the ABI is in [`super::abi`]):
//! - Linux arm64 semantics: top-down placement below [`Layout::mmap_base`] (then bottom-up from a
//!   quarter of the address space, as Linux falls back), hints honoured exactly when the range is
//!   free, 2 MiB alignment for unhinted anonymous mappings whose length is a multiple of 2 MiB
//!   (Linux 6.7+), nothing below [`Layout::mmap_min_addr`], Linux's errno values and their order.
//! - W^X: a mapping that would be writable and executable at once is refused with `EACCES`
//!   (mmap, mprotect, near placement) unless the process opted out ([`VmMap::set_allow_wx`]).
//! - Code window: one range of `size` bytes aligned to `size`, placed to contain the program's own
//!   executable segment when it fits, else in an aligned free gap found in one search (never by
//!   reserving twice the size and trimming). It is address space only: not a mapping, holds no
//!   memory, charged to nothing; it only steers placement. Mappings executable at creation or
//!   flagged `MAP_CODE` go inside, lowest fit first; when it is full they go outside on a range
//!   that crosses no 1 GiB line and `placed_outside` counts them (strict mode: `ENOMEM`). Other
//!   mappings never land inside it unless asked with `MAP_FIXED*`.
//! - `mprotect` adding `PROT_EXEC` to pages outside the window: **allowed and counted** in
//!   `placed_outside` by default; **`EACCES`** in strict mode (nothing changed). Why: a program
//!   that never heard of the window (a JIT doing the portable RW then RX dance) must see plain
//!   Linux behaviour, so the default cannot refuse; moving the pages is impossible (the program
//!   holds pointers into them). A program that turned strict mode on asked for "code only in the
//!   window", so refusing is what it wants, and `EACCES` ("not allowed for this mapping", as
//!   mprotect(2) uses it) cannot be confused with the `ENOMEM` of a hole. `MAP_FIXED` of an
//!   executable or `MAP_CODE` mapping outside the window follows the same rule.
//! - Near placement: [`VmMap::map_near`], exactly as [`super::abi::SYS_MMAP_NEAR`] says, in at most
//!   two gap searches (one below the target, one above).
//! - Limits, as Linux 6.1: `vm.max_map_count` (`mmap`, `brk` and near placement refuse a new
//!   mapping once the count is above it; a split that would pass it is refused by `munmap`,
//!   `mprotect` and `MAP_FIXED`), `RLIMIT_AS` and `RLIMIT_DATA` (`may_expand_vm`: mapped bytes,
//!   and private writable non-stack bytes), and the heuristic overcommit of `OVERCOMMIT_GUESS`
//!   (`__vm_enough_memory`: one accountable request larger than RAM plus swap,
//!   [`Layout::ram_pages`], is refused). All are `ENOMEM`. The code window is address space
//!   only, so it is charged to none of them.
//! - Memory: every allocation goes through [`super::fallible`]; a call first reserves the tree
//!   nodes it may need ([`SPARES`]), so it completes or fails with `ENOMEM` having changed
//!   nothing. Nothing here panics for want of heap.
//!
//! Where this differs from Linux, on purpose:
//! - near placement refuses unknown `prot` bits with `EINVAL` (`mmap` ignores them, as Linux's
//!   `calc_vm_prot_bits` does; `mprotect` refuses them, as Linux's `arch_validate_prot`);
//! - a hint is honoured only where the mapping may go: a data hint overlapping the code window,
//!   or a code hint outside it, is treated like an occupied hint (normal placement);
//! - no stack guard gap (no mapping grows down here); the type of an executable or `MAP_CODE`
//!   mapping is checked before the code window is searched (Linux checks it after placement,
//!   but the window's own refusals must not hide Linux's `EINVAL`);
//! - `brk`'s `RLIMIT_DATA` check counts the heap only (Linux adds the executable's data segment);
//! - an empty heap whose start falls inside the code window is moved to the window's end when
//!   the window is placed ([`VmMap::start_brk`]); Linux randomises the heap's start anyway;
//! - [`abi::WINDOW_SET_SIZE`] is refused with `EBUSY` only if a mapping now inside the window
//!   would be left outside the new one, so the program's own image (inside both) does not make
//!   the window impossible to resize.

use alloc::vec::Vec;

mod fork;
pub mod lock;
pub mod remap;

use super::abi::{self, CodeWindowInfo};
use super::advice::*;
use super::flags::*;
use super::limits::Rlimit;
use super::prot::*;
use super::tree::{Around, Dir, Edit, Fit, GapQuery, VmaTree};
use super::{Advice, Errno, PAGE, Prot, Vma, VmaFlags, fallible};

/// Mappings or pieces of mappings a call returns: the common calls return one, in place.
pub type Pieces = fallible::List<Vma, 2>;

/// Tree nodes one call reserves before changing anything: the most any call inserts beyond what
/// it removes (a mapping punched in the middle of another: two pieces plus the new one, less
/// the one taken out), plus one for the merge that follows.
pub const SPARES: usize = 3;

/// 1 GiB: code placed outside the window never crosses a multiple of this.
const GIB: u64 = 1 << 30;
/// 2 MiB: anonymous mappings of a multiple of this are aligned to it (for block promotion).
const BLOCK_2M: u64 = crate::addr::BLOCK_2M;
/// Smallest code-window size.
pub const WINDOW_MIN: u64 = 2 << 20;
/// Largest code-window size.
pub const WINDOW_MAX: u64 = 4 << 30;
/// Default code-window size.
pub const WINDOW_DEFAULT: u64 = 512 << 20;

/// The fixed shape of a user address space, chosen by the kernel at `exec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Lowest mappable address (Linux's `vm.mmap_min_addr`; 65536 here).
    pub mmap_min_addr: u64,
    /// One past the highest user address (`TASK_SIZE`: 2^48 with 48-bit VAs).
    pub task_size: u64,
    /// Top-down placement starts below this (under the stack and its gap).
    pub mmap_base: u64,
    /// Where the `brk` heap starts (page-aligned, after the executable's bss).
    pub start_brk: u64,
    /// Most mappings a process may have (Linux's `vm.max_map_count`).
    pub max_map_count: usize,
    /// RAM plus swap, in pages (Linux's `totalram_pages() + total_swap_pages`): the heuristic
    /// overcommit refuses one accountable request larger than this. The kernel passes the
    /// machine's frame count; `u64::MAX` turns the check off.
    pub ram_pages: u64,
}

impl Layout {
    /// Linux's arm64 shape for 48-bit VAs, without randomisation: `mmap_base` 128 MiB under the
    /// top (Linux's minimum stack gap), the heap at `start_brk`.
    pub const fn linux(start_brk: u64) -> Layout {
        let task_size = 1 << crate::addr::USER_VA_BITS;
        Layout {
            mmap_min_addr: 65536,
            task_size,
            mmap_base: task_size - (128 << 20),
            start_brk,
            max_map_count: 65530,
            ram_pages: u64::MAX,
        }
    }

    /// Linux's `TASK_UNMAPPED_BASE`: the bottom-up fallback search starts here.
    const fn unmapped_base(&self) -> u64 {
        (self.task_size / 4) & !(PAGE - 1)
    }
}

/// What a successful `mmap` or near placement did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// The address to return to the program.
    pub addr: u64,
    /// Length mapped (the request rounded up to pages).
    pub len: u64,
    /// The new mapping's access rights.
    pub prot: Prot,
    /// Pieces of older mappings that `MAP_FIXED` replaced, in address order: the kernel unmaps
    /// their pages (and frees their frames) before installing the new mapping.
    pub replaced: Pieces,
    /// `MAP_POPULATE` (or `MAP_LOCKED`) was given: the kernel may prefault the range.
    pub populate: bool,
    /// A code mapping placed outside the code window (it was full, or `MAP_FIXED` put it there).
    pub outside_window: bool,
}

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

/// What the kernel must do with the pages of the ranges `madvise` accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadviseAction {
    /// Nothing beyond the bookkeeping already done here (hints and attribute changes).
    None,
    /// Drop the pages now; the next access reads zero (`MADV_DONTNEED`, `MADV_REMOVE`).
    Discard,
    /// The pages may be dropped lazily, until the next write (`MADV_FREE`); discarding them now is
    /// correct too.
    Free,
    /// Read-ahead hint (`MADV_WILLNEED`): the kernel may prefault.
    WillNeed,
    /// Prefault now (`MADV_POPULATE_READ` / `MADV_POPULATE_WRITE`).
    Populate {
        /// Fault writable.
        write: bool,
    },
}

/// What `madvise` did. As in Linux the advice applies to every mapped part of the range; a hole
/// makes the call return `ENOMEM` afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Madvised {
    /// What to do with the pages of `ranges`.
    pub action: MadviseAction,
    /// The mapped parts the advice applied to, in address order.
    pub ranges: Vec<(u64, u64)>,
    /// The error to return after applying `action` (`ENOMEM` for a hole, `EINVAL`/`EFAULT` for a
    /// mapping the advice cannot apply to, which stops the walk there).
    pub error: Option<Errno>,
}

/// What `brk` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrkOutcome {
    /// The value to return: the new break on success, the old one on failure (Linux never
    /// returns an error from `brk`).
    pub brk: u64,
    /// A range newly mapped (anonymous RW) when the heap grew.
    pub mapped: Option<(u64, u64)>,
    /// Pieces unmapped when the heap shrank: the kernel unmaps their pages.
    pub unmapped: Pieces,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    base: Option<u64>,
    size: u64,
    used: u64,
    placed_outside: u64,
    strict: bool,
    anchor: Option<(u64, u64)>,
}

/// One process's user address space (see the module documentation).
pub struct VmMap {
    tree: VmaTree,
    layout: Layout,
    window: Window,
    allow_wx: bool,
    brk: u64,
    mapped: u64,
    /// Bytes of data mappings (Linux's `data_vm`: private, writable, not a stack).
    data: u64,
    /// `RLIMIT_AS`: the most bytes mapped.
    as_limit: Rlimit,
    /// `RLIMIT_DATA`: the most bytes of data mappings (and of the heap, for `brk`).
    data_limit: Rlimit,
}

/// Linux's `is_data_mapping`: private, writable and not a stack.
fn is_data(prot: Prot, flags: VmaFlags) -> bool {
    prot.write() && !flags.contains(VmaFlags::SHARED) && !flags.contains(VmaFlags::STACK)
}

/// Whether Linux charges a mapping against the commit limit (`accountable_mapping`, and
/// `shmem_acct_size` for shared anonymous memory): private writable, or shared, and not
/// `MAP_NORESERVE`.
fn accountable(prot: Prot, flags: VmaFlags, noreserve: bool) -> bool {
    !noreserve && (prot.write() || flags.contains(VmaFlags::SHARED))
}

const fn page_up(x: u64) -> Option<u64> {
    match x.checked_add(PAGE - 1) {
        Some(v) => Some(v & !(PAGE - 1)),
        None => None,
    }
}

const fn page_down(x: u64) -> u64 {
    x & !(PAGE - 1)
}

fn overlap_len(a: (u64, u64), b: (u64, u64)) -> u64 {
    let s = a.0.max(b.0);
    let e = a.1.min(b.1);
    e.saturating_sub(s)
}

impl VmMap {
    /// An empty address space (no mapping, code window not placed yet, default size 512 MiB).
    pub fn new(layout: Layout) -> VmMap {
        VmMap {
            tree: VmaTree::new(),
            layout,
            window: Window {
                base: None,
                size: WINDOW_DEFAULT,
                used: 0,
                placed_outside: 0,
                strict: false,
                anchor: None,
            },
            allow_wx: false,
            brk: layout.start_brk,
            mapped: 0,
            data: 0,
            as_limit: Rlimit::INFINITY,
            data_limit: Rlimit::INFINITY,
        }
    }

    /// Sets `RLIMIT_AS` and `RLIMIT_DATA` (the kernel calls this at `exec` and on every
    /// `setrlimit`/`prlimit64` of either). Lowering a limit below what is mapped unmaps nothing,
    /// as in Linux: only growth is refused.
    pub fn set_rlimits(&mut self, address_space: Rlimit, data: Rlimit) {
        self.as_limit = address_space;
        self.data_limit = data;
    }

    /// Bytes of data mappings (private, writable, not a stack), which `RLIMIT_DATA` limits.
    pub fn data_bytes(&self) -> u64 {
        self.data
    }

    /// Linux's `may_expand_vm`: whether `bytes` more of mappings (data mappings if `data`) stay
    /// within `RLIMIT_AS` and `RLIMIT_DATA`, with Linux's allowance for a zero `RLIMIT_DATA`
    /// (Valgrind's trick: the hard limit counts then).
    fn may_expand(&self, data: bool, bytes: u64) -> bool {
        if self.mapped.saturating_add(bytes) > self.as_limit.cur {
            return false;
        }
        if data && self.data.saturating_add(bytes) > self.data_limit.cur {
            return self.data_limit.cur == 0 && self.data.saturating_add(bytes) <= self.data_limit.max;
        }
        true
    }

    /// Linux's heuristic overcommit (`OVERCOMMIT_GUESS`): one request larger than RAM plus swap.
    fn enough_memory(&self, bytes: u64) -> bool {
        bytes / PAGE <= self.layout.ram_pages
    }

    /// Whether unmapping `[s, e)` would split one mapping in two while the map is at
    /// `vm.max_map_count` (Linux's `do_mas_align_munmap` refuses that with `ENOMEM`).
    fn punch_exceeds_count(&self, s: u64, e: u64) -> bool {
        self.tree.len() >= self.layout.max_map_count
            && self.tree.find(s).is_some_and(|v| v.start < s && e < v.end)
    }

    /// The layout this space was created with.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of mappings (VMAs, after merging).
    pub fn map_count(&self) -> usize {
        self.tree.len()
    }

    /// Total bytes mapped.
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped
    }

    /// The mapping containing `addr` (for the page-fault handler).
    pub fn find(&self, addr: u64) -> Option<&Vma> {
        self.tree.find(addr)
    }

    /// Every mapping in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Vma> + '_ {
        self.tree.iter()
    }

    /// The mappings overlapping `[start, end)`, clipped to it, in address order; none for an
    /// empty range (a mapping around `start` would otherwise come out clipped to nothing, and a
    /// caller walking by the ends of what it finds would never get past it).
    pub fn mappings_in(&self, start: u64, end: u64) -> impl Iterator<Item = Vma> + '_ {
        self.tree
            .iter_from(start)
            .take_while(move |v| start < end && v.start < end)
            .map(move |v| v.clip(start, end))
    }

    /// The allocator underneath (read-only: for gap queries and benchmarks).
    pub fn tree(&self) -> &VmaTree {
        &self.tree
    }

    /// The current program break.
    pub fn brk_value(&self) -> u64 {
        self.brk
    }

    /// Where the heap starts: [`Layout::start_brk`], unless placing the code window moved it
    /// (an empty heap whose start falls inside the window moves to the window's end, so code and
    /// heap do not block each other).
    pub fn start_brk(&self) -> u64 {
        self.layout.start_brk
    }

    // ----- primitive mutations: the only places the tree changes, so the counters stay exact.
    // Each system call reserves `SPARES` nodes before its first change; from there on an
    // insertion takes a spare (a removal gives one back), so no change fails half-way.

    /// Reserves the nodes one call may need (`ENOMEM` before any change).
    fn reserve(&mut self) -> Result<(), Errno> {
        self.tree.reserve(SPARES)
    }

    /// Adds (`sign` true) or subtracts `v`'s bytes to or from the counters (mapped, data, code
    /// window): a mapping's contribution depends on its bounds and attributes only, so pieces
    /// may be counted apart from the records that hold them.
    fn count(&mut self, v: &Vma, add: bool) {
        let data = if is_data(v.prot, v.flags) { v.len() } else { 0 };
        let window = self.window_range().map_or(0, |w| overlap_len((v.start, v.end), w));
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
    fn link(&mut self, v: Vma) {
        // Cannot fail: the spare nodes are there (the reservation bounds what a call inserts).
        let inserted = self.tree.insert(v);
        debug_assert!(inserted.is_ok(), "insertion without its reserved nodes: {v:?}");
    }

    /// Rewrites the record starting at `start` in place (bounds between its neighbours).
    fn edit(&mut self, start: u64, v: Vma) {
        let found = self.tree.replace(start, v);
        debug_assert!(found, "no mapping at {start:#x}");
    }

    /// Removes the mapping starting at `start` (callers only name mappings they just found).
    fn take(&mut self, start: u64) -> Option<Vma> {
        let v = self.tree.remove(start)?;
        self.count(&v, false);
        Some(v)
    }

    /// Adds `v` (free space), merged with a neighbour that touches it and has the same
    /// attributes. A merge extends the neighbour's record in place (and joining two neighbours
    /// removes one), so only a mapping that joins nothing takes a new node.
    fn add_merge(&mut self, v: Vma) {
        self.count(&v, true);
        // One descent decides and does it when both neighbours are in the leaf (or the free
        // space beside the leaf shows that the one outside does not touch `v`).
        let fast = self.tree.edit_leaf(v.start, |vs, beside| {
            let k = vs.partition_point(|w| w.start < v.start);
            let prev = match k.checked_sub(1) {
                Some(j) => Some(vs[j].end == v.start && vs[j].same_attrs(&v)),
                None => (beside.prev_end != Some(v.start)).then_some(false),
            };
            let next = match vs.get(k) {
                Some(n) => Some(n.start == v.end && n.same_attrs(&v)),
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
        let prev = prev.copied().filter(|p| p.end == v.start && p.same_attrs(&v));
        let next = next.copied().filter(|n| n.start == v.end && n.same_attrs(&v));
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
    fn remove_range(&mut self, s: u64, e: u64) -> Result<Pieces, Errno> {
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
    fn select(&self, s: u64, e: u64, stop_at_hole: bool) -> Result<(Pieces, bool), Errno> {
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
    fn rewrite(&mut self, pieces: &[Vma], f: impl FnMut(&Vma) -> Vma) {
        self.rewrite_from(pieces, None, f);
    }

    /// [`VmMap::rewrite`], where `first` (if given) is what [`VmaTree::around`] says of the first
    /// piece's start now: the caller looked already.
    /// The caller's answer is borrowed, not moved: a move of the 72-byte [`Around`] is a call to
    /// `memcpy` on a strict-alignment target.
    fn rewrite_from(&mut self, pieces: &[Vma], mut first: Option<&Around>, mut f: impl FnMut(&Vma) -> Vma) {
        for p in pieces {
            let looked;
            let around = match first.take() {
                Some(a) => a,
                None => {
                    looked = self.tree.around(p.start);
                    &looked
                }
            };
            let Some(whole) = around.at else { continue };
            let new = f(p);
            debug_assert!((new.start, new.end) == (p.start, p.end) && whole.end >= p.end);
            if new.same_attrs(&whole) {
                continue;
            }
            self.count(&Vma { start: p.start, end: p.end, ..whole }, false);
            self.count(&new, true);
            let (keeps_below, keeps_above) = (whole.start < p.start, p.end < whole.end);
            let prev = around.prev.filter(|v| !keeps_below && v.end == p.start && v.same_attrs(&new));
            let next = around.next.filter(|v| !keeps_above && v.start == p.end && v.same_attrs(&new));
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

    // ----- the code window

    fn window_range(&self) -> Option<(u64, u64)> {
        self.window.base.map(|b| (b, b + self.window.size))
    }

    fn window_candidate(&self, size: u64) -> Option<u64> {
        if let Some((s, e)) = self.window.anchor {
            let base = s & !(size - 1);
            if e <= base + size && base + size <= self.layout.task_size {
                return Some(base);
            }
        }
        let q = GapQuery {
            align: size,
            ..GapQuery::new(self.layout.mmap_min_addr, self.layout.mmap_base, size, Dir::Highest)
        };
        self.tree.find_gap(&q)
    }

    /// Moves the window to `size`/its candidate base. `EBUSY` if a mapping now inside the window
    /// would end up outside it.
    fn relocate_window(&mut self, size: u64) -> Result<(), Errno> {
        let base = self.window_candidate(size).ok_or(Errno::ENOMEM)?;
        let (nb, ne) = (base, base + size);
        if let Some((ob, oe)) = self.window_range()
            && self.mappings_in(ob, oe).any(|v| v.start < nb || v.end > ne)
        {
            return Err(Errno::EBUSY);
        }
        self.window.base = Some(base);
        self.window.size = size;
        self.window.used = self.mappings_in(nb, ne).map(|v| v.len()).sum();
        // Keep the heap out of the window while it is empty: code placed lowest-first would
        // otherwise land just above the bss and stop `brk` from growing.
        let sb = self.layout.start_brk;
        if self.brk == sb && nb <= sb && sb < ne && ne < self.layout.task_size {
            self.layout.start_brk = ne;
            self.brk = ne;
        }
        Ok(())
    }

    /// Places the window if it is not placed yet; its range, if it could be placed.
    fn ensure_window(&mut self) -> Option<(u64, u64)> {
        if self.window.base.is_none() {
            let _ = self.relocate_window(self.window.size);
        }
        self.window_range()
    }

    /// Places the code window for a new program: around `exec` (the executable segment's
    /// `[start, end)`) when it fits in one aligned window of the current size, otherwise in an
    /// aligned free gap (top-down below `mmap_base`, one search). Call after the loader has
    /// mapped the image. Without this call the window is placed on first use.
    ///
    /// # Errors
    /// `ENOMEM` when the segment does not fit and no free aligned gap exists (code then goes
    /// outside, counted); `EBUSY` if the window already holds mappings the new one would not.
    pub fn init_code_window(&mut self, exec: Option<(u64, u64)>) -> Result<CodeWindowInfo, Errno> {
        self.window.anchor = exec.filter(|(s, e)| s < e);
        self.relocate_window(self.window.size)?;
        Ok(self.code_window())
    }

    /// The window's counters ([`abi::WINDOW_GET`]). Base 0 while it is not placed.
    pub fn code_window(&self) -> CodeWindowInfo {
        CodeWindowInfo {
            base: self.window.base.unwrap_or(0),
            size: self.window.size,
            used: self.window.used,
            placed_outside: self.window.placed_outside,
            strict: u64::from(self.window.strict),
        }
    }

    /// The window's `[start, end)`, if placed.
    pub fn code_window_range(&self) -> Option<(u64, u64)> {
        self.window_range()
    }

    /// Sets the window size ([`abi::WINDOW_SET_SIZE`]). The window moves to the aligned block of
    /// the new size around the program's executable segment if that fits, else to a free aligned
    /// gap.
    ///
    /// # Errors
    /// `EINVAL` unless `size` is a power of two in 2 MiB..=4 GiB; `EBUSY` if the window holds a
    /// mapping the new window would not contain (the program's own segment, kept inside when it
    /// fits, does not count); `ENOMEM` if no place exists.
    pub fn set_window_size(&mut self, size: u64) -> Result<(), Errno> {
        if !size.is_power_of_two() || !(WINDOW_MIN..=WINDOW_MAX).contains(&size) {
            return Err(Errno::EINVAL);
        }
        if self.window.base.is_none() {
            self.window.size = size;
            return Ok(());
        }
        self.relocate_window(size)
    }

    /// Strict mode on or off ([`abi::WINDOW_SET_STRICT`]).
    pub fn set_window_strict(&mut self, strict: bool) {
        self.window.strict = strict;
    }

    /// The W^X opt-out ([`abi::WINDOW_ALLOW_WX`]).
    pub fn set_allow_wx(&mut self, allow: bool) {
        self.allow_wx = allow;
    }

    /// [`abi::SYS_CODE_WINDOW`] as one call: returns the info to copy out for
    /// [`abi::WINDOW_GET`], `None` for the other ops (return 0).
    ///
    /// # Errors
    /// `EINVAL` for an unknown op or an `arg` other than 0/1 for the switches; the errors of
    /// [`VmMap::set_window_size`].
    pub fn code_window_op(&mut self, op: u64, arg: u64) -> Result<Option<CodeWindowInfo>, Errno> {
        let switch = |a: u64| match a {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Errno::EINVAL),
        };
        match op {
            abi::WINDOW_GET => Ok(Some(self.code_window())),
            abi::WINDOW_SET_SIZE => self.set_window_size(arg).map(|()| None),
            abi::WINDOW_SET_STRICT => switch(arg).map(|s| self.set_window_strict(s)).map(|()| None),
            abi::WINDOW_ALLOW_WX => switch(arg).map(|s| self.set_allow_wx(s)).map(|()| None),
            _ => Err(Errno::EINVAL),
        }
    }

    fn inside_window(&self, s: u64, e: u64) -> bool {
        self.window_range().is_some_and(|(b, we)| b <= s && e <= we)
    }

    // ----- placement

    /// Where a non-code mapping of `len` bytes goes: the hint if free (and not in the window),
    /// else top-down below `mmap_base`, else bottom-up above `TASK_UNMAPPED_BASE`, skipping the
    /// window.
    fn place_data(&mut self, hint: u64, len: u64) -> Option<u64> {
        let l = &self.layout;
        let w = self.window_range();
        if hint != 0
            && let Some(end) = page_up(hint).and_then(|h| h.checked_add(len))
        {
            let h = end - len;
            let in_window = w.is_some_and(|(b, e)| h < e && b < end);
            if end <= l.task_size && h >= l.mmap_min_addr && !in_window && self.tree.is_free(h, end) {
                return Some(h);
            }
        }
        let q = GapQuery { exclude: w, ..GapQuery::new(l.mmap_min_addr, l.mmap_base, len, Dir::Highest) };
        // Linux (6.7 on, `thp_get_unmapped_area`): an anonymous mapping with no hint whose
        // length is a multiple of 2 MiB is 2 MiB-aligned when possible, so it can be promoted to
        // blocks.
        let thp = (hint == 0 && len.is_multiple_of(BLOCK_2M))
            .then(|| self.tree.find_gap(&GapQuery { align: BLOCK_2M, ..q }))
            .flatten();
        // The plain top-down search teaches the tree where it ended, for the next one.
        thp.or_else(|| self.tree.find_gap_and_learn(&q)).or_else(|| {
            let q =
                GapQuery { exclude: w, ..GapQuery::new(l.unmapped_base(), l.task_size, len, Dir::Lowest) };
            self.tree.find_gap(&q)
        })
    }

    /// Where a code mapping goes: (address, outside the window).
    fn place_code(&mut self, hint: u64, len: u64) -> Result<(u64, bool), Errno> {
        let l = self.layout;
        if let Some((b, e)) = self.ensure_window() {
            if hint != 0
                && let Some(h) = page_up(hint)
                && let Some(end) = h.checked_add(len)
                && h >= b.max(l.mmap_min_addr)
                && end <= e
                && self.tree.is_free(h, end)
            {
                return Ok((h, false));
            }
            let q = GapQuery::new(b.max(l.mmap_min_addr), e.min(l.task_size), len, Dir::Lowest);
            if let Some(a) = self.tree.find_gap(&q) {
                return Ok((a, false));
            }
        }
        if self.window.strict {
            return Err(Errno::ENOMEM);
        }
        let w = self.window_range();
        let q = GapQuery {
            exclude: w,
            no_cross: Some(GIB),
            ..GapQuery::new(l.mmap_min_addr, l.mmap_base, len, Dir::Highest)
        };
        let a = self.tree.find_gap(&q).or_else(|| {
            let q = GapQuery { dir: Dir::Lowest, lo: l.unmapped_base(), hi: l.task_size, ..q };
            self.tree.find_gap(&q)
        });
        a.map(|a| (a, true)).ok_or(Errno::ENOMEM)
    }

    // ----- system calls

    /// `mmap(addr, len, prot, flags, fd, offset)` for anonymous memory, as Linux 6.x on arm64
    /// answers it (see the module documentation for placement). The kernel unmaps
    /// [`Mapped::replaced`] and records the new mapping; pages are faulted in on demand and read
    /// zero.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` offset not page-aligned (arm64 checks it first); `EBADF` file
    /// mapping with `fd < 0`; `ENOMEM` `MAP_HUGETLB` (no huge-page pool); `EINVAL` zero `len`;
    /// `ENODEV` a file mapping (only anonymous memory is supported; the kernel answers `EBADF`
    /// first for an fd that is not open); `ENOMEM` `len` overflowing when rounded up, or too
    /// many mappings; `EOVERFLOW` offset plus length overflowing; `ENOMEM` `len` larger than the
    /// address space, a fixed range past `TASK_SIZE`, or no free gap for data; `EINVAL` fixed
    /// address not page-aligned; `EPERM` fixed address below `mmap_min_addr`; `EINVAL` no or an
    /// unknown mapping type (`MAP_SHARED_VALIDATE` included, as Linux for anonymous memory), or
    /// `MAP_SHARED | MAP_GROWSDOWN`; `ENOMEM` no free gap for code (strict mode: no room in the
    /// window); `EEXIST` `MAP_FIXED_NOREPLACE` over any mapped byte; `EACCES` writable and
    /// executable (W^X), or an executable/`MAP_CODE` `MAP_FIXED` mapping outside the code window
    /// in strict mode; `ENOMEM` past `RLIMIT_AS`/`RLIMIT_DATA`, a `MAP_FIXED` that would split a
    /// mapping at `vm.max_map_count`, one accountable mapping larger than RAM (the heuristic
    /// overcommit), or no kernel memory for the bookkeeping. Unknown `prot` bits are ignored,
    /// as Linux does (`PROT_MTE` and `PROT_BTI` too on a CPU without the feature).
    pub fn mmap(
        &mut self,
        addr: u64,
        len: u64,
        prot: u64,
        flags: u64,
        fd: i32,
        offset: u64,
    ) -> Result<Mapped, Errno> {
        if offset & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let anon = flags & MAP_ANONYMOUS != 0;
        if !anon && fd < 0 {
            return Err(Errno::EBADF);
        }
        if anon && flags & MAP_HUGETLB != 0 {
            return Err(Errno::ENOMEM);
        }
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        if !anon {
            return Err(Errno::ENODEV);
        }
        let fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0;
        let hint = if fixed { addr } else { round_hint_to_min(addr, self.layout.mmap_min_addr) };
        let len = page_up(len).filter(|&l| l != 0).ok_or(Errno::ENOMEM)?;
        if (offset / PAGE).checked_add(len / PAGE).is_none() {
            return Err(Errno::EOVERFLOW);
        }
        if self.tree.len() > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let prot_v = Prot::from_bits_truncate(prot);
        let code = prot_v.exec() || flags & MAP_CODE != 0;
        // Linux checks the mapping type after get_unmapped_area; it is checked here before the
        // code window is searched (or placed), whose strict-mode ENOMEM is this kernel's own and
        // must not hide Linux's EINVAL.
        let mapping_type = match flags & MAP_TYPE {
            MAP_SHARED if flags & MAP_GROWSDOWN != 0 => Err(Errno::EINVAL),
            MAP_SHARED => Ok(VmaFlags::SHARED),
            MAP_PRIVATE => Ok(VmaFlags::empty()),
            _ => Err(Errno::EINVAL),
        };
        // get_unmapped_area
        let l = self.layout;
        if len > l.task_size - l.mmap_min_addr {
            return Err(Errno::ENOMEM);
        }
        let (at, outside) = if fixed {
            if hint > l.task_size - len {
                return Err(Errno::ENOMEM);
            }
            if hint & (PAGE - 1) != 0 {
                return Err(Errno::EINVAL);
            }
            if hint < l.mmap_min_addr {
                return Err(Errno::EPERM);
            }
            if code {
                mapping_type?;
                self.ensure_window();
            }
            (hint, code && !self.inside_window(hint, hint + len))
        } else if code {
            mapping_type?;
            self.place_code(hint, len)?
        } else {
            (self.place_data(hint, len).ok_or(Errno::ENOMEM)?, false)
        };
        if flags & MAP_FIXED_NOREPLACE != 0 && !self.tree.is_free(at, at + len) {
            return Err(Errno::EEXIST);
        }
        let mut vflags = mapping_type?;
        if prot_v.write() && prot_v.exec() && !self.allow_wx {
            return Err(Errno::EACCES);
        }
        if fixed && outside && self.window.strict {
            return Err(Errno::EACCES);
        }
        if flags & MAP_CODE != 0 {
            vflags = vflags.union(VmaFlags::CODE);
        }
        if flags & MAP_OBJECT != 0 {
            vflags = vflags.union(VmaFlags::OBJECT);
        }
        if flags & (MAP_GROWSDOWN | MAP_STACK) != 0 {
            vflags = vflags.union(VmaFlags::STACK);
        }
        // mmap_region: the limits count what a MAP_FIXED replaces as given back.
        let data = is_data(prot_v, vflags);
        if !self.may_expand(data, len) {
            let replaced: u64 = self.mappings_in(at, at + len).map(|v| v.len()).sum();
            if !self.may_expand(data, len - replaced) {
                return Err(Errno::ENOMEM);
            }
        }
        if self.punch_exceeds_count(at, at + len) {
            return Err(Errno::ENOMEM);
        }
        if accountable(prot_v, vflags, flags & MAP_NORESERVE != 0) && !self.enough_memory(len) {
            return Err(Errno::ENOMEM);
        }
        self.reserve()?;
        // Only `MAP_FIXED` may land on mappings: every other placement (a free hint, a gap
        // search, `MAP_FIXED_NOREPLACE` after its check) is free, and looking costs a descent.
        let replaced = if flags & MAP_FIXED != 0 { self.remove_range(at, at + len)? } else { Pieces::new() };
        self.add_merge(Vma { start: at, end: at + len, prot: prot_v, flags: vflags, advice: Advice::Normal });
        if outside {
            self.window.placed_outside += 1;
        }
        Ok(Mapped {
            addr: at,
            len,
            prot: prot_v,
            replaced,
            populate: flags & (MAP_POPULATE | MAP_LOCKED) != 0,
            outside_window: outside,
        })
    }

    /// Maps `[start, start + len)` for the kernel itself (the executable's segments, the initial
    /// stack), replacing what is there, with no placement policy. W^X still applies.
    ///
    /// # Errors
    /// `EINVAL` unaligned or empty; `ENOMEM` outside `[mmap_min_addr, TASK_SIZE)`; `EACCES`
    /// writable and executable without the opt-out.
    pub fn map_kernel(&mut self, start: u64, len: u64, prot: Prot, flags: VmaFlags) -> Result<Pieces, Errno> {
        if start & (PAGE - 1) != 0 || len == 0 || len & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let end = start.checked_add(len).ok_or(Errno::ENOMEM)?;
        if start < self.layout.mmap_min_addr || end > self.layout.task_size {
            return Err(Errno::ENOMEM);
        }
        if prot.write() && prot.exec() && !self.allow_wx {
            return Err(Errno::EACCES);
        }
        self.reserve()?;
        let replaced = self.remove_range(start, end)?;
        self.add_merge(Vma { start, end, prot, flags, advice: Advice::Normal });
        Ok(replaced)
    }

    /// `munmap(addr, len)`: removes every mapped page of the range (holes are fine). Returns the
    /// removed pieces, in address order, for the kernel to unmap.
    ///
    /// # Errors
    /// `EINVAL` when `addr` is not page-aligned, `len` is zero, or the range leaves the address
    /// space; `ENOMEM` when it would split a mapping in two at `vm.max_map_count` (Linux lets
    /// the count pass the limit only through `mmap`), or no kernel memory for the bookkeeping.
    pub fn munmap(&mut self, addr: u64, len: u64) -> Result<Pieces, Errno> {
        let ts = self.layout.task_size;
        if addr & (PAGE - 1) != 0 || addr > ts || len > ts - addr {
            return Err(Errno::EINVAL);
        }
        let end = addr + page_up(len).ok_or(Errno::EINVAL)?;
        if end == addr {
            return Err(Errno::EINVAL);
        }
        if self.punch_exceeds_count(addr, end) {
            return Err(Errno::ENOMEM);
        }
        self.reserve()?;
        self.remove_range(addr, end)
    }

    /// `mprotect(addr, len, prot)`. Changes the mapped prefix of the range (Linux's behaviour)
    /// and reports a hole as [`Protected::error`].
    ///
    /// # Errors
    /// Before any change: `EINVAL` both `PROT_GROWSDOWN` and `PROT_GROWSUP`, unaligned `addr`, or
    /// unknown `prot` bits; `ENOMEM` range overflowing or no mapping at `addr`; `EINVAL`
    /// `PROT_GROWSDOWN`/`PROT_GROWSUP` (no mapping here grows); `EACCES` writable and executable
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
        if prot & !(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM | PROT_BTI) != 0 {
            return Err(Errno::EINVAL);
        }
        let new = Prot::from_bits_truncate(prot);
        // One descent serves the checks on the first mapping and, when the range lies in it,
        // the selection and the neighbours its rewrite needs.
        let around = self.tree.around(addr);
        let Some(first) = around.at else {
            // No mapping at `addr`: a mapping further in the range is what Linux's
            // PROT_GROWSDOWN would have extended (EINVAL here, as nothing grows), else ENOMEM.
            let further = around.next.is_some_and(|n| n.start < end);
            return Err(if further && grows == PROT_GROWSDOWN { Errno::EINVAL } else { Errno::ENOMEM });
        };
        if grows != 0 {
            return Err(Errno::EINVAL);
        }
        if new.write() && new.exec() && !self.allow_wx {
            return Err(Errno::EACCES);
        }
        let (mut pieces, hole) = if first.end >= end {
            (Pieces::one(first.clip(addr, end)), false)
        } else {
            self.select(addr, end, true)?
        };
        let gains_x_outside =
            new.exec() && pieces.iter().any(|p| !p.prot.exec() && !self.inside_window(p.start, p.end));
        if gains_x_outside && self.window.strict {
            return Err(Errno::EACCES);
        }
        // Linux's mprotect_fixup, area by area: the areas before the first refusal change, and
        // the call then fails with ENOMEM.
        let refused = self.mprotect_refusal(&pieces, new);
        if let Some(i) = refused {
            pieces.truncate(i);
        }
        for p in pieces.iter().filter(|p| p.prot != new) {
            if let Err(e) = out.changes.push(ProtChange { start: p.start, end: p.end, old: p.prot, new }) {
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
        self.rewrite_from(&pieces, Some(&around), |p| Vma { prot: new, ..*p });
        if gains_x_outside && !pieces.is_empty() {
            self.window.placed_outside += 1;
        }
        out.error = (refused.is_some() || hole).then_some(Errno::ENOMEM);
        Ok(())
    }

    /// How many new areas rewriting piece `p` (of one mapping) as `changed` creates: one per end
    /// of `p` strictly inside its mapping, unless, as Linux's `vma_merge` does first, the piece
    /// reaches the mapping's other end and joins the neighbour there (the boundary moves).
    fn splits_needed(&self, p: &Vma, changed: &Vma) -> usize {
        let around = self.tree.around(p.start);
        let Some(whole) = around.at else { return 0 };
        let joins_prev =
            p.start == whole.start && around.prev.is_some_and(|v| v.end == p.start && v.same_attrs(changed));
        let joins_next =
            p.end == whole.end && around.next.is_some_and(|v| v.start == p.end && v.same_attrs(changed));
        usize::from(whole.start < p.start && !joins_next) + usize::from(p.end < whole.end && !joins_prev)
    }

    /// The index of the first piece Linux's `mprotect_fixup` would refuse with `ENOMEM`: a split
    /// at `vm.max_map_count` (`split_vma`), becoming data past `RLIMIT_AS`/`RLIMIT_DATA`, or
    /// becoming writable (charged) while larger than RAM (the heuristic overcommit).
    fn mprotect_refusal(&self, pieces: &[Vma], new: Prot) -> Option<usize> {
        let (mut count, mut data) = (self.tree.len(), self.data);
        let max = self.layout.max_map_count;
        // Each piece splits at most twice: far from the limit, no split can pass it, and the
        // descent that counts a piece's splits is not needed.
        let roomy = count.saturating_add(pieces.len().saturating_mul(2)) <= max;
        for (i, p) in pieces.iter().enumerate() {
            if p.prot == new {
                continue;
            }
            let splits = if roomy { 0 } else { self.splits_needed(p, &Vma { prot: new, ..*p }) };
            if splits > 0 && count + splits > max {
                return Some(i);
            }
            count += splits;
            let (was, becomes) = (is_data(p.prot, p.flags), is_data(new, p.flags));
            if new.write() {
                let fits = |d: bool| {
                    self.mapped.saturating_add(p.len()) <= self.as_limit.cur
                        && (!d || data.saturating_add(p.len()) <= self.data_limit.cur)
                };
                if !fits(becomes) && fits(was) {
                    return Some(i);
                }
                let charged = !p.prot.write() && !p.flags.contains(VmaFlags::SHARED);
                if charged && !self.enough_memory(p.len()) {
                    return Some(i);
                }
            }
            if becomes && !was {
                data += p.len();
            } else if was && !becomes {
                data -= p.len();
            }
        }
        None
    }

    /// `madvise(addr, len, advice)`.
    ///
    /// Accepted: `NORMAL`, `RANDOM`, `SEQUENTIAL` (stored in the mapping), `WILLNEED`,
    /// `DONTNEED`, `DONTNEED_LOCKED`, `FREE` (private only), `REMOVE` (shared only), `DONTFORK`,
    /// `DOFORK`, `WIPEONFORK` (private only), `KEEPONFORK`, `DONTDUMP`, `DODUMP`, `HUGEPAGE`,
    /// `NOHUGEPAGE`, `COLLAPSE`, `COLD`, `PAGEOUT` (hints), `POPULATE_READ`/`POPULATE_WRITE`.
    ///
    /// # Errors
    /// Before any change: `EINVAL` unknown advice (also `MERGEABLE`/`UNMERGEABLE`, as Linux
    /// without KSM, and the guard-region advice of Linux 6.13), unaligned `addr`, or a range that
    /// overflows; `EPERM` `HWPOISON`/`SOFT_OFFLINE` (need `CAP_SYS_ADMIN`). `len` rounding to 0
    /// succeeds with no effect. After applying to what precedes: [`Madvised::error`] is `ENOMEM`
    /// for a hole, `EINVAL` for `FREE`/`WIPEONFORK` on shared or `REMOVE` on private memory,
    /// `EFAULT` for populating pages without the needed access.
    pub fn madvise(&mut self, addr: u64, len: u64, advice: u64) -> Result<Madvised, Errno> {
        let valid = matches!(advice, 0..=4 | 8..=25 | MADV_HWPOISON | MADV_SOFT_OFFLINE)
            && !matches!(advice, MADV_MERGEABLE | MADV_UNMERGEABLE);
        if !valid || addr & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let plen = page_up(len).unwrap_or(0);
        if len != 0 && plen == 0 {
            return Err(Errno::EINVAL);
        }
        let end = addr.checked_add(plen).ok_or(Errno::EINVAL)?;
        let action = match advice {
            MADV_DONTNEED | MADV_DONTNEED_LOCKED | MADV_REMOVE => MadviseAction::Discard,
            MADV_FREE => MadviseAction::Free,
            MADV_WILLNEED => MadviseAction::WillNeed,
            MADV_POPULATE_READ => MadviseAction::Populate { write: false },
            MADV_POPULATE_WRITE => MadviseAction::Populate { write: true },
            _ => MadviseAction::None,
        };
        if end == addr {
            return Ok(Madvised { action, ranges: Vec::new(), error: None });
        }
        if matches!(advice, MADV_HWPOISON | MADV_SOFT_OFFLINE) {
            return Err(Errno::EPERM);
        }
        let (mut pieces, hole) = self.select(addr, end, false)?;
        let mut error = hole.then_some(Errno::ENOMEM);
        // Per-mapping refusals stop the walk at that mapping, as in Linux.
        let refuse = |v: &Vma| -> Option<Errno> {
            let shared = v.flags.contains(VmaFlags::SHARED);
            match advice {
                MADV_FREE | MADV_WIPEONFORK if shared => Some(Errno::EINVAL),
                MADV_REMOVE if !shared => Some(Errno::EINVAL),
                MADV_POPULATE_READ if !v.prot.read() => Some(Errno::EFAULT),
                MADV_POPULATE_WRITE if !v.prot.write() => Some(Errno::EFAULT),
                _ => None,
            }
        };
        if let Some(i) = pieces.iter().position(|p| refuse(p).is_some()) {
            error = refuse(&pieces[i]);
            pieces.truncate(i);
        }
        let set = |v: &Vma| -> Vma {
            let mut v = *v;
            match advice {
                MADV_NORMAL => v.advice = Advice::Normal,
                MADV_RANDOM => v.advice = Advice::Random,
                MADV_SEQUENTIAL => v.advice = Advice::Sequential,
                MADV_DONTFORK => v.flags = v.flags.union(VmaFlags::DONTFORK),
                MADV_DOFORK => v.flags = v.flags.difference(VmaFlags::DONTFORK),
                MADV_WIPEONFORK => v.flags = v.flags.union(VmaFlags::WIPEONFORK),
                MADV_KEEPONFORK => v.flags = v.flags.difference(VmaFlags::WIPEONFORK),
                MADV_HUGEPAGE => v.flags = v.flags.union(VmaFlags::HUGEPAGE).difference(VmaFlags::NOHUGEPAGE),
                MADV_NOHUGEPAGE => {
                    v.flags = v.flags.union(VmaFlags::NOHUGEPAGE).difference(VmaFlags::HUGEPAGE)
                }
                _ => {}
            }
            v
        };
        // A split at vm.max_map_count stops the walk too: madvise_update_vma's ENOMEM, which
        // madvise reports as EAGAIN ("kernel resources temporarily unavailable").
        let mut count = self.tree.len();
        for i in 0..pieces.len() {
            let p = pieces[i];
            let splits = if set(&p) == p { 0 } else { self.splits_needed(&p, &set(&p)) };
            if splits > 0 && count + splits > self.layout.max_map_count {
                error = Some(Errno::EAGAIN);
                pieces.truncate(i);
                break;
            }
            count += splits;
        }
        let mut ranges = Vec::new();
        fallible::reserve(&mut ranges, pieces.len())?;
        ranges.extend(pieces.iter().map(|p| (p.start, p.end)));
        if pieces.iter().any(|p| set(p) != *p) {
            self.reserve()?;
            self.rewrite(&pieces, set);
        }
        Ok(Madvised { action, ranges, error })
    }

    /// `brk(addr)`, as Linux: below the heap's start (e.g. `brk(0)`) returns the current break;
    /// a heap larger than `RLIMIT_DATA` is refused (`check_data_rlimit`, counting the heap
    /// only); shrinking succeeds; growing succeeds when `[old, new)` rounded to pages is free
    /// and one page stays free before the next mapping, within `RLIMIT_AS`/`RLIMIT_DATA`,
    /// `vm.max_map_count` and the heuristic overcommit (`do_brk_flags`); otherwise, or without
    /// kernel memory for the bookkeeping, the old break is returned.
    pub fn brk(&mut self, addr: u64) -> BrkOutcome {
        let old = self.brk;
        let fail = BrkOutcome { brk: old, mapped: None, unmapped: Pieces::new() };
        if addr < self.layout.start_brk || addr - self.layout.start_brk > self.data_limit.cur {
            return fail;
        }
        let (Some(newbrk), Some(oldbrk)) = (page_up(addr), page_up(old)) else { return fail };
        if newbrk == oldbrk {
            self.brk = addr;
            return BrkOutcome { brk: addr, ..fail };
        }
        if addr <= old {
            // Linux shrinks through `do_vmi_munmap`, which refuses a split at the map count.
            if self.punch_exceeds_count(newbrk, oldbrk) {
                return fail;
            }
            let Ok(unmapped) = self.reserve().and_then(|()| self.remove_range(newbrk, oldbrk)) else {
                return fail;
            };
            self.brk = addr;
            return BrkOutcome { brk: addr, mapped: None, unmapped };
        }
        if newbrk > self.layout.task_size {
            return fail;
        }
        if let Some(next) = self.tree.first_ending_after(oldbrk)
            && newbrk.saturating_add(PAGE) > next.start
        {
            return fail;
        }
        let len = newbrk - oldbrk;
        if !self.may_expand(true, len)
            || self.tree.len() > self.layout.max_map_count
            || !self.enough_memory(len)
            || self.reserve().is_err()
        {
            return fail;
        }
        let heap =
            Vma { start: oldbrk, end: newbrk, prot: Prot::RW, flags: VmaFlags::HEAP, advice: Advice::Normal };
        self.add_merge(heap);
        self.brk = addr;
        BrkOutcome { brk: addr, mapped: Some((oldbrk, newbrk)), unmapped: Pieces::new() }
    }

    // ----- near placement

    /// The address [`VmMap::map_near`] would choose, without mapping anything: at most two gap
    /// searches. `code` limits the search to the code window (placing it if needed is not done
    /// here: without a window the answer is `ENOMEM`); otherwise the window is skipped.
    ///
    /// # Errors
    /// `ENOMEM` when no free range lies wholly within `radius` of `target`.
    pub fn find_near(&self, target: u64, len: u64, radius: u64, code: bool) -> Result<u64, Errno> {
        self.near(target, len, radius, code).map(|(at, _)| at)
    }

    /// [`VmMap::find_near`], with the search above the target and its answer, if it had one:
    /// what [`VmMap::map_near`] teaches the tree's bottom-up hint, so that the next search above
    /// a target at or above this one's starts where this one's answer lies.
    fn near(
        &self,
        target: u64,
        len: u64,
        radius: u64,
        code: bool,
    ) -> Result<(u64, Option<(GapQuery, Fit)>), Errno> {
        let l = &self.layout;
        let mut lo = target.saturating_sub(radius).max(l.mmap_min_addr);
        let mut hi = page_down(target.saturating_add(radius).min(l.task_size));
        lo = page_up(lo).ok_or(Errno::ENOMEM)?;
        let mut exclude = self.window_range();
        if code {
            let (b, e) = self.window_range().ok_or(Errno::ENOMEM)?;
            lo = lo.max(b);
            hi = hi.min(e);
            exclude = None;
        }
        if hi <= lo || hi - lo < len {
            return Err(Errno::ENOMEM);
        }
        // d(a) = max(t - a, a + len - t) is V-shaped with its minimum at c = t - len/2: the best
        // candidate is the highest fit below c or the lowest fit at or above it. `amin` is the
        // first page-aligned address with 2a >= 2t - len.
        let m = 2 * i128::from(target) - i128::from(len);
        let half_up = if m <= 0 { 0 } else { ((m + 1) / 2) as u64 };
        let amin = page_up(half_up).unwrap_or(!(PAGE - 1));
        let base = GapQuery { exclude, ..GapQuery::new(lo, hi, len, Dir::Lowest) };
        let up = GapQuery { lo: lo.max(amin), ..base };
        let fit = self.tree.find_fit(&up);
        let above = fit.map(|f| f.at);
        let below = amin.checked_sub(PAGE).and_then(|last| {
            let top = hi.min(last.saturating_add(len));
            self.tree.find_gap(&GapQuery { hi: top, dir: Dir::Highest, ..base })
        });
        let dist = |a: u64| -> u128 {
            let (a, t, n) = (i128::from(a), i128::from(target), i128::from(len));
            (t - a).max(a + n - t) as u128
        };
        let learnt = fit.map(|f| (up, f));
        match (below, above) {
            (Some(b), Some(a)) => Ok((if dist(a) <= dist(b) { a } else { b }, learnt)),
            (Some(b), None) => Ok((b, learnt)),
            (None, Some(a)) => Ok((a, learnt)),
            (None, None) => Err(Errno::ENOMEM),
        }
    }

    /// [`abi::SYS_MMAP_NEAR`]: maps `len` bytes of anonymous private memory wholly within
    /// `radius` of `target`, minimising the distance from `target` to the mapping's farthest end
    /// (ties: above). Executable or `MAP_CODE` requests search only the code window; others skip
    /// it. Never replaces a mapping.
    ///
    /// # Errors
    /// `EINVAL` zero or overflowing `len`, `target` not page-aligned, unknown `prot` bits, or
    /// flags other than `MAP_PRIVATE | MAP_ANONYMOUS [| MAP_CODE]`; `EACCES` writable and
    /// executable (W^X); `ENOMEM` no such free range, too many mappings, past `RLIMIT_AS` or
    /// `RLIMIT_DATA`, larger than RAM (writable), or no kernel memory for the bookkeeping.
    pub fn map_near(
        &mut self,
        target: u64,
        len: u64,
        radius: u64,
        prot: u64,
        flags: u64,
    ) -> Result<Mapped, Errno> {
        let len = page_up(len).filter(|&l| l != 0 && l <= self.layout.task_size).ok_or(Errno::EINVAL)?;
        if target & (PAGE - 1) != 0 || prot & !(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM | PROT_BTI) != 0
        {
            return Err(Errno::EINVAL);
        }
        if flags & !MAP_CODE != MAP_PRIVATE | MAP_ANONYMOUS {
            return Err(Errno::EINVAL);
        }
        let p = Prot::from_bits_truncate(prot);
        if p.write() && p.exec() && !self.allow_wx {
            return Err(Errno::EACCES);
        }
        if self.tree.len() > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let code = p.exec() || flags & MAP_CODE != 0;
        if code {
            self.ensure_window();
        }
        let (at, learnt) = self.near(target, len, radius, code)?;
        if let Some((q, fit)) = learnt {
            self.tree.learn(&q, fit);
        }
        let vflags = if flags & MAP_CODE != 0 { VmaFlags::CODE } else { VmaFlags::empty() };
        // As mmap: the address-space limits and the heuristic overcommit.
        if !self.may_expand(is_data(p, vflags), len) || (p.write() && !self.enough_memory(len)) {
            return Err(Errno::ENOMEM);
        }
        self.reserve()?;
        self.add_merge(Vma { start: at, end: at + len, prot: p, flags: vflags, advice: Advice::Normal });
        Ok(Mapped { addr: at, len, prot: p, replaced: Pieces::new(), populate: false, outside_window: false })
    }

    /// Checks every invariant (for tests; O(n)): the tree's own, no two touching mappings with
    /// equal attributes left unmerged, the byte counters, the window's alignment, W^X.
    pub fn check(&self) {
        self.tree.check();
        let mut prev: Option<Vma> = None;
        let (mut mapped, mut used, mut data) = (0, 0, 0);
        for v in self.tree.iter() {
            if is_data(v.prot, v.flags) {
                data += v.len();
            }
            if let Some(p) = prev {
                assert!(!(p.end == v.start && p.same_attrs(v)), "unmerged {p:?} {v:?}");
            }
            assert!(
                v.start >= self.layout.mmap_min_addr && v.end <= self.layout.task_size,
                "out of range {v:?}"
            );
            assert!(self.allow_wx || !(v.prot.write() && v.prot.exec()), "W+X {v:?}");
            mapped += v.len();
            if let Some(w) = self.window_range() {
                used += overlap_len((v.start, v.end), w);
            }
            prev = Some(*v);
        }
        assert_eq!(mapped, self.mapped, "mapped bytes");
        assert_eq!(data, self.data, "data bytes");
        assert_eq!(used, self.window.used, "window used bytes");
        if let Some((b, e)) = self.window_range() {
            assert!(
                self.window.size.is_power_of_two() && b % self.window.size == 0 && e <= self.layout.task_size
            );
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

/// Linux's `round_hint_to_min`: the hint rounded down to a page; a non-zero hint below
/// `mmap_min_addr` becomes `mmap_min_addr`.
fn round_hint_to_min(hint: u64, min: u64) -> u64 {
    let h = page_down(hint);
    if h != 0 && h < min { page_up(min).unwrap_or(min) } else { h }
}
