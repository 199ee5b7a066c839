//! The `mm` crate in a kernel, reduced to one file: what a kernel programs and implements around
//! the crate, from the first page tables to a user address space and its flushes. The steps are
//! those of the crate's integration guide (the crate's front page, and `docs/integrating-mm.md`
//! in its repository):
//!
//! 1. with the MMU off, build the boot tables with [`PageTable`] over a static arena (no heap):
//!    TTBR0 maps the image at its physical address (identity, to turn the MMU on), TTBR1 maps it
//!    at `VaRange::Upper.base() + PA` (text read-only and executable, the rest read-write and
//!    never executable) and the UART as device memory;
//! 2. compute `MAIR_EL1`, `TCR_EL1` and the TTBRs from the crate's constants ([`regime`]) and turn
//!    the MMU on; jump to the TTBR1 alias and turn TTBR0 walks off;
//! 3. read the TLB features ([`TlbFeatures`]), set up the ASID allocator, give a user
//!    [`AddressSpace`] a [`FlushTargets`] that asks the allocator at each flush, switch TTBR0 to
//!    it, fault in a 64 KiB run page by page (the space folds it: one break-before-make, one
//!    flush), make it read-only (one flush), unmap it (one flush, then the frames come back) and
//!    tear it down.
//!
//! Two ways to run it:
//! - on the build host, `cargo run -p mm --example bare_metal`: the same code over a recording
//!   TLB, checked with the tables' own walk (`mm/tests/bare_metal.rs` runs it as a test);
//! - on QEMU, built for `aarch64-unknown-none-softfloat` without the heap (`mm`'s default
//!   feature `alloc` off: nothing here allocates) and with the link script next to this file:
//!
//!   ```text
//!   cargo rustc -p mm --no-default-features --example bare_metal \
//!       --target aarch64-unknown-none-softfloat -- -C link-arg=-Tmm/examples/bare_metal.ld
//!   qemu-system-aarch64 -M virt -cpu max -m 256M -nographic -semihosting \
//!       -kernel target/aarch64-unknown-none-softfloat/debug/examples/bare_metal
//!   ```
//!
//!   It prints the register values and each step on the PL011 and exits through semihosting
//!   with status 0 when every check passed (after each step, the CPU's own walk: `AT S1E0R` and
//!   `AT S1E0W`). With `-cpu cortex-a53` (no FEAT_TLBIRANGE) each flush is one local `TLBI` per
//!   page; with `--features granule-16k`, `granule-64k` or `lpa2` the same steps run with that
//!   format. `scripts/test` runs it both ways.
//!
//! Why one file (it is long for an example): it is meant to be read top to bottom as a kernel's
//! integration of the crate, and `mm/tests/bare_metal.rs` includes it as one module.
//!
//! What is simplified, on purpose: one CPU (the ASID allocator's lock is a `RefCell`; a kernel
//! with several CPUs uses a spinlock and combines every CPU's [`TlbFeatures`]); the image is
//! linked at its physical address and continues at an alias in TTBR1 (a kernel is linked high,
//! so its boot code runs position-independent instead); the boot tables are never freed; no
//! exception vectors, so every check is an `AT` instruction rather than an access that would
//! fault. After the jump the code takes no address stored in data (no trait objects, no
//! formatting, no tables of `&str`): those hold link-time (physical) addresses, which TTBR0 no
//! longer maps.
#![cfg_attr(target_os = "none", no_std, no_main)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use core::cell::{RefCell, UnsafeCell};
use core::ptr::NonNull;

use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::asid::{AsidAllocator, AsidContext, asid_bits_from_mmfr0};
use mm::descriptor::{Attributes, CONTIGUOUS_ENTRIES, UserAccess};
use mm::paging::{AlignedTable, Constraints, ENTRIES_PER_TABLE, MapError, PageTable, Translation, VaRange};
use mm::space::{AddressSpace, FlushTargets};
use mm::tlb::{FlushTarget, TlbFeatures, TlbHardware, TlbIssuer, TlbStats};

/// The translation regime the crate's tables need, computed from the crate's constants only.
pub mod regime {
    use mm::addr::VA_BITS;
    use mm::asid::asid_bits_from_mmfr0;
    use mm::granule::{Format, Granule};
    use mm::paging::lpa2;

    /// `MAIR_EL1`: the crate's fixed attribute indices (0 Normal write-back, 1 Normal
    /// non-cacheable, 2 Device-nGnRE, 3 Device-nGnRnE; 4 to 7 unused).
    pub const MAIR_EL1: u64 = mm::descriptor::MAIR_EL1_VALUE;

