//! The kernel's final translation tables (TTBR1): built through the mm crate, then live as an
//! `mm::space::AddressSpace` ([`KernelSpace`]).
//!
//! While this map is built, the only memory the kernel can reach is the Image itself (the early
//! map shows nothing else), so table pages come from a static arena in .bss. Once the map is live
//! and the frame allocator holds RAM, later tables come from frames, reached through the linear
//! map. [`KernelTranslation`] answers both ways: a table's physical address inside the Image is
//! reached at its link address, any other through the linear map.
//!
//! Once installed, the table is handed to an address space (global scope, `Policy::KERNEL`) and
//! marked live, and every later change goes through it ([`with_space`]): the CPU stacks, device
//! mappings, the test image's changes. So break-before-make is done by the mm crate, with one
//! gathered invalidation per call, and a change that needs it can no longer be written in place
//! by mistake (the live table refuses it). Detached tables and unmapped frames are freed only
//! after the invalidation that covers them, on the error paths too.
//!
//! The map, by section (the `kernel_map_*` in-kernel tests check each line with the CPU's own
//! translation, `AT S1E1R/W`):
//! - text RX (PXN clear), rodata R, data/bss/stacks RW; all UXN, all global;
//! - no mapping for the guard pages below the boot and exception stacks;
//! - the linear map of RAM, RW and never executable, without the Image's own frames (so kernel
//!   text has no writable alias) and without `no-map` reservations;
//! - the device tree read-only at the address the early map used;
//! - device MMIO as device nGnRE in its own window.
//!
//! The kernel space never breaks what its own sequences use (the tables are reached through the
//! linear map or the Image, the code and stacks are mapped at their final granularity, and
//! `Policy::KERNEL` never promotes or folds on its own), so the broken range of a
//! break-before-make never faults under the code doing it.
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::Attributes;
use mm::paging::{AlignedTable, Constraints, ENTRIES_PER_TABLE, MapError, PageTable, Translation, VaRange};
use mm::phys::RegionSet;
use mm::space::AddressSpace;
use mm::tlb::issue::Aarch64Tlb;
use mm::tlb::{TlbFeatures, TlbIssuer};
use spin::Mutex;

use super::layout::{self, DEVICE_BASE};
use super::{frames, tlb};
use crate::boot::early_map::FDT_WINDOW_VADDR;

/// Table pages available before the frame allocator exists: 256 KiB of 4 KiB tables, or 16 of
/// the larger ones, each of which maps 4 (16 KiB) or 16 (64 KiB) times more per level, so the
/// same layouts need fewer of them (a boot reports how many it used).
pub const ARENA_PAGES: usize = if PAGE_SIZE == 4096 { 64 } else { 16 };

struct Arena(UnsafeCell<[AlignedTable; ARENA_PAGES]>);
// SAFETY: handed out page by page under the kernel-table lock.
unsafe impl Sync for Arena {}
static ARENA: Arena = Arena(UnsafeCell::new([AlignedTable([0; ENTRIES_PER_TABLE]); ARENA_PAGES]));

/// Where the kernel's table pages come from, and how the kernel reaches them.
pub struct KernelTranslation {
    /// VA − PA for the Image.
    image_offset: u64,
    image_pa: (u64, u64),
    arena_used: usize,
    arena_freed: u64,
}

/// Set once the frame allocator holds RAM and the linear map is live ([`frames_ready`]).
static FRAMES_READY: AtomicBool = AtomicBool::new(false);

impl KernelTranslation {
    fn arena_pa(&self, index: usize) -> PhysAddr {
        let va = ARENA.0.get() as u64 + (index as u64) * PAGE_SIZE;
        PhysAddr(va - self.image_offset)
    }
}

// SAFETY: table frames are page-aligned pages, either of the static arena (inside the Image, so
// below 2^48 and reachable at their link address) or of the frame allocator (RAM, reachable
// through the linear map once it is live: `FRAMES_READY` is set only then). Each frame is handed
// out once until returned, and the engine is the only user of a table frame.
unsafe impl Translation for KernelTranslation {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        if FRAMES_READY.load(Ordering::Acquire)
            && let Some(pa) = frames::alloc(1)
        {
            return Some(pa);
        }
        if self.arena_freed != 0 {
            let index = self.arena_freed.trailing_zeros() as usize;
            self.arena_freed &= !(1 << index);
            return Some(self.arena_pa(index));
        }
        if self.arena_used < ARENA_PAGES {
            self.arena_used += 1;
            return Some(self.arena_pa(self.arena_used - 1));
        }
        None
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        let arena_start = self.arena_pa(0).0;
        if (arena_start..arena_start + ARENA_PAGES as u64 * PAGE_SIZE).contains(&pa.0) {
            self.arena_freed |= 1 << ((pa.0 - arena_start) / PAGE_SIZE);
        } else {
            frames::free(pa, 1);
        }
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        let va = if (self.image_pa.0..self.image_pa.1).contains(&pa.0) {
            pa.0 + self.image_offset
        } else {
            layout::phys_to_linear(pa.0)
        };
        // SAFETY: never null: both windows are in the upper half.
        unsafe { NonNull::new_unchecked(va as *mut [u64; ENTRIES_PER_TABLE]) }
    }

    fn publish_barrier(&self) {
        // The MMU is on whenever this runs: the new table's zeroes must reach the walker before
        // the descriptor that points to it.
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    }
}

