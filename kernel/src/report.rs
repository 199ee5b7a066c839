//! The boot report: what the kernel found, printed once at start (and parsed by scripts/test,
//! which checks the entry EL and the memory of every QEMU configuration).
use crate::Booted;
use crate::console::{self, ConsoleKind};
use crate::kprintln;
use crate::memory::{frames, heap};
use core::fmt::Write;

/// Prints the boot report.
pub fn print(b: &Booted) {
    let m = &b.machine;
    let cpu = &b.cpu;
    kprintln!("kernel {} ({}) booting", env!("CARGO_PKG_VERSION"), env!("KERNEL_GIT_DESCRIBE"));
    kprintln!(
        "  entered at EL{}, Image loaded at {:#x}, linked at {:#x}, running at {:#x} ({})",
        b.boot.entry_el,
        b.boot.load_pa,
        crate::boot::early_map::KIMAGE_VADDR,
        crate::memory::layout::image().start,
        crate::boot::kaslr::outcome()
    );
    print_linear_map();
    if let Some(h) = &b.uefi {
        let mem = &h.memory;
        kprintln!(
            "  booted through UEFI: EFI stub at EL{}, ACPI RSDP {:#x}; memory from the UEFI map: {} descriptors, \
             {} KiB firmware-owned left out, {} dropped",
            h.firmware_el,
            h.rsdp,
            mem.descriptors,
            mem.firmware_bytes >> 10,
            mem.dropped
        );
        if h.load_options != 0 {
            kprintln!(
                "  command line: the {} bytes of the UEFI load options, as /chosen/bootargs",
                h.load_options
            );
        }
    }
    kprintln!("  device tree at {:#x} ({} bytes), model \"{}\"", b.boot.fdt_pa, m.fdt.total_size(), m.model);
    for &(start, end) in m.memory.ranges() {
        kprintln!("  memory: [{:#x}, {:#x}) {} MiB", start, end, (end - start) >> 20);
    }
    kprintln!("  memory total: {} MiB", m.memory.total() >> 20);
    for r in &m.reserved {
        kprintln!(
            "  reserved: [{:#x}, {:#x}) {}{}",
            r.start,
            r.end,
            r.what,
            if r.no_map { " (no-map)" } else { "" }
        );
    }
    if let Some((start, end)) = m.initrd {
        kprintln!("  initrd: [{:#x}, {:#x}) {} bytes", start, end, end - start);
    }
    let (used_frames, total_frames) = frames::usage();
    kprintln!(
        "  usable: {} KiB in {} ranges; frames: {} of {} in use; kernel tables from the boot arena: {} pages",
        b.usable.total() >> 10,
        b.usable.ranges().len(),
        used_frames,
        total_frames,
        b.arena_pages
    );
    let heap = heap::usage();
    kprintln!(
        "  heap: {} KiB of {} KiB in use (peak {} KiB, {} chunks); grows from frames up to {} KiB",
        heap.used >> 10,
        heap.size >> 10,
        heap.peak >> 10,
        heap.chunks,
        heap.ceiling >> 10
    );
    match (console::kind(), &m.console, crate::devicetree::console_uart(m)) {
        (ConsoleKind::Device { family, pa }, Ok(c), config) => {
            kprintln!("  console: {} at {:#x} ({})", family.name(), pa, c.path);
            if let Ok(config) = config {
                if config.reg_shift != 0 || config.reg_io_width != 4 {
                    kprintln!(
                        "  console registers: reg-shift {}, reg-io-width {}",
                        config.reg_shift,
                        config.reg_io_width
                    );
                }
                for note in &config.notes {
                    kprintln!("  console: {note}");
                }
            }
        }
        (kind, Ok(c), config) => {
            let after = if kind == ConsoleKind::Fallback {
                "staying on the fallback UART"
            } else {
                "running silently"
            };
            match config {
                Err(why)
                    if m.fdt
                        .find_node(&c.path)
                        .and_then(|n| devicetree::support::uart_family(&n))
                        .is_some() =>
                {
                    kprintln!(
                        "  console: {} ({}) at {:#x} cannot be driven: {}; {}",
                        c.path,
                        c.compatible,
                        c.pa,
                        why,
                        after
                    )
                }
                _ => kprintln!(
                    "  console: {} ({}) at {:#x} has no driver in this kernel; {}",
                    c.path,
                    c.compatible,
                    c.pa,
                    after
                ),
            }
        }
        (kind, Err(why), _) => kprintln!("  console: {:?} ({})", kind, why),
    }
    kprintln!("  board build: {} (fallback console)", crate::board::NAME);
    match (crate::arch::psci::conduit(), crate::arch::psci::version()) {
        (Some(conduit), Some((major, minor))) => {
            kprintln!("  psci: {:?}, version {}.{}", conduit, major, minor)
        }
        (Some(conduit), None) => kprintln!("  psci: {:?}, no answer", conduit),
        (None, _) => kprintln!("  psci: none in the device tree"),
    }
    for problem in &m.problems {
        kprintln!("  device tree: {} (left out)", problem);
    }
    match &m.interrupt_controller {
        Some((compatible, pa)) => kprintln!("  interrupt controller: {} at {:#x}", compatible, pa),
        None => kprintln!("  interrupt controller: none found"),
    }
    kprintln!(
        "  cpu: {} (MIDR {:#010x}, MPIDR {:#x}); {} CPUs in the device tree",
        cpu.core_name(),
        cpu.midr,
        cpu.mpidr,
        m.cpus.len()
    );
    kprintln!(
        "  mm features: FEAT_TLBIRANGE {}, ASID {} bits, PAN {} ({}), TTL {}, LPA2 {}, PA {} bits, PMU instructions counter to EL0 {}",
        if cpu.has_range_tlbi() { "yes" } else { "no" },
        cpu.asid_bits,
        cpu.pan,
        if b.pan_enabled { "enabled" } else { "absent" },
        if cpu.ttl { "yes" } else { "no" },
        if cpu.gran4 == crate::arch::cpu::Granule::Yes52 { "yes" } else { "no" },
        cpu.pa_bits,
        if b.pmu_enabled { "yes" } else { "no" }
    );
    kprintln!("  granules: 4K {}, 16K {}, 64K {}", cpu.gran4, cpu.gran16, cpu.gran64);
    let tcr = aarch64_cpu::registers::Readable::get(&aarch64_cpu::registers::TCR_EL1);
    let (kernel_va, user_va) = crate::arch::aarch64::translation::va_bits(tcr);
    kprintln!(
        "  translation: {}K granule (this build), {}-bit VA, {}-bit PA (TCR_EL1 {:#x}; user half {}-bit VA)",
        crate::arch::aarch64::translation::PAGE_KIB,
        kernel_va,
        crate::arch::aarch64::translation::ips_bits(tcr),
        tcr,
        user_va
    );
    if !m.bootargs.is_empty() {
        kprintln!("  bootargs: {}", m.bootargs);
    }
    let freq = crate::arch::time::frequency();
    let us = crate::arch::time::ticks_to_us(crate::arch::time::counter().wrapping_sub(b.boot.entry_counter));
    // Boot: an infallible string is fine here (memory::fallible's boundary).
    let mut line = alloc::string::String::new();
    let _ = write!(line, "  boot timeline (us from entry):");
    for (phase, at) in b.timeline {
        let _ = write!(
            line,
            " {} {}",
            phase,
            crate::arch::time::ticks_to_us(at.wrapping_sub(b.boot.entry_counter))
        );
    }
    kprintln!("{line}");
    kprintln!("  counter: {} Hz; time from entry to this report: {} us", freq, us);
}

/// Where the linear map puts physical 0, and why there (randomised with KASLR's seed where the
/// CPU's physical addresses leave room: `memory::layout`).
fn print_linear_map() {
    use crate::boot::kaslr::{self, Kaslr};
    use crate::memory::layout;
    let offset = kaslr::linear_offset();
    let at = layout::LINEAR_BASE + offset;
    match kaslr::outcome() {
        _ if offset != 0 => kprintln!("  linear map: physical 0 at {at:#x} (KASLR: offset {offset:#x})"),
        Kaslr::Moved { .. } | Kaslr::NoRoom => kprintln!(
            "  linear map: physical 0 at {at:#x} (not randomised: {}-bit physical addresses leave no room)",
            kaslr::physical_address_bits()
        ),
        other => kprintln!("  linear map: physical 0 at {at:#x} (not randomised: {other})"),
    }
}
