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
//!   (mmap, mprotect, near placement) unless the process opted out ([`VmMap::set_allow_wx`]) or
//!   runs with the personality flag `READ_IMPLIES_EXEC` (`setarch -X`: [`VmMap::set_personality`]);
//!   `prctl(PR_SET_MDWE)` refuses it whatever the opt-outs say.
//! - Code window: one range of `size` bytes aligned to `size`, placed to contain the program's own
//!   executable segment when it fits, else in an aligned free gap found in one search (never by
//!   reserving twice the size and trimming). It is address space only: not a mapping, holds no
//!   memory, charged to nothing; it only steers placement. Mappings executable at creation or
//!   flagged `MAP_CODE` go inside, lowest fit first; when it is full they go outside on a range
//!   that crosses no 1 GiB line and `placed_outside` counts them (strict mode: `ENOMEM`). Other
//!   mappings land inside it only when asked (`MAP_FIXED*`, or a hint inside the window, served
//!   there: at the hint if free, else at the nearest free range), or when they are a loader's
//!   reservation for a library (private anonymous `PROT_NONE`, no hint, a length of no whole
//!   number of pages: glibc's; docs/address-space.md, "Libraries and JITs"), placed as code so
//!   that the text mapped into it lands in the window. The kernel places a program's
//!   interpreter as code too ([`VmMap::place_image`]).
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
//! - a hint is honoured only where the mapping may go: a data hint that starts outside the code
//!   window but overlaps it, or a code hint outside it, is treated like an occupied hint (normal
//!   placement); an occupied hint inside the window gets the nearest free range of the window
//!   (Linux: top-down placement);
//! - the type of an executable or `MAP_CODE` mapping is checked before the code window is
//!   searched (Linux checks it after placement, but the window's own refusals must not hide
//!   Linux's `EINVAL`);
//! - the stack guard gap is kept free below a mapping that grows down by top-down placement and
//!   hints (Linux's `vm_start_gap`), not by the bottom-up fallback, which only checks;
//! - `brk`'s `RLIMIT_DATA` check counts the heap only (Linux adds the executable's data segment);
//! - an empty heap whose start falls inside the code window is moved to the window's end when
//!   the window is placed ([`VmMap::start_brk`]); Linux randomises the heap's start anyway;
//! - [`abi::WINDOW_SET_SIZE`] is refused with `EBUSY` only if a mapping now inside the window
//!   would be left outside the new one, so the program's own image (inside both) does not make
//!   the window impossible to resize.
//!
//! Files, by concern: this one holds the state ([`VmMap`], [`Layout`]) and what every call
//! reads (the limits, the queries, [`VmMap::check`]); `edit.rs` the primitive mutations, the only
//! code that changes the tree (so the counters stay exact); `mmap.rs` placement, `mmap`,
//! `munmap` and [`VmMap::map_kernel`]; `protect.rs` `mprotect`; `madvise.rs`; `brk.rs`;
//! `window.rs` the code window; `near.rs` near placement; [`remap`] `mremap`; [`lock`] `msync`,
//! `mincore` and the `mlock` family; `fork.rs` the child's map; [`stack`] the mappings that grow
//! down.
//!
//! [`abi::WINDOW_SET_SIZE`]: super::abi::WINDOW_SET_SIZE

use super::limits::Rlimit;
use super::tree::VmaTree;
use super::{PAGE, Prot, Vma, VmaFlags, fallible};

mod brk;
mod edit;
mod fork;
pub mod lock;
mod madvise;
mod mmap;
#[cfg(test)]
pub(super) use mmap::jit_buffer;
mod names;
mod near;
mod protect;
pub mod remap;
mod seal;
pub mod stack;
mod window;

pub use brk::BrkOutcome;
pub use madvise::{MadviseAction, Madvised};
pub use mmap::Mapped;
pub use names::ANON_NAME_MAX;
pub use protect::{ProtChange, Protected};
pub use stack::{NoGrowth, STACK_GUARD_GAP};
pub use window::{WINDOW_DEFAULT, WINDOW_MAX, WINDOW_MIN};

/// Mappings or pieces of mappings a call returns: the common calls return one, in place.
pub type Pieces = fallible::List<Vma, 2>;

/// Tree nodes one call reserves before changing anything: the most any call inserts beyond what
/// it removes (a mapping punched in the middle of another: two pieces plus the new one, less
/// the one taken out), plus one for the merge that follows.
pub const SPARES: usize = 3;

/// The fixed shape of a user address space, chosen by the kernel at `exec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Lowest mappable address (Linux's `vm.mmap_min_addr`; 65536 in `Layout::linux`, which a
    /// kernel may lower: Debian's Linux 6.1 on arm64 uses 4096).
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

