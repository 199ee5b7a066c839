//! Resource exhaustion: no program can panic the kernel by asking for too much (threads,
//! mappings, memory, address space), and the kernel heap grows from frames up to its ceiling and
//! no further.
use alloc::vec::Vec;

use crate::memory::heap;
use crate::process;
use crate::sched;
use crate::{ensure, ensure_eq, kernel_test};

kernel_test!(
    fn floods_of_threads_and_mappings_end_in_eagain_and_enomem_and_every_frame_comes_back() {
        // The userland `limits` mode: threads until EAGAIN, mappings until ENOMEM, a 1 TiB
        // mapping, RLIMIT_AS; it exits non-zero if any answer was not Linux's.
        let program = crate::builtin_program();
        if program.is_empty() {
            return Err(alloc::string::String::from("no built-in userland (build through scripts/)"));
        }
        let before = super::frames_in_use();
        let live = sched::live_threads();
        let status = process::run(program, &["userland", "limits"])?;
        ensure_eq!(status, 0, "the limits mode failed (its report is above)");
        ensure_eq!(sched::live_threads(), live, "threads left behind");
        ensure_eq!(super::frames_in_use(), before, "frames leaked");
        Ok(())
    }
);

kernel_test!(
    fn the_heap_grows_from_frames_to_its_ceiling_then_refuses_and_gives_chunks_back() {
        // The ceiling is lowered for the test to 16 MiB above what the heap holds now, so the
        // test costs the same on every machine (the floods above meet the real one on 128 MiB).
        const BLOCK: usize = 1 << 20;
        let start = heap::usage();
        ensure!(start.ceiling > 0, "a ceiling is set");
        let grown_before = start.grown_frames;
        heap::set_ceiling(start.size - heap::BOOTSTRAP_SIZE + 16 * BLOCK);
        // Room for the list itself first: nothing below may allocate except the blocks.
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let filled = blocks.try_reserve_exact(64).map_err(|_| "no room for the list").map(|()| {
            loop {
                let mut b = Vec::new();
                if blocks.len() == blocks.capacity() || b.try_reserve_exact(BLOCK).is_err() {
                    break;
                }
                blocks.push(b);
            }
            heap::usage()
        });
        heap::set_ceiling(start.ceiling);
        let full = filled?;
        crate::cprintln!(
            "    heap full: {} blocks of 1 MiB, {} KiB in {} chunks",
            blocks.len(),
            full.size >> 10,
            full.chunks
        );
        ensure!(full.size > start.size, "the heap grew");
        ensure!(full.size <= start.size + 16 * BLOCK, "and stopped at its ceiling");
        ensure!(blocks.len() >= 8, "most of the 16 MiB could be had");
        // Refused, not panicked: the last request got an error; freeing gives the chunks back.
        drop(blocks);
        let after = heap::usage();
        ensure!(after.grown_frames <= grown_before + 256, "grown chunks went back to the frame allocator");
        let small = alloc::boxed::Box::new([0u8; 64]);
        ensure!(small.iter().all(|&b| b == 0));
        Ok(())
    }
);

kernel_test!(
    fn fallible_arc_hands_its_reserved_block_to_arc_new() {
        // `memory::fallible::arc` allocates the block `Arc::new` will ask for first; if the
        // layout it computes for `ArcInner` ever differs from `alloc`'s, `Arc::new` would take
        // memory infallibly again, which the miss counter shows.
        use crate::memory::fallible;
        let misses = fallible::arc_misses();
        let small = fallible::arc(7u8).map_err(|_| "no heap for an Arc<u8>")?;
        let large = fallible::arc([3u64; 100]).map_err(|_| "no heap for an Arc<[u64; 100]>")?;
        let odd = fallible::arc((1u16, [9u8; 3], 5u128)).map_err(|_| "no heap for an Arc of a tuple")?;
        ensure_eq!((*small, large[99], odd.2), (7, 3, 5));
        ensure_eq!(fallible::arc_misses(), misses, "Arc::new asked for another layout");
        Ok(())
    }
);
