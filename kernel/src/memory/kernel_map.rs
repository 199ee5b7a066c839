//! The kernel's final translation tables (TTBR1), built through the mm crate.
//!
//! While this map is built, the only memory the kernel can reach is the Image itself (the early
//! map shows nothing else), so table pages come from a static arena in .bss. Once the map is live
//! and the frame allocator holds RAM, later tables come from frames, reached through the linear
//! map. [`KernelTranslation`] answers both ways: a table's physical address inside the Image is
//! reached at its link address, any other through the linear map.
//!
//! The map, by section (DESIGN.md §4; the `kernel_map_*` in-kernel tests check each line with the
//! CPU's own translation, `AT S1E1R/W`):
//! - text RX (PXN clear), rodata R, data/bss/stacks RW; all UXN, all global;
//! - no mapping for the guard pages below the boot and exception stacks;
//! - the linear map of RAM, RW and never executable, without the Image's own frames (so kernel
//!   text has no writable alias) and without `no-map` reservations;
//! - the device tree read-only at the address the early map used;
//! - device MMIO as device nGnRE in its own window.
use core::cell::UnsafeCell;
use core::ptr::NonNull;

use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::Attributes;
use mm::paging::{Constraints, MapError, PageTable, Translation, VaRange};
use mm::phys::RegionSet;
use spin::Mutex;

use super::frames;
use super::layout::{self, DEVICE_BASE};
use crate::boot::early_map::{FDT_WINDOW_VADDR, KIMAGE_VADDR};

/// Table pages available before the frame allocator exists.
pub const ARENA_PAGES: usize = 64;

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[[u8; 4096]; ARENA_PAGES]>);
// SAFETY: handed out page by page under the kernel-table lock.
unsafe impl Sync for Arena {}
static ARENA: Arena = Arena(UnsafeCell::new([[0; 4096]; ARENA_PAGES]));

/// Where the kernel's table pages come from, and how the kernel reaches them.
pub struct KernelTranslation {
    /// VA − PA for the Image.
    image_offset: u64,
    image_pa: (u64, u64),
    arena_used: usize,
    arena_freed: u64,
    frames_ready: bool,
}

impl KernelTranslation {
    fn arena_pa(&self, index: usize) -> PhysAddr {
        let va = ARENA.0.get() as u64 + (index as u64) * PAGE_SIZE;
        PhysAddr(va - self.image_offset)
    }
}

// SAFETY: table frames are 4 KiB-aligned pages, either of the static arena (inside the Image, so
// below 2^48 and reachable at their link address) or of the frame allocator (RAM, reachable
// through the linear map once it is live: `frames_ready` is set only then). Each frame is handed
// out once until returned, and the engine is the only user of a table frame.
unsafe impl Translation for KernelTranslation {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        if self.frames_ready
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

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; 512]> {
        let va = if (self.image_pa.0..self.image_pa.1).contains(&pa.0) {
            pa.0 + self.image_offset
        } else {
            layout::phys_to_linear(pa.0)
        };
        // SAFETY: never null: both windows are in the upper half.
        unsafe { NonNull::new_unchecked(va as *mut [u64; 512]) }
    }

    fn publish_barrier(&self) {
        // The MMU is on whenever this runs: the new table's zeroes must reach the walker before
        // the descriptor that points to it.
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    }
}

/// The live kernel table.
pub static KERNEL_TABLE: Mutex<Option<PageTable<KernelTranslation>>> = Mutex::new(None);

static NEXT_DEVICE_VA: Mutex<u64> = Mutex::new(DEVICE_BASE);