#[derive(Clone, Copy, Debug)]
struct Window {
    base: Option<u64>,
    size: u64,
    used: u64,
    placed_outside: u64,
    strict: bool,
    anchor: Option<(u64, u64)>,
    /// Where lowest-fit code placement starts, as an offset into the window: 0, or a random
    /// draw at exec ([`VmMap::set_code_floor`]).
    floor: u64,
    /// Off: loader reservations and hints inside the window are placed as before the rule
    /// (tests measure what it changes, `trace_replay`).
    #[cfg(test)]
    library_rule: bool,
}

/// One process's user address space (see the module documentation).
pub struct VmMap {
    tree: VmaTree,
    layout: Layout,
    window: Window,
    allow_wx: bool,
    /// The personality's `READ_IMPLIES_EXEC` ([`VmMap::set_personality`]): the administrator's
    /// W^X opt-out, kept apart from the program's own ([`VmMap::set_allow_wx`]) so that neither
    /// switch turns the other off.
    read_implies_exec: bool,
    /// `prctl(PR_SET_MDWE)`'s flags (Linux's `MMF_HAS_MDWE` and `MMF_HAS_MDWE_NO_INHERIT`).
    mdwe: u64,
    brk: u64,
    mapped: u64,
    /// Bytes of data mappings (Linux's `data_vm`: private, writable, not a stack).
    data: u64,
    /// `RLIMIT_AS`: the most bytes mapped.
    as_limit: Rlimit,
    /// `RLIMIT_DATA`: the most bytes of data mappings (and of the heap, for `brk`).
    data_limit: Rlimit,
    /// The names of anonymous areas (`names.rs`).
    names: names::AnonNames,
    /// `RLIMIT_STACK`: the largest a mapping that grows down may grow ([`stack`]).
    stack_limit: Rlimit,
    /// Whether any mapping was ever sealed (`mseal`): only then do the calls that remove or
    /// change mappings look for sealed ones, so an address space without seals pays nothing.
    sealed: bool,
}

/// Linux's heuristic overcommit (`OVERCOMMIT_GUESS`) with `ram_pages` of RAM: whether a request
/// of `bytes` is no larger than RAM plus swap (there is no swap).
fn enough_memory(ram_pages: u64, bytes: u64) -> bool {
    bytes / PAGE <= ram_pages
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
                floor: 0,
                #[cfg(test)]
                library_rule: true,
            },
            allow_wx: false,
            read_implies_exec: false,
            mdwe: 0,
            brk: layout.start_brk,
            mapped: 0,
            data: 0,
            as_limit: Rlimit::INFINITY,
            data_limit: Rlimit::INFINITY,
            names: names::AnonNames::default(),
            stack_limit: Rlimit { cur: stack::DEFAULT_STACK_LIMIT, max: super::limits::RLIM_INFINITY },
            sealed: false,
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
        enough_memory(self.layout.ram_pages, bytes)
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

    /// Checks every invariant (for tests; O(n)): the tree's own, no two touching mappings with
    /// equal attributes left unmerged, the byte counters, the window's alignment, W^X.
    pub fn check(&self) {
        self.tree.check();
        let mut prev: Option<Vma> = None;
        let (mut mapped, mut used, mut data) = (0, 0, 0);
        let mut named: alloc::vec::Vec<(super::AnonName, u64)> = alloc::vec::Vec::new();
        for v in self.tree.iter() {
            named.push((v.name, v.len()));
            if is_data(v.prot, v.flags) {
                data += v.len();
            }
            if let Some(p) = prev {
                assert!(!(p.end == v.start && p.merges_with(v)), "unmerged {p:?} {v:?}");
            }
            assert!(
                v.start >= self.layout.mmap_min_addr && v.end <= self.layout.task_size,
                "out of range {v:?}"
            );
            assert!(
                self.allow_wx || self.read_implies_exec || !(v.prot.write() && v.prot.exec()),
                "W+X {v:?}"
            );
            mapped += v.len();
            if let Some(w) = self.window_range() {
                used += overlap_len((v.start, v.end), w);
            }
            prev = Some(*v);
        }
        assert_eq!(mapped, self.mapped, "mapped bytes");
        assert_eq!(data, self.data, "data bytes");
        assert_eq!(used, self.window.used, "window used bytes");
        self.names.check(&named);
        if let Some((b, e)) = self.window_range() {
            assert!(
                self.window.size.is_power_of_two() && b % self.window.size == 0 && e <= self.layout.task_size
            );
        }
    }
}
