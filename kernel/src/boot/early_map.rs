//! The first page tables, built with the MMU off.
//!
//! This code runs at the Image's physical address before the MMU is on, so it must stay
//! position-independent: no trait objects or function pointers (they hold link-time addresses), no
//! formatting, no atomics or locks (exclusives are unreliable with the MMU off), no heap. It is
//! plain arithmetic and aligned stores into a static arena in .bss, reached PC-relatively. The
//! descriptors come from the mm crate's `const` constructors (`Descriptor::block_2m`,
//! `Descriptor::page`, `Descriptor::table`, the `Attributes` constants), the same encoding the
//! final map uses: they compile to the same shifts and masks, inlined into `early_map`, with no
//! panic path (`block_2m` and `page` have no level check to fail). `kimage check` (its `early-code` check)
//! reads the generated code: no indirect branch and no load of a link address in `early_map` or
//! anything it calls.
//!
//! The map is deliberately coarse and short-lived (read-write-execute for EL1 only), in
//! [`EARLY_LEAF`] units: 2 MiB blocks with 4 KiB pages; with 16 KiB and 64 KiB pages, whose
//! level-2 blocks (32 MiB, 512 MiB) are larger than the 2 MiB alignment the boot protocol
//! promises, level-3 pages (as Linux's `SWAPPER_BLOCK_SIZE` is `PAGE_SIZE` there):
//! - TTBR0: the Image identity-mapped, so the instruction after the MMU turns on still fetches;
//! - TTBR1: the Image at its link address [`KIMAGE_VADDR`];
//! - TTBR1: a window of 4 MiB from the 2 MiB boundary below the device tree x0 points at,
//!   read-only, at [`FDT_WINDOW_VADDR`], so the kernel can validate it with the exception
//!   vectors installed (a bad x0 then gives a report rather than a silent hang);
//! - TTBR1: the 2 MiB around the board's fallback UART, if the board has one (device memory), at
//!   [`EARLY_UART_VADDR`].
//!
//! Before any of it, the CPU must offer the build's granule ([`crate::arch::aarch64::translation`]); if it
//! does not, `early_map` says so on the fallback UART and the entry code stops the run.
//!
//! `memory::kernel_map` replaces all of it with the final, section-by-section map.

use core::cell::UnsafeCell;

use mm::addr::PhysAddr;
use mm::descriptor::{Attributes, Descriptor, MAIR_EL1_VALUE as MM_MAIR};
use mm::granule::Format;
#[cfg(feature = "lpa2")]
use mm::paging::lpa2;
use mm::paging::{AlignedTable, ENTRIES_PER_TABLE};

/// Link address of the Image's first byte; must equal `KIMAGE_VADDR` in `linker.ld` (checked at
/// boot by `memory::layout::check_link_address`).
pub const KIMAGE_VADDR: u64 = 0xffff_8000_0000_0000;
/// Where the early map shows the device tree: 4 MiB from the 2 MiB block holding x0.
pub const FDT_WINDOW_VADDR: u64 = KIMAGE_VADDR + (512 << 20);
/// Size of the device-tree window.
pub const FDT_WINDOW_SIZE: u64 = 4 << 20;
/// Where the early map shows the board's fallback UART (its 2 MiB block).
pub const EARLY_UART_VADDR: u64 = FDT_WINDOW_VADDR + FDT_WINDOW_SIZE;

/// MAIR_EL1, from the mm crate (index 0 normal write-back, 1 normal non-cacheable, 2 device nGnRE,
/// 3 device nGnRnE).
pub const MAIR_EL1_VALUE: u64 = MM_MAIR;

/// SCTLR_EL1 with the MMU and caches off: only the bits that are RES1 in Armv8.0 (EOS, TSCXT, EIS,
/// SPAN, nTLSMD, LSMAOE), so nothing the loader left behind survives.
pub const SCTLR_EL1_MMU_OFF: u64 = (1 << 11) | (1 << 20) | (1 << 22) | (1 << 23) | (1 << 28) | (1 << 29);
/// SCTLR_EL1 with the MMU (M), data cache (C), instruction cache (I) and SP alignment check (SA) on.
pub const SCTLR_EL1_MMU_ON: u64 = SCTLR_EL1_MMU_OFF | (1 << 0) | (1 << 2) | (1 << 3) | (1 << 12);

