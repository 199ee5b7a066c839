//! The ABI of this kernel's extensions, copied from `mm/src/vm/abi.rs`, which is the source of
//! truth (see there for the full contract of each item).
//!
//! Why a copy: the user program must build on its own, whatever state the kernel-side crate is in
//! while it is being developed, and must not link any of it. `build.rs` compares every constant
//! and both structures' field lists here against `mm/src/vm/abi.rs` at build time and fails the
//! build on any difference, so the copy cannot drift.

/// `mmap` flag: a mapping meant for code, placed in the code window while still RW (like `MAP_JIT`).
/// Linux ignores it for private mappings.
pub const MAP_CODE: u64 = 0x0200_0000;

/// System call: map `len` bytes within `radius` of `target`, as close as possible, in one search.
/// `x0 = target, x1 = len, x2 = radius, x3 = prot, x4 = flags`. Linux: `-ENOSYS`.
pub const SYS_MMAP_NEAR: u64 = 1000;

/// System call: the code window, `x0 = op, x1 = arg, x2 = *mut CodeWindowInfo`. Linux: `-ENOSYS`.
pub const SYS_CODE_WINDOW: u64 = 1001;

/// System call: memory-management counters, `x0 = *mut MmStats, x1 = size`. Linux: `-ENOSYS`.
pub const SYS_MM_STATS: u64 = 1002;

/// [`SYS_CODE_WINDOW`] op: fill the [`CodeWindowInfo`] at `x2`.
pub const WINDOW_GET: u64 = 0;
/// [`SYS_CODE_WINDOW`] op: set the window size (only while the window holds no mapping).
#[allow(dead_code)] // part of the ABI; this program does not change the window
pub const WINDOW_SET_SIZE: u64 = 1;
/// [`SYS_CODE_WINDOW`] op: strict mode on (1) or off (0).
#[allow(dead_code)] // part of the ABI; this program does not change the window
pub const WINDOW_SET_STRICT: u64 = 2;
/// [`SYS_CODE_WINDOW`] op: allow W+X mappings for this process (1) or refuse them (0).
#[allow(dead_code)] // part of the ABI; this program does not change the window
pub const WINDOW_ALLOW_WX: u64 = 3;

/// What [`WINDOW_GET`] reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeWindowInfo {
    /// First byte of the window (aligned to `size`).
    pub base: u64,
    /// Size in bytes (a power of two).
    pub size: u64,
    /// Bytes of the window currently mapped.
    pub used: u64,
    /// Code mappings placed outside the window because it was full (default mode).
    pub placed_outside: u64,
    /// 1 in strict mode.
    pub strict: u64,
}

/// What [`SYS_MM_STATS`] reports: the TLB instructions and page faults cumulative since boot
/// for the whole machine; promotions, demotions, folds, unfolds and the frames held for the
/// calling process; the machine's free frames now.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmStats {
    /// Range TLBIs issued (broadcast).
    pub tlbi_range_broadcast: u64,
    /// Single-page TLBIs issued (broadcast).
    pub tlbi_page_broadcast: u64,
    /// Whole-ASID TLBIs issued (broadcast).
    pub tlbi_asid_broadcast: u64,
    /// Whole-TLB TLBIs issued (broadcast).
    pub tlbi_all_broadcast: u64,
    /// Range TLBIs issued (local).
    pub tlbi_range_local: u64,
    /// Single-page TLBIs issued (local).
    pub tlbi_page_local: u64,
    /// Whole-ASID TLBIs issued (local).
    pub tlbi_asid_local: u64,
    /// Whole-TLB TLBIs issued (local).
    pub tlbi_all_local: u64,
    /// 2 MiB promotions (this process).
    pub promotions: u64,
    /// Block demotions (this process).
    pub demotions: u64,
    /// Page faults resolved by demand paging (the whole machine).
    pub page_faults: u64,
    /// 64 KiB runs given the contiguous hint (this process).
    pub folds: u64,
    /// Contiguous runs whose hint was cleared (this process).
    pub unfolds: u64,
    /// Data frames this process holds now.
    pub data_frames: u64,
    /// Page-table frames this process holds now (the root included).
    pub table_frames: u64,
    /// Free frames in the machine now.
    pub free_frames: u64,
}

const _: () = assert!(core::mem::size_of::<CodeWindowInfo>() == 5 * 8);
const _: () = assert!(core::mem::size_of::<MmStats>() == 16 * 8);