    /// `TCR_EL1` for a CPU whose `ID_AA64MMFR0_EL1` reads `mmfr0`: both halves `64 − VA_BITS`
    /// bits (`T0SZ`, `T1SZ`), walks inner-shareable and write-back cacheable (the crate writes
    /// tables through cacheable memory and makes them visible with `DSB ISH*`, no cache
    /// maintenance), the build's granule in `TG0` and `TG1` (two encodings), `IPS` the CPU's
    /// `PARange` capped at what a descriptor holds, `AS` (16-bit ASIDs) where the CPU has them, so
    /// that it matches the ASID allocator, and `DS` in an `lpa2` build. `A1` = 0: the ASID is
    /// TTBR0's. `EPD0`, `TBI`, `HA`/`HD` stay 0 (the crate sets the Access flag itself and never
    /// uses the dirty state).
    pub const fn tcr_el1(mmfr0: u64) -> u64 {
        let tsz = 64 - VA_BITS as u64;
        let granule = Format::BUILD.granule;
        let ips_max = if Format::BUILD.pa_bits() == 52 { 0b110 } else { 0b101 };
        let parange = mmfr0 & 0xf;
        let ips = if parange > ips_max { ips_max } else { parange };
        let as16 = if asid_bits_from_mmfr0(mmfr0) == 16 { 1 << 36 } else { 0 };
        let ds = if Format::BUILD.ds() { lpa2::TCR_DS } else { 0 };
        tsz // T0SZ [5:0]
            | (0b01 << 8) // IRGN0: write-back, read and write allocate
            | (0b01 << 10) // ORGN0
            | (0b11 << 12) // SH0: inner shareable
            | (granule.tcr_tg0() << 14) // TG0 [15:14]
            | (tsz << 16) // T1SZ [21:16]
            | (0b01 << 24) // IRGN1
            | (0b01 << 26) // ORGN1
            | (0b11 << 28) // SH1
            | (granule.tcr_tg1() << 30) // TG1 [31:30]
            | (ips << 32) // IPS [34:32]
            | as16 // AS [36]
            | ds // DS [59]
    }

    /// `TTBRn_EL1` naming the table at physical address `root` with `asid` in bits `[63:48]`
    /// (0 for TTBR1: `TCR_EL1.A1` = 0 takes the ASID from TTBR0). The build's `BADDR` layout:
    /// with 52-bit addresses bits `[51:48]` of the table address go to bits `[5:2]`.
    pub const fn ttbr(root: u64, asid: u16) -> u64 {
        Format::BUILD.ttbr_baddr(root) | (asid as u64) << 48
    }

    /// Whether the CPU offers the build's granule for stage 1 (`ID_AA64MMFR0_EL1.TGran4`,
    /// `TGran16`, `TGran64`) and, in an `lpa2` build, 52-bit addresses with it. Without it the
    /// MMU must stay off: every walk would fault, or worse.
    pub const fn cpu_supports_build(mmfr0: u64) -> bool {
        let granule = match Format::BUILD.granule {
            Granule::K4 => (mmfr0 >> 28) & 0xf != 0b1111,
            Granule::K16 => (mmfr0 >> 20) & 0xf != 0b0000,
            Granule::K64 => (mmfr0 >> 24) & 0xf != 0b1111,
        };
        granule && (!Format::BUILD.ds() || lpa2::cpu_supports_lpa2(Format::BUILD, mmfr0))
    }
}

/// Table frames the arena holds: the boot tables (two trees) and one user space, with room.
const ARENA_FRAMES: usize = 24;

/// The frames of every table, in the image's .bss (zeroed by the entry code on the machine):
/// no frame allocator and no heap are needed, which is how early boot has to work.
struct Arena(UnsafeCell<[AlignedTable; ARENA_FRAMES]>, UnsafeCell<u32>);
// SAFETY: one CPU uses the arena, one `Frames` call at a time (the example has no threads and no
// interrupts; the host test runs the example once).
unsafe impl Sync for Arena {}

static ARENA: Arena =
    Arena(UnsafeCell::new([AlignedTable([0; ENTRIES_PER_TABLE]); ARENA_FRAMES]), UnsafeCell::new(0));

/// Pages of one contiguous run: what the user space folds into one TLB entry (16 pages of
/// 4 KiB; 128 of 16 KiB and 32 of 64 KiB, 2 MiB each).
const RUN_PAGES: u64 = CONTIGUOUS_ENTRIES as u64;

