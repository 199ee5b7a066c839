//! Memory: the final kernel map (checked with the CPU's own `AT` translation), the frame allocator
//! and the heap.
use alloc::vec::Vec;

use mm::addr::{PAGE_SIZE, VirtAddr};

use crate::arch::exception::probe_read;
use crate::arch::mmu::{par_fault_status, translate};
use crate::memory::kernel_map;
use crate::memory::{frames, layout};
use crate::{booted, ensure, ensure_eq, kernel_test};

fn readable(va: u64) -> bool {
    translate(va, false).is_ok()
}
fn writable(va: u64) -> bool {
    translate(va, true).is_ok()
}

/// (executable at EL1, executable at EL0) from the kernel table's own descriptor.
fn exec_bits(va: u64) -> Result<(bool, bool), alloc::string::String> {
    let leaf = kernel_map::with_space(|space| space.query(VirtAddr(va)))
        .ok_or("no kernel space")?
        .ok_or_else(|| alloc::format!("{va:#x} not mapped"))?;
    Ok((!leaf.attrs.pxn(), !leaf.attrs.uxn()))
}

kernel_test!(
    fn kernel_map_text_is_read_execute() {
        let va = layout::image().start + PAGE_SIZE;
        ensure!(readable(va) && !writable(va), "text must be read-only");
        ensure_eq!(exec_bits(va)?, (true, false));
        Ok(())
    }
);

kernel_test!(
    fn kernel_map_rodata_is_read_only_never_executable() {
        let va = layout::image().rodata_start;
        ensure!(readable(va) && !writable(va), "rodata must be read-only");
        ensure_eq!(exec_bits(va)?, (false, false));
        Ok(())
    }
);

kernel_test!(
    fn writes_to_text_and_rodata_fault_writes_to_data_do_not() {
        use crate::arch::exception::probe_write;
        static mut SCRATCH: u64 = 0;
        for va in [layout::image().start + PAGE_SIZE, layout::image().rodata_start] {
            // SAFETY: the write must fault (that is the point); if it did not, the test fails.
            let esr =
                unsafe { probe_write(va, 0) }.err().ok_or_else(|| alloc::format!("wrote to {va:#x}"))?;
            let fsc = esr & 0x3f;
            ensure!((0x0d..=0x0f).contains(&fsc), "{va:#x}: not a permission fault ({fsc:#x})");
            ensure!(esr & (1 << 6) != 0, "the fault was not reported as a write");
        }
        let data = (&raw mut SCRATCH) as u64;
        // SAFETY: SCRATCH is a private static of this test.
        ensure!(unsafe { probe_write(data, 42) }.is_ok());
        // SAFETY: as above.
        ensure_eq!(unsafe { (&raw const SCRATCH).read_volatile() }, 42);
        Ok(())
    }
);

kernel_test!(
    fn kernel_map_data_is_read_write_never_executable() {
        let va = layout::image().data_start;
        ensure!(readable(va) && writable(va), "data must be read-write");
        ensure_eq!(exec_bits(va)?, (false, false));
        let stack = layout::image().boot_stack_top - 8;
        ensure!(writable(stack));
        Ok(())
    }
);

kernel_test!(
    fn kernel_map_stack_guard_pages_are_unmapped() {
        for guard in [layout::image().boot_stack_guard, layout::image().exception_stack_guard] {
            let par =
                translate(guard, false).err().ok_or_else(|| alloc::format!("guard {guard:#x} is mapped"))?;
            let fsc = par_fault_status(par);
            ensure!((0x04..=0x07).contains(&fsc), "guard {guard:#x}: not a translation fault ({fsc:#x})");
            ensure!(probe_read(guard).is_err());
            ensure!(readable(guard + PAGE_SIZE), "the stack above the guard is not mapped");
        }
        Ok(())
    }
);

kernel_test!(
    fn kernel_map_linear_map_covers_ram_but_not_the_image() {
        let b = booted();
        let (start, _) = b.usable.ranges()[0];
        let va = layout::phys_to_linear(start);
        ensure!(readable(va) && writable(va));
        ensure_eq!(translate(va, false).ok(), Some(start));
        ensure_eq!(exec_bits(va)?, (false, false));
        ensure!(!readable(layout::phys_to_linear(b.boot.load_pa)), "the Image has a linear alias");
        Ok(())
    }
);

