//! In-kernel benchmarks, run with `bench` on the kernel command line (scripts/bench does, on
//! several CPU models in one run). They print guest times measured with the generic counter and
//! TLBI counts; nothing here asserts a time (a slow machine is not a failure).
use mm::addr::{BLOCK_2M, PAGE_SIZE, VirtAddr};
use mm::descriptor::Attributes;
use mm::paging::{Constraints, PageTable, VaRange};
use mm::space::{AddressSpace, Policy};
use mm::tlb::issue::Aarch64Tlb;
use mm::tlb::{FlushTarget, Reach, TlbIssuer};

use crate::arch::time::{counter, ticks_to_us};
use crate::cprintln;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::{frames, tlb};
use crate::process::exec::tiny_elf::{loop_program, mov};

const SVC: u32 = 0xd400_0001;

/// Runs every benchmark and prints one line per figure.
pub fn run() {
    let cpu = crate::arch::cpu::CpuFeatures::read();
    cprintln!(
        "bench: cpu {}, FEAT_TLBIRANGE {}",
        cpu.core_name(),
        if cpu.has_range_tlbi() { "yes" } else { "no" }
    );
    syscalls();
    promotion();
    gigabyte();
}

/// Guest microseconds per iteration of `body`, measured as the difference between `n` and 0
/// iterations of the same program (so loading and teardown cancel out).
fn per_iteration(prologue: &[u32], body: &[u32], n: u64) -> f64 {
    let time = |count| {
        let program = loop_program(prologue, body, count);
        let start = counter();
        let status = crate::process::run(&program, &["bench"]);
        (ticks_to_us(counter() - start), status)
    };
    let _ = time(1); // warm up (first run pays for QEMU's translation of the code paths)
    let (base, _) = time(1);
    let (full, status) = time(n);
    if status != Ok(0) {
        cprintln!("bench: a benchmark program failed: {:?}", status);
    }
    (full.saturating_sub(base)) as f64 / (n - 1) as f64
}

fn syscalls() {
    const N: u64 = 2000;
    // mmap(NULL, 4096, RW, PRIVATE|ANONYMOUS, -1, 0); munmap(x0, 4096)
    let mut body = alloc::vec::Vec::new();
    for (reg, value) in [(0, 0), (1, 4096), (2, 3), (3, 0x22), (4, u64::MAX), (5, 0), (8, 222)] {
        body.extend(mov(reg, value));
    }
    body.push(SVC);
    body.extend(mov(1, 4096));
    body.extend(mov(8, 215));
    body.push(SVC);
    let us = per_iteration(&[], &body, N);
    cprintln!("bench: mmap+munmap of one page: {:.2} us per pair (guest, {} pairs)", us, N);

    // Prologue: x19 = mmap(NULL, 64 KiB, RW, PRIVATE|ANONYMOUS|POPULATE); body: mprotect R, RW.
    let mut prologue = alloc::vec::Vec::new();
    for (reg, value) in [(0, 0), (1, 65536), (2, 3), (3, 0x8022), (4, u64::MAX), (5, 0), (8, 222)] {
        prologue.extend(mov(reg, value));
    }
    prologue.push(SVC);
    prologue.push(0xaa00_03f3); // mov x19, x0
    let mut body = alloc::vec::Vec::new();
    for prot in [1u64, 3] {
        body.push(0xaa13_03e0); // mov x0, x19
        body.extend(mov(1, 65536));
        body.extend(mov(2, prot));
        body.extend(mov(8, 226));
        body.push(SVC);
    }
    let us = per_iteration(&prologue, &body, N);
    cprintln!("bench: mprotect of 16 touched pages: {:.2} us per call (guest, {} calls)", us / 2.0, 2 * N);

    // SYS_MMAP_NEAR(target 1 GiB, 4096, radius 1 MiB, RW, PRIVATE|ANONYMOUS); munmap.
    let mut body = alloc::vec::Vec::new();
    for (reg, value) in [(0, 0x4000_0000), (1, 4096), (2, 1 << 20), (3, 3), (4, 0x22), (8, 1000)] {
        body.extend(mov(reg, value));
    }
    body.push(SVC);
    body.extend(mov(1, 4096));
    body.extend(mov(8, 215));
    body.push(SVC);
    let us = per_iteration(&[], &body, N);
    cprintln!("bench: SYS_MMAP_NEAR+munmap of one page: {:.2} us per pair (guest, {} pairs)", us, N);
}

