//! The vDSO: the shared object every program is given (`AT_SYSINFO_EHDR`), whose
//! `__kernel_clock_gettime`, `__kernel_gettimeofday` and `__kernel_clock_getres` answer from
//! user space what would otherwise be a system call each (a JavaScript runtime asks the time
//! thousands of times a second), and whose `__kernel_rt_sigreturn` is where a signal handler
//! installed without `SA_RESTORER` returns to, as Linux's arm64 vDSO
//! (`arch/arm64/kernel/vdso/`).
//!
//! Two pieces, mapped together at every exec as Linux maps them, `[vvar]` then `[vdso]`:
//! - the data page ([`Vvar`]), written by the kernel only: the counter's scale
//!   (`linux_abi::time::CounterScale`: the kernel's `clock_gettime` computes CLOCK_MONOTONIC
//!   with the same scale from the same counter, CNTVCT_EL0, so a vDSO reading and a system
//!   call's never disagree), CLOCK_REALTIME's offset from it, the COARSE clocks' step, the
//!   resolution, and a sequence count odd while an update is under way (Linux's
//!   `vdso_data.seq`), which a reader retries on;
//! - the image: the code below, assembled into the kernel by the integrated assembler, placed
//!   in an ELF shared object by `elf::vdso::write` at boot (that module says why it is built so).
//!   The code reads the data page PC-relatively, one page below the image, and so has no
//!   relocation and runs wherever it is mapped.
//!
//! Both are frames of two shared memory objects made at boot and never freed, so every process
//! maps the same two frames (the image privately: a debugger's breakpoint copies the page, as
//! on Linux). Clocks the data page cannot answer (the CPU-time clocks, unknown ids) make the
//! system call from the vDSO, as Linux's do (`clock_gettime_fallback`).
//!
//! Where the two go in a process, and why there: see docs/address-space.md ("The vDSO").
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU32, Ordering, fence};

use linux_abi::Errno;
use linux_abi::time::CounterScale;
use mm::addr::PAGE_SIZE;
use mm::user::UserFrames as _;
use mm::user::object::{Backing, MemObject, ObjectRef, SharedObject, same_object};
use spin::{Mutex, Once};

use crate::memory::frames::UserFrames;
use crate::memory::vmspace::Mm;

/// `LINUX_VERSION_CODE` of the release `uname` reports (6.1.0), in the image's `Linux` note.
const LINUX_VERSION_CODE: u32 = (6 << 16) | (1 << 8);

/// The data page's layout (`#[repr(C)]`: the code below reads it at these offsets).
#[repr(C)]
struct Vvar {
    /// Odd while the kernel updates the page.
    seq: u32,
    _pad: u32,
    /// [`CounterScale::mult`]; 0: the counter cannot be used (an unknown frequency), the vDSO
    /// makes the system call.
    mult: u64,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, in nanoseconds (beside `mult`: one `LDP`).
    realtime_offset: u64,
    /// The COARSE clocks' step (one scheduler tick), in nanoseconds.
    tick_ns: u64,
    /// `clock_getres` of the counter clocks, in nanoseconds.
    resolution_ns: u64,
}

const SEQ: usize = core::mem::offset_of!(Vvar, seq);
const MULT: usize = core::mem::offset_of!(Vvar, mult);
const REALTIME_OFFSET: usize = core::mem::offset_of!(Vvar, realtime_offset);
const TICK_NS: usize = core::mem::offset_of!(Vvar, tick_ns);
const RESOLUTION_NS: usize = core::mem::offset_of!(Vvar, resolution_ns);
const _: () = assert!(REALTIME_OFFSET == MULT + 8 && CounterScale::SHIFT == 32);

/// The clock ids the data page answers, as a bit set by id: CLOCK_REALTIME (0), MONOTONIC (1),
/// MONOTONIC_RAW (4), REALTIME_COARSE (5), MONOTONIC_COARSE (6), BOOTTIME (7), TAI (11) —
/// the ones `linux_abi::time::Clock::decode` makes the counter's.
const ANSWERED: u32 = 1 << 0 | 1 << 1 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 11;
/// Those that add the realtime offset.
const REALTIME: u32 = 1 << 0 | 1 << 5 | 1 << 11;
/// Those that step once a tick (`linux_abi::time::is_coarse`).
const COARSE: u32 = 1 << 5 | 1 << 6;
const _: () = assert!(ANSWERED & (1 << 2 | 1 << 3) == 0, "the CPU-time clocks are the kernel's");

