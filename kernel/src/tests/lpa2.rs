//! The `lpa2` build's in-kernel tests: the CPU runs with the 52-bit layout (`TCR_EL1.DS`, a
//! 52-bit kernel half, the level −1 table with 4 KiB pages), and range TLBIs, whose `BaseADDR`
//! then counts 64 KiB units, invalidate exactly what the planner meant (stale reads, as in
//! `tlb.rs`), from a 64 KiB boundary and from pages off it.
use alloc::format;
use alloc::string::String;

use aarch64_cpu::asm::barrier;
use aarch64_cpu::registers::{Readable, TCR_EL1, TTBR1_EL1};
use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::{Attributes, Descriptor, DescriptorKind};
use mm::granule::Format;
use mm::paging::{Constraints, PageTable, Translation, VaRange, lpa2};
use mm::tlb::operand::RangeOperand;
use mm::tlb::{FlushTarget, OpKind};

use super::tlb::{Space, range_request, scenario};
use crate::arch::aarch64::translation::ttbr_table;
use crate::memory::kernel_map::{self, FrameTranslation};
use crate::memory::layout::phys_to_linear;
use crate::memory::{frames, tlb};
use crate::{ensure, ensure_eq, kernel_test};

kernel_test!(
    fn tcr_has_ds_and_a_52_bit_kernel_half() {
        let tcr = TCR_EL1.get();
        ensure!(tcr & lpa2::TCR_DS != 0, "TCR_EL1.DS is clear: {tcr:#x}");
        ensure_eq!((tcr >> 16) & 0x3f, lpa2::T1SZ_52, "T1SZ");
        ensure_eq!(tcr & 0x3f, lpa2::T0SZ, "T0SZ");
        ensure!((tcr >> 32) & 0b111 <= lpa2::TCR_IPS_52, "IPS {:#b}", (tcr >> 32) & 0b111);
        Ok(())
    }
);

kernel_test!(
    fn ttbr1_walks_from_the_build_start_level() {
        let ttbr1 = PhysAddr(ttbr_table(TTBR1_EL1.get()));
        let result = kernel_map::with_space(|space| {
            let root = space.table().root_pa();
            if !lpa2::LEVEL_MINUS_ONE {
                ensure_eq!(ttbr1, root, "TTBR1 is the 52-bit tree's root");
                return Ok(());
            }
            // TTBR1 names a level -1 table whose only entry is the kernel's tree.
            let table = space.table().translation().table_ptr(ttbr1).cast::<u64>().as_ptr();
            let top = lpa2::level_minus_one_index(VaRange::Upper.base());
            for i in 0..lpa2::LEVEL_MINUS_ONE_ENTRIES {
                // SAFETY: the level -1 table is a live kernel table page, read-only here.
                let d = Descriptor::from_bits(unsafe { table.add(i).read_volatile() });
                if i == top {
                    ensure_eq!(d.kind_in(Format::BUILD, -1), DescriptorKind::Table);
                    ensure_eq!(d.output_address_in(Format::BUILD, -1), root);
                } else {
                    ensure_eq!(d.bits(), 0, "level -1 entry {i}");
                }
            }
            Ok(())
        });
        result.ok_or("no kernel space")?
    }
);

kernel_test!(
    fn the_bottom_of_the_52_bit_kernel_half_translates() {
        // 2^64 - 2^52: unreachable with 48-bit VAs. With 4 KiB pages it is slot 0 of the level -1
        // table, given a tree of its own here; with 16 KiB pages the bottom of the kernel's tree.
        const LOW: u64 = 0u64.wrapping_sub(1 << 52);
        let offset = 0x1234_0000;
        let va = LOW + offset;
        ensure!(crate::arch::mmu::translate(va, false).is_err(), "{va:#x} translates before the map");
        let frame = frames::alloc(1).ok_or("out of frames")?;
        // SAFETY: a fresh frame, reached through the linear map.
        unsafe { (phys_to_linear(frame.0) as *mut u64).write_volatile(0x52b1) };
        let result = if lpa2::LEVEL_MINUS_ONE { second_slot(frame, offset) } else { in_the_tree(frame, va) };
        frames::free(frame, 1);
        result
    }
);

