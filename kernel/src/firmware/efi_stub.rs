//! The EFI stub: the Image run as a UEFI application, up to the raw-Image entry.
//!
//! UEFI firmware (edk2, U-Boot's `bootefi`) loads the Image as a PE/COFF file (its header is in
//! `boot::head`) and calls [`efi_pe_entry`] with the MMU on, an identity map and the firmware's
//! stack. The stub does what Linux's arm64 EFI stub does (drivers/firmware/efi/libstub/ and
//! arch/arm64/kernel/efi-entry.S), and no more:
//! 1. finds the device tree (DEVICE_TREE_GUID) and the ACPI 2.0 RSDP in the configuration table;
//!    without a device tree, reads the ACPI tables and writes one describing them
//!    (`firmware::acpi`, `firmware::acpi_dt`); takes the image's command line (its UCS-2
//!    `LoadOptions`) as `/chosen/bootargs`, in a copy of the firmware's tree
//!    (`firmware::fdt_edit`) or in the one made from ACPI, as Linux's stub does (a non-empty
//!    command line replaces the tree's `bootargs`, an empty one leaves them);
//! 2. moves the Image to a 2 MiB boundary if the firmware put it elsewhere (the arm64 boot
//!    protocol, and `boot::early_map`, want one);
//! 3. reads the memory map, calls ExitBootServices with its key (reading the map again and
//!    retrying when the key went stale, as UEFI 2.10 §7.4 allows and Linux's
//!    `efi_exit_boot_services` does), and converts the map (`firmware::efi::MemoryLayout`) into
//!    the hand-over record [`HANDOFF`] of the Image it will start;
//! 4. cleans the Image and the device tree to the point of coherency, turns the MMU and data
//!    cache off at the current exception level, and branches to `primary_entry` with x0 = the
//!    device tree and x1..x3 = 0: from there on the boot is the raw-Image boot.
//!
//! Everything here runs at the address the firmware chose, before the kernel's own map exists,
//! so it has the constraints of `boot::early_map`: PC-relative code only, no formatting, no
//! panics, no trait objects. The firmware's functions are called through the pointers of its
//! tables, with the UEFI calling convention (`extern "efiapi"`, AAPCS64 on arm64).
//!
//! The bindings are hand-written: the few fields used, laid out as UEFI 2.10 §4.3 (system
//! table), §4.4 (boot services), §4.6 (configuration table) and §12.4 (simple text output).
//!
//! One file (about 580 lines) because it is one sequence, the four steps above, read top to
//! bottom in the order the firmware's calls must be made; what needs no firmware (the memory-map
//! conversion, ACPI, the tree editing) is already the host-tested `firmware` crate.

use core::cell::UnsafeCell;
use core::ffi::c_void;

use firmware::efi::{
    ACPI_20_TABLE_GUID, DEVICE_TREE_GUID, Guid, HANDOFF_MAGIC, Handoff, LOADED_IMAGE_PROTOCOL_GUID,
    MemoryLayout, memory_type,
};

/// `EFI_STATUS`.
type Status = usize;
/// The high bit marks an error (UEFI 2.10 Appendix D).
const ERROR: Status = 1 << 63;
const SUCCESS: Status = 0;
const INVALID_PARAMETER: Status = ERROR | 2;
const LOAD_ERROR: Status = ERROR | 1;
const BUFFER_TOO_SMALL: Status = ERROR | 5;

/// `EFI_TABLE_HEADER`.
#[repr(C)]
struct TableHeader {
    signature: u64,
    revision: u32,
    header_size: u32,
    crc32: u32,
    reserved: u32,
}

/// `EFI_SYSTEM_TABLE`.
#[repr(C)]
struct SystemTable {
    hdr: TableHeader,
    firmware_vendor: *const u16,
    firmware_revision: u32,
    console_in_handle: *mut c_void,
    con_in: *mut c_void,
    console_out_handle: *mut c_void,
    con_out: *mut TextOutput,
    standard_error_handle: *mut c_void,
    std_err: *mut c_void,
    runtime_services: *mut c_void,
    boot_services: *const BootServices,
    number_of_table_entries: usize,
    configuration_table: *const ConfigurationTable,
}

/// `EFI_CONFIGURATION_TABLE`.
#[repr(C)]
struct ConfigurationTable {
    vendor_guid: Guid,
    vendor_table: *mut c_void,
}