/// The size of the data page's mapping and of the image's: one page each.
pub const VVAR_SIZE: u64 = PAGE_SIZE;
/// See [`VVAR_SIZE`].
pub const IMAGE_SIZE: u64 = PAGE_SIZE;

// The code. Each function is Linux's (lib/vdso/gettimeofday.c with arm64's counter read) for the
// clocks the data page answers: read the sequence count (acquire), the page, the counter after
// an ISB (not read early), then the count again; retry if it changed or was odd. Registers x0-x17
// only, no stack: AAPCS64's caller-saved registers. CLOCK_REALTIME and CLOCK_MONOTONIC, what
// programs ask for nearly always, take a path of their own of 25 instructions (the system call
// costs about 500).
core::arch::global_asm!(
    ".pushsection .rodata.vdso_text, \"a\"",
    ".balign 16",
    ".global vdso_text_start",
    "vdso_text_start:",
    ".Lvdso_text:",
    // The data page: one page below the image, whose text begins TEXT_OFFSET into it.
    ".set .Lvvar, .Lvdso_text - {text_offset} - {vvar_size}",
    // READ: x2 = the data page; reads x5 = mult, x7 = realtime offset, x13 = CLOCK_MONOTONIC
    // (ticks * mult >> 32, the 128-bit product); to \fallback when mult is 0.
    ".macro READ fallback",
    "1: ldar w3, [x2, #{seq}]",
    "tbnz w3, #0, 1b",
    "ldp x5, x7, [x2, #{mult}]",
    "cbz x5, \\fallback",
    "isb",
    "mrs x11, cntvct_el0",
    "dmb ishld",
    "ldr w12, [x2, #{seq}]",
    "cmp w12, w3",
    "b.ne 1b",
    "mul x13, x11, x5",
    "umulh x14, x11, x5",
    "extr x13, x14, x13, #32",
    ".endm",
    // SPLIT: x10 = \ns / 10^9, x11 = \ns % 10^9 (x9 = 10^9).
    ".macro SPLIT ns",
    "movz x9, #0xca00",
    "movk x9, #0x3b9a, lsl #16",
    "udiv x10, \\ns, x9",
    "msub x11, x10, x9, \\ns",
    ".endm",
    // __kernel_clock_gettime(w0 clock, x1 timespec)
    ".global vdso_clock_gettime",
    "vdso_clock_gettime:",
    "cmp w0, #1",
    "b.hi 5f",
    // CLOCK_REALTIME (0) or CLOCK_MONOTONIC (1).
    "adr x2, .Lvvar",
    "READ 9f",
    "cbnz w0, 2f",
    "add x13, x13, x7",
    "2:",
    "SPLIT x13",
    "stp x10, x11, [x1]",
    "mov w0, #0",
    "ret",
    // The other clocks of the page: MONOTONIC_RAW, the COARSE ones, BOOTTIME, TAI.
    "5: cmp w0, #31",
    "b.hi 9f",
    "mov w9, #{answered}",
    "lsr w9, w9, w0",
    "tbz w9, #0, 9f",
    "adr x2, .Lvvar",
    "READ 9f",
    "ldr x10, [x2, #{tick_ns}]",
    "mov x16, x13",
    "mov w15, #{realtime}",
    "lsr w15, w15, w0",
    "tbz w15, #0, 2f",
    "add x16, x16, x7",
    // COARSE: back to the last tick of the monotonic clock (`linux_abi::time::coarse_ns`).
    "2: mov w15, #{coarse}",
    "lsr w15, w15, w0",
    "tbz w15, #0, 3f",
    "udiv x17, x13, x10",
    "msub x17, x17, x10, x13",
    "sub x16, x16, x17",
    "3:",
    "SPLIT x16",
    "stp x10, x11, [x1]",
    "mov w0, #0",
    "ret",
    "9: mov x8, #{nr_clock_gettime}",
    "svc #0",
    "ret",
    // __kernel_gettimeofday(x0 timeval, x1 timezone)
    ".global vdso_gettimeofday",
    "vdso_gettimeofday:",
    "adr x2, .Lvvar",
    "READ 9f",
    "add x13, x13, x7",
    "cbz x0, 2f",
    "SPLIT x13",
    "mov x12, #1000",
    "udiv x11, x11, x12",
    "stp x10, x11, [x0]",
    // The time zone is UTC: both fields 0, as the system call writes them.
    "2: cbz x1, 3f",
    "str xzr, [x1]",
    "3: mov w0, #0",
    "ret",
    "9: mov x8, #{nr_gettimeofday}",
    "svc #0",
    "ret",
    // __kernel_clock_getres(w0 clock, x1 timespec)
    ".global vdso_clock_getres",
    "vdso_clock_getres:",
    "cmp w0, #31",
    "b.hi 9f",
    "mov w9, #{answered}",
    "lsr w9, w9, w0",
    "tbz w9, #0, 9f",
    "adr x2, .Lvvar",
    "ldr x4, [x2, #{mult}]",
    "cbz x4, 9f",
    "mov w15, #{coarse}",
    "lsr w15, w15, w0",
    "tbz w15, #0, 1f",
    "ldr x3, [x2, #{tick_ns}]",
    "b 2f",
    "1: ldr x3, [x2, #{resolution_ns}]",
    "2: cbz x1, 3f",
    "stp xzr, x3, [x1]",
    "3: mov w0, #0",
    "ret",
    "9: mov x8, #{nr_clock_getres}",
    "svc #0",
    "ret",
    // __kernel_rt_sigreturn: the two instructions libgcc's unwinder recognises. The NOP before
    // it is Linux's (sigreturn.S): an unwinder looking up the caller's FDE at the return address
    // minus one lands on it, not on the previous function.
    "nop",
    ".global vdso_rt_sigreturn",
    "vdso_rt_sigreturn:",
    ".inst {sigreturn0}",
    ".inst {sigreturn1}",
    ".global vdso_text_end",
    "vdso_text_end:",
    ".purgem READ",
    ".purgem SPLIT",
    ".popsection",
    text_offset = const elf::vdso::TEXT_OFFSET,
    vvar_size = const VVAR_SIZE,
    answered = const ANSWERED,
    realtime = const REALTIME,
    coarse = const COARSE,
    seq = const SEQ,
    mult = const MULT,
    tick_ns = const TICK_NS,
    resolution_ns = const RESOLUTION_NS,
    nr_clock_gettime = const linux_abi::nr::CLOCK_GETTIME,
    nr_gettimeofday = const linux_abi::nr::GETTIMEOFDAY,
    nr_clock_getres = const linux_abi::nr::CLOCK_GETRES,
    sigreturn0 = const signal::frame::SIGRETURN_CODE[0],
    sigreturn1 = const signal::frame::SIGRETURN_CODE[1],
);

