//! Kernel address-space layout randomisation (KASLR): the Image moved to a random virtual address
//! at boot, so a kernel pointer an attacker could guess from the link address is wrong.
//!
//! The kernel is a position-independent executable whose relocations (`.rela.dyn`, only
//! `R_AARCH64_RELATIVE`: vtables, the GOT, the entry code's literal pools) are already applied in
//! the file for the link address [`KIMAGE_VADDR`], so an Image that is not moved runs as before.
//! The entry code turns the MMU on at the link address, installs the vectors and calls
//! [`kaslr_relocate`] first, before `kernel_main` has stored anything: it chooses the offset, maps
//! the Image a second time there ([`early_map::map_image_alias`]), rewrites every relocated word
//! for the new address (through the link-address mapping, still read-write-execute) and returns
//! the offset; the entry code then jumps to its own new address and starts again from there, the
//! stacks and vectors at their new addresses. The final map (`memory::kernel_map`) maps only the
//! new address, from `layout::image()`, whose symbols are PC-relative.
//!
//! As Linux arm64 (`kaslr_early_init`): the seed is `/chosen/kaslr-seed` when the boot loader
//! gives one (QEMU `virt` does), else one `RNDR` draw where the CPU has FEAT_RNG, else there is no
//! KASLR; `nokaslr` on the command line turns it off. The offset is a ChaCha20 block keyed by the
//! seed (so the kernel base says nothing about the seed, which `random` also mixes into its
//! generator), reduced to one of 2^24 2 MiB-aligned places in the 32 TiB from 1 GiB above the
//! link address (clear of the early device-tree and UART windows, 512 MiB up, and below the
//! device window). The physical load address is the loader's, unchanged.
//!
//! The same seed moves the linear map, as Linux's `memstart_offset_seed`: 16 more bits of the
//! ChaCha20 block choose the offset [`linear_offset_for`] gives for the CPU's
//! physical-address size (none where the CPU's physical addresses fill the linear region, as on
//! QEMU's `max`), stored before `kernel_main` builds or reads the linear map.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};

use super::early_map::{self, FDT_WINDOW_SIZE, FDT_WINDOW_VADDR, KIMAGE_VADDR};

/// Where the random range starts, above the link address.
const RANGE_START: u64 = 1 << 30;
/// The alignment of the offset: the boot protocol's unit, and one early-map leaf or more.
const OFFSET_ALIGN: u64 = 2 << 20;
/// The number of places: 2^24 (32 TiB in 2 MiB steps).
const PLACES: u64 = 1 << 24;

/// The size of the kernel's linear region, 2^47 bytes: `memory::layout` places it right below
/// the Image's link address.
pub const LINEAR_REGION: u64 = 1 << 47;
/// The unit the linear map moves by, Linux's `ARM64_MEMSTART_ALIGN`: 1 GiB with 4 KiB and
/// 16 KiB pages, 512 MiB with 64 KiB pages (whole level-1 or level-2 blocks either way, so the
/// map keeps its block entries).
pub const LINEAR_ALIGN: u64 = if mm::addr::PAGE_SIZE == 64 << 10 { 512 << 20 } else { 1 << 30 };

/// The linear map's offset: set by [`kaslr_relocate`] before anything maps or reads through the
/// linear map, read-only afterwards.
static LINEAR_OFFSET: AtomicU64 = AtomicU64::new(0);

/// How far physical 0 sits above the linear region's base (0 without KASLR or without room).
pub fn linear_offset() -> u64 {
    LINEAR_OFFSET.load(Ordering::Relaxed)
}

/// The linear map's offset for a 16-bit seed on a CPU with `pa_bits` physical-address bits, as
/// Linux's `arm64_memblock_init` moves `memstart_addr`: the room the region leaves beyond what
/// `pa_bits` span, in [`LINEAR_ALIGN`] steps, scaled by `seed / 2^16`; 0 when the room is less
/// than one step (a 48-bit or larger PARange with this 47-bit region).
pub const fn linear_offset_for(seed: u16, pa_bits: u32) -> u64 {
    let span = 1u64 << pa_bits;
    if span >= LINEAR_REGION || LINEAR_REGION - span < LINEAR_ALIGN {
        return 0;
    }
    let steps = (LINEAR_REGION - span) / LINEAR_ALIGN;
    LINEAR_ALIGN * ((steps * seed as u64) >> 16)
}

/// Why the Image runs where it runs, for the boot report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kaslr {
    /// Moved by this offset from the link address, with the seed from this source.
    Moved { offset: u64, seed: SeedSource },
    /// `nokaslr` was on the command line.
    Disabled,
    /// No seed: no `/chosen/kaslr-seed` and no FEAT_RNG.
    NoSeed,
    /// A seed, but the early map had no room for the alias (cannot happen with the arena's
    /// sizing; reported rather than assumed).
    NoRoom,
}

