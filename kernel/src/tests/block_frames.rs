//! The output range of a level-2 block for the tests that map one, write through it and read it
//! back (`kernel_map`'s block split, `promotion`), and which of its pages they may touch.
//!
//! Why it is built so: with 4 KiB and 16 KiB pages the block (2 MiB, 32 MiB) is a fresh aligned
//! run of free frames, and the tests write and read every page of it. With 64 KiB pages a block
//! is 512 MiB, more free contiguous memory than a test machine has (QEMU's `-m 512M` is all of
//! it). There the block is the aligned block of RAM that holds a few frames the test allocates
//! one at a time: the test writes and reads those pages only, and the others, which belong to the
//! rest of the kernel, are address space only: mapped, and checked to translate to their frame
//! (`AT`), never read or written. The tables are real either way, from the frame allocator.
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use mm::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr};

use crate::memory::frames;

/// The pages of one level-2 block: 512, 2048 or 8192.
pub const BLOCK_PAGES: u64 = BLOCK_2M / PAGE_SIZE;
/// Whether the block is RAM shared with the rest of the kernel (64 KiB pages) rather than
/// frames of the test's own.
const SHARED_RAM: bool = cfg!(feature = "granule-64k");
/// The frames a test allocates one at a time when the block is shared RAM: the pages it writes
/// and reads back.
const OWNED_FRAMES: usize = 8;

/// A level-2 block of physical memory and the pages of it a test owns.
pub struct BlockFrames {
    /// The block's first frame, aligned to [`BLOCK_2M`].
    pub base: PhysAddr,
    /// The pages (indices from `base`, ascending) the test owns: it may write and read them.
    /// Every page with 4 KiB and 16 KiB pages.
    pub owned: Vec<u64>,
    /// What goes back to the frame allocator: (first frame, count).
    allocated: Vec<(PhysAddr, usize)>,
}

impl BlockFrames {
    /// A block for one test; give it back with [`BlockFrames::free`].
    pub fn alloc() -> Result<Self, String> {
        if !SHARED_RAM {
            let base = frames::alloc(BLOCK_PAGES as usize).ok_or("no level-2 block of frames")?;
            let block = Self {
                base,
                owned: (0..BLOCK_PAGES).collect(),
                allocated: vec![(base, BLOCK_PAGES as usize)],
            };
            if !base.is_aligned(BLOCK_2M) {
                block.free();
                return Err(format!("the buddy allocator gave a misaligned block: {base:?}"));
            }
            return Ok(block);
        }
        // Else frames one at a time until OWNED_FRAMES of them lie in one block that is all RAM
        // (the allocator may start in a block a firmware hole cuts, as edk2's reserved ranges do).
        let memory = crate::booted().machine.memory.ranges();
        let all_ram =
            |base: u64| memory.iter().any(|&(start, stop)| start <= base && base + BLOCK_2M <= stop);
        // A whole free block first, when the machine has one (2 GiB under edk2 has).
        if let Some(base) = frames::alloc(BLOCK_PAGES as usize) {
            if base.is_aligned(BLOCK_2M) && all_ram(base.0) {
                let owned = (0..OWNED_FRAMES as u64).collect();
                return Ok(Self { base, owned, allocated: vec![(base, BLOCK_PAGES as usize)] });
            }
            frames::free(base, BLOCK_PAGES as usize);
        }
        let mut allocated: Vec<(PhysAddr, usize)> = Vec::new();
        let mut chosen = None;
        while chosen.is_none() && allocated.len() < 4096 {
            let Some(pa) = frames::alloc(1) else { break };
            allocated.push((pa, 1));
            let base = pa.align_down(BLOCK_2M);
            let here = allocated.iter().filter(|(f, _)| f.align_down(BLOCK_2M) == base).count();
            if here >= OWNED_FRAMES && all_ram(base.0) {
                chosen = Some(base);
            }
        }
        let Some(base) = chosen else {
            let had = allocated.len();
            for (pa, count) in allocated {
                frames::free(pa, count);
            }
            return Err(format!("no block of RAM holds {OWNED_FRAMES} of {had} frames: {memory:x?}"));
        };
        let end = base.0 + BLOCK_2M;
        let owned = allocated.iter().filter(|(pa, _)| (base.0..end).contains(&pa.0));
        let mut owned: Vec<u64> = owned.map(|(pa, _)| (pa.0 - base.0) / PAGE_SIZE).collect();
        owned.sort_unstable();
        let block = Self { base, owned, allocated };
        Ok(block)
    }

    /// The frame of page `i` of the block.
    pub fn frame(&self, i: u64) -> u64 {
        self.base.0 + i * PAGE_SIZE
    }

    /// Gives the frames back.
    pub fn free(self) {
        for (pa, count) in self.allocated {
            frames::free(pa, count);
        }
    }
}