unsafe extern "C" {
    static vdso_text_start: u8;
    static vdso_clock_gettime: u8;
    static vdso_gettimeofday: u8;
    static vdso_clock_getres: u8;
    static vdso_rt_sigreturn: u8;
    static vdso_text_end: u8;
}

/// The assembled text and its functions' offsets in it: `[start, gettime, gettimeofday,
/// getres, sigreturn, end]` as offsets from the start.
fn text() -> (&'static [u8], [usize; 6]) {
    let marks = [
        &raw const vdso_text_start,
        &raw const vdso_clock_gettime,
        &raw const vdso_gettimeofday,
        &raw const vdso_clock_getres,
        &raw const vdso_rt_sigreturn,
        &raw const vdso_text_end,
    ]
    .map(|p| p as usize);
    let offsets = marks.map(|m| m - marks[0]);
    // SAFETY: the assembly above emits these labels in this order, in one read-only section of
    // the kernel image: `[start, end)` is its bytes, never written.
    let bytes = unsafe { core::slice::from_raw_parts(marks[0] as *const u8, offsets[5]) };
    (bytes, offsets)
}

/// One page the kernel made, as a shared memory object every process maps.
struct Page(Mutex<MemObject>);

impl SharedObject for Page {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.0.lock());
    }
}

/// The two objects, made at boot ([`init`]).
struct Objects {
    vvar: Arc<Page>,
    image: Arc<Page>,
    /// The frame of the data page, which [`publish`] writes.
    vvar_pa: mm::addr::PhysAddr,
    /// Offset of `__kernel_rt_sigreturn` in the image.
    sigreturn: u64,
}

static OBJECTS: Once<Objects> = Once::new();

/// Serialises writers of the data page (readers never wait).
static WRITER: Mutex<()> = Mutex::new(());
/// The data page's sequence count, as the kernel last wrote it.
static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// A page of one frame holding `bytes` (at most a page).
fn page_with(bytes: &[u8]) -> Result<(Arc<Page>, mm::addr::PhysAddr), &'static str> {
    let mut frames = UserFrames;
    let mut object = MemObject::new();
    object.set_size(PAGE_SIZE, &mut frames).map_err(|_| "no memory")?;
    let pa = object.page(0, false, &mut frames).map_err(|_| "no memory")?;
    frames.write(pa, 0, bytes);
    object.written(0);
    let page = crate::memory::fallible::arc(Page(Mutex::new(object))).map_err(|_| "no memory")?;
    Ok((page, pa))
}