type Space = AddressSpace<FrameTranslation, Aarch64Tlb>;

fn user_space(asid: u16) -> Option<Space> {
    let table = PageTable::new(FrameTranslation, VaRange::Lower).ok()?;
    let features = tlb::features();
    let target = FlushTarget::asid(asid, Reach::Broadcast);
    let mut space = AddressSpace::user(table, TlbIssuer::new(Aarch64Tlb, features.errata), features, target);
    space.set_policy(Policy { promote: false, fold: false, split_contiguous: false });
    Some(space)
}

fn promotion() {
    let Some(mut space) = user_space(11) else { return };
    let Some(block) = frames::alloc(512) else { return };
    let va = 0x0000_0080_0000_0000;
    for i in 0..512u64 {
        let _ = space.map(
            VirtAddr(va + i * PAGE_SIZE),
            mm::addr::PhysAddr(block.0 + i * PAGE_SIZE),
            PAGE_SIZE,
            Attributes::kernel_data(),
            Constraints::NO_CONTIGUOUS,
        );
    }
    let tlbis = space.tlb_stats().planned_tlbis();
    let start = counter();
    let promoted = space.promote(VirtAddr(va));
    let us = ticks_to_us(counter() - start);
    cprintln!(
        "bench: 2 MiB promotion: {:?}, {} TLBI instruction(s), {} us (guest)",
        promoted,
        space.tlb_stats().planned_tlbis() - tlbis,
        us
    );
    tlb::account(space.tlb_stats());
    let _ = space.destroy(|_| {});
    frames::free(block, 512);
}

/// Protect, then unmap, 1 GiB of touched pages (one call each, as one mprotect and one munmap
/// would): with range TLBI the plan stays a few instructions; without, it becomes one
/// whole-ASID flush (262144 pages is past the 511-page per-page limit).
fn gigabyte() {
    const SIZE: u64 = 1 << 30;
    let Some(mut space) = user_space(12) else { return };
    let va = 0x0000_0100_0000_0000;
    let mut blocks = alloc::vec::Vec::new();
    for i in 0..SIZE / BLOCK_2M {
        let Some(block) = frames::alloc(512) else {
            cprintln!("bench: 1 GiB protect/unmap: not enough memory (run with -m 2G)");
            break;
        };
        let _ = space.map(
            VirtAddr(va + i * BLOCK_2M),
            block,
            BLOCK_2M,
            Attributes::kernel_data(),
            Constraints::NO_BLOCKS.union(Constraints::NO_CONTIGUOUS),
        );
        blocks.push(block);
    }
    if blocks.len() as u64 == SIZE / BLOCK_2M {
        let before = *space.tlb_stats();
        let start = counter();
        let _ =
            space.protect_with(VirtAddr(va), SIZE, |a| a.with_permissions_of(Attributes::kernel_rodata()));
        let protect_us = ticks_to_us(counter() - start);
        let protect_tlbis = space.tlb_stats().since(&before).planned_tlbis();
        let before = *space.tlb_stats();
        let start = counter();
        let _ = space.unmap(VirtAddr(va), SIZE, |_| {});
        let unmap_us = ticks_to_us(counter() - start);
        let unmap_tlbis = space.tlb_stats().since(&before).planned_tlbis();
        cprintln!(
            "bench: protect 1 GiB of pages: {} us, {} TLBI instruction(s) (guest)",
            protect_us,
            protect_tlbis
        );
        cprintln!(
            "bench: unmap 1 GiB of pages: {} us, {} TLBI instruction(s) (guest)",
            unmap_us,
            unmap_tlbis
        );
    }
    tlb::account(space.tlb_stats());
    let _ = space.destroy(|_| {});
    for block in blocks {
        frames::free(block, 512);
    }
}
