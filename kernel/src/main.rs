//! A bare-metal arm64 kernel whose memory management is meant to be studied.
//!
//! Module map, by layer from the bottom up (`scripts/check-layers.py` holds the same list and
//! fails the suite when a module uses one above its layer; docs/kernel.md says why each layer
//! sits where it does):
//! - [`arch`]: AArch64 specifics (the exception vectors, MMU switch, user copies, PSCI, timer,
//!   CPU features, the translation regime);
//! - [`cpu`], [`symbols`], [`board`]: which CPU this is and its stacks; symbolising addresses;
//!   the few facts the device tree cannot give (the fallback console);
//! - [`boot`], [`devicetree`], [`firmware`]: the Image header, the entry code, the early page
//!   tables and the secondary-boot slots; what the machine is, from the device tree; the EFI stub;
//! - [`memory`]: layout, frames, heap, the kernel's own tables (through the `mm` crate), ASIDs,
//!   the address spaces processes run on (`Vmspace`) and the user copies;
//! - [`drivers`]: consoles (PL011, BCM2835 mini UART, the `uart` family), the PL031 RTC and the
//!   interrupt controllers (GICv2/v3, BCM2836, Apple AIC);
//! - [`exit`]: ending a run (semihosting, PSCI);
//! - [`console`]: `kprintln!`, the fatal-path printing, ending a run after a flush;
//! - [`irq`], [`wallclock`], [`random`]: interrupts, the tick and IPIs (handlers registered from
//!   above); the time of day; random bytes;
//! - [`sched`]: tasks queued, run, blocked and woken, on every CPU (a thread is a `sched::Task`);
//! - [`fs`]: descriptors and what they refer to: the terminal, pipes, memfds, generated texts,
//!   readiness;
//! - [`ipc`]: System V IPC: the machine-wide table of shared memory segments;
//! - [`process`]: processes and threads, their families, exec, signals;
//! - [`procfs`]: what `/proc` shows (`/proc/self/maps`);
//! - [`syscall`]: the system-call table and the calls, one file per family;
//! - [`trap`]: what an exception becomes (an interrupt, a system call, a fault, a signal, a report);
//! - [`smp`], [`bench`](mod@bench), [`report`], [`selftest`]: starting the secondary CPUs, the in-kernel
//!   benchmarks, the boot report, deliberate failures for the suite;
//! - `ktest` and `tests` (test image only): the in-kernel test framework and the tests of the
//!   test image; this file: `kernel_main`, the boot sequence.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

extern crate alloc;

mod arch;
mod bench;
mod board;
mod boot;
mod console;
mod cpu;
mod devicetree;
mod drivers;
mod exit;
mod firmware;
mod fs;
mod ipc;
mod irq;
mod klog;
#[cfg(feature = "test-image")]
mod ktest;
mod memory;
mod process;
mod procfs;
mod random;
mod report;
mod sched;
mod selftest;
mod smp;
mod symbols;
mod syscall;
#[cfg(feature = "test-image")]
mod tests;
mod trap;
mod vdso;
mod wallclock;

use core::sync::atomic::{AtomicPtr, Ordering};

use alloc::string::String;
use alloc::vec::Vec;
use linux_abi::Errno;
use mm::addr::{PAGE_SIZE, PhysAddr};
use mm::phys::RegionSet;

use crate::boot::BootInfo;
use crate::boot::early_map::{EARLY_UART_VADDR, FDT_WINDOW_SIZE, FDT_WINDOW_VADDR};
use crate::console::ConsoleKind;
use crate::devicetree::Machine;
use crate::memory::{frames, heap, kernel_map, layout};

/// Usable RAM below which the kernel refuses to run (the heap, tables and tests need room).
const MIN_USABLE_MEMORY: u64 = 8 << 20;

/// What the kernel is doing, for the panic message ("while reading the device tree").
static PHASE: AtomicPtr<&'static str> = AtomicPtr::new(core::ptr::null_mut());