/// The user space's data frames: one contiguous run, aligned to 2 MiB (the largest run), so the
/// space can give it the contiguous hint.
#[repr(C, align(0x20_0000))]
struct UserRam(UnsafeCell<[u8; (RUN_PAGES * PAGE_SIZE) as usize]>);
// SAFETY: only reached through the user mapping and the checks below, on one CPU.
unsafe impl Sync for UserRam {}

static USER_RAM: UserRam = UserRam(UnsafeCell::new([0; (RUN_PAGES * PAGE_SIZE) as usize]));

/// The [`Translation`] of every table here: frames of [`ARENA`], reached at `PA + offset`
/// (offset 0 with the MMU off and on the host; the TTBR1 alias's offset after the jump).
pub struct Frames {
    offset: u64,
}

impl Frames {
    /// The physical address of a byte of the image, from the address the code reaches it at.
    fn pa_of(&self, ptr: *const u8) -> u64 {
        ptr as u64 - self.offset
    }

    /// Table frames in use.
    pub fn used(&self) -> u32 {
        // SAFETY: the arena's one CPU, no other `Frames` call in progress (`Arena`'s `Sync`).
        unsafe { *ARENA.1.get() }.count_ones()
    }
}

// SAFETY: every frame is one page of `ARENA` (page-aligned: `AlignedTable` is, below 2^48: the
// image is linked at 0x4020_0000 and host pointers are user addresses), handed out once until
// `deallocate_table` (the bitmap), used by nothing but the engine; `table_ptr` reaches it at
// `pa + offset`, where the image is mapped as Normal write-back memory (or is the physical
// address, MMU off), as the walker reads it.
unsafe impl Translation for Frames {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        // SAFETY: as in `used`.
        let used = unsafe { &mut *ARENA.1.get() };
        let free = (!*used).trailing_zeros() as usize;
        if free >= ARENA_FRAMES {
            return None;
        }
        *used |= 1 << free;
        let base = ARENA.0.get().cast::<AlignedTable>();
        Some(PhysAddr(self.pa_of(base.wrapping_add(free).cast())))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        let base = self.pa_of(ARENA.0.get().cast());
        // SAFETY: as in `used`.
        unsafe { *ARENA.1.get() &= !(1 << ((pa.0 - base) / PAGE_SIZE)) };
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        NonNull::new((pa.0 + self.offset) as *mut [u64; ENTRIES_PER_TABLE]).expect("a frame of the arena")
    }

    fn publish_barrier(&self) {
        // Once the MMU is on, another CPU's walker could see the new table's descriptor before
        // its zeroes: `DSB ISHST` in between. (Nothing to order with the MMU off, or here.)
        #[cfg(target_os = "none")]
        // SAFETY: a barrier; no memory is changed.
        unsafe {
            core::arch::asm!("dsb ishst", options(nostack, preserves_flags))
        };
    }
}

/// Where the image lies and what the boot map must show (physical addresses).
#[derive(Clone, Copy)]
pub struct Image {
    /// First byte of the image (and of its text).
    pub start: u64,
    /// End of the text: text is mapped read-only and executable, the rest read-write.
    pub text_end: u64,
    /// End of the image (its .bss and stack included), page-aligned.
    pub end: u64,
    /// The UART's registers (one page, device memory).
    pub uart: u64,
}

/// The boot tables: both roots, for TTBR0 and TTBR1.
pub struct BootTables {
    /// TTBR0's tree: the image at its physical address.
    pub identity: PageTable<Frames>,
    /// TTBR1's tree: the image and the UART at `VaRange::Upper.base() + PA`.
    pub kernel: PageTable<Frames>,
}

/// The offset of the TTBR1 alias: the image at `base + PA` (a kernel's linear map).
pub const fn alias_offset() -> u64 {
    VaRange::Upper.base().0
}

