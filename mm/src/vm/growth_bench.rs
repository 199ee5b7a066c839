//! A host reproduction of the guest's growth table (userland mode `ops`): the area-map part of
//! mmap + munmap, of an mprotect pair and of near placement, with 10 and with many single-page
//! mappings held, as the guest holds them (alternating `PROT_READ` and `PROT_READ | PROT_WRITE`,
//! so that no two merge).
//!
//! Why it exists: the guest's instruction counts include the kernel's entry, the page tables and
//! the heap; this isolates the tree, deterministically, so a profiler (`valgrind --tool=callgrind`
//! on the test `growth_ops_run`, one held count per run through `GROWTH_HELD`) shows where the
//! growth with the number of mappings comes from.

use core::hint::black_box;

use super::flags::{MAP_ANONYMOUS, MAP_PRIVATE};
use super::prot::{PROT_READ, PROT_WRITE};
use super::{Layout, PAGE, Prot, VmMap, VmaFlags};

/// The operations of the growth table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrowthOp {
    /// mmap of one RW page, then munmap of it.
    MmapMunmap,
    /// mprotect of 16 pages to R, then back to RW.
    Mprotect16,
    /// mprotect of one held page to `PROT_NONE`, then back.
    MprotectHeld,
    /// `SYS_MMAP_NEAR` of one page near the held block, then munmap of it.
    NearMunmap,
}

/// The address space of the table: `held` single pages of alternating protection and the 16-page
/// region of [`GrowthOp::Mprotect16`] after the first 10 of them, all placed top-down by `mmap`,
/// as the guest program places them. Returns the space, the region and the middle held page.
///
/// # Panics
/// If a mapping fails (the layout has room for millions).
pub fn growth_space(held: usize) -> (VmMap, u64, u64) {
    growth_space_of(held, false)
}

/// [`growth_space`], with the program's own mappings first if `program`: its image (text and
/// data at 4 MiB), its code window around the text and its 8 MiB stack under the top, as the
/// kernel's loader maps them. They matter to the gap search: the stack's gap above
/// `mmap_base` is large but outside the search's domain, and the heap's below the held block
/// is where top-down placement lands.
///
/// # Panics
/// If a mapping fails.
pub fn growth_space_of(held: usize, program: bool) -> (VmMap, u64, u64) {
    let mut m = VmMap::new(Layout::linux(0x1000_0000));
    if program {
        let top = m.layout().task_size - PAGE;
        m.map_kernel(0x40_0000, 0x2_0000, Prot::RX, VmaFlags::IMAGE).expect("text");
        m.map_kernel(0x42_0000, 0x1_0000, Prot::RW, VmaFlags::IMAGE).expect("data");
        m.map_kernel(top - (8 << 20), 8 << 20, Prot::RW, VmaFlags::STACK).expect("stack");
        m.init_code_window(Some((0x40_0000, 0x42_0000))).expect("code window");
    }
    let flags = MAP_PRIVATE | MAP_ANONYMOUS;
    let mut middle = 0;
    let mut hold = |m: &mut VmMap, from: usize, to: usize| {
        for i in from..to {
            let prot = if i % 2 == 0 { PROT_READ } else { PROT_READ | PROT_WRITE };
            let a = m.mmap(0, PAGE, prot, flags, -1, 0).expect("held").addr;
            if i == held / 2 {
                middle = a;
            }
        }
    };
    // As the guest: 10 held, then the region, then the rest.
    hold(&mut m, 0, held.min(10));
    let region = m.mmap(0, 16 * PAGE, PROT_READ | PROT_WRITE, flags, -1, 0).expect("region").addr;
    hold(&mut m, held.min(10), held);
    (m, region, middle)
}