/// `EFI_SIMPLE_TEXT_OUTPUT_PROTOCOL`, up to OutputString.
#[repr(C)]
struct TextOutput {
    reset: usize,
    output_string: unsafe extern "efiapi" fn(*mut TextOutput, *const u16) -> Status,
}

/// `EFI_BOOT_SERVICES`, up to ExitBootServices.
#[repr(C)]
struct BootServices {
    hdr: TableHeader,
    raise_tpl: usize,
    restore_tpl: usize,
    allocate_pages: unsafe extern "efiapi" fn(u32, u32, usize, *mut u64) -> Status,
    free_pages: usize,
    get_memory_map:
        unsafe extern "efiapi" fn(*mut usize, *mut u8, *mut usize, *mut usize, *mut u32) -> Status,
    allocate_pool: unsafe extern "efiapi" fn(u32, usize, *mut *mut u8) -> Status,
    free_pool: unsafe extern "efiapi" fn(*mut u8) -> Status,
    // CreateEvent .. UninstallProtocolInterface: not used here.
    unused_before_handle_protocol: [usize; 9],
    handle_protocol: unsafe extern "efiapi" fn(*mut c_void, *const Guid, *mut *mut c_void) -> Status,
    // Reserved .. UnloadImage: not used here.
    unused_after_handle_protocol: [usize; 9],
    exit_boot_services: unsafe extern "efiapi" fn(*mut c_void, usize) -> Status,
}

/// `EFI_LOADED_IMAGE_PROTOCOL`, up to LoadOptions (UEFI §9.1).
#[repr(C)]
struct LoadedImage {
    revision: u32,
    parent_handle: *mut c_void,
    system_table: *mut c_void,
    device_handle: *mut c_void,
    file_path: *mut c_void,
    reserved: *mut c_void,
    load_options_size: u32,
    load_options: *const u16,
}

/// The image's command line (LoadOptions) as ASCII in `out`; returns its length (0 without).
fn command_line(bs: &BootServices, image_handle: *mut c_void, out: &mut [u8]) -> usize {
    let mut interface = core::ptr::null_mut();
    // SAFETY: a boot service with the image's own handle, a GUID and an out-pointer to a local.
    let status = unsafe { (bs.handle_protocol)(image_handle, &LOADED_IMAGE_PROTOCOL_GUID, &mut interface) };
    if status != SUCCESS || interface.is_null() {
        return 0;
    }
    // SAFETY: the firmware returned its EFI_LOADED_IMAGE_PROTOCOL for this image.
    let loaded = unsafe { &*interface.cast::<LoadedImage>() };
    if loaded.load_options.is_null() || !(loaded.load_options as usize).is_multiple_of(2) {
        return 0;
    }
    // SAFETY: LoadOptions holds LoadOptionsSize bytes (UEFI §9.1), alive until ExitBootServices.
    let wide =
        unsafe { core::slice::from_raw_parts(loaded.load_options, loaded.load_options_size as usize / 2) };
    firmware::efi::load_options_to_ascii(wide, out)
}

/// `AllocateAnyPages` (EFI_ALLOCATE_TYPE).
const ALLOCATE_ANY_PAGES: u32 = 0;
const BLOCK_2M: u64 = 2 << 20;

/// What the stub leaves for the kernel: written into the Image that is started (the moved copy,
/// when the stub moved it), read by `kernel_main`. In .data, not .bss: the entry code zeroes .bss,
/// and a raw-Image boot must find the linked value (magic 0).
#[unsafe(link_section = ".data.efi_handoff")]
static HANDOFF: HandoffCell = HandoffCell(UnsafeCell::new(Handoff::empty()));

/// The cell [`HANDOFF`] is kept in: the stub writes it behind the compiler's back (possibly in
/// another copy of the Image), so every read is a volatile one.
#[repr(transparent)]
struct HandoffCell(UnsafeCell<Handoff>);
// SAFETY: written only by the stub, before the kernel runs; read by the boot CPU afterwards.
unsafe impl Sync for HandoffCell {}

/// What the EFI stub handed over, or `None` on a raw-Image boot.
pub fn handoff() -> Option<Handoff> {
    // SAFETY: HANDOFF is a valid `Handoff` (the linked value or the one the stub wrote before
    // the kernel started); nothing writes it while the kernel runs.
    let h = unsafe { HANDOFF.0.get().read_volatile() };
    h.is_valid().then_some(h)
}