/// Step 1: the boot map, built with the MMU off (or on the host). Nothing is live yet, so the
/// engine writes in place and nothing needs a flush.
pub fn boot_tables(image: Image) -> Result<BootTables, MapError> {
    let mut identity = PageTable::new(Frames { offset: 0 }, VaRange::Lower)?;
    let mut kernel = PageTable::new(Frames { offset: 0 }, VaRange::Upper)?;
    let (start, text_end, end) = (image.start, image.text_end, image.end);
    // The identity map: only for the instructions between turning the MMU on and the jump, so
    // coarse (EL1 read-write-execute), as the early map of a kernel is.
    let rwx = Attributes::kernel_data().with_el1_execute(true);
    identity.map(VirtAddr(start), PhysAddr(start), end - start, rwx, Constraints::NONE)?;
    let high = |pa: u64| VirtAddr(alias_offset() + pa);
    kernel.map(
        high(start),
        PhysAddr(start),
        text_end - start,
        Attributes::kernel_text(),
        Constraints::NONE,
    )?;
    kernel.map(
        high(text_end),
        PhysAddr(text_end),
        end - text_end,
        Attributes::kernel_data(),
        Constraints::NONE,
    )?;
    kernel.map(high(image.uart), PhysAddr(image.uart), PAGE_SIZE, Attributes::device(), Constraints::NONE)?;
    Ok(BootTables { identity, kernel })
}

/// What the demonstration needs from the machine, so that the same steps run on the CPU and on
/// the host.
pub trait Machine {
    /// The TLB instructions and barriers.
    type Tlb: TlbHardware;
    /// A handle on them for an issuer.
    fn tlb(&mut self) -> Self::Tlb;
    /// `ID_AA64MMFR0_EL1`.
    fn mmfr0(&self) -> u64;
    /// This CPU's TLB features (`ID_AA64ISAR0_EL1`, `MIDR_EL1`).
    fn tlb_features(&self) -> TlbFeatures;
    /// Prints `text`.
    fn say(&mut self, text: &str);
    /// Prints `label`, `value` in hex and a line end.
    fn say_hex(&mut self, label: &str, value: u64);
    /// Prints `label`, `value` in decimal and a line end.
    fn say_dec(&mut self, label: &str, value: u64);
    /// Loads `ttbr0` and enables TTBR0 walks (`None`: disables them and loads 0).
    fn set_user_table(&mut self, ttbr0: Option<u64>);
    /// `DSB NSHST; TLBI VMALLE1; DSB NSH; ISB` (what the ASID allocator asks after a rollover).
    fn local_flush_all(&mut self);
    /// Whether the CPU's own walk lets EL0 read (or write) `va` (`AT S1E0R`/`AT S1E0W`);
    /// `None` where there is no CPU (the host checks the table instead).
    fn el0_may_access(&mut self, va: u64, write: bool) -> Option<bool>;
}

/// The flush targets of the one user space: its ASID and reach, decided by the allocator at
/// the moment of each flush, for the CPU that issues it (here always CPU 0). A kernel with
/// several CPUs holds a spinlock instead of the `RefCell`, and the same lock around `switch_to`.
struct AsidTargets<'a> {
    allocator: &'a RefCell<AsidAllocator<1>>,
    context: &'a RefCell<AsidContext>,
    issued: TlbStats,
}

impl FlushTargets for AsidTargets<'_> {
    fn target(&mut self) -> FlushTarget {
        self.allocator.borrow().flush_target(&self.context.borrow(), 0)
    }

    fn issued(&mut self, stats: &TlbStats) {
        self.issued.add(stats);
    }
}

/// Prints the TLB instructions of `stats` by kind and reach.
fn say_stats<M: Machine>(m: &mut M, stats: &TlbStats) {
    m.say_dec("  range TLBIs, broadcast: ", stats.range_broadcast);
    m.say_dec("  range TLBIs, local:     ", stats.range_local);
    m.say_dec("  page TLBIs, broadcast:  ", stats.page_broadcast);
    m.say_dec("  page TLBIs, local:      ", stats.page_local);
}

/// A check that holds, or the run fails (a panic on the host; on the machine a message and
/// exit status 1).
fn check<M: Machine>(m: &mut M, ok: bool, what: &str) {
    if !ok {
        m.say("FAILED: ");
        m.say(what);
        m.say("\n");
        panic!("check failed");
    }
}

/// Whether EL0 may read and write `va` as expected, by the CPU's walk (skipped on the host).
fn check_access<M: Machine>(m: &mut M, va: u64, read: bool, write: bool, what: &str) {
    if let Some(r) = m.el0_may_access(va, false) {
        check(m, r == read, what);
    }
    if let Some(w) = m.el0_may_access(va, true) {
        check(m, w == write, what);
    }
}

