//! The kernel map after boot is a live address space: changes that need break-before-make (a
//! memory-type change, a block split) go through it with one gathered flush, the raw table
//! refuses them, and the error path of the CPU-stack mapping flushes before it frees.
//!
//! The addresses are in the test window, away from the pages the TLB tests use (`tests/tlb.rs`:
//! the first 2 MiB, `tests/shootdown.rs`: the second), so breaking them cannot fault under the
//! code that does it.
use mm::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::{Attributes, MemoryType};
use mm::paging::{Constraints, MapError};
use mm::space::Policy;
use mm::tlb::FlushTarget;

use crate::arch::mmu::{memory_attribute, translate};
use crate::memory::kernel_map::{self, KernelSpace};
use crate::memory::layout::{STACK_AREA, TEST_WINDOW};
use crate::memory::{frames, tlb};
use crate::{ensure, ensure_eq, kernel_test};

use super::block_frames::{BLOCK_PAGES, BlockFrames};

/// A page the memory-type test maps as device memory.
const DEVICE_VA: u64 = TEST_WINDOW + 0x60_0000;
/// A block-aligned range the split test maps as one level-2 block (2 MiB, 32 MiB or 512 MiB),
/// 8 MiB or one block into the window, clear of the pages the other tests use there.
const BLOCK_VA: u64 = TEST_WINDOW + if BLOCK_2M > 0x80_0000 { BLOCK_2M } else { 0x80_0000 };
/// Where the alias test maps a block of RAM again: the block after [`BLOCK_VA`]'s.
const ALIAS_VA: u64 = BLOCK_VA + BLOCK_2M;

/// MAIR_EL1 bytes (mm::descriptor::MAIR_EL1_VALUE) as PAR_EL1.ATTR reports them.
const MAIR_DEVICE_NGNRE: u8 = 0x04;
const MAIR_DEVICE_NGNRNE: u8 = 0x00;

fn space<R>(f: impl FnOnce(&mut KernelSpace) -> R) -> Result<R, alloc::string::String> {
    kernel_map::with_space(f).ok_or_else(|| "no kernel space".into())
}

fn err(e: MapError) -> alloc::string::String {
    alloc::format!("{e:?}")
}

/// Runs `change` on the kernel space and checks that it split exactly one block with one
/// gathered flush, planned once: what break-before-make through the live space costs.
fn one_demotion_one_flush_one_plan(
    change: impl FnOnce(&mut KernelSpace) -> Result<(), MapError>,
) -> Result<(), alloc::string::String> {
    let tlb_before = tlb::stats();
    let (before, after, changed) = space(|s| {
        let before = s.stats();
        let changed = change(s);
        (before, s.stats(), changed)
    })?;
    changed.map_err(err)?;
    ensure_eq!(after.demotions - before.demotions, 1);
    ensure_eq!(after.flushes - before.flushes, 1);
    ensure_eq!(tlb::stats().since(&tlb_before).plans, 1);
    Ok(())
}

kernel_test!(
    fn kernel_map_is_a_live_global_space() {
        let (live, user, target, policy) =
            space(|s| (s.table().is_live(), s.is_user(), *s.targets(), s.policy()))?;
        ensure!(live, "the kernel table is not marked live: break-before-make is not enforced");
        ensure!(!user, "the kernel space makes its entries non-global");
        ensure_eq!(target, FlushTarget::GLOBAL);
        ensure_eq!(policy, Policy::KERNEL);
        Ok(())
    }
);