/// Table pages in the early arena. 4 KiB: TTBR0 needs up to 1 + 2 + 2, TTBR1 1 + 1 + 1.
/// 16 KiB (levels 0 to 3, a level-3 table spans 32 MiB): TTBR0 1 + 1 + 1 + 2 (the Image may
/// cross a 32 MiB line), TTBR1 1 + 1 + 1 + 1 (the Image) + 1 (the device-tree and UART windows,
/// 512 MiB up, one 32 MiB span). 64 KiB (levels 1 to 3, a level-3 table spans 512 MiB): TTBR0
/// 1 + 1 + 2, TTBR1 1 + 1 + 1 + 1. So 10 covers every granule, and [`ALIAS_PAGES`] more the
/// Image's second, randomised address.
const ARENA_PAGES: usize = 10 + ALIAS_PAGES;
/// Table pages the Image's randomised alias ([`map_image_alias`]) may need: it lies in another
/// top-level entry than the link address, so 4 KiB pages need a level-1 and a level-2 table, and
/// one more of each where the Image crosses a 1 GiB or 512 GiB line; 16 KiB a level-2 and two
/// level-3 (a 32 MiB line); 64 KiB a level-2 and two level-3 (a 512 MiB line).
const ALIAS_PAGES: usize = 4;

/// The level the early map's leaves sit at: 2 (2 MiB blocks) with 4 KiB pages, 3 (pages)
/// with 16 KiB and 64 KiB.
const EARLY_LEAF_LEVEL: u32 = if mm::addr::BLOCK_2M == 2 << 20 { 2 } else { 3 };
/// The size of one early leaf: 2 MiB or one page.
pub const EARLY_LEAF: u64 = mm::descriptor::level_size(EARLY_LEAF_LEVEL);
/// The unit the boot protocol aligns the Image to, and the early windows' alignment.
const WINDOW_ALIGN: u64 = 2 << 20;
const _: () = assert!(WINDOW_ALIGN.is_multiple_of(EARLY_LEAF));

type Table = [u64; ENTRIES_PER_TABLE];

struct Arena(UnsafeCell<[AlignedTable; ARENA_PAGES]>);
// SAFETY: written only by the boot CPU before any other CPU or interrupt exists.
unsafe impl Sync for Arena {}

static EARLY_TABLES: Arena = Arena(UnsafeCell::new([AlignedTable([0; ENTRIES_PER_TABLE]); ARENA_PAGES]));

/// What [`map_image_alias`] needs of the early map once the MMU is on: the physical addresses of
/// the arena and of the kernel half's tree, and the arena pages used. Written once by
/// `early_map` with the MMU off (it is in .bss, which the entry code invalidates afterwards, so
/// the cached view reads what was written).
#[derive(Clone, Copy)]
struct ArenaState {
    base: u64,
    used: usize,
    root1: u64,
}

struct Shared(UnsafeCell<ArenaState>);
// SAFETY: written by the boot CPU only, before the MMU is on and before any other CPU runs;
// read and updated by the boot CPU in `map_image_alias`, still before any other CPU runs.
unsafe impl Sync for Shared {}

static ARENA_STATE: Shared = Shared(UnsafeCell::new(ArenaState { base: 0, used: 0, root1: 0 }));

// The early map's attributes, as compile-time constants of the mm crate's one descriptor
// encoding (`const` items: nothing of `Attributes` is left to run here but the `u64`s).
/// The Image: EL1 read-write-execute, UXN (one coarse mapping, replaced by the final map).
const IMAGE: Attributes = Attributes::kernel_data().with_el1_execute(true);
/// The device-tree window: EL1 read-only, never executable.
const FDT: Attributes = Attributes::kernel_rodata();
/// The fallback UART: Device-nGnRE, never executable.
const UART: Attributes = Attributes::device();

/// What the entry code needs to turn the MMU on: the two roots and `TCR_EL1`, returned through
/// the buffer x8 points to (AAPCS64 returns a struct larger than 16 bytes in memory), all zero
/// when the kernel cannot go on.
#[repr(C)]
pub struct EarlyRoots {
    ttbr0: u64,
    ttbr1: u64,
    tcr: u64,
}

/// The answer that stops the boot.
const REFUSED: EarlyRoots = EarlyRoots { ttbr0: 0, ttbr1: 0, tcr: 0 };

struct Bump {
    base: *mut Table,
    used: usize,
}

impl Bump {
    /// Takes the next zeroed page of the arena (zeroed with .bss by the entry code), or `None`.
    fn take(&mut self) -> Option<*mut Table> {
        if self.used == ARENA_PAGES {
            return None;
        }
        // SAFETY: `used < ARENA_PAGES`, so the page is inside the arena.
        let page = unsafe { self.base.add(self.used) };
        self.used += 1;
        Some(page)
    }
}