/// The kernel's live address space: the TTBR1 table with its TLB maintenance.
pub type KernelSpace = AddressSpace<KernelTranslation, Aarch64Tlb>;

/// The live kernel space, from the switch to the final map on.
static KERNEL_SPACE: Mutex<Option<KernelSpace>> = Mutex::new(None);

/// Runs `f` on the live kernel space, the one way to change the kernel map after boot (`None`
/// before the final map is live). Its flushes go to every CPU (`FlushTarget::GLOBAL`), and what
/// it issued is added to the kernel's TLB counters ([`tlb::stats`]).
///
/// The machine's TLB features are fixed in a space, but they are combined over the CPUs as each
/// comes up, after the kernel space exists: when they changed (a CPU without FEAT_TLBIRANGE, or
/// with an erratum the boot CPU lacks), the space is made again around the same table with the
/// new features and an issuer with the new errata (its counters start over), before `f` runs.
pub fn with_space<R>(f: impl FnOnce(&mut KernelSpace) -> R) -> Option<R> {
    let mut guard = KERNEL_SPACE.lock();
    let features = tlb::features();
    if guard.as_ref()?.features() != features {
        let (table, issuer, _) = guard.take()?.into_parts();
        *guard = Some(kernel_space(table, TlbIssuer::new(issuer.into_hw(), features.errata), features));
    }
    let space = guard.as_mut()?;
    let before = *space.tlb_stats();
    let result = f(space);
    tlb::account(&space.tlb_stats().since(&before));
    Some(result)
}

fn kernel_space(
    table: PageTable<KernelTranslation>,
    issuer: TlbIssuer<Aarch64Tlb>,
    features: TlbFeatures,
) -> KernelSpace {
    AddressSpace::kernel(table, issuer, features)
}

static NEXT_DEVICE_VA: Mutex<u64> = Mutex::new(DEVICE_BASE);

/// Zeroed table used to break TTBR1 during the switch.
static EMPTY_TABLE: AlignedTable = AlignedTable([0; ENTRIES_PER_TABLE]);

/// What the final map needs to know.
pub struct MapInputs<'a> {
    /// Physical address the Image was loaded at.
    pub load_pa: u64,
    /// RAM ranges from the device tree.
    pub memory: &'a RegionSet<64>,
    /// Ranges the linear map must not cover (`no-map` reservations).
    pub no_map: &'a [(u64, u64)],
    /// The device tree blob: physical address and size.
    pub fdt: (u64, u64),
    /// The console's registers, if any: physical address and the bytes its driver touches.
    pub console: Option<(u64, u64)>,
}

/// Where the final map put things.
pub struct Mapped {
    /// Virtual address of the console's registers.
    pub console_va: Option<u64>,
    /// Table pages taken from the static arena.
    pub arena_pages: usize,
}

fn map(
    pt: &mut PageTable<KernelTranslation>,
    va: u64,
    pa: u64,
    size: u64,
    attrs: Attributes,
) -> Result<(), MapError> {
    if size == 0 {
        return Ok(());
    }
    pt.map(VirtAddr(va), PhysAddr(pa), size, attrs, Constraints::NONE)
}