kernel_test!(
    fn kernel_map_memory_type_change_goes_through_the_live_space() {
        let frame = frames::alloc(1).ok_or("no frame")?;
        let result = (|| {
            let va = VirtAddr(DEVICE_VA);
            space(|s| s.map(va, frame, PAGE_SIZE, Attributes::device(), Constraints::NONE))?.map_err(err)?;
            ensure_eq!(memory_attribute(DEVICE_VA), Some(MAIR_DEVICE_NGNRE));
            let tlb_before = tlb::stats();
            let (refused, flushes, changed) = space(|s| {
                // SAFETY: the engine refuses the change (checked below), so nothing changes and
                // there is nothing to invalidate.
                let raw =
                    unsafe { s.table_mut_unflushed() }.protect(va, PAGE_SIZE, Attributes::device_ngnrne());
                let before = s.stats().flushes;
                let changed = s.set_memory_type(va, PAGE_SIZE, MemoryType::DeviceNGnRnE);
                (
                    matches!(raw, Err(MapError::BreakBeforeMakeRequired(_))),
                    s.stats().flushes - before,
                    changed,
                )
            })?;
            ensure!(refused, "the raw kernel table changed a memory type in place");
            changed.map_err(err)?;
            ensure_eq!(flushes, 1);
            let issued = tlb::stats().since(&tlb_before);
            ensure_eq!(issued.plans, 1);
            ensure!(issued.planned_tlbis() >= 1, "no TLBI between break and make");
            ensure_eq!(memory_attribute(DEVICE_VA), Some(MAIR_DEVICE_NGNRNE));
            Ok(())
        })();
        let _ = space(|s| s.unmap(VirtAddr(DEVICE_VA), PAGE_SIZE, |_| {}));
        frames::free(frame, 1);
        result
    }
);

// With 64 KiB pages a level-2 block is 512 MiB, more free frames than a test machine has: there
// the block is RAM the test shares with the kernel, and it writes only the frames it owns
// (`block_frames`).
kernel_test!(
    fn kernel_map_block_split_goes_through_the_live_space() {
        let block = BlockFrames::alloc()?;
        let pa = block.base;
        let result = (|| {
            let va = VirtAddr(BLOCK_VA);
            let data = Attributes::kernel_data();
            space(|s| s.map(va, pa, BLOCK_2M, data, Constraints::NONE))?.map_err(err)?;
            ensure_eq!(space(|s| s.query(va).map(|l| l.level))?, Some(2));
            for &i in &block.owned {
                // SAFETY: the block maps the test's own frame of page `i`, read-write.
                unsafe { ((BLOCK_VA + i * PAGE_SIZE) as *mut u64).write_volatile(0x5917_0000 + i) };
            }
            let one = va.wrapping_add(PAGE_SIZE);
            one_demotion_one_flush_one_plan(|s| s.protect(one, PAGE_SIZE, Attributes::kernel_rodata()))?;
            let leaf = space(|s| s.query(one))?.ok_or("the split lost the page")?;
            ensure_eq!((leaf.level, leaf.attrs), (3, Attributes::kernel_rodata()));
            ensure!(translate(one.0, true).is_err(), "the read-only page is writable");
            ensure!(translate(BLOCK_VA, true).is_ok(), "the split lost the rest of the block");
            ensure_eq!(translate(BLOCK_VA + 5 * PAGE_SIZE, false).ok(), Some(pa.0 + 5 * PAGE_SIZE));
            for i in 0..BLOCK_PAGES {
                ensure_eq!(translate(BLOCK_VA + i * PAGE_SIZE, false).ok(), Some(block.frame(i)), "page {i}");
            }
            for &i in &block.owned {
                // SAFETY: every page is still mapped (readable) to its frame, this one the test's.
                let v = unsafe { ((BLOCK_VA + i * PAGE_SIZE) as *const u64).read_volatile() };
                ensure_eq!(v, 0x5917_0000 + i);
            }
            ensure!(!block.owned.is_empty(), "no page of the block was written");
            Ok(())
        })();
        let _ = space(|s| s.unmap(VirtAddr(BLOCK_VA), BLOCK_2M, |_| {}));
        block.free();
        result
    }
);

