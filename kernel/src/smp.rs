//! Secondary CPUs: found in the device tree, started through PSCI `CPU_ON` or a spin-table
//! release, each given its own kernel and exception stacks (with guard pages), the vector table
//! and the shared kernel tables.
//!
//! A secondary enters `secondary_entry` (kernel/src/boot/head.rs) at its physical address with the MMU off, at the same
//! EL the boot CPU entered (booting.rst). It finds its slot in [`SECONDARY_BOOT`] by its MPIDR
//! (the boot CPU wrote the slot and cleaned it to the point of coherency, since the secondary
//! reads it with its caches off), drops to EL1 if needed, turns its MMU on with the early identity
//! map in TTBR0 and the final kernel table in TTBR1, and jumps to `secondary_main` at the link
//! address. CPU capabilities are sanitised as each CPU comes up: range TLBI and the errata
//! decision are the intersection and union over all CPUs (`memory::tlb::add_cpu`).
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use mm::addr::PAGE_SIZE;

use crate::arch::psci;
use crate::boot::secondary::{SECONDARY_BOOT, SLOT_SIZE, SecondaryBoot};
use crate::cpu::{CPUS, MAX_CPUS, MPIDR_AFFINITY, ONLINE};
use crate::devicetree::{CpuNode, EnableMethod, Machine};
use crate::kprintln;
use crate::memory::{kernel_map, layout};

/// How long a CPU has to come up before it is reported missing.
pub const BRING_UP_TIMEOUT_US: u64 = 500_000;

/// Outcome of starting one CPU.
#[derive(Debug)]
pub enum BringUp {
    /// It reported in after this many microseconds.
    Online(u64),
    /// It could not be started, or did not report in; the message names it.
    Failed(String),
}

/// Starts every CPU of the device tree other than the boot CPU; returns what happened to each.
pub fn start_secondaries(machine: &Machine<'_>, load_pa: u64, early_ttbr0: u64) -> Vec<(CpuNode, BringUp)> {
    use aarch64_cpu::registers::{
        MAIR_EL1, MPIDR_EL1, Readable, SCTLR_EL1, TCR_EL1, TPIDR_EL1, TTBR1_EL1, Writeable,
    };
    TPIDR_EL1.set(0);
    let boot_mpidr = MPIDR_EL1.get() & MPIDR_AFFINITY;
    CPUS[0].mpidr.store(boot_mpidr, Ordering::Relaxed);
    CPUS[0].online_at.store(crate::arch::time::counter(), Ordering::Relaxed);
    let entry_pa = (secondary_entry_address()).wrapping_sub(crate::memory::layout::image().start) + load_pa;
    let mut results = Vec::new();
    let mut index = 1;
    for node in machine.cpus.iter().cloned() {
        if node.mpidr == boot_mpidr {
            continue;
        }
        if index >= MAX_CPUS {
            results.push((node, BringUp::Failed(format!("more than {MAX_CPUS} CPUs: not started"))));
            continue;
        }
        let stacks = match kernel_map::map_cpu_stacks(index) {
            Ok(s) => s,
            Err(e) => {
                results.push((node, BringUp::Failed(format!("no stacks: {e:?}"))));
                continue;
            }
        };
        let slot = SecondaryBoot {
            mpidr: node.mpidr,
            mair: MAIR_EL1.get(),
            tcr: TCR_EL1.get() & !(1 << 7), // EPD0 clear: the identity map is needed to turn on
            ttbr0: early_ttbr0,
            ttbr1: TTBR1_EL1.get(),
            sctlr: SCTLR_EL1.get(),
            exception_stack_top: stacks.exception_stack_top,
            kernel_stack_top: stacks.kernel_stack_top,
            cpu: index as u64,
            _pad: [0; 7],
        };
        // SAFETY: only the boot CPU writes slots, and CPU `index` is not started yet.
        unsafe { (*SECONDARY_BOOT.0.get())[index] = slot };
        clean_to_poc((SECONDARY_BOOT.0.get() as u64) + (index * SLOT_SIZE) as u64, SLOT_SIZE);
        CPUS[index].mpidr.store(node.mpidr, Ordering::Relaxed);
        let started = crate::arch::time::counter();
        let launched = match &node.enable_method {
            EnableMethod::Psci => match psci::cpu_on(node.mpidr, entry_pa) {
                Ok(()) => Ok(()),
                Err(code) => Err(format!("PSCI CPU_ON refused with {code}")),
            },
            EnableMethod::SpinTable => match node.release_addr {
                Some(addr) if !release_word_is_ours_to_write(machine, addr, load_pa) => Err(format!(
                    "cpu-release-addr {addr:#x} is not an 8-byte aligned word of RAM that the device \
                     tree reserves (and the linear map shows)"
                )),
                Some(addr) => {
                    release_spin_table(addr, entry_pa);
                    Ok(())
                }
                None => Err(String::from("spin-table CPU without cpu-release-addr")),
            },
            EnableMethod::Other(name) => Err(format!("unknown enable-method {name:?}")),
            EnableMethod::Missing => Err(String::from("no enable-method")),
        };
        let outcome = match launched {
            Err(why) => BringUp::Failed(why),
            Ok(()) => {
                let limit = BRING_UP_TIMEOUT_US * crate::arch::time::frequency() / 1_000_000;
                loop {
                    let at = CPUS[index].online_at.load(Ordering::Acquire);
                    if at != 0 {
                        break BringUp::Online(crate::arch::time::ticks_to_us(at.saturating_sub(started)));
                    }
                    if crate::arch::time::counter() - started > limit {
                        break BringUp::Failed(format!(
                            "did not report in within {} ms",
                            BRING_UP_TIMEOUT_US / 1000
                        ));
                    }
                    core::hint::spin_loop();
                }
            }
        };
        if matches!(outcome, BringUp::Online(_)) {
            index += 1;
        } else {
            // The slot's stacks stay mapped (a CPU that comes up late must not run on freed
            // memory); the next CPU gets the next slot.
            CPUS[index].mpidr.store(u64::MAX, Ordering::Relaxed);
            // SAFETY: as above; the entry code looks slots up by MPIDR, so an emptied slot is
            // never matched again.
            unsafe { (*SECONDARY_BOOT.0.get())[index].mpidr = u64::MAX };
            clean_to_poc((SECONDARY_BOOT.0.get() as u64) + (index * SLOT_SIZE) as u64, SLOT_SIZE);
            index += 1;
        }
        results.push((node, outcome));
    }
    results
}