/// Reads entry `index` of the table at `table`.
///
/// # Safety
/// `table` points to a table page of the arena and `index < ENTRIES_PER_TABLE`.
unsafe fn entry(table: *mut Table, index: usize) -> *mut u64 {
    // SAFETY: in bounds by the caller's contract.
    unsafe { table.cast::<u64>().add(index) }
}

/// Maps one [`EARLY_LEAF`] `va -> pa` under `root`, creating the tables between the root level
/// and the leaf as needed. Returns false when the arena is exhausted or the slot is taken by
/// something else.
fn map_leaf(arena: &mut Bump, root: *mut Table, va: u64, pa: u64, attrs: Attributes) -> bool {
    let mut table = root;
    // The tree below a level -1 table (4 KiB pages with LPA2: `early_map` puts that table on
    // top afterwards) starts at level 0.
    let start = Format::BUILD.start_level();
    let mut level = if start < 0 { 0 } else { start as u32 };
    while level < EARLY_LEAF_LEVEL {
        // Below ENTRIES_PER_TABLE: the index is masked by the level's entry count.
        let index = Format::BUILD.table_index(va, level as i32);
        // SAFETY: `table` is an arena page and the index is in bounds.
        let slot = unsafe { entry(table, index) };
        // SAFETY: `slot` is a valid, aligned u64 inside the arena.
        let current = Descriptor::from_bits(unsafe { slot.read_volatile() });
        table = if current.is_table(level) {
            current.output_address().0 as *mut Table
        } else if current.bits() == 0 {
            let Some(next) = arena.take() else { return false };
            // SAFETY: as above; the new table's physical address is its address (MMU off).
            unsafe { slot.write_volatile(Descriptor::table(PhysAddr(next as u64)).bits()) };
            next
        } else {
            return false;
        };
        level += 1;
    }
    let index = Format::BUILD.table_index(va, EARLY_LEAF_LEVEL as i32);
    let leaf = if EARLY_LEAF_LEVEL == 2 {
        Descriptor::block_2m(PhysAddr(pa), attrs)
    } else {
        Descriptor::page(PhysAddr(pa), attrs)
    };
    // SAFETY: `table` is an arena page and the index is in bounds.
    unsafe { entry(table, index).write_volatile(leaf.bits()) };
    true
}

/// Maps `[va, va + size)` to `[pa, pa + size)` in [`EARLY_LEAF`]s (all three aligned to one).
fn map_range(arena: &mut Bump, root: *mut Table, va: u64, pa: u64, size: u64, attrs: Attributes) -> bool {
    let mut ok = true;
    let mut offset = 0;
    while offset < size {
        ok &= map_leaf(arena, root, va + offset, pa + offset, attrs);
        offset += EARLY_LEAF;
    }
    ok
}