unsafe extern "C" {
    static __image_start: u8;
    static __data_file_end: u8;
    static __image_end: u8;
    /// Cleans and jumps: `efi_enter_kernel(image, fdt, image_bytes, fdt_bytes)` (below).
    fn efi_enter_kernel(image: u64, fdt: u64, image_bytes: u64, fdt_bytes: u64) -> !;
}

/// The firmware's console, for the few messages before ExitBootServices.
struct Console(*mut TextOutput);

impl Console {
    /// Writes `text` (ASCII; "\n" becomes "\r\n"), in chunks through a UCS-2 buffer.
    fn say(&self, text: &[u8]) {
        if self.0.is_null() {
            return;
        }
        let mut buf = [0u16; 64];
        let mut n = 0;
        for &byte in text {
            if byte == b'\n' {
                buf[n] = u16::from(b'\r');
                n += 1;
            }
            buf[n] = u16::from(byte);
            n += 1;
            if n >= buf.len() - 3 {
                self.flush(&mut buf, n);
                n = 0;
            }
        }
        self.flush(&mut buf, n);
    }

    fn flush(&self, buf: &mut [u16; 64], n: usize) {
        buf[n] = 0;
        // SAFETY: `self.0` is the system table's ConOut (checked non-null), valid until
        // ExitBootServices, before which every message is written; `buf` is NUL-terminated.
        unsafe { ((*self.0).output_string)(self.0, buf.as_ptr()) };
    }

    /// Writes `value` in hexadecimal.
    fn hex(&self, value: u64) {
        let mut digits = *b"0x0000000000000000";
        for (i, d) in digits[2..].iter_mut().enumerate() {
            let nibble = (value >> (60 - 4 * i)) & 0xf;
            *d = if nibble < 10 { b'0' + nibble as u8 } else { b'a' + nibble as u8 - 10 };
        }
        self.say(&digits);
    }
}

/// The PE/COFF entry point (the header's AddressOfEntryPoint).
///
/// Returns an error status to the firmware when it cannot hand over (the firmware then goes
/// on with its boot menu); on success it never returns.
#[unsafe(no_mangle)]
extern "efiapi" fn efi_pe_entry(image_handle: *mut c_void, system_table: *const SystemTable) -> Status {
    if system_table.is_null() {
        return INVALID_PARAMETER;
    }
    // SAFETY: the firmware passes a valid system table, alive until ExitBootServices.
    let st = unsafe { &*system_table };
    let console = Console(st.con_out);
    if st.boot_services.is_null() {
        console.say(b"EFI stub: no boot services\n");
        return LOAD_ERROR;
    }
    // SAFETY: as above: the boot services table is valid until ExitBootServices.
    let bs = unsafe { &*st.boot_services };

    // 1. The configuration table.
    let (mut fdt, mut rsdp) = (0u64, 0u64);
    for i in 0..st.number_of_table_entries {
        // SAFETY: the table holds `number_of_table_entries` entries (UEFI §4.3).
        let entry = unsafe { &*st.configuration_table.add(i) };
        if entry.vendor_guid == DEVICE_TREE_GUID {
            fdt = entry.vendor_table as u64;
        } else if entry.vendor_guid == ACPI_20_TABLE_GUID {
            rsdp = entry.vendor_table as u64;
        }
    }
    console.say(b"EFI stub: running at ");
    console.hex(crate::boot::pc_relative!(__image_start));
    console.say(b"; device tree ");
    console.hex(fdt);
    console.say(b", ACPI RSDP ");
    console.hex(rsdp);
    console.say(b"\n");
    if fdt != 0 && fdt_size(fdt) == 0 {
        console.say(b"EFI stub: the configuration table's device tree has no FDT header; ignored\n");
        fdt = 0;
    }
    let mut bootargs = [0u8; 1024];
    let mut load_options = command_line(bs, image_handle, &mut bootargs);
    if fdt == 0 && rsdp != 0 {
        fdt = device_tree_from_acpi(bs, rsdp, &bootargs[..load_options], &console);
    } else if fdt != 0 && load_options != 0 {
        match tree_with_bootargs(bs, fdt, &bootargs[..load_options]) {
            Some(edited) => fdt = edited,
            None => {
                console.say(b"EFI stub: the load options could not be put in the device tree; its own bootargs stand\n");
                load_options = 0;
            }
        }
    }
    if fdt == 0 {
        load_options = 0;
    }
    let fdt_bytes = fdt_size(fdt);

    // 2. A 2 MiB-aligned Image.
    let base = crate::boot::pc_relative!(__image_start);
    let file_bytes = crate::boot::pc_relative!(__data_file_end) - base;
    let image_bytes = crate::boot::pc_relative!(__image_end) - base;
    let target = if base.is_multiple_of(BLOCK_2M) {
        base
    } else {
        let pages = ((image_bytes + BLOCK_2M) / 4096) as usize;
        let mut at = 0u64;
        // SAFETY: a boot service with an out-pointer to a local.
        let status =
            unsafe { (bs.allocate_pages)(ALLOCATE_ANY_PAGES, memory_type::LOADER_DATA, pages, &mut at) };
        if status != SUCCESS {
            console.say(b"EFI stub: cannot allocate memory to move the Image to a 2 MiB boundary\n");
            return status;
        }
        let target = at.next_multiple_of(BLOCK_2M);
        // SAFETY: [target, target + image_bytes) lies inside the pages just allocated
        // (image_bytes + 2 MiB from `at`), which nothing else uses; the source is this Image's
        // file part, loaded by the firmware; the two do not overlap (fresh allocation).
        unsafe { core::ptr::copy_nonoverlapping(base as *const u8, target as *mut u8, file_bytes as usize) };
        target
    };
    console.say(b"EFI stub: Image at ");
    console.hex(base);
    console.say(b", starting it at ");
    console.hex(target);
    console.say(b"; exiting boot services\n");

    // 3. The memory map and ExitBootServices.
    let Some(layout) = exit_boot_services(bs, image_handle, &console) else {
        return LOAD_ERROR;
    };
    let handoff = Handoff {
        magic: HANDOFF_MAGIC,
        fdt,
        rsdp,
        firmware_el: current_el(),
        load_options: load_options as u64,
        memory: layout,
    };
    let offset = (&raw const HANDOFF) as u64 - base;
    // SAFETY: HANDOFF lies at `offset` in the Image copy at `target` (or in this Image), in
    // .data, which nothing reads until the kernel starts; `write` does not drop the old value
    // (it is the linked, empty one).
    unsafe { ((target + offset) as *mut Handoff).write(handoff) };

    // 4. Clean, MMU off, enter.
    // SAFETY: boot services are gone, the Image is complete at `target` (2 MiB aligned), and
    // `efi_enter_kernel` makes memory coherent for the MMU-off entry before branching to it.
    unsafe { efi_enter_kernel(target, fdt, image_bytes, fdt_bytes) }
}

