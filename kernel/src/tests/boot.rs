//! Boot: where and how the kernel runs once `kernel_main` has been reached.
use aarch64_cpu::registers::{CurrentEL, Readable, SCTLR_EL1, TCR_EL1, VBAR_EL1};

use crate::arch::exception::probe_read;
use crate::boot::early_map::KIMAGE_VADDR;
use crate::boot::head::{IMAGE_FLAGS, MZ_NOP};
use crate::memory::layout;
use crate::{booted, ensure, ensure_eq, kernel_test};

kernel_test!(
    fn runs_at_el1() {
        ensure_eq!(CurrentEL.read(CurrentEL::EL), 1);
        let entry = booted().boot.entry_el;
        ensure!(entry == 1 || entry == 2, "entered at EL{entry}");
        Ok(())
    }
);

kernel_test!(
    fn runs_at_the_link_address_in_the_upper_half() {
        let pc: u64;
        // SAFETY: reads the program counter into a register.
        unsafe { core::arch::asm!("adr {}, .", out(reg) pc) };
        ensure!(pc >= layout::image().start && pc < layout::image().text_end, "pc {pc:#x}");
        ensure_eq!(layout::image().start, KIMAGE_VADDR + crate::boot::kaslr::offset());
        ensure!(layout::check_link_address(), "runs at {:#x}", layout::image().start);
        ensure!(booted().boot.load_pa.is_multiple_of(2 << 20), "load address {:#x}", booted().boot.load_pa);
        Ok(())
    }
);

kernel_test!(
    fn mmu_and_caches_are_on_and_ttbr0_is_off() {
        ensure!(SCTLR_EL1.is_set(SCTLR_EL1::M), "MMU off");
        ensure!(SCTLR_EL1.is_set(SCTLR_EL1::C) && SCTLR_EL1.is_set(SCTLR_EL1::I), "caches off");
        ensure!(TCR_EL1.is_set(TCR_EL1::EPD0), "TTBR0 walks still enabled");
        ensure!(crate::arch::mmu::translate(0x1000, false).is_err(), "a low address translates");
        Ok(())
    }
);

kernel_test!(
    fn vector_table_is_installed_and_aligned() {
        unsafe extern "C" {
            static exception_vectors: u8;
        }
        let vbar = VBAR_EL1.get();
        ensure_eq!(vbar, (&raw const exception_vectors) as u64);
        ensure_eq!(vbar % 2048, 0);
        Ok(())
    }
);

kernel_test!(
    fn a_fault_is_caught_and_decoded_by_the_probe() {
        let esr = match probe_read(0xffff_7000_dead_0000) {
            Ok(v) => return Err(alloc::format!("unmapped read returned {v:#x}")),
            Err(esr) => esr,
        };
        ensure_eq!((esr >> 26) & 0x3f, 0x25); // data abort, same EL
        let fsc = esr & 0x3f;
        ensure!((0x04..=0x07).contains(&fsc), "not a translation fault: FSC {fsc:#x}");
        // SAFETY: the Image's first word (its header) is mapped readable.
        let start = layout::image().start;
        // SAFETY: as above.
        let first = unsafe { (start as *const u64).read_volatile() };
        ensure_eq!(probe_read(start).ok(), Some(first));
        Ok(())
    }
);

kernel_test!(
    fn the_loaded_image_header_is_the_arm64_one() {
        let base = layout::image().start as *const u64;
        // SAFETY: the header is the first 64 bytes of text, mapped readable.
        let word = |i: usize| unsafe { base.add(i).read_volatile() };
        ensure_eq!(word(1), 0); // text_offset
        ensure_eq!(word(2), layout::image().end - layout::image().start); // image_size
        ensure_eq!(word(3), IMAGE_FLAGS);
        ensure_eq!(word(7) & 0xffff_ffff, 0x644d_5241); // "ARM\x64"
        ensure_eq!(word(0) as u32, MZ_NOP); // code0: "MZ", a harmless ccmp
        ensure_eq!((word(0) >> 32) as u32 >> 26, 0b000101); // code1 is a B instruction
        // res5: the PE header's offset, inside the first page, where "PE\0\0" and the arm64
        // machine type are.
        let pe = (word(7) >> 32) as usize;
        ensure!(pe >= 64 && pe.is_multiple_of(8) && pe < 4096, "PE header offset {pe:#x}");
        ensure_eq!(word(pe / 8) & 0xffff_ffff_ffff, 0xaa64_0000_4550);
        Ok(())
    }
);