fn set_phase(phase: &'static &'static str) {
    PHASE.store(phase as *const _ as *mut _, Ordering::Relaxed);
}

/// Everything the rest of the kernel learned at boot, for tests and the report.
pub struct Booted {
    /// From the entry code.
    pub boot: BootInfo,
    /// From the device tree.
    pub machine: Machine<'static>,
    /// What the EFI stub handed over, when the Image was started as a UEFI application.
    pub uefi: Option<::firmware::efi::Handoff>,
    /// RAM given to the frame allocator.
    pub usable: RegionSet<64>,
    /// Boot CPU features.
    pub cpu: arch::cpu::CpuFeatures,
    /// Whether PAN was turned on.
    pub pan_enabled: bool,
    /// PMU event counter 0 counts instructions retired and EL0 may read it (arch::pmu).
    pub pmu_enabled: bool,
    /// Table pages the final map took from the static arena.
    pub arena_pages: usize,
    /// Counter values at the end of each boot phase, for the report's timeline.
    pub timeline: [(&'static str, u64); 4],
}

static BOOTED: spin::Once<Booted> = spin::Once::new();

/// What boot learned; available once the boot report has been printed.
pub fn booted() -> &'static Booted {
    BOOTED.get().expect("booted() before the end of boot")
}

/// Prints a fatal boot problem and ends the run with a failing status.
fn boot_failure(args: core::fmt::Arguments<'_>) -> ! {
    console::print_fatal(format_args!("kernel: cannot boot: {args}\n"));
    crate::console::end_run(crate::exit::FAILURE)
}

#[unsafe(no_mangle)]
extern "C" fn kernel_main(
    fdt_pa: u64,
    load_pa: u64,
    entry_el: u64,
    entry_counter: u64,
    early_ttbr0: u64,
) -> ! {
    let boot = BootInfo { fdt_pa, load_pa, entry_el, entry_counter, early_ttbr0 };
    let t_main = arch::time::counter();
    // The vectors are installed: let SErrors be reported from here on.
    // SAFETY: unmasks SError only; the vector table (installed by the entry code) reports it.
    unsafe { core::arch::asm!("msr daifclr, #4", options(nomem, nostack)) };
    heap::init_bootstrap();
    if let Some((family, pa)) = board::FALLBACK_UART {
        let driver = console::UartDriver::plain(family);
        // SAFETY: the early map shows the fallback UART's 2 MiB block at EARLY_UART_VADDR as
        // device memory, for as long as the early map is live (the console moves before it goes).
        unsafe { console::use_uart(driver, EARLY_UART_VADDR + (pa & 0x1f_ffff), ConsoleKind::Fallback) };
    }
    if !layout::check_link_address() {
        boot_failure(format_args!(
            "running at {:#x}, which is neither the link address {:#x} nor a KASLR address",
            layout::image().start,
            boot::early_map::KIMAGE_VADDR
        ));
    }

    set_phase(&"validating x0 as a device tree");
    let mapped = fdt_pa != 0 && fdt_pa.is_multiple_of(8) && fdt_pa < (1 << 48);
    let offset = fdt_pa & 0x1f_ffff;
    let fdt = if mapped {
        // SAFETY: the early map shows FDT_WINDOW_SIZE bytes from the 2 MiB block holding x0,
        // read-only, at FDT_WINDOW_VADDR; nothing writes there.
        unsafe { devicetree::open(FDT_WINDOW_VADDR + offset, (FDT_WINDOW_SIZE - offset) as usize) }
    } else {
        Err(devicetree::FdtProblem::NotMapped)
    };
    let fdt = match fdt {
        Ok(fdt) => fdt,
        Err(problem) => boot_failure(format_args!(
            "x0 = {fdt_pa:#x} is not a flattened device tree: {problem}{}. The arm64 boot protocol \
             passes the device tree's physical address in x0",
            atag_hint(&problem)
        )),
    };
    set_phase(&"reading the device tree");
    let mut machine = Machine::from_fdt(fdt);
    // Booted through the EFI stub: RAM is what the UEFI memory map declares usable (plus the ACPI
    // tables, mapped but reserved), not the device tree's memory nodes, which also cover the
    // firmware's runtime services and reservations (Linux's EFI stub deletes them for the same
    // reason, drivers/firmware/efi/libstub/fdt.c).
    let uefi = firmware::efi_stub::handoff();
    if let Some(h) = &uefi {
        use_uefi_memory(&mut machine, &h.memory);
    }
    // A tree whose memory covers its own console's registers contradicts itself (a corrupt
    // memory node, say one at 0 on QEMU virt): fatal, and said on the fallback UART when that is
    // the tree's console too (then it is a device after all). Otherwise a fallback UART inside
    // the tree's RAM (the QEMU virt build on a Pi) is RAM: stop writing there, and any failure
    // before the tree's console is mapped ends silently, with a failing status (docs/boards.md).
    let page = |pa: u64| pa / PAGE_SIZE;
    let console_in_ram = machine.console.as_ref().ok().filter(|c| machine.memory.contains(c.pa));
    if let Some(pa) = board::FALLBACK_UART_PA
        && machine.memory.contains(pa)
        && console_in_ram.is_none_or(|c| page(c.pa) != page(pa))
    {
        console::silence();
    }
    if let Some(c) = console_in_ram {
        boot_failure(format_args!(
            "the device tree contradicts itself: its memory covers the registers of its console \
             {} at {:#x}",
            c.path, c.pa
        ));
    }
    if let Some(method) = machine.psci {
        arch::psci::set_conduit(match method {
            devicetree::PsciMethod::Hvc => arch::psci::Conduit::Hvc,
            devicetree::PsciMethod::Smc => arch::psci::Conduit::Smc,
        });
    }
    if machine.memory.total() == 0 {
        boot_failure(format_args!(
            "the device tree describes no memory (no node with device_type = \"memory\")"
        ));
    }
    let image_size = layout::image().end.next_multiple_of(PAGE_SIZE) - layout::image().start;
    if !machine.memory.contains(load_pa) || !machine.memory.contains(load_pa + image_size - 1) {
        boot_failure(format_args!(
            "the Image at [{load_pa:#x}, {:#x}) is not inside the memory the device tree describes",
            load_pa + image_size
        ));
    }
    // A console without a driver is not fatal: the kernel runs silently and the report (kept by
    // `console::kind` and the device tree) names it. No stdout-path at all is bad input.
    // Without a driver, the build's fallback UART (when this board has it: not RAM here) keeps the
    // output; otherwise the kernel runs silently.
    // The driver comes from the node's whole compatible list; a node no driver takes, or whose
    // layout properties no driver can use, leaves the fallback UART (or silence), and the report
    // says why.
    let console = match (&machine.console, devicetree::console_uart(&machine)) {
        (Err(why), _) => boot_failure(format_args!("no usable console in the device tree: {why}")),
        (Ok(_), Ok(config)) => {
            let va_offset = config.reg_offset;
            let span = config.reg_offset + config.family.span(config.reg_shift, config.reg_io_width);
            Some((console::UartDriver::from_config(&config), config.pa, va_offset, span, false))
        }
        (Ok(_), Err(_)) if console::kind() == ConsoleKind::Fallback => {
            board::FALLBACK_UART.map(|(family, pa)| (console::UartDriver::plain(family), pa, 0, 0x1000, true))
        }
        (Ok(_), Err(_)) => None,
    };
    let fdt_size = machine.fdt.total_size() as u64;
    let mut usable = machine.memory.clone();
    let mut no_map = Vec::new();
    let _ = usable.remove(load_pa, load_pa + image_size);
    let _ = usable.remove(fdt_pa, fdt_pa + fdt_size);
    if let Some((start, end)) = machine.initrd {
        let _ = usable.remove(start, end);
    }
    for r in &machine.reserved {
        let _ = usable.remove(r.start, r.end);
        if r.no_map {
            no_map.push((r.start, r.end));
        }
    }
    usable.align_inward(PAGE_SIZE);
    if usable.total() < MIN_USABLE_MEMORY {
        boot_failure(format_args!(
            "memory too small: {} KiB usable after the Image, the device tree and \
            reservations; the kernel needs at least {} KiB",
            usable.total() / 1024,
            MIN_USABLE_MEMORY / 1024
        ));
    }

    let t_fdt = arch::time::counter();
    set_phase(&"building the kernel map");
    // The kernel space issues its TLB maintenance with the capabilities read here.
    memory::tlb::init();
    let inputs = kernel_map::MapInputs {
        load_pa,
        memory: &machine.memory,
        no_map: &no_map,
        fdt: (fdt_pa, fdt_size),
        console: console.map(|(_, pa, _, span, _)| (pa, span)),
    };
    // MTE's MAIR byte and tag access, before the linear map is built tagged.
    arch::aarch64::mte::init_cpu();
    let mapped = match kernel_map::build_and_switch(&inputs) {
        Ok(m) => m,
        Err(e) => boot_failure(format_args!("building the kernel map failed: {e:?}")),
    };
    match (console, mapped.console_va) {
        (Some((driver, pa, va_offset, _, fallback)), Some(va)) => {
            let kind = if fallback {
                ConsoleKind::Fallback
            } else {
                ConsoleKind::Device { family: driver.family, pa }
            };
            // SAFETY: the final map shows the console's registers (every page the driver
            // touches) as device memory at `va`, permanently, and `driver` is the one the
            // node's compatible list and layout properties chose.
            unsafe { console::use_uart(driver, va + va_offset, kind) };
        }
        // No driver for the device tree's console: silent from here on (the early map and its
        // fallback UART are gone).
        _ => console::silence(),
    }

    let t_map = arch::time::counter();
    set_phase(&"setting up frames and heap");
    for &(start, end) in usable.ranges() {
        frames::add_range(PhysAddr(start), PhysAddr(end));
    }
    kernel_map::frames_ready();
    // The reference counts of frames shared by fork, made before anything measures frames in
    // use (a table made at the first fork would look like a leak of the program that forked).
    frames::init_shared_counts();
    frames::init_zero_region();
    // The heap starts with a main region of about 1/32 of RAM and grows from frames up to a
    // quarter of RAM (memory::heap).
    heap::set_ceiling((usable.total() / 4) as usize);
    let heap_bytes = (usable.total() / 16).clamp(1 << 20, 64 << 20).next_power_of_two() / 2;
    if let Some(pa) = frames::alloc((heap_bytes / PAGE_SIZE) as usize) {
        // SAFETY: the frames were just taken from the allocator, so nothing else uses them, and
        // the linear map shows them read-write.
        unsafe { heap::add_main_region(layout::phys_to_linear(pa.0) as usize, heap_bytes as usize) };
    }

    let t_frames = arch::time::counter();
    let cpu = arch::cpu::CpuFeatures::read();
    memory::asids::init();
    let pan_enabled = arch::cpu::enable_pan(&cpu);
    let pmu_enabled = arch::pmu::enable_instruction_counter();
    arch::aarch64::cpu::init_el0_controls();
    set_phase(&"running");
    let booted = BOOTED.call_once(|| Booted {
        boot,
        machine,
        uefi,
        usable,
        cpu,
        pan_enabled,
        pmu_enabled,
        arena_pages: mapped.arena_pages,
        timeline: [
            ("kernel_main", t_main),
            ("device tree", t_fdt),
            ("kernel map", t_map),
            ("frames+heap", t_frames),
        ],
    });
    apply_loglevel(booted.machine.bootargs);
    process::aslr::configure(booted.machine.bootargs);
    arch::aarch64::pauth::configure(booted.machine.bootargs);
    report::print(booted);
    // Before the first process: AT_RANDOM, keys and layouts all draw from it.
    kprintln!("  random: {}", random::seed_at_boot(&booted.machine.fdt));
    match drivers::intc::init(&booted.machine.fdt).and_then(|_| irq::init_cpu()) {
        Ok(()) => kprintln!(
            "  interrupts: {}, timer INTID {} at {} Hz",
            drivers::intc::current().map_or("?", |g| g.name()),
            irq::TIMER_INTID,
            irq::TICK_HZ
        ),
        Err(why) => kprintln!("  interrupts: none ({}); no preemption, CPUs poll", why),
    }
    kprintln!("  wall clock: {}", wallclock::init(&booted.machine.fdt));
    kprintln!("  vDSO: {}", vdso::init());
    kprintln!("  console input: {}", fs::tty::enable_interrupts(&booted.machine));
    process::signals::timers::init();
    for (node, outcome) in smp::start_secondaries(&booted.machine, load_pa, early_ttbr0) {
        match outcome {
            smp::BringUp::Online(us) => {
                kprintln!("  cpu MPIDR {:#x} ({}): up in {} us", node.mpidr, node.enable_method, us)
            }
            smp::BringUp::Failed(why) => {
                kprintln!("  cpu MPIDR {:#x} ({}): NOT up: {}", node.mpidr, node.enable_method, why)
            }
        }
    }
    kprintln!(
        "  cpus online: {} of {} in the device tree",
        cpu::ONLINE.load(Ordering::Acquire),
        booted.machine.cpus.len()
    );

    build_file_tree(booted);
    selftest::run_requested(booted);
    if booted.machine.has_bootarg("failslab") {
        kprintln!("  fault injection: SYS_FAIL_NTH enabled (failslab)");
        memory::fallible::allow_injection();
    }
    if booted.machine.has_bootarg("bench") {
        bench::run();
        crate::console::end_run(0)
    }
    #[cfg(feature = "test-image")]
    {
        let filter = booted.machine.bootargs.split_ascii_whitespace().find_map(|w| w.strip_prefix("test="));
        ktest::run_all(filter)
    }
    #[cfg(not(feature = "test-image"))]
    {
        let status = run_init(booted);
        crate::console::end_run(status as u32)
    }
}

/// Replaces the device tree's memory by the UEFI memory map's: the usable ranges and the ACPI
/// tables are RAM; the tables are also reserved (mapped, never allocated). Firmware-owned ranges
/// are left out of RAM altogether, so neither the allocator nor the linear map touches them.
fn use_uefi_memory(machine: &mut Machine<'static>, layout: &::firmware::efi::MemoryLayout) {
    let mut memory = layout.usable.clone();
    for &(start, end) in layout.acpi.ranges() {
        if memory.add(start, end).is_ok() {
            machine.reserved.push(::devicetree::machine::Reserved {
                start,
                end,
                what: String::from("UEFI memory map: ACPI tables"),
                no_map: false,
            });
        }
    }
    machine.memory = memory;
}

/// The built-in user program (userland/, embedded by kernel/build.rs when scripts/lib.sh names it).
#[repr(C, align(4096))]
struct Aligned<T: ?Sized>(T);
#[cfg(has_userland)]
static BUILTIN_PROGRAM: &Aligned<[u8]> = &Aligned(*include_bytes!(env!("USERLAND_ELF")));
#[cfg(not(has_userland))]
static BUILTIN_PROGRAM: &Aligned<[u8]> = &Aligned([]);

/// The built-in user program (empty when the build did not embed one).
pub fn builtin_program() -> &'static [u8] {
    &BUILTIN_PROGRAM.0
}