/// Gives slot 0 of the level -1 table a tree mapping `frame` at `offset`, reads it at the bottom
/// of the kernel half, then takes the slot away again.
fn second_slot(frame: PhysAddr, offset: u64) -> Result<(), String> {
    let va = 0u64.wrapping_sub(1 << 52) + offset;
    let mut pt = PageTable::new(FrameTranslation, VaRange::Upper).map_err(|e| format!("{e:?}"))?;
    let attrs = Attributes::kernel_data();
    let mapped = pt.map(
        VirtAddr(VaRange::Upper.base().0 + offset),
        frame,
        PAGE_SIZE,
        attrs,
        Constraints::NO_CONTIGUOUS,
    );
    let entry = lpa2::level_minus_one_entry(pt.root_pa()).ok_or("root beyond 52 bits")?;
    let ttbr1 = PhysAddr(ttbr_table(TTBR1_EL1.get()));
    let slot = kernel_map::with_space(|s| s.table().translation().table_ptr(ttbr1).cast::<u64>().as_ptr())
        .ok_or("no kernel space")?;
    let result = (|| {
        mapped.map_err(|e| format!("{e:?}"))?;
        // SAFETY: slot 0 of the live level -1 table is empty (checked by the translation fault
        // above) and the kernel never uses it; the new tree is complete before it is published.
        unsafe {
            barrier::dsb(barrier::ISHST);
            slot.write_volatile(entry.bits());
        }
        barrier::dsb(barrier::ISHST);
        barrier::isb(barrier::SY);
        ensure_eq!(crate::arch::mmu::translate(va, false), Ok(frame.0), "{va:#x} through slot 0");
        // SAFETY: mapped just above, normal memory readable at EL1.
        ensure_eq!(unsafe { (va as *const u64).read_volatile() }, 0x52b1);
        Ok(())
    })();
    // SAFETY: as above; the slot goes back to empty, then the whole TLB and walk cache forget it.
    unsafe { slot.write_volatile(0) };
    barrier::dsb(barrier::ISHST);
    tlb::flush_all(FlushTarget::GLOBAL);
    let after = crate::arch::mmu::translate(va, false);
    let (mut translation, record) = pt.destroy();
    record.release(&mut translation);
    result?;
    ensure!(after.is_err(), "{va:#x} still translates after the slot was cleared");
    Ok(())
}

/// Maps `frame` at `va` in the kernel's own (52-bit) tree, reads it, unmaps it.
fn in_the_tree(frame: PhysAddr, va: u64) -> Result<(), String> {
    let attrs = Attributes::kernel_data();
    kernel_map::with_space(|s| s.map(VirtAddr(va), frame, PAGE_SIZE, attrs, Constraints::NO_CONTIGUOUS))
        .ok_or("no kernel space")?
        .map_err(|e| format!("{e:?}"))?;
    let seen = crate::arch::mmu::translate(va, false);
    // SAFETY: mapped just above, normal memory readable at EL1.
    let value = if seen.is_ok() { unsafe { (va as *const u64).read_volatile() } } else { 0 };
    let _ = kernel_map::with_space(|s| s.unmap(VirtAddr(va), PAGE_SIZE, |_| {}));
    ensure_eq!(seen, Ok(frame.0), "{va:#x} in the 52-bit tree");
    ensure_eq!(value, 0x52b1);
    ensure!(crate::arch::mmu::translate(va, false).is_err(), "{va:#x} still translates after the unmap");
    Ok(())
}

/// Pages of a stale-read scenario that wants `n` with 4 KiB pages. QEMU's software TLB is
/// direct-mapped over 4 KiB slots (64 at its smallest, with an 8-entry victim TLB beside them) and
/// each test page fills one slot when read; 16 KiB pages take every fourth slot, so past 16 of
/// them (24 with the victim entries) they evict each other before the test looks: with 40 pages
/// the user-ASID scenario fails every attempt under QEMU 7.2 ("page 0 changed before any TLBI").
/// The pin page and the control page of `scenario` take two more of those 16 slots, and the
/// kernel's own accesses (its stack, the data it reads) land in them too. With 13 and 14 pages
/// the slots were full, and the user-ASID scenario failed all five attempts in two boots of six
/// of the 16 KiB LPA2 image on four CPUs ("page 4 changed before any TLBI"; QEMU's TLB is at its
/// smallest only after a spell of little use, which it measures in wall-clock time, so how often
/// depends on the host). With 9 and 10 pages four slots stay free (0 failures in 12 boots), and
/// a 64 KiB boundary being every fourth page, they still give range ops from and off it.
const fn stale_read_pages(n: usize, n_16k: usize) -> usize {
    if PAGE_SIZE == 4096 { n } else { n_16k }
}

kernel_test!(
    fn stale_read_range_in_64k_units_kernel() {
        // 21 pages (9 with 16 KiB pages): from a 64 KiB boundary (the first attempt) one range
        // op and a single for the odd last page; from the pages a retry moves to, singles up to
        // the boundary first.
        const N: usize = stale_read_pages(21, 9);
        scenario(
            || Ok(Space::Kernel),
            N,
            N,
            |s| tlb::flush(&range_request(s, N, false), true),
            range_ops_start_on_64k,
        )
    }
);

kernel_test!(
    fn stale_read_range_in_64k_units_user_asid() {
        const N: usize = stale_read_pages(40, 10);
        scenario(
            Space::user,
            N,
            N,
            |s| tlb::flush(&range_request(s, N, false), false),
            range_ops_start_on_64k,
        )
    }
);

/// With range ops available, the plan has one, and every range op starts on a 64 KiB boundary
/// (decoded from its operand the way the CPU does with `DS`).
fn range_ops_start_on_64k(plan: &mm::tlb::TlbPlan) -> Result<(), String> {
    if !tlb::features().range {
        return Ok(());
    }
    ensure!(plan.iter().any(|i| i.op.kind() == OpKind::Range), "plan {plan:?} has no range op");
    for i in plan.iter().filter(|i| i.op.kind() == OpKind::Range) {
        let start = RangeOperand::decode(i.operand).start_in(Format::BUILD);
        ensure!(start.0.is_multiple_of(64 << 10), "range op at {:#x} in {plan:?}", start.0);
    }
    Ok(())
}