/// Builds the image and the data page. Returns a line for the boot report.
pub fn init() -> alloc::string::String {
    match make() {
        Ok(o) => {
            let line = alloc::format!(
                "{} bytes of code, __kernel_rt_sigreturn at +{:#x}; data page: {}",
                text().0.len(),
                o.sigreturn,
                describe_scale()
            );
            OBJECTS.call_once(|| o);
            publish();
            line
        }
        Err(why) => alloc::format!("none ({why}): programs make system calls for the time"),
    }
}

fn describe_scale() -> alloc::string::String {
    let s = crate::wallclock::scale();
    alloc::format!("ns = counter * {:#x} >> {}", s.mult, CounterScale::SHIFT)
}

fn make() -> Result<Objects, &'static str> {
    let (code, at) = text();
    if code[at[4]..at[5]]
        != signal::frame::SIGRETURN_CODE.iter().flat_map(|w| w.to_le_bytes()).collect::<alloc::vec::Vec<u8>>()
            [..]
    {
        return Err("the assembled rt_sigreturn is not the frame's");
    }
    let symbols = [
        elf::vdso::Symbol { name: "__kernel_clock_gettime", offset: at[1], size: at[2] - at[1] },
        elf::vdso::Symbol { name: "__kernel_gettimeofday", offset: at[2], size: at[3] - at[2] },
        elf::vdso::Symbol { name: "__kernel_clock_getres", offset: at[3], size: at[4] - 4 - at[3] },
        elf::vdso::Symbol { name: "__kernel_rt_sigreturn", offset: at[4], size: at[5] - at[4] },
    ];
    let mut image = alloc::vec::Vec::new();
    image.try_reserve_exact(PAGE_SIZE as usize).map_err(|_| "no memory")?;
    image.resize(PAGE_SIZE as usize, 0);
    elf::vdso::write(&mut image, code, &symbols, LINUX_VERSION_CODE)
        .map_err(|_| "the image does not fit a page")?;
    let (image_page, _) = page_with(&image)?;
    let (vvar, vvar_pa) = page_with(&[])?;
    Ok(Objects { vvar, image: image_page, vvar_pa, sigreturn: (elf::vdso::TEXT_OFFSET + at[4]) as u64 })
}

/// Writes the data page from the kernel's clocks (at boot; again whenever one of them changes),
/// inside an odd sequence count so that no reader uses a half-written page.
pub fn publish() {
    let Some(o) = OBJECTS.get() else { return };
    let _writer = WRITER.lock();
    let scale: CounterScale = crate::wallclock::scale();
    let freq = crate::arch::time::frequency();
    let page = Vvar {
        seq: 0,
        _pad: 0,
        mult: scale.mult,
        realtime_offset: crate::wallclock::realtime_offset_ns(),
        tick_ns: linux_abi::time::NSEC_PER_SEC / crate::irq::TICK_HZ,
        resolution_ns: linux_abi::time::NSEC_PER_SEC.div_ceil(freq.max(1)),
    };
    let base = crate::memory::layout::phys_to_linear(o.vvar_pa.0) as *mut Vvar;
    let seq = SEQUENCE.load(Ordering::Relaxed);
    // SAFETY: the data page's frame, reached through the linear map, written only here (under
    // WRITER); user space maps it read-only. The sequence count is a naturally aligned u32 read
    // by user space with single loads, so it is written with atomic stores.
    unsafe {
        let count = &*(&raw mut (*base).seq).cast::<AtomicU32>();
        count.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        core::ptr::write_volatile(base, Vvar { seq: seq.wrapping_add(1), ..page });
        fence(Ordering::Release);
        count.store(seq.wrapping_add(2), Ordering::Relaxed);
    }
    SEQUENCE.store(seq.wrapping_add(2), Ordering::Relaxed);
}

/// Maps the data page and the image into `mm` (a new program's memory, after its interpreter):
/// `[vvar]` then `[vdso]`, together, as Linux's `__setup_additional_pages`, placed at `hint`
/// or as near to it as the rules allow: as code (`near_code`: the code window's free place
/// nearest the hint), or as data (at the hint when free, else where `mmap` puts data; the image
/// is then code outside the window, counted, or in the window when a strict window refuses
/// that). docs/address-space.md ("The vDSO") says which hint and why. Returns the image's
/// address (`AT_SYSINFO_EHDR`), 0 when the kernel has no vDSO.
///
/// # Errors
///
/// `ENOMEM` when no room or memory is left for them.
pub fn map(mm: &mut Mm, hint: u64, near_code: bool) -> Result<u64, Errno> {
    use linux_abi::mman::{PROT_EXEC, PROT_READ};
    let Some(o) = OBJECTS.get() else { return Ok(0) };
    match map_at(mm, o, hint, if near_code { PROT_READ | PROT_EXEC } else { PROT_READ }) {
        Err(Errno::EACCES) if !near_code => map_at(mm, o, hint, PROT_READ | PROT_EXEC),
        mapped => mapped,
    }
}