/// Step 3: a user address space and its flushes. `frames` reaches the arena as the code now
/// does. Returns the TLB instructions the space issued.
pub fn user_space<M: Machine>(m: &mut M, frames: Frames) -> TlbStats {
    // The machine's features, read on every CPU and combined (range = intersection, errata =
    // union) before any space uses them; one CPU here.
    let features = m.tlb_features();
    m.say_dec("FEAT_TLBIRANGE: ", u64::from(features.range));
    // One allocator for the machine, as wide as the CPU's ASIDs (and TCR_EL1.AS says so).
    let allocator = RefCell::new(AsidAllocator::<1>::new(asid_bits_from_mmfr0(m.mmfr0())));
    let context = RefCell::new(AsidContext::new());
    let targets = AsidTargets { allocator: &allocator, context: &context, issued: TlbStats::ZERO };
    let table = PageTable::new(frames, VaRange::Lower).expect("a root frame");
    let issuer = TlbIssuer::new(m.tlb(), features.errata);
    let mut space = AddressSpace::user(table, issuer, features, targets);

    // The switch: an ASID for this CPU (and the local flush a rollover asks for), then TTBR0.
    let (asid, flush) = allocator.borrow_mut().switch_to(&mut context.borrow_mut(), 0);
    if flush {
        m.local_flush_all();
    }
    let ttbr0 = regime::ttbr(space.table().root_pa().0, asid);
    m.say_hex("user TTBR0_EL1: ", ttbr0);
    m.set_user_table(Some(ttbr0));

    // Fault in a run, page by page, as demand paging does: the last page completes it and the
    // space folds it (break, one flush, make with the contiguous hint).
    let va = 0x40_0000_0000u64;
    let ram = USER_RAM.0.get().cast::<u8>();
    let pa = space.table().translation().pa_of(ram);
    let rw = Attributes::user(UserAccess::ReadWrite);
    for i in 0..RUN_PAGES {
        let off = i * PAGE_SIZE;
        space.map(VirtAddr(va + off), PhysAddr(pa + off), PAGE_SIZE, rw, Constraints::NONE).expect("map");
    }
    let leaf = space.query(VirtAddr(va)).expect("mapped");
    check(
        m,
        leaf.contiguous && space.stats().folds == 1 && space.stats().flushes == 1,
        "one fold, one flush",
    );
    check_access(m, va, true, true, "EL0 reads and writes the run");
    m.say("faulted in one run page by page: folded, one flush\n");
    say_stats(m, space.tlb_stats());
    // Only this CPU ever ran the ASID, so the allocator chose the local forms: one range op
    // with FEAT_TLBIRANGE, one op per page without.
    let local = space.tlb_stats().page_local + space.tlb_stats().range_local;
    let expected = if features.range { 1 } else { RUN_PAGES };
    check(
        m,
        local == expected && space.tlb_stats().plans == 1,
        "the fold's flush is local, one op a page or one range op",
    );

    // Read-only: a permission change, made in place, then one flush.
    let before = *space.tlb_stats();
    space
        .protect(VirtAddr(va), RUN_PAGES * PAGE_SIZE, Attributes::user(UserAccess::ReadOnly))
        .expect("protect");
    check_access(m, va, true, false, "EL0 reads the run, cannot write it");
    m.say("made read-only: one flush\n");
    say_stats(m, &space.tlb_stats().since(&before));
    check(m, space.stats().flushes == 2, "one more flush");

    // Unmap: one flush, and the frames come back after it.
    let before = *space.tlb_stats();
    let mut freed = 0;
    space.unmap(VirtAddr(va), RUN_PAGES * PAGE_SIZE, |u| freed += u.size).expect("unmap");
    check(m, freed == RUN_PAGES * PAGE_SIZE && space.stats().flushes == 3, "frames back after one flush");
    check(m, space.translate(VirtAddr(va)).is_none(), "nothing mapped");
    check_access(m, va, false, false, "EL0 reaches nothing");
    m.say("unmapped: one flush, then the frames came back\n");
    say_stats(m, &space.tlb_stats().since(&before));

    // Teardown: no TTBR0 names the table any more, the ASID is flushed (locally: it ran only
    // here), then the tables go back.
    m.set_user_table(None);
    let issued = *space.tlb_stats();
    let (frames, _, targets) = space.destroy(|_| {});
    allocator.borrow().note_local_full_flush(&mut context.borrow_mut(), 0);
    check(m, targets.issued == issued, "every flush reported to the provider");
    m.say_dec("table frames in use after the teardown (the boot tables): ", u64::from(frames.used()));
    issued
}

/// The host: the same steps over a recording TLB; the tables' own walk is the check.
#[cfg(not(target_os = "none"))]
mod host {
    use super::*;

    /// Counts what would have been executed.
    #[derive(Default)]
    pub struct Recorder;