/// Physical memory through the firmware's identity map (UEFI 2.10 §2.3.6: AArch64 firmware runs
/// with a 1:1 mapping of all memory it describes).
struct IdentityMap;

impl firmware::acpi::PhysMem for IdentityMap {
    fn read(&self, pa: u64, len: usize) -> Option<&[u8]> {
        if pa == 0 || pa.checked_add(len as u64)? > 1 << 48 {
            return None;
        }
        // SAFETY: the address comes from the firmware's ACPI tables (the RSDP from its
        // configuration table, the rest from checksummed tables), which lie in memory the
        // identity map covers; nothing writes them while the stub runs.
        Some(unsafe { core::slice::from_raw_parts(pa as *const u8, len) })
    }
}

/// Pages for the device tree made from ACPI.
const ACPI_DT_PAGES: usize = 4;

/// Reads the ACPI tables and writes a device tree describing them (`firmware::acpi_dt`, with the
/// image's command line as `/chosen/bootargs`) into
/// pages allocated for it; returns its address, or 0 (said on the console) when the tables are
/// unusable.
fn device_tree_from_acpi(bs: &BootServices, rsdp: u64, bootargs: &[u8], console: &Console) -> u64 {
    let platform = match firmware::acpi::Platform::read(&IdentityMap, rsdp) {
        Ok(p) => p,
        Err(_) => {
            console.say(b"EFI stub: the ACPI tables are malformed (a bad checksum, length or entry); no device tree\n");
            return 0;
        }
    };
    let mut at = 0u64;
    // SAFETY: a boot service with an out-pointer to a local.
    let status =
        unsafe { (bs.allocate_pages)(ALLOCATE_ANY_PAGES, memory_type::LOADER_DATA, ACPI_DT_PAGES, &mut at) };
    if status != SUCCESS {
        console.say(b"EFI stub: cannot allocate memory for the device tree made from ACPI\n");
        return 0;
    }
    // SAFETY: the pages were just allocated for this and nothing else uses them.
    let buf = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, ACPI_DT_PAGES * 4096) };
    match firmware::acpi_dt::build(&platform, bootargs, buf) {
        Some(_) => {
            console
                .say(b"EFI stub: no device tree; made one from the ACPI tables (MADT, GTDT, SPCR, FADT) at ");
            console.hex(at);
            console.say(b"\n");
            at
        }
        None => {
            console.say(b"EFI stub: the device tree made from ACPI does not fit\n");
            0
        }
    }
}