fn secondary_entry_address() -> u64 {
    unsafe extern "C" {
        fn secondary_entry();
    }
    secondary_entry as *const () as u64
}

/// Cleans `[va, va + len)` to the point of coherency, for a reader whose caches are off.
fn clean_to_poc(va: u64, len: usize) {
    let mut a = va & !63;
    while a < va + len as u64 {
        // SAFETY: cleaning a mapped address to PoC does not change memory contents.
        unsafe { core::arch::asm!("dc civac, {}", in(reg) a, options(nostack)) };
        a += 64;
    }
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
}

/// Spin-table release (booting.rst): write the entry point to the CPU's release address, clean it
/// to the point of coherency (the waiting CPU reads it with caches off), and `SEV`.
/// Whether the kernel may write a spin-table release word at `addr`: 8-byte aligned RAM inside a
/// reservation that the linear map shows (so no frame of the kernel's is there), outside the
/// Image. A corrupt `cpu-release-addr` would otherwise be a write anywhere.
fn release_word_is_ours_to_write(machine: &Machine<'_>, addr: u64, load_pa: u64) -> bool {
    let image = layout::image();
    let image_size = image.end.next_multiple_of(PAGE_SIZE) - image.start;
    let Some(end) = addr.checked_add(8) else { return false };
    addr.is_multiple_of(8)
        && machine.memory.contains(addr)
        && machine.reserved.iter().any(|r| !r.no_map && r.start <= addr && end <= r.end)
        && (end <= load_pa || addr >= load_pa + image_size)
}

fn release_spin_table(release_pa: u64, entry_pa: u64) {
    let va = layout::phys_to_linear(release_pa);
    // SAFETY: the release address is a reserved, 8-byte aligned word in RAM outside the Image
    // (`release_word_is_ours_to_write`), reached through the linear map; only the waiting CPU
    // reads it.
    unsafe { (va as *mut u64).write_volatile(entry_pa) };
    clean_to_poc(va, 8);
    aarch64_cpu::asm::sev();
}

/// Rust entry of a secondary CPU, on its own kernel stack with the MMU on.
#[unsafe(no_mangle)]
extern "C" fn secondary_main(cpu: u64) -> ! {
    use aarch64_cpu::registers::{TPIDR_EL1, Writeable};
    TPIDR_EL1.set(cpu);
    // SAFETY: unmask SError only; the vectors are installed.
    unsafe { core::arch::asm!("msr daifclr, #4", options(nomem, nostack)) };
    // The identity map was needed only to turn the MMU on; user address spaces own TTBR0.
    {
        use aarch64_cpu::registers::{ReadWriteable, TCR_EL1, TTBR0_EL1};
        TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
        TTBR0_EL1.set(0);
        // SAFETY: drops this CPU's translations learned through the identity map.
        unsafe { core::arch::asm!("isb", "tlbi vmalle1", "dsb nsh", "isb", options(nostack)) };
    }
    let features = crate::arch::cpu::CpuFeatures::read();
    crate::memory::tlb::add_cpu();
    crate::arch::cpu::enable_pan(&features);
    crate::arch::pmu::enable_instruction_counter();
    crate::arch::aarch64::cpu::init_el0_controls();
    crate::arch::aarch64::mte::init_cpu();
    let irqs = crate::irq::init_cpu();
    kprintln!(
        "cpu{}: online (MPIDR {:#x}, {}){}",
        cpu,
        features.mpidr,
        features.core_name(),
        if irqs.is_ok() { "" } else { ", no interrupts" }
    );
    CPUS[cpu as usize].online_at.store(crate::arch::time::counter(), Ordering::Release);
    ONLINE.fetch_add(1, Ordering::AcqRel);
    if irqs.is_err() {
        crate::exit::park()
    }
    // Run user threads for as long as the machine is up.
    crate::sched::run_cpu(None);
    crate::exit::park()
}