/// Zeroed table used to break TTBR1 during the switch.
#[repr(C, align(4096))]
struct EmptyTable([u64; 512]);
static EMPTY_TABLE: EmptyTable = EmptyTable([0; 512]);

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
    /// The console's registers, if any.
    pub console_pa: Option<u64>,
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
    let image_offset = KIMAGE_VADDR - inputs.load_pa;
    let image_end = img.end.next_multiple_of(PAGE_SIZE);
    let pa_of = |va: u64| va - image_offset;
    let translation = KernelTranslation {
        image_offset,
        image_pa: (inputs.load_pa, pa_of(image_end)),
        arena_used: 0,
        arena_freed: 0,
        frames_ready: false,
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
    for &(start, end) in linear.ranges() {
        map(&mut pt, layout::phys_to_linear(start), start, end - start, rw)?;
    }

    let (fdt_pa, fdt_size) = inputs.fdt;
    let fdt_page = fdt_pa & !(PAGE_SIZE - 1);
    let fdt_end = (fdt_pa + fdt_size).next_multiple_of(PAGE_SIZE);
    let window_va = FDT_WINDOW_VADDR + (fdt_page & ((2 << 20) - 1));
    map(&mut pt, window_va, fdt_page, fdt_end - fdt_page, ro)?;

    let mut console_va = None;
    if let Some(pa) = inputs.console_pa {
        let mut next = NEXT_DEVICE_VA.lock();
        let page = pa & !(PAGE_SIZE - 1);
        map(&mut pt, *next, page, PAGE_SIZE, Attributes::device())?;
        console_va = Some(*next + (pa - page));
        *next += PAGE_SIZE;
    }

    let empty_pa = (&raw const EMPTY_TABLE) as u64 - image_offset;
    // SAFETY: the new table maps the Image by section at its link address, including the running
    // code (text) and both stacks; the early identity map is still live in TTBR0; EMPTY_TABLE is
    // a zeroed, page-aligned table and `image_offset` is the Image's VA − PA.
    unsafe { crate::arch::mmu::switch_kernel_tables(pt.root_pa().0, empty_pa, image_offset) };
    let arena_pages = pt.translation().arena_used;
    *KERNEL_TABLE.lock() = Some(pt);
    Ok(Mapped { console_va, arena_pages })
}

/// From now on, new kernel table pages come from the frame allocator.
pub fn frames_ready() {
    if let Some(pt) = KERNEL_TABLE.lock().as_mut() {
        pt.translation_mut().frames_ready = true;
    }
}

/// Table pages from the frame allocator, reached through the linear map: the translation for
/// every table built after boot (user address spaces, test tables).
pub struct FrameTranslation;

// SAFETY: frames come from the frame allocator (4 KiB-aligned RAM below 2^48, each handed out
// once until freed) and are reached through the linear map, which covers all usable RAM.
unsafe impl Translation for FrameTranslation {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        frames::alloc(1)
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        frames::free(pa, 1);
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; 512]> {
        // SAFETY: the linear map is in the upper half, never null.
        unsafe { NonNull::new_unchecked(layout::phys_to_linear(pa.0) as *mut [u64; 512]) }
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
    use crate::smp::{EXCEPTION_STACK, KERNEL_STACK, STACK_SLOT};
    let slot = layout::STACK_AREA + cpu as u64 * STACK_SLOT;
    let kernel = slot + PAGE_SIZE;
    let exception = kernel + KERNEL_STACK + PAGE_SIZE;
    let mut mapped: alloc::vec::Vec<(u64, PhysAddr, u64)> = alloc::vec::Vec::new();
    let mut table = KERNEL_TABLE.lock();
    let pt = table.as_mut().ok_or(MapError::InvalidRange)?;
    let mut result = Ok(());
    for (va, size) in [(kernel, KERNEL_STACK), (exception, EXCEPTION_STACK)] {
        let pages = (size / PAGE_SIZE) as usize;
        let Some(pa) = frames::alloc(pages) else {
            result = Err(MapError::OutOfMemory);
            break;
        };
        if let Err(e) = pt.map(VirtAddr(va), pa, size, Attributes::kernel_data(), Constraints::NONE) {
            frames::free(pa, pages);
            result = Err(e);
            break;
        }
        mapped.push((va, pa, size));
    }
    if let Err(e) = result {
        for (va, pa, size) in mapped {
            if let Ok(record) = pt.unmap(VirtAddr(va), size) {
                record.release(pt.translation_mut());
            }
            frames::free(pa, (size / PAGE_SIZE) as usize);
        }
        return Err(e);
    }
    // Invalid to valid: no TLBI; make the entries visible to other CPUs' walkers.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    Ok(CpuStacks {
        kernel_stack_top: kernel + KERNEL_STACK,
        exception_stack_top: exception + EXCEPTION_STACK,
    })
}

/// Maps `size` bytes of device registers at `pa` into the device window (device nGnRE, never
/// executable); returns the virtual address of `pa`.
///
/// # Errors
/// The mm error if the mapping fails (out of table pages).
pub fn map_device(pa: u64, size: u64) -> Result<u64, MapError> {
    let page = pa & !(PAGE_SIZE - 1);
    let len = (pa + size.max(1)).next_multiple_of(PAGE_SIZE) - page;
    let mut table = KERNEL_TABLE.lock();
    let pt = table.as_mut().ok_or(MapError::InvalidRange)?;
    let mut next = NEXT_DEVICE_VA.lock();
    pt.map(VirtAddr(*next), PhysAddr(page), len, Attributes::device(), Constraints::NONE)?;
    // Invalid to valid needs no TLBI; the barriers make the entries visible before first use.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    let va = *next + (pa - page);
    *next += len;
    Ok(va)
}
