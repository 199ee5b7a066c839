//! The first page tables, built with the MMU off.
//!
//! This code runs at the Image's physical address before the MMU is on, so it must stay
//! position-independent: no trait objects or function pointers (they hold link-time addresses), no
//! formatting, no atomics or locks (exclusives are unreliable with the MMU off), no heap. It is
//! plain arithmetic and aligned stores into a static arena in .bss, reached PC-relatively. The
//! descriptors come from the mm crate's `const` constructors (`Descriptor::block_2m`,
//! `Descriptor::table`, the `Attributes` constants), the same encoding the final map uses: they
//! compile to the same shifts and masks, inlined into `early_map`, with no panic path
//! (`Descriptor::block_2m` has no level check to fail). `kimage check` (its `early-code` check)
//! reads the generated code: no indirect branch and no load of a link address in `early_map` or
//! anything it calls.
//!
//! The map is deliberately coarse and short-lived (2 MiB blocks, read-write-execute for EL1 only):
//! - TTBR0: the Image identity-mapped, so the instruction after the MMU turns on still fetches;
//! - TTBR1: the Image at its link address [`KIMAGE_VADDR`];
//! - TTBR1: a window of two 2 MiB blocks over the device tree x0 points at, read-only, at
//!   [`FDT_WINDOW_VADDR`], so the kernel can validate it with the exception vectors installed
//!   (a bad x0 then gives a report rather than a silent hang);
//! - TTBR1: the board's fallback UART, if the board has one (device memory), at
//!   [`EARLY_UART_VADDR`].
//!
//! `memory::kernel_map` replaces all of it with the final, section-by-section map.

use core::cell::UnsafeCell;

use mm::addr::PhysAddr;
use mm::descriptor::{Attributes, Descriptor, MAIR_EL1_VALUE as MM_MAIR};
#[cfg(feature = "lpa2")]
use mm::paging::lpa2;

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

/// TCR_EL1 without IPS and AS (filled in from ID_AA64MMFR0_EL1 by the entry code): 48-bit VAs in
/// both halves (T0SZ = T1SZ = 16), 4 KiB granules, walks inner-shareable write-back cacheable.
/// The `lpa2` build adds [`LPA2_TCR`].
pub const TCR_EL1_BASE: u64 = (16 // T0SZ
    | (0b01 << 8) // IRGN0 write-back write-allocate
    | (0b01 << 10) // ORGN0
    | (0b11 << 12) // SH0 inner shareable
    // TG0 = 0b00: 4 KiB
    | (16 << 16) // T1SZ
    | (0b01 << 24) // IRGN1
    | (0b01 << 26) // ORGN1
    | (0b11 << 28) // SH1
    | (0b10 << 30)) // TG1 4 KiB
    ^ LPA2_TCR;

/// What FEAT_LPA2 changes in TCR_EL1 (`mm::paging::lpa2`): `DS`, a 52-bit kernel half (T1SZ 12
/// instead of 16) and the user half's T0SZ (16 with 4 KiB pages, 12 with 16 KiB). Applied with
/// `^` to the 48-bit value, whose T0SZ and T1SZ are 16.
#[cfg(feature = "lpa2")]
const LPA2_TCR: u64 = lpa2::TCR_DS | ((16 ^ lpa2::T1SZ_52) << 16) | (16 ^ lpa2::T0SZ);
/// Nothing without the `lpa2` feature.
#[cfg(not(feature = "lpa2"))]
const LPA2_TCR: u64 = 0;

/// The largest `TCR_EL1.IPS` the entry code programs (it takes PARange, capped here): 48 bits
/// (0b101), 52 bits (0b110) in the `lpa2` build, whose descriptors can hold them.
pub const TCR_IPS_MAX: u64 = if cfg!(feature = "lpa2") { 0b110 } else { 0b101 };

/// Pages in the early arena: TTBR0 needs up to 1 + 2 + 2, TTBR1 1 + 1 + 1; a few spare.
const ARENA_PAGES: usize = 10;

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[[u64; 512]; ARENA_PAGES]>);
// SAFETY: written only by the boot CPU before any other CPU or interrupt exists.
unsafe impl Sync for Arena {}

static EARLY_TABLES: Arena = Arena(UnsafeCell::new([[0; 512]; ARENA_PAGES]));

// The early map's attributes, as compile-time constants of the mm crate's one descriptor
// encoding (`const` items: nothing of `Attributes` is left to run here but the `u64`s).
/// The Image: EL1 read-write-execute, UXN (one coarse mapping, replaced by the final map).
const IMAGE: Attributes = Attributes::kernel_data().with_el1_execute(true);
/// The device-tree window: EL1 read-only, never executable.
const FDT: Attributes = Attributes::kernel_rodata();
/// The fallback UART: Device-nGnRE, never executable.
const UART: Attributes = Attributes::device();
const BLOCK_2M: u64 = mm::addr::BLOCK_2M;

/// The two roots, returned in x0 and x1 (AAPCS64 returns a 16-byte struct in registers).
#[repr(C)]
pub struct EarlyRoots {
    ttbr0: u64,
    ttbr1: u64,
}

struct Bump {
    base: *mut [u64; 512],
    used: usize,
}