kernel_test!(
    fn uefi_memory_map_replaced_the_device_tree_memory() {
        let b = booted();
        let Some(h) = &b.uefi else {
            // A raw-Image boot: the handover record is the linked one.
            ensure!(crate::firmware::efi_stub::handoff().is_none());
            return Ok(());
        };
        // RAM is the map's usable memory and the ACPI tables, nothing the firmware keeps.
        ensure!(h.memory.descriptors > 0);
        ensure!(h.memory.usable.total() > 0);
        let mut expected = h.memory.usable.clone();
        for &(s, e) in h.memory.acpi.ranges() {
            ensure!(expected.add(s, e).is_ok());
        }
        ensure_eq!(b.machine.memory.ranges(), expected.ranges());
        for r in b.usable.ranges() {
            ensure!(
                h.memory.usable.ranges().iter().any(|u| u.0 <= r.0 && r.1 <= u.1),
                "usable {r:x?} not in the map's usable memory"
            );
        }
        // The Image runs where the stub put it: 2 MiB aligned, inside the map's usable memory.
        ensure!(b.boot.load_pa.is_multiple_of(2 << 20));
        ensure!(h.memory.usable.contains(b.boot.load_pa));
        ensure_eq!(b.boot.fdt_pa, h.fdt);
        Ok(())
    }
);

kernel_test!(
    fn device_tree_gave_memory_console_and_psci() {
        let m = &booted().machine;
        ensure!(m.memory.total() > 0);
        ensure!(m.console.is_ok(), "{:?}", m.console.as_ref().err());
        // A board without PSCI (a Raspberry Pi 3: spin-table CPUs, no firmware calls) has no /psci.
        ensure!(
            m.psci.is_some() || m.fdt.find_node("/psci").is_none(),
            "a /psci node without a known conduit"
        );
        ensure!(!m.cpus.is_empty());
        ensure!(m.fdt.find_node("/chosen").is_some(), "the device tree is unreadable after the switch");
        ensure!(crate::arch::time::frequency() > 0, "CNTFRQ_EL0 is 0");
        Ok(())
    }
);

kernel_test!(
    fn symbols_name_kernel_functions() {
        let addr = kernel_main_address();
        let (name, offset) = crate::trap::kernel::symbol_at(addr).ok_or("no symbol for kernel_main")?;
        ensure_eq!(name, "kernel_main");
        ensure_eq!(offset, 0);
        Ok(())
    }
);

fn kernel_main_address() -> u64 {
    unsafe extern "C" {
        fn kernel_main();
    }
    kernel_main as *const () as u64
}

/// The ACPI tables through the kernel's linear map (ACPI reclaim memory is RAM the map covers).
struct LinearMap;

impl ::firmware::acpi::PhysMem for LinearMap {
    fn read(&self, pa: u64, len: usize) -> Option<&[u8]> {
        let m = &booted().machine.memory;
        let end = pa.checked_add(len as u64)?;
        if !m.ranges().iter().any(|&(s, e)| s <= pa && end <= e) {
            return None;
        }
        // SAFETY: [pa, pa + len) lies in one range of RAM, which the linear map covers (the
        // ACPI tables are reserved, never allocated, so nothing writes them).
        Some(unsafe { core::slice::from_raw_parts(layout::phys_to_linear(pa) as *const u8, len) })
    }
}

kernel_test!(
    fn a_machine_described_by_acpi_is_what_the_tables_say() {
        let b = booted();
        let Some(h) = b.uefi.as_ref().filter(|h| h.rsdp != 0) else { return Ok(()) };
        if b.machine.model.as_bytes() != ::firmware::acpi_dt::MODEL {
            return Ok(()); // the firmware gave a device tree too: it was used
        }
        // Read again, by the kernel, through its own map: the tree the stub made agrees.
        let p = ::firmware::acpi::Platform::read(&LinearMap, h.rsdp).map_err(|e| alloc::format!("{e:?}"))?;
        ensure_eq!(p.cpus().len(), b.machine.cpus.len());
        for (cpu, node) in p.cpus().iter().zip(&b.machine.cpus) {
            ensure_eq!(cpu.mpidr, node.mpidr);
        }
        let console = b.machine.console.as_ref().map_err(|e| e.clone())?;
        ensure_eq!(Some(console.pa), p.console.map(|c| c.base));
        ensure_eq!(b.machine.psci.is_some(), p.psci.is_some());
        ensure_eq!(b.machine.interrupt_controller.as_ref().map(|i| i.1), p.gicd.map(|g| g.0));
        Ok(())
    }
);

