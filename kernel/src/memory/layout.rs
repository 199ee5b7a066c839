//! The kernel's virtual address layout (TTBR1, 48-bit, top 16 bits set).
//!
//! ```text
//! 0xffff_0000_0000_0000  linear map: physical address P at LINEAR_BASE + linear_offset() + P
//!                        (RAM only, RW, never executable; the Image's own frames are left out,
//!                        so its text has no writable alias); the offset is 0 unless KASLR
//!                        moved the map (below)
//! 0xffff_8000_0000_0000  the Image at its link address (text RX, rodata R, data/bss RW), with
//!                        unmapped guard pages below the boot and exception stacks
//!   + 512 MiB            the device tree, read-only (the same address the early map used)
//!   + 1 GiB ... + 32 TiB the Image instead, with KASLR (boot::kaslr): one of 2^24 2 MiB steps
//! 0xffff_c000_0000_0000  device MMIO, allocated upwards page by page
//! 0xffff_d000_0000_0000  secondary CPUs' stacks: [guard][kernel stack][guard][exception stack]
//! 0xffff_e000_0000_0000  scratch window for the test image's TLB tests
//! ```
//!
//! The linear map's offset is randomised with KASLR as Linux's `memstart_offset_seed`
//! (`boot::kaslr::linear_offset_for`): physical 0 moved up within the room the CPU's physical
//! addresses leave in the region, none on a CPU whose PARange fills it (QEMU's `max`).
use crate::boot::early_map::{FDT_WINDOW_SIZE, FDT_WINDOW_VADDR, KIMAGE_VADDR};
use crate::boot::kaslr::{LINEAR_REGION, linear_offset};

/// Base of the linear region: physical 0 is mapped here plus `boot::kaslr::linear_offset()`.
pub const LINEAR_BASE: u64 = KIMAGE_VADDR - LINEAR_REGION;
const _: () = assert!(LINEAR_BASE == 0xffff_0000_0000_0000);
/// Base of the device MMIO window.
pub const DEVICE_BASE: u64 = 0xffff_c000_0000_0000;
/// Per-CPU stacks of the secondary CPUs: one `cpu::STACK_SLOT` per CPU, guard pages unmapped.
pub const STACK_AREA: u64 = 0xffff_d000_0000_0000;
/// A window the test image maps and remaps freely (TLB stale-read tests).
#[cfg_attr(not(feature = "test-image"), allow(dead_code, reason = "only the test image maps it"))]
pub const TEST_WINDOW: u64 = 0xffff_e000_0000_0000;

unsafe extern "C" {
    static __image_start: u8;
    static __text_end: u8;
    static __rodata_start: u8;
    static __rodata_end: u8;
    static __data_start: u8;
    static __image_end: u8;
    static __boot_stack_guard: u8;
    static __boot_stack_bottom: u8;
    static __boot_stack_top: u8;
    static __exception_stack_guard: u8;
    static __exception_stack_bottom: u8;
}

/// The Image's sections, as link addresses.
#[derive(Clone, Copy, Debug)]
pub struct ImageLayout {
    /// First byte (the header).
    pub start: u64,
    /// End of text (page-aligned).
    pub text_end: u64,
    /// Start of rodata.
    pub rodata_start: u64,
    /// End of rodata (page-aligned).
    pub rodata_end: u64,
    /// Start of data.
    pub data_start: u64,
    /// Guard page below the boot stack.
    pub boot_stack_guard: u64,
    /// Lowest byte of the boot stack.
    pub boot_stack_bottom: u64,
    /// Top of the boot stack.
    #[cfg_attr(not(feature = "test-image"), expect(dead_code, reason = "read by the test image"))]
    pub boot_stack_top: u64,
    /// Guard page below the exception stack.
    pub exception_stack_guard: u64,
    /// Lowest byte of the exception stack.
    pub exception_stack_bottom: u64,
    /// End of the Image in memory (bss and stacks included).
    pub end: u64,
}

/// The Image's layout from the linker's symbols.
pub fn image() -> ImageLayout {
    ImageLayout {
        start: (&raw const __image_start) as u64,
        text_end: (&raw const __text_end) as u64,
        rodata_start: (&raw const __rodata_start) as u64,
        rodata_end: (&raw const __rodata_end) as u64,
        data_start: (&raw const __data_start) as u64,
        boot_stack_guard: (&raw const __boot_stack_guard) as u64,
        boot_stack_bottom: (&raw const __boot_stack_bottom) as u64,
        boot_stack_top: (&raw const __boot_stack_top) as u64,
        exception_stack_guard: (&raw const __exception_stack_guard) as u64,
        exception_stack_bottom: (&raw const __exception_stack_bottom) as u64,
        end: (&raw const __image_end) as u64,
    }
}

/// Whether the Image runs where this code assumes: at its link address, or moved from it by
/// `boot::kaslr` by a 2 MiB multiple into the part of the kernel half KASLR draws from.
pub fn check_link_address() -> bool {
    let start = image().start;
    start == KIMAGE_VADDR
        || (start >= KIMAGE_VADDR + (1 << 30) && image().end <= DEVICE_BASE && start.is_multiple_of(2 << 20))
}

/// Virtual address of physical `pa` in the linear map.
pub fn phys_to_linear(pa: u64) -> u64 {
    LINEAR_BASE + linear_offset() + pa
}

/// Names the region a kernel address falls in, for fault reports.
pub fn describe_address(va: u64) -> Option<&'static str> {
    let img = image();
    let page = mm::addr::PAGE_SIZE;
    Some(if (img.boot_stack_guard..img.boot_stack_guard + page).contains(&va) {
        "guard page below the boot stack: kernel stack overflow"
    } else if (img.exception_stack_guard..img.exception_stack_guard + page).contains(&va) {
        "guard page below the exception stack: exception stack overflow"
    } else if (img.start..img.text_end).contains(&va) {
        "kernel text"
    } else if (img.rodata_start..img.rodata_end).contains(&va) {
        "kernel rodata"
    } else if (img.data_start..img.end).contains(&va) {
        "kernel data/bss"
    } else if (FDT_WINDOW_VADDR..FDT_WINDOW_VADDR + FDT_WINDOW_SIZE).contains(&va) {
        "device-tree window"
    } else if (LINEAR_BASE..KIMAGE_VADDR).contains(&va) {
        "linear map"
    } else if (STACK_AREA..STACK_AREA + crate::cpu::MAX_CPUS as u64 * crate::cpu::STACK_SLOT).contains(&va) {
        let offset = (va - STACK_AREA) % crate::cpu::STACK_SLOT;
        let exception_guard = page + crate::cpu::KERNEL_STACK;
        if offset < page {
            "guard page below a CPU's kernel stack: kernel stack overflow"
        } else if (exception_guard..exception_guard + page).contains(&offset) {
            "guard page below a CPU's exception stack: exception stack overflow"
        } else {
            "a CPU's stacks"
        }
    } else if va >= DEVICE_BASE {
        "device window"
    } else if va < (1 << 48) {
        "user address (TTBR0)"
    } else {
        return None;
    })
}