/// The console log level the command line asks for: `loglevel=N`, `quiet` (4), `debug` (10);
/// else the default (`klog`).
fn apply_loglevel(bootargs: &str) {
    for word in bootargs.split_ascii_whitespace() {
        if word == "--" {
            break;
        }
        match word {
            "quiet" => klog::set_console_level(4),
            "debug" => klog::set_console_level(10),
            _ => {
                if let Some(n) = word.strip_prefix("loglevel=").and_then(|v| v.parse::<u8>().ok()) {
                    klog::set_console_level(n);
                }
            }
        }
    }
}

/// The initrd, as bytes in place (`None` without one).
fn initrd_bytes(booted: &Booted) -> Option<&'static [u8]> {
    let (start, end) = booted.machine.initrd?;
    // SAFETY: the initrd lies in RAM that the linear map covers (it was left out of the frame
    // allocator), and nothing writes it.
    Some(unsafe {
        core::slice::from_raw_parts(layout::phys_to_linear(start) as *const u8, (end - start) as usize)
    })
}

/// Builds the file tree (Linux's rootfs with the initramfs unpacked into it) and mounts `/proc`
/// and `/sys` on it. A malformed archive is unpacked up to the damage and said in the log.
fn build_file_tree(booted: &Booted) {
    match fs::namespace::init(initrd_bytes(booted)) {
        Ok(u) => {
            let r = u.report;
            if u.was_cpio {
                kprintln!("  initramfs: {} members unpacked into the root file system", r.made);
            }
            if r.skipped > 0 {
                klog::log(
                    klog::level::WARNING,
                    format_args!(
                        "kernel: initramfs: {} members skipped (first: {:?})",
                        r.skipped, r.first_error
                    ),
                );
            }
            if let Some(e) = r.malformed {
                klog::log(klog::level::ERR, format_args!("kernel: initramfs: malformed from here on: {e}"));
            }
        }
        Err(e) => klog::log(klog::level::ERR, format_args!("kernel: no memory for the file tree: {e:?}")),
    }
    if let Err(e) = procfs::init() {
        klog::log(klog::level::ERR, format_args!("kernel: cannot mount /proc and /sys: {e:?}"));
    }
}