kernel_test!(
    fn kaslr_moved_the_image_by_what_it_reports() {
        use crate::boot::kaslr::{self, Kaslr};
        match kaslr::outcome() {
            Kaslr::Moved { offset, .. } => {
                ensure_eq!(kaslr::offset(), offset);
                ensure!(offset >= 1 << 30 && offset.is_multiple_of(2 << 20), "offset {offset:#x}");
            }
            other => ensure!(
                kaslr::offset() == 0,
                "{other}, but running {:#x} from the link address",
                kaslr::offset()
            ),
        }
        Ok(())
    }
);

kernel_test!(
    fn linear_map_offset_follows_linux_memstart_rule() {
        use crate::boot::kaslr::{
            self, Kaslr, LINEAR_ALIGN, LINEAR_REGION, linear_offset_for, linear_offset_for_seed,
        };
        // No room where the physical addresses fill the 47-bit region (QEMU's max), as on Linux.
        ensure_eq!(linear_offset_for(0xffff, 47), 0);
        ensure_eq!(linear_offset_for(0xffff, 48), 0);
        ensure_eq!(linear_offset_for(0xffff, 52), 0);
        // 40 bits (a Cortex-A53): from 0 to the top of the room, in whole steps.
        ensure_eq!(linear_offset_for(0, 40), 0);
        let top = linear_offset_for(0xffff, 40);
        // The largest seed falls short of the room's top by its steps / 2^16, rounded up.
        let steps = (LINEAR_REGION - (1 << 40)) / LINEAR_ALIGN;
        let short = LINEAR_ALIGN * ((steps >> 16) + 1);
        ensure!(
            top.is_multiple_of(LINEAR_ALIGN)
                && top + (1 << 40) <= LINEAR_REGION
                && top + (1 << 40) + short >= LINEAR_REGION,
            "top {top:#x}"
        );
        let mut seen = alloc::vec::Vec::new();
        for seed in 1..=64u64 {
            let o = linear_offset_for_seed(seed, 40);
            ensure!(o.is_multiple_of(LINEAR_ALIGN) && o + (1 << 40) <= LINEAR_REGION, "seed {seed}: {o:#x}");
            seen.push(o);
        }
        seen.sort_unstable();
        seen.dedup();
        ensure!(seen.len() >= 62, "{} distinct offsets of 64", seen.len());
        // The running kernel: what the seed gave for this CPU, or 0 without one.
        let offset = kaslr::linear_offset();
        ensure_eq!(crate::memory::layout::phys_to_linear(0), crate::memory::layout::LINEAR_BASE + offset);
        let pa_bits = kaslr::physical_address_bits();
        ensure!(
            offset.is_multiple_of(LINEAR_ALIGN) && offset + (1 << pa_bits) <= LINEAR_REGION.max(1 << pa_bits),
            "offset {offset:#x}, {pa_bits} bits"
        );
        match kaslr::outcome() {
            Kaslr::Moved { .. } | Kaslr::NoRoom => {
                ensure!(pa_bits < 47 || offset == 0, "{pa_bits}-bit CPU, offset {offset:#x}")
            }
            _ => ensure_eq!(offset, 0),
        }
        Ok(())
    }
);

kernel_test!(
    fn kaslr_offsets_are_aligned_in_range_and_differ_by_seed() {
        use crate::boot::kaslr::offset_for_seed;
        let mut seen = alloc::vec::Vec::new();
        for seed in 1..=64u64 {
            let o = offset_for_seed(seed);
            ensure!(
                ((1 << 30)..(1 << 30) + (32 << 40)).contains(&o) && o.is_multiple_of(2 << 20),
                "seed {seed}: {o:#x}"
            );
            ensure_eq!(offset_for_seed(seed), o);
            seen.push(o);
        }
        seen.sort_unstable();
        seen.dedup();
        ensure_eq!(seen.len(), 64);
        Ok(())
    }
);