/// [`map`] with the placement `mmap` gives an anonymous mapping of `prot` at `hint`: that
/// reservation is then replaced by the two mappings.
fn map_at(mm: &mut Mm, o: &Objects, hint: u64, prot: u64) -> Result<u64, Errno> {
    use linux_abi::mman::{MAP_ANONYMOUS, MAP_FIXED, MAP_PRIVATE, PROT_EXEC, PROT_READ};
    let len = VVAR_SIZE + IMAGE_SIZE;
    let base = mm.mmap(hint, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)?;
    let (vvar, image): (ObjectRef, ObjectRef) = (o.vvar.clone(), o.image.clone());
    // The data page can never be made writable (Linux's `[vvar]` has no VM_MAYWRITE); the image
    // can, privately (a debugger's breakpoint).
    let at = base + VVAR_SIZE;
    let mapped =
        mm.map_object(base, VVAR_SIZE, PROT_READ, MAP_PRIVATE | MAP_FIXED, vvar, 0, false).and_then(|_| {
            mm.map_object(at, IMAGE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, image, 0, true)
        });
    if let Err(e) = mapped {
        let _ = mm.munmap(base, len);
        return Err(e);
    }
    Ok(at)
}

/// What `/proc/PID/maps` names a mapping of `object`: `[vvar]`, `[vdso]`, or `None` for any
/// other object.
pub fn name_of(object: &ObjectRef) -> Option<&'static [u8]> {
    let o = OBJECTS.get()?;
    let vvar: ObjectRef = o.vvar.clone();
    let image: ObjectRef = o.image.clone();
    if same_object(object, &vvar) {
        Some(b"[vvar]")
    } else if same_object(object, &image) {
        Some(b"[vdso]")
    } else {
        None
    }
}

/// Whether `object` is the vDSO's data page (`[vvar]`): Linux maps it by frame number
/// (`VM_PFNMAP`), so `vm_normal_page` gives no page for it and `smaps` counts none of it.
pub fn is_data_page(object: &ObjectRef) -> bool {
    OBJECTS.get().is_some_and(|o| {
        let vvar: ObjectRef = o.vvar.clone();
        same_object(object, &vvar)
    })
}

/// Where `__kernel_rt_sigreturn` is in `mm`: in the image where it is mapped now (followed
/// through `mremap`, as Linux's `vdso_mremap` updates `mm->context.vdso`), `hint` first (the
/// image's address last found, checked in one lookup). `None` when the image is not mapped
/// (unmapped by the program, or a kernel without one).
pub fn sigreturn_in(mm: &Mm, hint: u64) -> Option<(u64, u64)> {
    let o = OBJECTS.get()?;
    let image: ObjectRef = o.image.clone();
    let is_image =
        |b: &Backing| same_object(&b.object, &image) && b.offset == 0 && b.end - b.start >= IMAGE_SIZE;
    let found = match mm.backings().at(hint) {
        Some(b) if b.start == hint && is_image(b) => Some(hint),
        _ => mm.backings().iter().find(|b| is_image(b)).map(|b| b.start),
    }?;
    Some((found, found + o.sigreturn))
}

/// The image's and the data page's bytes, as every process maps them (the test image reads
/// them back).
#[cfg(feature = "test-image")]
pub fn pages() -> Option<(&'static [u8], &'static [u8])> {
    let o = OBJECTS.get()?;
    let mut image_pa = None;
    o.image.with(&mut |m| image_pa = m.frame_of(0));
    let bytes = |pa: mm::addr::PhysAddr| {
        // SAFETY: a frame the object holds for ever (the objects are never freed), reached
        // through the linear map; only read here.
        unsafe {
            core::slice::from_raw_parts(
                crate::memory::layout::phys_to_linear(pa.0) as *const u8,
                PAGE_SIZE as usize,
            )
        }
    };
    Some((bytes(image_pa?), bytes(o.vvar_pa)))
}

/// Offset of `__kernel_clock_gettime` in the image, as assembled (the test image compares it
/// with the symbol table's).
#[cfg(feature = "test-image")]
pub fn clock_gettime_offset() -> u64 {
    (elf::vdso::TEXT_OFFSET + text().1[1]) as u64
}