/// Where the seed came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedSource {
    /// The device tree's `/chosen/kaslr-seed`.
    DeviceTree,
    /// FEAT_RNG's `RNDR`.
    Rndr,
}

impl core::fmt::Display for Kaslr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Kaslr::Moved { offset, seed } => {
                let from = match seed {
                    SeedSource::DeviceTree => "/chosen/kaslr-seed",
                    SeedSource::Rndr => "RNDR",
                };
                write!(f, "KASLR: offset {offset:#x}, seed from {from}")
            }
            Kaslr::Disabled => write!(f, "no KASLR: nokaslr"),
            Kaslr::NoSeed => write!(f, "no KASLR: no seed (no /chosen/kaslr-seed, no FEAT_RNG)"),
            Kaslr::NoRoom => write!(f, "no KASLR: the early page-table arena had no room"),
        }
    }
}

struct Outcome(UnsafeCell<Kaslr>);
// SAFETY: written once by the boot CPU in `kaslr_relocate`, before any other CPU runs or
// anything reads it; read-only afterwards.
unsafe impl Sync for Outcome {}

/// What [`kaslr_relocate`] did. A plain value with no addresses in it, so it reads the same from
/// either address of the Image.
static OUTCOME: Outcome = Outcome(UnsafeCell::new(Kaslr::NoSeed));

/// What boot chose, for the boot report.
pub fn outcome() -> Kaslr {
    // SAFETY: read-only after the entry code (see `Outcome`).
    unsafe { *OUTCOME.0.get() }
}

/// How far the Image runs from its link address (0 without KASLR): link addresses (the symbol
/// table's) are run addresses minus this.
pub fn offset() -> u64 {
    run_address_of_image().wrapping_sub(KIMAGE_VADDR)
}

/// Where the Image's first byte is now (PC-relative: the run address once the MMU is on).
fn run_address_of_image() -> u64 {
    unsafe extern "C" {
        static __image_start: u8;
    }
    super::pc_relative!(__image_start)
}

/// The ChaCha20 block keyed by a seed, whose bytes choose both offsets.
fn block_for_seed(seed: u64) -> [u8; 64] {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    crng::chacha20_block(&key, 0, b"kernel kaslr")
}

/// The offset a seed gives: its block's first 8 bytes, reduced to one of [`PLACES`].
pub fn offset_for_seed(seed: u64) -> u64 {
    let block = block_for_seed(seed);
    let mut word = [0u8; 8];
    word.copy_from_slice(&block[..8]);
    RANGE_START + (u64::from_le_bytes(word) % PLACES) * OFFSET_ALIGN
}

/// The linear map's offset a seed gives on a CPU with `pa_bits` physical-address bits: the
/// block's next 16 bits as Linux's `memstart_offset_seed` (independent of the Image's offset).
pub fn linear_offset_for_seed(seed: u64, pa_bits: u32) -> u64 {
    let block = block_for_seed(seed);
    linear_offset_for(u16::from_le_bytes([block[8], block[9]]), pa_bits)
}

/// The physical-address bits the kernel's walks may output on this CPU: its PARange, capped as
/// `TCR_EL1.IPS` is (48 bits, 52 in the `lpa2` build).
pub fn physical_address_bits() -> u32 {
    use crate::arch::aarch64::translation::{ips_bits, read_mmfr0, tcr_el1};
    ips_bits(tcr_el1(read_mmfr0()))
}

/// Called by the entry code at the link address with the MMU on and the vectors installed, before
/// `kernel_main`: moves the Image if KASLR is on and answers the offset, or 0 where it stays (it
/// also answers 0 when called again at the new address).
#[unsafe(no_mangle)]
extern "C" fn kaslr_relocate(fdt_pa: u64, load_pa: u64) -> u64 {
    if offset() != 0 {
        return 0;
    }
    let choice = match choose(fdt_pa) {
        Ok(seed) => {
            // Before anything maps or reads through the linear map (`kernel_main` builds it).
            LINEAR_OFFSET.store(linear_offset_for_seed(seed.0, physical_address_bits()), Ordering::Relaxed);
            let offset = offset_for_seed(seed.0);
            if early_map::map_image_alias(KIMAGE_VADDR + offset, load_pa) {
                relocate(offset);
                Kaslr::Moved { offset, seed: seed.1 }
            } else {
                Kaslr::NoRoom
            }
        }
        Err(why) => why,
    };
    // SAFETY: the boot CPU alone, before anything reads it (see `Outcome`).
    unsafe { OUTCOME.0.get().write(choice) };
    match choice {
        Kaslr::Moved { offset, .. } => offset,
        _ => 0,
    }
}