/// Runs `op` once on a space from [`growth_space`].
///
/// # Panics
/// If the operation fails.
pub fn growth_op(m: &mut VmMap, region: u64, middle: u64, op: GrowthOp) {
    let flags = MAP_PRIVATE | MAP_ANONYMOUS;
    match op {
        GrowthOp::MmapMunmap => {
            let a = m.mmap(0, PAGE, PROT_READ | PROT_WRITE, flags, -1, 0).expect("mmap").addr;
            m.munmap(black_box(a), PAGE).expect("munmap");
        }
        GrowthOp::Mprotect16 => {
            m.mprotect(region, 16 * PAGE, PROT_READ).expect("mprotect");
            m.mprotect(region, 16 * PAGE, PROT_READ | PROT_WRITE).expect("mprotect");
        }
        GrowthOp::MprotectHeld => {
            let old = m.find(middle).expect("held page").prot.bits();
            m.mprotect(middle, PAGE, 0).expect("mprotect");
            m.mprotect(middle, PAGE, old).expect("mprotect");
        }
        GrowthOp::NearMunmap => {
            let a = m.map_near(middle, PAGE, 1 << 30, PROT_READ | PROT_WRITE, flags).expect("near").addr;
            m.munmap(black_box(a), PAGE).expect("munmap");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: [GrowthOp; 4] =
        [GrowthOp::MmapMunmap, GrowthOp::Mprotect16, GrowthOp::MprotectHeld, GrowthOp::NearMunmap];

    #[test]
    fn the_growth_operations_leave_the_space_as_they_found_it() {
        for program in [false, true] {
            let (mut m, region, middle) = growth_space_of(101, program);
            // The region merges with the 10th held page above it (both RW), as in the guest.
            assert_eq!(m.map_count(), 101 + if program { 3 } else { 0 });
            let before: std::vec::Vec<_> = m.iter().copied().collect();
            for op in OPS {
                growth_op(&mut m, region, middle, op);
                m.check();
                let after: std::vec::Vec<_> = m.iter().copied().collect();
                assert_eq!(after, before, "{op:?}");
            }
        }
    }

    #[test]
    fn near_placement_teaches_the_bottom_up_hint_where_the_held_block_ends() {
        let (mut m, _, middle) = growth_space_of(3000, true);
        let flags = MAP_PRIVATE | MAP_ANONYMOUS;
        // The block of held pages ends under `mmap_base`; above it is free up to the stack's
        // guard gap.
        let block_top =
            m.iter().filter(|v| v.start > middle && v.end <= m.layout().mmap_base).map(|v| v.end).max();
        let first = m.map_near(middle, PAGE, 1 << 30, PROT_READ | PROT_WRITE, flags).unwrap().addr;
        // The search above the target crossed the upper half of the block: the hint says that
        // nothing of a page fits between the target and the block's top, and that the range
        // from there up is free. (The answer is the fit under the block, nearer by a page.)
        let top = block_top.unwrap();
        let up = m.tree().hints().up;
        // (It searched from the target itself: the lowest start whose far end is nearest.)
        assert_eq!(up.lo, middle, "{up:?}");
        assert_eq!((up.above, up.longest), (top, PAGE - 1), "{up:?}");
        assert!(up.gap_hi > top && m.tree().is_free(top, up.gap_hi), "{up:?}");
        assert!(first < middle);
        m.check();
        m.munmap(first, PAGE).unwrap();
        assert_eq!(m.tree().hints().up, up);
        m.check();
        // The next search above the same target starts at the block's top and takes its answer
        // from the free range there: the same placement as before.
        let again = m.map_near(middle, PAGE, 1 << 30, PROT_READ | PROT_WRITE, flags).unwrap().addr;
        assert_eq!(again, first);
        assert_eq!(m.tree().hints().up, up);
        m.check();
    }

    /// `GROWTH_HELD=50000 GROWTH_OP=MmapMunmap [GROWTH_PROGRAM=1] valgrind --tool=callgrind
    /// --toggle-collect='*growth_measured*' target/release/deps/mm-… --ignored growth_ops_run`
    #[test]
    #[ignore = "profiling harness: run under callgrind"]
    fn growth_ops_run() {
        let held = std::env::var("GROWTH_HELD").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
        let op = std::env::var("GROWTH_OP").unwrap_or_default();
        let op = OPS.into_iter().find(|o| std::format!("{o:?}") == op).unwrap_or(GrowthOp::MmapMunmap);
        let program = std::env::var("GROWTH_PROGRAM").is_ok_and(|v| v == "1");
        let (mut m, region, middle) = growth_space_of(held, program);
        for _ in 0..10 {
            growth_op(&mut m, region, middle, op);
        }
        #[inline(never)]
        fn growth_measured(m: &mut VmMap, region: u64, middle: u64, op: GrowthOp) {
            for _ in 0..1000 {
                growth_op(m, region, middle, op);
            }
        }
        growth_measured(&mut m, region, middle, op);
    }
}