impl Bump {
    /// Takes the next zeroed page of the arena (zeroed with .bss by the entry code), or `None`.
    fn take(&mut self) -> Option<*mut [u64; 512]> {
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
/// `table` points to a table page of the arena and `index < 512`.
unsafe fn entry(table: *mut [u64; 512], index: u64) -> *mut u64 {
    // SAFETY: in bounds by the caller's contract.
    unsafe { table.cast::<u64>().add(index as usize) }
}

/// Maps one 2 MiB block `va -> pa` under `root`, creating level-1 and level-2 tables as needed.
/// Returns false when the arena is exhausted or the slot is taken by something else.
fn map_block(arena: &mut Bump, root: *mut [u64; 512], va: u64, pa: u64, attrs: Attributes) -> bool {
    let mut table = root;
    for level in 0..2u32 {
        let index = (va >> (39 - 9 * level)) & 0x1ff;
        // SAFETY: `table` is an arena page and index < 512.
        let slot = unsafe { entry(table, index) };
        // SAFETY: `slot` is a valid, aligned u64 inside the arena.
        let current = Descriptor::from_bits(unsafe { slot.read_volatile() });
        table = if current.is_table(level) {
            current.output_address().0 as *mut [u64; 512]
        } else if current.bits() == 0 {
            let Some(next) = arena.take() else { return false };
            // SAFETY: as above; the new table's physical address is its address (MMU off).
            unsafe { slot.write_volatile(Descriptor::table(PhysAddr(next as u64)).bits()) };
            next
        } else {
            return false;
        };
    }
    let index = (va >> 21) & 0x1ff;
    // SAFETY: `table` is an arena page and index < 512.
    unsafe { entry(table, index).write_volatile(Descriptor::block_2m(PhysAddr(pa), attrs).bits()) };
    true
}

/// Builds the early tables. Called once by the entry code, MMU off, on the boot stack.
///
/// Returns the roots for TTBR0 and TTBR1, or zero roots when the arena ran out (the entry code
/// then parks; this cannot happen for an Image below 4 MiB... see [`ARENA_PAGES`]).
#[unsafe(no_mangle)]
extern "C" fn early_map(load_pa: u64, fdt_pa: u64) -> EarlyRoots {
    unsafe extern "C" {
        static __image_start: u8;
        static __image_end: u8;
    }
    // PC-relative: these are physical addresses here, and their difference is the image size.
    let image_size = (&raw const __image_end) as u64 - (&raw const __image_start) as u64;
    if !load_pa.is_multiple_of(BLOCK_2M) {
        early_say(b"kernel: loaded at an address that is not 2 MiB aligned; the arm64 boot protocol requires it\r\n");
        return EarlyRoots { ttbr0: 0, ttbr1: 0 };
    }
    #[cfg(feature = "lpa2")]
    if !lpa2::cpu_supports_lpa2(mm::granule::Format::BUILD, {
        use aarch64_cpu::registers::Readable;
        aarch64_cpu::registers::ID_AA64MMFR0_EL1.get()
    }) {
        early_say(b"kernel: built for FEAT_LPA2 (52-bit addresses), which this CPU's ID_AA64MMFR0_EL1 does not report for the kernel's granule; boot a build without the lpa2 feature\r\n");
        return EarlyRoots { ttbr0: 0, ttbr1: 0 };
    }
    let mut arena = Bump { base: EARLY_TABLES.0.get().cast(), used: 0 };
    let (Some(root0), Some(root1)) = (arena.take(), arena.take()) else {
        return EarlyRoots { ttbr0: 0, ttbr1: 0 };
    };
    let mut ok = true;
    let mut offset = 0;
    while offset < image_size {
        ok &= map_block(&mut arena, root0, load_pa + offset, load_pa + offset, IMAGE);
        ok &= map_block(&mut arena, root1, KIMAGE_VADDR + offset, load_pa + offset, IMAGE);
        offset += BLOCK_2M;
    }
    // The device-tree window: only for an x0 that could be a device tree at all.
    if fdt_pa != 0 && fdt_pa.is_multiple_of(8) && fdt_pa < (1 << 48) {
        let base = fdt_pa & !(BLOCK_2M - 1);
        ok &= map_block(&mut arena, root1, FDT_WINDOW_VADDR, base, FDT);
        ok &= map_block(&mut arena, root1, FDT_WINDOW_VADDR + BLOCK_2M, base + BLOCK_2M, FDT);
    }
    if let Some(uart) = crate::board::FALLBACK_UART_PA {
        ok &= map_block(&mut arena, root1, EARLY_UART_VADDR, uart & !(BLOCK_2M - 1), UART);
    }
    if !ok {
        early_say(b"kernel: the early page-table arena is too small for this image\r\n");
        return EarlyRoots { ttbr0: 0, ttbr1: 0 };
    }
    #[cfg(feature = "lpa2")]
    if lpa2::LEVEL_MINUS_ONE {
        // A 52-bit kernel half with 4 KiB pages walks from a level -1 table; its last entry is
        // the tree built above (the upper 2^48 bytes, where the kernel lives).
        let Some(top) = arena.take() else { return EarlyRoots { ttbr0: 0, ttbr1: 0 } };
        let index = lpa2::level_minus_one_index(mm::addr::VirtAddr(KIMAGE_VADDR)) as u64;
        // SAFETY: `top` is an arena page and index < 16; the table address is an arena page, so
        // `Descriptor::table` encodes it (no panic path, unlike the `Option` of the LPA2 helper).
        unsafe { entry(top, index).write_volatile(Descriptor::table(PhysAddr(root1 as u64)).bits()) };
        return EarlyRoots { ttbr0: root0 as u64, ttbr1: top as u64 };
    }
    EarlyRoots { ttbr0: root0 as u64, ttbr1: root1 as u64 }
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