/// The first program: its bytes (8-byte aligned, as the ELF reader wants) and its path.
struct Init {
    bytes: InitBytes,
    path: String,
}

/// Where the first program's bytes are.
enum InitBytes {
    /// In place: the whole initrd (a program, not an archive), or the built-in demo.
    Static(&'static [u8]),
    /// Read from the file tree.
    Read(fs::node_file::Image),
}

impl InitBytes {
    fn get(&self) -> &[u8] {
        match self {
            Self::Static(b) => b,
            Self::Read(image) => image.bytes(),
        }
    }
}

/// The program to run first, as Linux chooses init: from the initramfs unpacked into the tree,
/// the file `rdinit=` names (default `/init`; an archive with a single file runs that file); an
/// initrd that is not an archive is the program itself; without an initrd, the built-in demo.
fn initial_program(booted: &Booted, rdinit: Option<&str>) -> Result<Init, String> {
    use initramfs::cpio::{Archive, is_cpio};
    let Some(initrd) = initrd_bytes(booted) else {
        return Ok(Init { bytes: InitBytes::Static(&BUILTIN_PROGRAM.0), path: String::from("userland") });
    };
    if !is_cpio(initrd) {
        let path = String::from(rdinit.unwrap_or("/init"));
        return Ok(Init { bytes: InitBytes::Static(initrd), path });
    }
    let archive = Archive(initrd);
    let files = archive.file_names();
    let path = match rdinit {
        Some(p) => String::from(p),
        None if files.len() == 1 && archive.lookup("/init").is_err() => alloc::format!("/{}", files[0]),
        None => String::from("/init"),
    };
    let ctx = fs::namespace::FsContext::first().map_err(|e| alloc::format!("no file tree ({e:?})"))?;
    let node = match fs::namespace::lookup(&ctx, &ctx.root, path.as_bytes(), true) {
        Ok(node) => node,
        Err(Errno::ENOENT) => {
            return Err(alloc::format!(
                "no {path} in the initramfs (it holds: {}); name the program with rdinit=PATH",
                files.join(", ")
            ));
        }
        Err(e) => return Err(alloc::format!("{path}: {e:?}")),
    };
    match fs::node_file::read_image(&node, u64::MAX) {
        Ok(image) => Ok(Init { bytes: InitBytes::Read(image), path }),
        Err(Errno::EACCES) => Err(alloc::format!("{path} in the initramfs is not a regular file")),
        Err(e) => Err(alloc::format!("{path}: {e:?}")),
    }
}

#[cfg_attr(feature = "test-image", allow(dead_code, reason = "the test image runs programs from its tests"))]
fn run_init(booted: &Booted) -> u64 {
    // The command line as Linux reads it for init: `rdinit=`, NAME=VALUE environment, arguments
    // (initramfs::cmdline documents the syntax).
    let args = match initramfs::cmdline::BootArgs::parse(booted.machine.bootargs) {
        Ok(args) => args,
        Err(why) => {
            kprintln!("kernel: cannot read the command line: {why}");
            return exit::FAILURE as u64;
        }
    };
    let init = match initial_program(booted, args.rdinit.as_deref()) {
        Ok(init) => init,
        Err(why) => {
            kprintln!("kernel: cannot run init: {why}");
            return exit::FAILURE as u64;
        }
    };
    let bytes = init.bytes.get();
    if bytes.is_empty() {
        kprintln!("kernel: no initrd and no built-in program (build through scripts/ to embed userland)");
        return 0;
    }
    let mut argv = alloc::vec![init.path.as_str()];
    argv.extend(args.args.iter().map(String::as_str));
    let envp: Vec<&str> = args.env.iter().map(String::as_str).collect();
    let name = init.path.as_str();
    kprintln!("kernel: running {} ({} bytes) as pid 1: {:?}", name, bytes.len(), argv);
    let started = arch::time::counter();
    // Frames outside the heap's grown chunks (which the heap keeps while any allocation lives
    // there): every frame init and the processes it started took must be back at the end.
    let in_use = || frames::usage().0 - heap::usage().grown_frames;
    let before = in_use();
    match process::run_with_env(bytes, &argv, &envp) {
        Ok(status) => {
            let ms = arch::time::ticks_to_us(arch::time::counter() - started) / 1000;
            kprintln!("kernel: {} exited with status {} after {} ms", name, status, ms);
            kprintln!("kernel: frames in use: {} before, {} after", before, in_use());
            // Every process is freed by now, so no entry of the process table is left.
            kprintln!("kernel: process table: {} entries left", process::family::listed());
            status
        }
        Err(why) => {
            kprintln!("kernel: cannot run {}: {}", name, why);
            exit::FAILURE as u64
        }
    }
}

/// ATAG lists (what a 32-bit-style loader passes, e.g. QEMU raspi3b without -dtb) start with a
/// header of size 5 or 2 words and the tag ATAG_CORE (0x54410001).
fn atag_hint(problem: &devicetree::FdtProblem) -> &'static str {
    match problem {
        devicetree::FdtProblem::BadMagic(m) if u32::from_be(*m) == 5 || u32::from_be(*m) == 2 => {
            " (it looks like an ATAG list: the loader booted the kernel the 32-bit way, as QEMU \
             raspi3b does without -dtb; give the loader a device tree)"
        }
        _ => "",
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let phase = PHASE.load(Ordering::Relaxed);
    // SAFETY: PHASE only ever holds null or a pointer to a `&'static str` static.
    let phase = if phase.is_null() { "starting" } else { unsafe { *phase } };
    console::print_fatal(format_args!("\nkernel panic while {phase}: {info}\n"));
    #[cfg(feature = "test-image")]
    if let Some(test) = ktest::CURRENT.try_lock().and_then(|t| *t) {
        use core::sync::atomic::Ordering::Relaxed;
        console::print_fatal(format_args!(
            "test {test} ... FAILED: panicked\n{} passed, {} failed\n",
            ktest::PASSED.load(Relaxed),
            ktest::FAILED.load(Relaxed) + 1
        ));
    }
    crate::console::end_run(crate::exit::FAILURE)
}