kernel_test!(
    fn kernel_map_block_split_of_a_read_only_alias_of_ram() {
        // A block-aligned range of RAM (any granule: the first of the machine's memory, which
        // QEMU virt starts at 1 GiB), mapped again read-only as one level-2 block; unmapping one
        // page splits it through the live space, and every other page still translates to its
        // frame and reads what the linear map reads there.
        let memory = crate::booted().machine.memory.ranges();
        let Some(base) = memory.iter().find_map(|&(start, end)| {
            let base = start.next_multiple_of(BLOCK_2M);
            (base + BLOCK_2M <= end).then_some(base)
        }) else {
            return Err(alloc::format!("no {BLOCK_2M:#x}-aligned block of RAM in {memory:x?}"));
        };
        let va = VirtAddr(ALIAS_VA);
        space(|s| s.map(va, PhysAddr(base), BLOCK_2M, Attributes::kernel_rodata(), Constraints::NONE))?
            .map_err(err)?;
        let result = (|| {
            ensure_eq!(space(|s| s.query(va).map(|l| (l.level, l.size)))?, Some((2, BLOCK_2M)));
            let hole = va.wrapping_add(BLOCK_2M / 2 + PAGE_SIZE);
            one_demotion_one_flush_one_plan(|s| s.unmap(hole, PAGE_SIZE, |_| {}))?;
            ensure!(translate(hole.0, false).is_err(), "the unmapped page still translates");
            ensure_eq!(space(|s| s.query(hole.wrapping_add(PAGE_SIZE)).map(|l| l.level))?, Some(3));
            for i in 0..BLOCK_PAGES {
                let at = ALIAS_VA + i * PAGE_SIZE;
                if at == hole.0 {
                    continue;
                }
                let pa = base + i * PAGE_SIZE;
                ensure_eq!(translate(at, false).ok(), Some(pa), "page {i}");
                ensure!(translate(at, true).is_err(), "page {i} of the alias is writable");
                // The linear map leaves the Image's frames out; elsewhere both views agree.
                let linear = crate::memory::layout::phys_to_linear(pa);
                if translate(linear, false).is_ok() {
                    // A live kernel page may change between two reads (another CPU, an
                    // interrupt): a wrong frame differs every time, a live one agrees once.
                    let agree = (0..3).any(|_| {
                        // SAFETY: both addresses are mapped readable (checked), normal memory.
                        unsafe {
                            (at as *const u64).read_volatile() == (linear as *const u64).read_volatile()
                        }
                    });
                    ensure!(agree, "page {i}: the alias and the linear map read different words");
                }
            }
            Ok(())
        })();
        let _ = space(|s| s.unmap(va, BLOCK_2M, |_| {}));
        result
    }
);

kernel_test!(
    fn cpu_stack_rollback_flushes_before_it_frees() {
        // The last slot: no CPU of the QEMU matrix (at most 4) uses it.
        let cpu = crate::cpu::MAX_CPUS - 1;
        let stack = STACK_AREA + cpu as u64 * crate::cpu::STACK_SLOT + PAGE_SIZE;
        ensure!(space(|s| s.query(VirtAddr(stack)).is_none())?, "slot {cpu} is in use");
        let frames_before = super::frames_in_use();
        let flushes_before = space(|s| s.stats().flushes)?;
        let tlb_before = tlb::stats();
        let mut calls = 0;
        // The kernel stack gets its frames, the exception stack does not.
        let mut alloc = |pages: usize| -> Option<PhysAddr> {
            calls += 1;
            if calls == 1 { frames::alloc(pages) } else { None }
        };
        let result = kernel_map::map_stacks(cpu, &mut alloc);
        ensure!(matches!(result, Err(MapError::OutOfMemory)), "map_stacks: {:?}", result.err());
        ensure_eq!(calls, 2);
        ensure!(space(|s| s.query(VirtAddr(stack)).is_none())?, "the kernel stack stayed mapped");
        ensure!(translate(stack, false).is_err());
        ensure_eq!(space(|s| s.stats().flushes)? - flushes_before, 1);
        let issued = tlb::stats().since(&tlb_before);
        ensure_eq!(issued.plans, 1);
        ensure!(issued.planned_tlbis() >= 1, "the rollback freed mapped frames without a TLBI");
        ensure_eq!(super::frames_in_use(), frames_before, "stack frames or emptied tables not freed");
        Ok(())
    }
);