/// A copy of the firmware's device tree at `fdt` with `/chosen/bootargs` = `bootargs`, in pages
/// allocated for it (the firmware's own tree is left as it is); its address, or `None`.
fn tree_with_bootargs(bs: &BootServices, fdt: u64, bootargs: &[u8]) -> Option<u64> {
    let size = fdt_size(fdt) as usize;
    // The old tree, the new property (its header, name offset, value) and `/chosen` if made.
    let pages = (size + bootargs.len() + 64).div_ceil(4096);
    let mut at = 0u64;
    // SAFETY: a boot service with an out-pointer to a local.
    let status = unsafe { (bs.allocate_pages)(ALLOCATE_ANY_PAGES, memory_type::LOADER_DATA, pages, &mut at) };
    if status != SUCCESS {
        return None;
    }
    // SAFETY: `fdt_size` checked the header at `fdt`; the firmware's tree is `size` bytes of
    // memory its identity map covers, not written while the stub runs.
    let src = unsafe { core::slice::from_raw_parts(fdt as *const u8, size) };
    // SAFETY: the pages were just allocated for this and nothing else uses them.
    let out = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, pages * 4096) };
    firmware::fdt_edit::with_bootargs(src, bootargs, out).ok().map(|_| at)
}

/// The device tree's `totalsize` (big-endian, at offset 4) if `fdt` starts with the FDT magic;
/// 0 otherwise.
fn fdt_size(fdt: u64) -> u64 {
    if fdt == 0 || !fdt.is_multiple_of(4) {
        return 0;
    }
    // SAFETY: the firmware's configuration table points at its device tree, which is mapped (the
    // firmware's identity map covers all memory it hands out) and at least a header long.
    let header = unsafe { core::ptr::read_volatile(fdt as *const [u32; 2]) };
    if u32::from_be(header[0]) != devicetree::FDT_MAGIC {
        return 0;
    }
    u64::from(u32::from_be(header[1]))
}

/// Reads the memory map into a pool buffer and exits boot services with its key; returns the
/// map converted, or `None` (said on the console) when the firmware refused.
fn exit_boot_services(
    bs: &BootServices,
    image_handle: *mut c_void,
    console: &Console,
) -> Option<MemoryLayout> {
    let (mut size, mut key, mut descriptor_size, mut version) = (0usize, 0usize, 0usize, 0u32);
    // The size the map needs now (BUFFER_TOO_SMALL with a null buffer), plus room for the
    // descriptors the pool allocation itself may add.
    // SAFETY: a boot service with out-pointers to locals and a zero-sized (null) buffer.
    let status = unsafe {
        (bs.get_memory_map)(&mut size, core::ptr::null_mut(), &mut key, &mut descriptor_size, &mut version)
    };
    if status != BUFFER_TOO_SMALL {
        console.say(b"EFI stub: GetMemoryMap did not report the map's size\n");
        return None;
    }
    for _attempt in 0..4 {
        let capacity = size + 8 * descriptor_size.max(48);
        let mut buffer = core::ptr::null_mut();
        // SAFETY: a boot service with an out-pointer to a local.
        if unsafe { (bs.allocate_pool)(memory_type::LOADER_DATA, capacity, &mut buffer) } != SUCCESS {
            console.say(b"EFI stub: cannot allocate the memory map's buffer\n");
            return None;
        }
        size = capacity;
        // SAFETY: `buffer` holds `capacity` bytes; the others are locals.
        let status =
            unsafe { (bs.get_memory_map)(&mut size, buffer, &mut key, &mut descriptor_size, &mut version) };
        if status == BUFFER_TOO_SMALL {
            // SAFETY: `buffer` came from AllocatePool and is not used again.
            unsafe { (bs.free_pool)(buffer) };
            continue;
        }
        if status != SUCCESS {
            console.say(b"EFI stub: GetMemoryMap failed\n");
            return None;
        }
        // SAFETY: `image_handle` is the one the firmware started us with; `key` is the map's.
        let mut status = unsafe { (bs.exit_boot_services)(image_handle, key) };
        if status == INVALID_PARAMETER {
            // The map changed between the two calls (an event allocated memory): read it again
            // into the same buffer (no allocation is allowed now) and retry once (UEFI §7.4).
            size = capacity;
            // SAFETY: as above; GetMemoryMap may be called after a failed ExitBootServices.
            let again = unsafe {
                (bs.get_memory_map)(&mut size, buffer, &mut key, &mut descriptor_size, &mut version)
            };
            if again == SUCCESS {
                // SAFETY: as above.
                status = unsafe { (bs.exit_boot_services)(image_handle, key) };
            }
        }
        if status != SUCCESS {
            console.say(b"EFI stub: ExitBootServices failed\n");
            return None;
        }
        // Boot services are gone: the console too. The buffer is ordinary memory now, read once.
        // SAFETY: GetMemoryMap wrote `size` bytes of descriptors into `buffer`.
        let map = unsafe { core::slice::from_raw_parts(buffer.cast_const(), size) };
        // A descriptor size the conversion refuses leaves no memory: the kernel then says so.
        return Some(MemoryLayout::from_memory_map(map, descriptor_size).unwrap_or_default());
    }
    console.say(b"EFI stub: the memory map kept growing\n");
    None
}