    impl TlbHardware for Recorder {
        fn dsb_ishst(&mut self) {}
        fn dsb_ish(&mut self) {}
        fn dsb_nshst(&mut self) {}
        fn dsb_nsh(&mut self) {}
        fn isb(&mut self) {}
        fn tlbi(&mut self, op: mm::tlb::TlbiOp, operand: u64) {
            println!("  {} {operand:#018x}", op.mnemonic());
        }
    }

    /// A made-up CPU: 16-bit ASIDs, 48-bit PAs, every granule; FEAT_TLBIRANGE.
    pub struct Host;

    impl Machine for Host {
        type Tlb = Recorder;
        fn tlb(&mut self) -> Recorder {
            Recorder
        }
        fn mmfr0(&self) -> u64 {
            0b0101 | (0b0010 << 4)
        }
        fn tlb_features(&self) -> TlbFeatures {
            TlbFeatures { range: true, ..TlbFeatures::BASELINE }
        }
        fn say(&mut self, text: &str) {
            print!("{text}");
        }
        fn say_hex(&mut self, label: &str, value: u64) {
            println!("{label}{value:#x}");
        }
        fn say_dec(&mut self, label: &str, value: u64) {
            println!("{label}{value}");
        }
        fn set_user_table(&mut self, _ttbr0: Option<u64>) {}
        fn local_flush_all(&mut self) {}
        fn el0_may_access(&mut self, _va: u64, _write: bool) -> Option<bool> {
            None
        }
    }
}

/// Runs the steps on the host, with a made-up image layout.
#[cfg(not(target_os = "none"))]
pub fn main() {
    let mut m = host::Host;
    let image = Image { start: 0x4020_0000, text_end: 0x4030_0000, end: 0x4060_0000, uart: 0x0900_0000 };
    let boot = boot_tables(image).expect("the boot map");
    // The tables say what the CPU will see.
    let high = |pa: u64| VirtAddr(alias_offset() + pa);
    assert_eq!(boot.identity.translate(VirtAddr(0x4020_1234)), Some(PhysAddr(0x4020_1234)));
    assert_eq!(boot.kernel.translate(high(0x4031_0008)), Some(PhysAddr(0x4031_0008)));
    assert!(boot.kernel.query(high(0x4020_0000)).is_some_and(|l| l.attrs == Attributes::kernel_text()));
    assert!(boot.kernel.query(high(image.uart)).is_some_and(|l| l.attrs.memory_type().is_device()));
    let mmfr0 = m.mmfr0();
    assert!(regime::cpu_supports_build(mmfr0));
    m.say_hex("MAIR_EL1: ", regime::MAIR_EL1);
    m.say_hex("TCR_EL1: ", regime::tcr_el1(mmfr0));
    m.say_hex("TTBR0_EL1 (identity): ", regime::ttbr(boot.identity.root_pa().0, 0));
    m.say_hex("TTBR1_EL1 (kernel): ", regime::ttbr(boot.kernel.root_pa().0, 0));
    let boot_frames = boot.kernel.translation().used();
    let issued = user_space(&mut m, Frames { offset: 0 });
    assert_eq!(issued.plans, 3);
    assert_eq!(Frames { offset: 0 }.used(), boot_frames, "the user space's tables came back");
    // The boot tables live as long as the kernel; here, until the end of the run.
    drop(boot);
    assert_eq!(Frames { offset: 0 }.used(), 0);
}

/// The machine: entry, the MMU, the UART, semihosting.
#[cfg(target_os = "none")]
mod machine {
    use core::arch::{asm, global_asm};

    use super::*;
    use mm::tlb::issue::{Aarch64Tlb, read_id_aa64isar0_el1, read_midr_el1};

    /// QEMU `virt`'s PL011 data register (physical).
    const UART_PA: u64 = 0x0900_0000;

    /// `SCTLR_EL1`: the MMU (M), data and instruction caches (C, I), stack alignment check
    /// (SA), and the bits that are RES1 in Armv8.0.
    const SCTLR_EL1: u64 = (1 << 0)
        | (1 << 2)
        | (1 << 3)
        | (1 << 12)
        | (1 << 11)
        | (1 << 20)
        | (1 << 22)
        | (1 << 23)
        | (1 << 28)
        | (1 << 29);

