//! Superpage promotion under QEMU: a table of pages of a live TTBR0 address space (512 pages with
//! the 4 KiB granule, 2048 with 16 KiB, 8192 with 64 KiB) becomes one level-2 block (2 MiB,
//! 32 MiB, 512 MiB) with one TLBI (where a page-by-page loop issues one a page), every page
//! still translates to its frame and every page the test owns reads what it held (every page but
//! with 64 KiB pages, whose block is RAM shared with the kernel: `block_frames`). (The test name
//! keeps the 4 KiB numbers.)
use aarch64_cpu::registers::{ReadWriteable, TCR_EL1, TTBR0_EL1, Writeable};
use mm::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::Attributes;
use mm::paging::{Constraints, PageTable, VaRange};
use mm::space::{AddressSpace, Policy};
use mm::tlb::issue::Aarch64Tlb;
use mm::tlb::{FlushTarget, Reach, TlbIssuer};

use crate::arch::mmu::translate;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::layout::phys_to_linear;
use crate::memory::tlb;
use crate::{ensure, ensure_eq, kernel_test};

use super::block_frames::{BLOCK_PAGES as PAGES, BlockFrames};

const ASID: u16 = 9;
const VA: u64 = 0x0000_0080_0000_0000;

fn read(va: u64) -> u64 {
    // SAFETY: the test reads only the pages it owns in the range it mapped (EL1-accessible
    // normal memory).
    unsafe { (va as *const u64).read_volatile() }
}

kernel_test!(
    fn promoting_512_pages_to_a_2m_block_takes_one_tlbi_and_keeps_the_data() {
        let frames_before = super::frames_in_use();
        let block = BlockFrames::alloc()?;
        for &i in &block.owned {
            // SAFETY: the test's own frame; reached through the linear map.
            unsafe { (phys_to_linear(block.frame(i)) as *mut u64).write_volatile(0x5000 + i) };
        }
        let table = PageTable::new(FrameTranslation, VaRange::Lower).map_err(|e| alloc::format!("{e:?}"))?;
        let features = tlb::features();
        let target = FlushTarget::asid(ASID, Reach::Broadcast);
        let mut space =
            AddressSpace::user(table, TlbIssuer::new(Aarch64Tlb, features.errata), features, target);
        space.set_policy(Policy { promote: false, fold: false, split_contiguous: false });
        TTBR0_EL1.set(crate::arch::aarch64::translation::ttbr(space.table().root_pa().0, ASID));
        TCR_EL1.modify(TCR_EL1::EPD0::EnableTTBR0Walks);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        let result = (|| {
            for i in 0..PAGES {
                let (va, pa) = (VA + i * PAGE_SIZE, PhysAddr(block.frame(i)));
                space
                    .map(VirtAddr(va), pa, PAGE_SIZE, Attributes::kernel_data(), Constraints::NO_CONTIGUOUS)
                    .map_err(|e| alloc::format!("map: {e:?}"))?;
            }
            for &i in &block.owned {
                ensure_eq!(read(VA + i * PAGE_SIZE), 0x5000 + i, "before promotion");
            }
            ensure_eq!(space.query(VirtAddr(VA)).map(|l| l.level), Some(3));
            let tlbis = space.tlb_stats().planned_tlbis();
            let promoted = space.promote(VirtAddr(VA)).map_err(|e| alloc::format!("promote: {e:?}"))?;
            ensure!(promoted, "promote declined a full, contiguous, uniform block range");
            ensure_eq!(space.tlb_stats().planned_tlbis() - tlbis, 1, "TLBI instructions for one promotion");
            ensure_eq!(space.stats().promotions, 1);
            ensure_eq!(space.query(VirtAddr(VA)).map(|l| (l.level, l.size)), Some((2, BLOCK_2M)));
            for i in 0..PAGES {
                ensure_eq!(translate(VA + i * PAGE_SIZE, false).ok(), Some(block.frame(i)), "page {i}");
            }
            for &i in &block.owned {
                ensure_eq!(read(VA + i * PAGE_SIZE), 0x5000 + i, "after promotion");
            }
            ensure!(!block.owned.is_empty(), "no page of the block was written");
            Ok(())
        })();
        TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
        TTBR0_EL1.set(0);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        tlb::flush_all(target);
        tlb::account(space.tlb_stats());
        let (mut translation, _, _) = space.destroy(|_| {});
        let _ = &mut translation;
        block.free();
        ensure_eq!(super::frames_in_use(), frames_before, "frames leaked");
        result
    }
);