kernel_test!(
    fn frames_come_from_usable_ram_and_all_return() {
        let b = booted();
        let (before, total) = (super::frames_in_use(), frames::usage().1);
        ensure!(total > 0);
        let mut taken = Vec::new();
        for _ in 0..256 {
            let pa = frames::alloc(1).ok_or("out of frames")?;
            ensure!(b.usable.contains(pa.0), "frame {pa:?} outside usable RAM");
            let va = layout::phys_to_linear(pa.0);
            // SAFETY: the frame is ours and the linear map shows it read-write.
            unsafe { (va as *mut u64).write_volatile(pa.0 ^ 0x5a5a) };
            taken.push(pa);
        }
        for pa in &taken {
            // SAFETY: as above.
            let v = unsafe { (layout::phys_to_linear(pa.0) as *const u64).read_volatile() };
            ensure_eq!(v, pa.0 ^ 0x5a5a);
        }
        let mut sorted: Vec<u64> = taken.iter().map(|p| p.0).collect();
        sorted.sort_unstable();
        sorted.dedup();
        ensure_eq!(sorted.len(), taken.len());
        for pa in taken {
            frames::free(pa, 1);
        }
        ensure_eq!(super::frames_in_use(), before);
        Ok(())
    }
);

kernel_test!(
    fn heap_serves_large_and_small_allocations() {
        let big: Vec<u8> = alloc::vec![0xa5; 256 * 1024];
        ensure!(big.iter().all(|&b| b == 0xa5));
        let mut small = Vec::new();
        for i in 0..1000u64 {
            small.push(alloc::boxed::Box::new(i));
        }
        ensure!(small.iter().enumerate().all(|(i, b)| **b == i as u64));
        Ok(())
    }
);

kernel_test!(
    fn zeroing_clears_exactly_its_range_by_blocks_and_otherwise() {
        use mm::user::UserFrames as _;
        let pa = frames::alloc(2).ok_or("no frames")?;
        let va = layout::phys_to_linear(pa.0) as usize;
        let bytes = 2 * PAGE_SIZE as usize;
        // SAFETY: two fresh frames owned by this test, through the linear map.
        let mem = unsafe { core::slice::from_raw_parts_mut(va as *mut u8, bytes) };
        // Whole blocks (DC ZVA where allowed: a frame four at a time, three blocks one at a
        // time, nothing), then an unaligned range (the write_bytes path).
        let (page, three) = (PAGE_SIZE as usize, 3 * 64);
        for (start, len) in [(page, page), (page, three), (0, 0), (100, 301)] {
            mem.fill(0xa5);
            // SAFETY: inside the two frames owned by this test.
            unsafe { crate::arch::aarch64::cache::zero(va + start, len) };
            let wrong = mem
                .iter()
                .enumerate()
                .find(|&(i, &b)| b != if (start..start + len).contains(&i) { 0 } else { 0xa5 });
            ensure!(wrong.is_none(), "zero({start}, {len}): byte {:?} wrong", wrong);
        }
        frames::free(pa, 2);
        // And what user memory gets: a frame dirtied, freed and allocated again reads zero.
        let mut uf = frames::UserFrames;
        let f = uf.alloc_zeroed().ok_or("no frame")?;
        // SAFETY: a frame this test owns, through the linear map.
        unsafe { core::ptr::write_bytes(layout::phys_to_linear(f.0) as *mut u8, 0x5a, PAGE_SIZE as usize) };
        uf.free(f);
        let g = uf.alloc_zeroed().ok_or("no frame")?;
        // SAFETY: as above.
        let page = unsafe {
            core::slice::from_raw_parts(layout::phys_to_linear(g.0) as *const u8, PAGE_SIZE as usize)
        };
        let dirty = page.iter().any(|&b| b != 0);
        uf.free(g);
        ensure!(!dirty, "a frame from alloc_zeroed held old bytes");
        Ok(())
    }
);