/// The seed, or why there is none: `nokaslr`, then `/chosen/kaslr-seed`, then `RNDR`.
fn choose(fdt_pa: u64) -> Result<(u64, SeedSource), Kaslr> {
    // The device tree as kernel_main opens it (which reports a bad one; here it only means no
    // seed and no command line from it).
    let fdt = (fdt_pa != 0 && fdt_pa.is_multiple_of(8) && fdt_pa < (1 << 48))
        .then(|| {
            let offset = fdt_pa & 0x1f_ffff;
            // SAFETY: the early map shows FDT_WINDOW_SIZE bytes from the 2 MiB block holding x0,
            // read-only, at FDT_WINDOW_VADDR; nothing writes there.
            unsafe { crate::devicetree::open(FDT_WINDOW_VADDR + offset, (FDT_WINDOW_SIZE - offset) as usize) }
                .ok()
        })
        .flatten();
    let chosen = fdt.as_ref().and_then(|f| f.find_node("/chosen"));
    if let Some(chosen) = &chosen
        && let Some(args) = chosen.property("bootargs").and_then(|p| p.as_str())
        && args.split_ascii_whitespace().take_while(|w| *w != "--").any(|w| w == "nokaslr")
    {
        return Err(Kaslr::Disabled);
    }
    if let Some(seed) = chosen.and_then(|c| c.property("kaslr-seed")).and_then(|p| p.as_u64())
        && seed != 0
    {
        return Ok((seed, SeedSource::DeviceTree));
    }
    rndr().map(|seed| (seed, SeedSource::Rndr)).ok_or(Kaslr::NoSeed)
}

/// One `RNDR` draw where the CPU has FEAT_RNG (ID_AA64ISAR0_EL1.RNDR); `None` without it or when
/// the hardware had nothing to give.
fn rndr() -> Option<u64> {
    use aarch64_cpu::registers::{ID_AA64ISAR0_EL1, Readable};
    if (ID_AA64ISAR0_EL1.get() >> 60) & 0xf == 0 {
        return None;
    }
    let value: u64;
    let ok: u64;
    // SAFETY: RNDR (s3_3_c2_c4_0) exists (checked above); it writes the register and NZCV only.
    unsafe {
        core::arch::asm!("mrs {v}, s3_3_c2_c4_0", "cset {ok}, ne", v = out(reg) value, ok = out(reg) ok,
                         options(nomem, nostack));
    }
    (ok == 1 && value != 0).then_some(value)
}

/// One `.rela.dyn` entry (Elf64_Rela).
#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: u64,
}

/// `R_AARCH64_RELATIVE`: the word at `offset` holds the link address `addend`, to which the
/// distance between run and link address is added.
const R_AARCH64_RELATIVE: u64 = 1027;

/// Rewrites every relocated word for the Image at `KIMAGE_VADDR + offset`, through the link
/// address (the early map shows the whole Image there read-write-execute).
fn relocate(offset: u64) {
    unsafe extern "C" {
        static __rela_dyn_start: Rela;
        static __rela_dyn_end: Rela;
    }
    let start = &raw const __rela_dyn_start;
    let end = &raw const __rela_dyn_end;
    let count = (end as usize - start as usize) / core::mem::size_of::<Rela>();
    unsafe extern "C" {
        static __image_end: u8;
    }
    // Link addresses: this runs before the move, at the link address.
    let (image_start, image_end) = (run_address_of_image(), super::pc_relative!(__image_end));
    for i in 0..count {
        // SAFETY: `i` indexes the linker's .rela.dyn, which lies between the two symbols.
        let r = unsafe { &*start.add(i) };
        // The link ships only RELATIVE entries (a static PIE with no symbols to resolve); any
        // other, or a target outside the Image, is left alone rather than trusted.
        if r.info != R_AARCH64_RELATIVE
            || r.offset < image_start
            || r.offset + 8 > image_end
            || r.offset % 8 != 0
        {
            continue;
        }
        // SAFETY: an 8-byte aligned word of the Image, mapped writable by the early map.
        unsafe { (r.offset as *mut u64).write_volatile(r.addend.wrapping_add(offset)) };
    }
    // The words are data (literal pools are read as data too): make the writes complete before
    // the entry code loads its new address from one of them.
    // SAFETY: barriers only.
    unsafe { core::arch::asm!("dsb ish", "isb", options(nostack, preserves_flags)) };
}