/// Builds the early tables. Called once by the entry code, MMU off, on the boot stack.
///
/// Returns the roots for TTBR0 and TTBR1, or zero roots when the kernel cannot go on (the CPU
/// lacks the build's granule, the load address is misaligned, or the arena ran out; it said
/// which on the fallback UART, and the entry code ends the run).
#[unsafe(no_mangle)]
extern "C" fn early_map(load_pa: u64, fdt_pa: u64) -> EarlyRoots {
    unsafe extern "C" {
        static __image_start: u8;
        static __image_end: u8;
    }
    // PC-relative: these are physical addresses here, and their difference is the image size.
    let image_size = super::pc_relative!(__image_end) - super::pc_relative!(__image_start);
    let mmfr0 = crate::arch::aarch64::translation::read_mmfr0();
    if let Err(message) = crate::arch::aarch64::translation::granule_supported(mmfr0) {
        early_say(message);
        return REFUSED;
    }
    if !load_pa.is_multiple_of(WINDOW_ALIGN) {
        early_say(b"kernel: loaded at an address that is not 2 MiB aligned; the arm64 boot protocol requires it\r\n");
        return REFUSED;
    }
    #[cfg(feature = "lpa2")]
    if !lpa2::cpu_supports_lpa2(Format::BUILD, mmfr0) {
        early_say(b"kernel: built for FEAT_LPA2 (52-bit addresses), which this CPU's ID_AA64MMFR0_EL1 does not report for the kernel's granule; boot a build without the lpa2 feature\r\n");
        return REFUSED;
    }
    let mut arena = Bump { base: EARLY_TABLES.0.get().cast(), used: 0 };
    let (Some(root0), Some(root1)) = (arena.take(), arena.take()) else {
        return REFUSED;
    };
    let image_span = image_size.next_multiple_of(EARLY_LEAF);
    let mut ok = map_range(&mut arena, root0, load_pa, load_pa, image_span, IMAGE);
    ok &= map_range(&mut arena, root1, KIMAGE_VADDR, load_pa, image_span, IMAGE);
    // The device-tree window: only for an x0 that could be a device tree at all.
    if fdt_pa != 0 && fdt_pa.is_multiple_of(8) && fdt_pa < (1 << 48) {
        let base = fdt_pa & !(WINDOW_ALIGN - 1);
        ok &= map_range(&mut arena, root1, FDT_WINDOW_VADDR, base, FDT_WINDOW_SIZE, FDT);
    }
    if let Some(uart) = crate::board::FALLBACK_UART_PA {
        ok &= map_range(&mut arena, root1, EARLY_UART_VADDR, uart & !(WINDOW_ALIGN - 1), WINDOW_ALIGN, UART);
    }
    if !ok {
        early_say(b"kernel: the early page-table arena is too small for this image\r\n");
        return REFUSED;
    }
    // SAFETY: the boot CPU alone, MMU off, nothing else reads it yet (see `ArenaState`).
    unsafe {
        ARENA_STATE.0.get().write_volatile(ArenaState {
            base: arena.base as u64,
            used: arena.used,
            root1: root1 as u64,
        })
    };
    #[cfg(feature = "lpa2")]
    if lpa2::LEVEL_MINUS_ONE {
        // A 52-bit kernel half with 4 KiB pages walks from a level -1 table; its last entry is
        // the tree built above (the upper 2^48 bytes, where the kernel lives).
        let Some(top) = arena.take() else { return REFUSED };
        let index = lpa2::level_minus_one_index(mm::addr::VirtAddr(KIMAGE_VADDR));
        // SAFETY: `top` is an arena page and index < 16; the table address is an arena page, so
        // `Descriptor::table` encodes it (no panic path, unlike the `Option` of the LPA2 helper).
        unsafe { entry(top, index).write_volatile(Descriptor::table(PhysAddr(root1 as u64)).bits()) };
        return roots(root0 as u64, top as u64, mmfr0);
    }
    roots(root0 as u64, root1 as u64, mmfr0)
}

/// The answer for tables at `root0` and `root1`: TTBR values in the build's layout
/// ([`crate::arch::aarch64::translation::ttbr`]), never zero (a table is never at 0: the arena is in .bss).
fn roots(root0: u64, root1: u64, mmfr0: u64) -> EarlyRoots {
    use crate::arch::aarch64::translation::{tcr_el1, ttbr};
    EarlyRoots { ttbr0: ttbr(root0, 0), ttbr1: ttbr(root1, 0), tcr: tcr_el1(mmfr0) }
}

/// Maps the Image a second time, at `va` (2 MiB aligned, in the kernel half, clear of the early
/// windows), in the early map's kernel-half tree, for `boot::kaslr`: called once on the boot CPU
/// with the MMU on, before the final map exists. The tables are reached at their physical
/// addresses through the early identity map (TTBR0), which covers the whole Image and so the
/// arena. Returns false, having changed nothing the running kernel uses, when the arena is out
/// of pages or a slot is already taken.
pub fn map_image_alias(va: u64, load_pa: u64) -> bool {
    unsafe extern "C" {
        static __image_start: u8;
        static __image_end: u8;
    }
    let image_size = super::pc_relative!(__image_end) - super::pc_relative!(__image_start);
    // SAFETY: see `ArenaState`: the boot CPU alone, before any other CPU runs.
    let state = unsafe { &mut *ARENA_STATE.0.get() };
    if state.root1 == 0 || !va.is_multiple_of(WINDOW_ALIGN) {
        return false;
    }
    let mut arena = Bump { base: state.base as *mut Table, used: state.used };
    let ok = map_range(
        &mut arena,
        state.root1 as *mut Table,
        va,
        load_pa,
        image_size.next_multiple_of(EARLY_LEAF),
        IMAGE,
    );
    state.used = arena.used;
    // The new entries filled invalid slots (no break-before-make): they need only be visible to
    // the table walker before the first access through them.
    // SAFETY: barriers only.
    unsafe { core::arch::asm!("dsb ishst", "isb", options(nostack, preserves_flags)) };
    ok
}

/// Writes a message to the board's fallback UART with the MMU off (device memory by default), for
/// the few failures that happen before anything else can speak.
fn early_say(message: &[u8]) {
    if let Some(uart) = crate::board::FALLBACK_UART_PA {
        for &byte in message {
            // SAFETY: the board code names a PL011 data register at this physical address; with
            // the MMU off every access is a device access, and writing DR only queues a byte.
            unsafe { (uart as *mut u32).write_volatile(u32::from(byte)) };
        }
    }
}