/// CurrentEL.EL.
fn current_el() -> u64 {
    let el: u64;
    // SAFETY: reading CurrentEL has no side effects.
    unsafe { core::arch::asm!("mrs {}, CurrentEL", out(reg) el, options(nomem, nostack)) };
    (el >> 2) & 3
}

core::arch::global_asm!(
    r#"
    .section .text, "ax"
    // efi_enter_kernel(x0 = Image, x1 = device tree, x2 = Image bytes, x3 = device-tree bytes):
    // after ExitBootServices, with the firmware's MMU on. Cleans and invalidates the Image
    // (bss and stacks included: the entry code writes them with the cache off) and the device
    // tree to the point of coherency, so nothing dirty is left to be evicted over what the
    // MMU-off entry code writes; invalidates the instruction cache (the Image may have been
    // copied through the data cache); turns the MMU and data cache off at the current EL and
    // branches to primary_entry with x0 = device tree, x1..x3 = 0 (booting.rst). As Linux's
    // arch/arm64/kernel/efi-entry.S, the code from the SCTLR write on is cleaned to the PoC too:
    // it is fetched with the MMU off.
    .global efi_enter_kernel
    .balign 64
efi_enter_kernel:
    msr     daifset, #0xf
    mov     x19, x0
    mov     x20, x1
    mrs     x9, ctr_el0
    ubfx    x9, x9, #16, #4
    mov     x10, #4
    lsl     x10, x10, x9            // smallest D-cache line
    sub     x11, x10, #1
    // The Image.
    bic     x4, x0, x11
    add     x5, x0, x2
1:  dc      civac, x4
    add     x4, x4, x10
    cmp     x4, x5
    b.lo    1b
    // The device tree.
    cbz     x1, 3f
    bic     x4, x1, x11
    add     x5, x1, x3
2:  dc      civac, x4
    add     x4, x4, x10
    cmp     x4, x5
    b.lo    2b
3:  // This routine (it runs on with the MMU off).
    adr     x4, efi_enter_kernel
    add     x5, x4, #256
4:  dc      civac, x4
    add     x4, x4, x10
    cmp     x4, x5
    b.lo    4b
    dsb     sy
    ic      iallu
    dsb     sy
    isb
    adr     x6, primary_entry       // its offset in the Image to start
    adr     x7, _start
    sub     x6, x6, x7
    add     x21, x19, x6
    mov     x0, x20
    mov     x1, xzr
    mov     x2, xzr
    mov     x3, xzr
    mrs     x4, CurrentEL
    cmp     x4, #(2 << 2)
    b.eq    5f
    mrs     x4, sctlr_el1
    bic     x4, x4, #1              // M
    bic     x4, x4, #(1 << 2)       // C
    msr     sctlr_el1, x4
    isb
    ic      iallu
    dsb     nsh
    isb
    br      x21
5:  mrs     x4, sctlr_el2
    bic     x4, x4, #1
    bic     x4, x4, #(1 << 2)
    msr     sctlr_el2, x4
    isb
    ic      iallu
    dsb     nsh
    isb
    br      x21
"#
);