    // The entry: zero .bss (the arena and the stack among it), set the stack, go to Rust. The
    // MMU is off, so every address here is physical, and the image runs where it is linked.
    global_asm!(
        r#"
        .section .text.entry, "ax"
        .global _start
    _start:
        adrp    x0, __bss_start
        add     x0, x0, :lo12:__bss_start
        adrp    x1, __bss_end
        add     x1, x1, :lo12:__bss_end
    1:  cmp     x0, x1
        b.hs    2f
        str     xzr, [x0], #8
        b       1b
    2:  adrp    x0, __stack_top
        add     x0, x0, :lo12:__stack_top
        mov     sp, x0
        bl      boot_main
        b       .
        "#
    );

    unsafe extern "C" {
        static __image_start: u8;
        static __text_end: u8;
        static __image_end: u8;
    }

    /// The CPU: the UART at its physical address or at its alias.
    struct Cpu {
        uart: u64,
    }

    impl Cpu {
        fn putc(&self, byte: u8) {
            // SAFETY: the PL011's data register, mapped as device memory (or MMU off); a write
            // queues one byte.
            unsafe { (self.uart as *mut u32).write_volatile(u32::from(byte)) };
        }
    }

    impl Machine for Cpu {
        type Tlb = Aarch64Tlb;
        fn tlb(&mut self) -> Aarch64Tlb {
            Aarch64Tlb
        }
        fn mmfr0(&self) -> u64 {
            let v: u64;
            // SAFETY: reading an ID register has no side effect.
            unsafe { asm!("mrs {}, id_aa64mmfr0_el1", out(reg) v, options(nomem, nostack)) };
            v
        }
        fn tlb_features(&self) -> TlbFeatures {
            TlbFeatures::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1())
        }
        fn say(&mut self, text: &str) {
            for &b in text.as_bytes() {
                if b == b'\n' {
                    self.putc(b'\r');
                }
                self.putc(b);
            }
        }
        fn say_hex(&mut self, label: &str, value: u64) {
            self.say(label);
            self.say("0x");
            let mut started = false;
            for i in (0..16).rev() {
                let digit = ((value >> (4 * i)) & 0xf) as u8;
                if digit != 0 || started || i == 0 {
                    started = true;
                    self.putc(if digit < 10 { b'0' + digit } else { b'a' + digit - 10 });
                }
            }
            self.say("\n");
        }
        fn say_dec(&mut self, label: &str, value: u64) {
            self.say(label);
            let mut digits = [0u8; 20];
            let (mut n, mut i) = (value, digits.len());
            loop {
                i -= 1;
                digits[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            for &d in &digits[i..] {
                self.putc(d);
            }
            self.say("\n");
        }
        fn set_user_table(&mut self, ttbr0: Option<u64>) {
            // SAFETY: TTBR0 holds a complete user table (or walks are off); the kernel runs from
            // TTBR1, which this does not touch.
            unsafe {
                match ttbr0 {
                    Some(ttbr0) => asm!(
                        "msr ttbr0_el1, {t}",
                        "isb",
                        "mrs {c}, tcr_el1",
                        "bic {c}, {c}, #0x80",
                        "msr tcr_el1, {c}",
                        "isb",
                        t = in(reg) ttbr0, c = out(reg) _, options(nostack)
                    ),
                    None => asm!(
                        "mrs {c}, tcr_el1",
                        "orr {c}, {c}, #0x80",
                        "msr tcr_el1, {c}",
                        "isb",
                        "msr ttbr0_el1, xzr",
                        "isb",
                        c = out(reg) _, options(nostack)
                    ),
                }
            }
        }
        fn local_flush_all(&mut self) {
            // SAFETY: TLB maintenance only drops cached translations.
            unsafe { asm!("dsb nshst", "tlbi vmalle1", "dsb nsh", "isb", options(nostack)) };
        }
        fn el0_may_access(&mut self, va: u64, write: bool) -> Option<bool> {
            let par: u64;
            // SAFETY: AT walks the tables and writes PAR_EL1; nothing is accessed at `va`.
            unsafe {
                if write {
                    asm!("at s1e0w, {va}", "isb", "mrs {par}, par_el1", va = in(reg) va, par = out(reg) par, options(nostack));
                } else {
                    asm!("at s1e0r, {va}", "isb", "mrs {par}, par_el1", va = in(reg) va, par = out(reg) par, options(nostack));
                }
            }
            Some(par & 1 == 0)
        }
    }

    /// Ends the run through semihosting (`SYS_EXIT`, `ADP_Stopped_ApplicationExit`).
    fn exit(status: u64) -> ! {
        let block = [0x2_0026u64, status];
        // SAFETY: the semihosting call reads the two words at x1 and ends the run.
        unsafe { asm!("hlt #0xf000", in("w0") 0x18u32, in("x1") block.as_ptr(), options(nostack)) };
        loop {
            core::hint::spin_loop();
        }
    }

    /// Step 1 and 2, at the physical address with the MMU off.
    #[unsafe(no_mangle)]
    extern "C" fn boot_main() -> ! {
        let mut m = Cpu { uart: UART_PA };
        let image = Image {
            start: &raw const __image_start as u64,
            text_end: &raw const __text_end as u64,
            end: &raw const __image_end as u64,
            uart: UART_PA,
        };
        let mmfr0 = m.mmfr0();
        if !regime::cpu_supports_build(mmfr0) {
            m.say("this CPU lacks the build's granule (or LPA2)\n");
            exit(1);
        }
        let Ok(boot) = boot_tables(image) else {
            m.say("the boot map did not fit the arena\n");
            exit(1);
        };
        let (ttbr0, ttbr1) =
            (regime::ttbr(boot.identity.root_pa().0, 0), regime::ttbr(boot.kernel.root_pa().0, 0));
        // The boot tables stay for the whole run (TTBR1 keeps naming its tree).
        core::mem::forget(boot);
        let tcr = regime::tcr_el1(mmfr0);
        // SAFETY: the tables map this code at its address (TTBR0) and the image at the alias
        // (TTBR1). They were written with the MMU off, straight to memory: the data cache may
        // hold stale lines of the arena from before, which would shadow them once the walks
        // are cacheable, so every line of the image is invalidated first (DC IVAC by the
        // smallest line size, CTR_EL0.DminLine), and the instruction cache too.
        unsafe {
            asm!(
                "mrs {l}, ctr_el0",
                "ubfx {l}, {l}, #16, #4",
                "mov {s}, #4",
                "lsl {l}, {s}, {l}",
                "sub {s}, {l}, #1",
                "bic {a}, {a}, {s}",
                "3: dc ivac, {a}",
                "add {a}, {a}, {l}",
                "cmp {a}, {e}",
                "b.lo 3b",
                "dsb sy",
                "ic iallu",
                "dsb nsh",
                "isb",
                "msr mair_el1, {mair}",
                "msr tcr_el1, {tcr}",
                "msr ttbr0_el1, {t0}",
                "msr ttbr1_el1, {t1}",
                "isb",
                "tlbi vmalle1",
                "dsb nsh",
                "isb",
                "msr sctlr_el1, {sctlr}",
                "isb",
                a = inout(reg) image.start => _, e = in(reg) image.end, l = out(reg) _, s = out(reg) _,
                mair = in(reg) regime::MAIR_EL1, tcr = in(reg) tcr, t0 = in(reg) ttbr0, t1 = in(reg) ttbr1,
                sctlr = in(reg) SCTLR_EL1, options(nostack)
            );
        }
        // Continue at the TTBR1 alias: the stack and the code move by the alias's offset.
        // SAFETY: `high_main` and the stack are mapped at `alias_offset() + PA` (TTBR1); the
        // function never returns.
        unsafe {
            asm!(
                "add sp, sp, x0",
                "add x1, x1, x0",
                "br x1",
                in("x0") alias_offset(), in("x1") high_main as *const () as u64, options(noreturn)
            )
        }
    }

    /// Step 2's end and step 3, at the alias, from TTBR1.
    extern "C" fn high_main(offset: u64) -> ! {
        let mut m = Cpu { uart: offset + UART_PA };
        m.say("mm bare-metal example: running from TTBR1\n");
        let mmfr0 = m.mmfr0();
        m.say_hex("MAIR_EL1: ", regime::MAIR_EL1);
        m.say_hex("TCR_EL1: ", regime::tcr_el1(mmfr0));
        // The identity map is not needed any more: TTBR0 belongs to user spaces from now on.
        m.set_user_table(None);
        m.local_flush_all();
        let issued = user_space(&mut m, Frames { offset });
        m.say_dec("flushes: ", issued.plans);
        m.say("all checks passed\n");
        exit(0);
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        // The UART at its alias if the MMU is on (TTBR1 maps it), else at its address.
        let sctlr: u64;
        // SAFETY: reading a system register.
        unsafe { asm!("mrs {}, sctlr_el1", out(reg) sctlr, options(nomem, nostack)) };
        let mut m = Cpu { uart: if sctlr & 1 != 0 { alias_offset() + UART_PA } else { UART_PA } };
        m.say("panic\n");
        exit(1);
    }
}