/// Builds the final kernel map and installs it in TTBR1.
///
/// # Errors
/// The mm error when the map cannot be built (the arena is too small for this machine's memory
/// layout, or a range is misaligned); the early map then stays live.
pub fn build_and_switch(inputs: &MapInputs<'_>) -> Result<Mapped, MapError> {
    let img = layout::image();
    let image_offset = img.start - inputs.load_pa;
    let image_end = img.end.next_multiple_of(PAGE_SIZE);
    let pa_of = |va: u64| va - image_offset;
    let translation = KernelTranslation {
        image_offset,
        image_pa: (inputs.load_pa, pa_of(image_end)),
        arena_used: 0,
        arena_freed: 0,
    };
    let mut pt = PageTable::new(translation, VaRange::Upper)?;
    let text = Attributes::kernel_text();
    let ro = Attributes::kernel_rodata();
    let rw = Attributes::kernel_data();
    map(&mut pt, img.start, pa_of(img.start), img.text_end - img.start, text)?;
    map(&mut pt, img.rodata_start, pa_of(img.rodata_start), img.rodata_end - img.rodata_start, ro)?;
    map(&mut pt, img.data_start, pa_of(img.data_start), img.boot_stack_guard - img.data_start, rw)?;
    let boot_stack = img.boot_stack_bottom;
    map(&mut pt, boot_stack, pa_of(boot_stack), img.exception_stack_guard - boot_stack, rw)?;
    let exc_stack = img.exception_stack_bottom;
    map(&mut pt, exc_stack, pa_of(exc_stack), image_end - exc_stack, rw)?;

    let mut linear = inputs.memory.clone();
    let _ = linear.remove(inputs.load_pa, pa_of(image_end));
    for &(start, end) in inputs.no_map {
        let _ = linear.remove(start, end);
    }
    linear.align_inward(PAGE_SIZE);
    // Tagged where the CPU has tag storage, as Linux's `map_mem`: the kernel zeroes and copies
    // the tags of user frames through the linear map (`arch::aarch64::mte`). The kernel's own
    // accesses are never tag-checked (SCTLR_EL1.TCF = 0), so nothing else changes.
    let linear_attrs = rw.with_tagged(crate::arch::aarch64::mte::linear_map_tagged());
    for &(start, end) in linear.ranges() {
        map(&mut pt, layout::phys_to_linear(start), start, end - start, linear_attrs)?;
    }

    let (fdt_pa, fdt_size) = inputs.fdt;
    let fdt_page = fdt_pa & !(PAGE_SIZE - 1);
    let fdt_end = (fdt_pa + fdt_size).next_multiple_of(PAGE_SIZE);
    let window_va = FDT_WINDOW_VADDR + (fdt_page & ((2 << 20) - 1));
    map(&mut pt, window_va, fdt_page, fdt_end - fdt_page, ro)?;

    let mut console_va = None;
    if let Some((pa, len)) = inputs.console {
        let mut next = NEXT_DEVICE_VA.lock();
        let page = pa & !(PAGE_SIZE - 1);
        // Every page the driver's registers reach (a GENI engine's TX FIFO is 0x700 in).
        let pages_len = (pa + len.max(1)).next_multiple_of(PAGE_SIZE) - page;
        map(&mut pt, *next, page, pages_len, Attributes::device())?;
        console_va = Some(*next + (pa - page));
        *next += pages_len;
    }

    let empty_pa = (&raw const EMPTY_TABLE) as u64 - image_offset;
    // SAFETY: the new table maps the Image by section at its link address, including the running
    // code (text) and both stacks; the early identity map is still live in TTBR0; EMPTY_TABLE is
    // a zeroed, page-aligned table and `image_offset` is the Image's VA − PA.
    unsafe { crate::arch::mmu::switch_kernel_tables(ttbr1_root(&mut pt)?, empty_pa, image_offset) };
    let arena_pages = pt.translation().arena_used;
    // Live from here on (the switch flushed everything the early map left in the TLB).
    let features = tlb::features();
    *KERNEL_SPACE.lock() = Some(kernel_space(pt, TlbIssuer::new(Aarch64Tlb, features.errata), features));
    Ok(Mapped { console_va, arena_pages })
}

/// The table TTBR1 points at for the tree `pt`: its root, or with 4 KiB pages and FEAT_LPA2 a
/// level -1 table (a permanent arena page) whose last entry is that root (`mm::paging::lpa2`).
fn ttbr1_root(pt: &mut PageTable<KernelTranslation>) -> Result<u64, MapError> {
    #[cfg(feature = "lpa2")]
    if mm::paging::lpa2::LEVEL_MINUS_ONE {
        use mm::paging::lpa2;
        let top = pt.translation_mut().allocate_table().ok_or(MapError::OutOfMemory)?;
        let entry = lpa2::level_minus_one_entry(pt.root_pa()).ok_or(MapError::OutOfMemory)?;
        let table = pt.translation().table_ptr(top).cast::<u64>().as_ptr();
        for i in 0..lpa2::LEVEL_MINUS_ONE_ENTRIES {
            // SAFETY: `top` is a fresh arena page, reachable at `table` and used by nothing else.
            unsafe { table.add(i).write_volatile(0) };
        }
        let index = lpa2::level_minus_one_index(VaRange::Upper.base());
        // SAFETY: as above; index < 16.
        unsafe { table.add(index).write_volatile(entry.bits()) };
        // The table reaches memory's view before TTBR1 names it (the switch's TLBI and ISB do
        // not order stores).
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
        return Ok(top.0);
    }
    Ok(pt.root_pa().0)
}

/// From now on, new kernel table pages come from the frame allocator.
pub fn frames_ready() {
    FRAMES_READY.store(true, Ordering::Release);
}

/// Table pages from the frame allocator, reached through the linear map: the translation for
/// every table built after boot (user address spaces, test tables).
pub struct FrameTranslation;

// SAFETY: frames come from the frame allocator (page-aligned RAM below 2^48, each handed out
// once until freed) and are reached through the linear map, which covers all usable RAM.
unsafe impl Translation for FrameTranslation {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        if super::fallible::inject_failure() {
            return None;
        }
        frames::alloc(1)
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        frames::free(pa, 1);
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        // SAFETY: the linear map is in the upper half, never null.
        unsafe { NonNull::new_unchecked(layout::phys_to_linear(pa.0) as *mut [u64; ENTRIES_PER_TABLE]) }
    }

    fn publish_barrier(&self) {
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    }
}

/// The stacks of one secondary CPU, mapped with guard pages below each.
pub struct CpuStacks {
    /// Initial SP_EL0 (the CPU's kernel stack).
    pub kernel_stack_top: u64,
    /// Initial SP_EL1 (its exception stack).
    pub exception_stack_top: u64,
}

/// Maps CPU `cpu`'s kernel and exception stacks in its slot of the stack area:
/// `[guard][kernel stack][guard][exception stack]`, the guards left unmapped.
///
/// # Errors
/// The mm error if frames or table pages run out (nothing stays mapped or allocated then).
pub fn map_cpu_stacks(cpu: usize) -> Result<CpuStacks, MapError> {
    map_stacks(cpu, &mut |pages| frames::alloc(pages))
}

/// [`map_cpu_stacks`] with the stack frames from `alloc` (the test image makes it fail).
///
/// On failure the stacks mapped so far are unmapped through the space: the TLB invalidation
/// that covers them completes before their emptied tables are freed (inside the space) and
/// before their frames go back (here, after the unmap returned). The entries were valid, so a
/// walker may have cached them, even though nothing ran on these stacks.
pub(crate) fn map_stacks(
    cpu: usize,
    alloc: &mut dyn FnMut(usize) -> Option<PhysAddr>,
) -> Result<CpuStacks, MapError> {
    use crate::cpu::{EXCEPTION_STACK, KERNEL_STACK, STACK_SLOT};
    let slot = layout::STACK_AREA + cpu as u64 * STACK_SLOT;
    let kernel = slot + PAGE_SIZE;
    let exception = kernel + KERNEL_STACK + PAGE_SIZE;
    let stacks = [(kernel, KERNEL_STACK), (exception, EXCEPTION_STACK)];
    with_space(|space| {
        let mut mapped: [Option<PhysAddr>; 2] = [None; 2];
        let mut result = Ok(());
        for (i, &(va, size)) in stacks.iter().enumerate() {
            let pages = (size / PAGE_SIZE) as usize;
            let Some(pa) = alloc(pages) else {
                result = Err(MapError::OutOfMemory);
                break;
            };
            // Invalid to valid: no TLBI; the space ends with DSB ISHST and ISB, so the entries
            // are visible to the CPU about to start on them.
            if let Err(e) = space.map(VirtAddr(va), pa, size, Attributes::kernel_data(), Constraints::NONE) {
                frames::free(pa, pages); // nothing was mapped
                result = Err(e);
                break;
            }
            mapped[i] = Some(pa);
        }
        if let Err(e) = result {
            for (&(va, size), pa) in stacks.iter().zip(mapped) {
                // Unmapping pages that were mapped as pages splits nothing, so it cannot fail;
                // if it did, the frames would stay allocated rather than be freed while mapped.
                if let Some(pa) = pa
                    && space.unmap(VirtAddr(va), size, |_| {}).is_ok()
                {
                    frames::free(pa, (size / PAGE_SIZE) as usize);
                }
            }
            return Err(e);
        }
        Ok(CpuStacks {
            kernel_stack_top: kernel + KERNEL_STACK,
            exception_stack_top: exception + EXCEPTION_STACK,
        })
    })
    .unwrap_or(Err(MapError::InvalidRange))
}

/// Maps `size` bytes of device registers at `pa` into the device window (device nGnRE, never
/// executable); returns the virtual address of `pa`.
///
/// # Errors
/// The mm error if the mapping fails (out of table pages).
pub fn map_device(pa: u64, size: u64) -> Result<u64, MapError> {
    let page = pa & !(PAGE_SIZE - 1);
    let len = (pa + size.max(1)).next_multiple_of(PAGE_SIZE) - page;
    with_space(|space| {
        let mut next = NEXT_DEVICE_VA.lock();
        // Invalid to valid needs no TLBI; the space's DSB ISHST and ISB make the entries
        // visible before first use.
        space.map(VirtAddr(*next), PhysAddr(page), len, Attributes::device(), Constraints::NONE)?;
        let va = *next + (pa - page);
        *next += len;
        Ok(va)
    })
    .unwrap_or(Err(MapError::InvalidRange))
}
