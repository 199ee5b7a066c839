//! The model runs: each configuration runs a share of `MM_MODEL_OPS` operations (default
//! 100 000); `MM_MODEL_SEED` replaces the seeds (a failure prints the seed and step).

use std::println;
use std::string::String;

use crate::tlb::mutation::{self, Mutation};

use super::driver::{CacheBug, Config, Driver, Report};

fn total_ops() -> u64 {
    std::env::var("MM_MODEL_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

fn seed(default: u64) -> u64 {
    std::env::var("MM_MODEL_SEED")
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(default)
}

fn run(cfg: Config) -> Report {
    let start = std::time::Instant::now();
    let report = match Driver::new(cfg).run() {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let secs = start.elapsed().as_secs_f64();
    println!("{cfg:?}: {report:?}, {secs:.2} s, {:.0} ops/s", report.steps as f64 / secs);
    report
}

fn config(cpus: usize, asid_bits: u32, slots: usize, range: bool, share: u64, s: u64) -> Config {
    Config {
        cpus,
        asid_bits,
        slots,
        range,
        ops: total_ops() * share / 100,
        seed: seed(s),
        exit_percent: 2,
        sibling_switches: true,
        decided_before: false,
        guard_percent: 0,
        file_percent: 0,
        move_percent: 0,
        cache_bug: None,
    }
}

/// What a run is for and did not do: rollovers, promotions, folds, local and broadcast flushes,
/// switches between operations and in the middle of them, forks and copy-on-write, memfd
/// mappings, the zero frame.
fn gaps(r: &Report) -> std::vec::Vec<&'static str> {
    let m = &r.machine;
    [
        (r.rollovers > 0, "an ASID rollover"),
        (r.user.promotions > 0, "a promotion"),
        (r.user.folds > 0, "a fold"),
        (m.local_tlbis > 0 && m.tlbis > m.local_tlbis, "local and broadcast TLBIs"),
        (m.rollover_flushes > 0 && r.exits > 0, "a rollover flush and an exit"),
        (m.mid_op_switches > 0 && m.switches > m.mid_op_switches, "switches between and inside operations"),
        (
            r.forks > 0 && r.user.cow_copies > 0 && r.user.cow_reuses > 0,
            "a fork, a copy and a reuse on write",
        ),
        (r.object_maps > 0 && r.truncations > 0, "a memfd mapping and a truncation"),
        (r.user.zero_faults > 0, "a read fault mapping the shared zero frame"),
        (r.user.zero_large_faults > 0, "a read fault mapping a zero block or run"),
    ]
    .into_iter()
    .filter_map(|(done, what)| (!done).then_some(what))
    .collect()
}

/// Runs beyond the first that [`run_covered`] may add.
const MORE_COVER_RUNS: u64 = 3;

/// Runs `cfg`, then, while something the runs are for has happened in none of them yet
/// ([`gaps`]), the same configuration from the next seeds, up to [`MORE_COVER_RUNS`] more: every
/// run must pass the model's checks, and together they must cover everything. Returns the first
/// run's report. (One seed cannot be relied on to cover a rare event, a 32 MiB promotion with
/// 16 KiB pages above all: the model draws from its random stream on every table access, so a
/// change to how often an operation reads the tables gives every seed another run; the seed
/// notes below record how single seeds kept losing that.)
fn run_covered(cfg: Config) -> Report {
    let first = run(cfg);
    let mut missing = gaps(&first);
    let mut more = 0;
    while !missing.is_empty() && more < MORE_COVER_RUNS {
        more += 1;
        let next = gaps(&run(Config { seed: cfg.seed + more, ..cfg }));
        missing.retain(|g| next.contains(g));
    }
    assert!(missing.is_empty(), "not covered in {} runs from seed {:#x}: {missing:?}", more + 1, cfg.seed);
    first
}

/// Seed 0x5eed_0042: with the shared zero frame, 0x5eed_0001's run made no promotion with 16 KiB
/// pages and LPA2, nor, once a move gathered its extents in the gate, 0x5eed_0011's with 16 KiB
/// pages (32 MiB blocks fill up rarely: 0 to 5 promotions over seven seeds, before that change
/// and after), nor 0x5eed_0021's (16K) once a change that staged nothing stopped walking its
/// range again (every table access draws from the model's random stream, `hw.rs`);
/// 0x5eed_0042 covers everything in every build.
#[test]
fn two_cpus_2bit_asids_range() {
    run_covered(config(2, 2, 3, true, 25, 0x5eed_0042));
}

/// Seed 0x5eed_0013: with 16 KiB pages and LPA2, 0x5eed_0002's run (after the stack-growth and
/// placement changes moved its addresses) made copies on write but never reused a page in place,
/// so it covered less than this test exists for; 0x5eed_0012's made no promotion with 16 KiB
/// pages once a read fault mapped its cached neighbours in runs (the model draws on every
/// table access); 0x5eed_0013 covers everything in every build.
#[test]
fn three_cpus_3bit_asids_no_range() {
    run_covered(config(3, 3, 3, false, 25, 0x5eed_0013));
}

/// Seed 0x5eed_0040: with 16 KiB pages and LPA2, 0x5eed_0003's run made no promotion once a
/// move gathered its extents in the gate and counted a fixed target's tables from the area map
/// (promotions are rare there: 0 to 7 in six seeds, before that change and after), nor
/// 0x5eed_0023's once a change that staged nothing stopped walking its range again (every
/// table access draws from the model's random stream, `hw.rs`); 0x5eed_0040 covers everything
/// in every build.
#[test]
fn four_cpus_3bit_asids_range() {
    run_covered(config(4, 3, 4, true, 25, 0x5eed_0040));
}

#[test]
fn four_cpus_8bit_asids_range() {
    let mut cfg = config(4, 8, 3, true, 25, 0x5eed_0004);
    cfg.exit_percent = 8;
    run_covered(cfg);
}

/// Guard regions in the tables: installs zap with a flush, removals and unmaps detach tables
/// that held only markers (the flush then covers the markers' pages, so the walk caches that
/// point at the table are invalidated before its frame goes back); faults find the markers.
/// With them, `MADV_FREE` and the reclaim of what it freed (frames back after the flush).
#[test]
fn four_cpus_with_guard_regions() {
    // Seed 0x5eed_0017: with the shared zero frame, 0x5eed_0005's run made no promotion with
    // 16 KiB pages (its reads now map the zero frame, so no 32 MiB block filled up), and with
    // the zero block and the exact mremap table count neither did 0x5eed_0015's, nor, once
    // populations stepped a leaf at a time, 0x5eed_0016's (16K+LPA2), nor, once a move gathered
    // its extents in the gate, 0x5eed_0017's (16K), nor, once a change that staged nothing
    // stopped walking its range again, 0x5eed_0037's (16K+LPA2), nor, once a protection change
    // in one last-level table stopped walking from the root, 0x5eed_0046's (16K+LPA2; every
    // table access draws from the model's random stream); 0x5eed_0047 covers everything in the
    // 4K, 16K, 64K, LPA2 and 16K+LPA2 builds.
    let mut cfg = config(4, 3, 3, true, 15, 0x5eed_0047);
    cfg.guard_percent = 10;
    let r = run_covered(cfg);
    assert!(r.guard_ops > 0 && r.guard_faults > 0, "no guard installed or hit: {r:?}");
    assert!(r.reclaims > 0, "no lazily freed page reclaimed: {r:?}");
}

/// Moves (`mremap`): pages taken out of one place of a window entry by entry and written at
/// another, with guard regions among them (their markers move too), the source tables a move
/// empties detached, all under faults, forks, exits and switches on four CPUs.
#[test]
fn four_cpus_with_moves() {
    let mut cfg = config(4, 3, 3, true, 10, 0x5eed_0b00);
    cfg.move_percent = 10;
    cfg.guard_percent = 5;
    let r = run(cfg);
    assert!(r.moves > 0 && r.guard_ops > 0, "no move or no guard: {r:?}");
    assert!(r.rollovers > 0 && r.forks > 0 && r.exits > 0, "{r:?}");
}

/// Files: page caches whose frames several processes map at once, `MAP_SHARED` and
/// `MAP_PRIVATE` (read-only until a write copies), read into the cache, truncated while mapped
/// (the frames go back only after every process unmapped them and every covering flush), and
/// unmapped, exited, forked, `MADV_DONTNEED`ed and faulted in again from the cache.
#[test]
fn four_cpus_with_file_mappings() {
    let mut cfg = config(4, 3, 3, true, 10, 0x5eed_0006);
    cfg.file_percent = 50;
    let r = run(cfg);
    let f = r.files;
    assert!(f.shared_maps > 0 && f.private_maps > 0 && f.reads > 0, "{f:?}");
    assert!(f.truncations > 0 && f.truncated_shared > 0, "no truncation of a page mapped twice: {f:?}");
    assert!(f.cow_breaks > 0 && f.cache_hits > 0 && f.cache_frees > 0, "{f:?}");
    assert!(r.rollovers > 0 && r.forks > 0 && r.exits > 0, "{r:?}");
}

/// Today's kernel decides the flush target before each operation (`aim_flushes`). If a sibling
/// thread starts on another CPU between that decision and the table writes, that CPU caches
/// translations the local flush then misses: the model must see it.
#[test]
fn target_decided_before_the_writes_misses_a_sibling_thread() {
    let mut caught = 0;
    for s in 0..4 {
        let mut cfg = config(2 + s as usize % 3, 3, 3, true, 0, 0x5eed_0100 + s);
        cfg.ops = 30_000;
        cfg.sibling_switches = true;
        cfg.decided_before = true;
        if let Err(e) = Driver::new(cfg).run() {
            println!("caught: {}", e.lines().next().unwrap_or_default());
            caught += 1;
            break;
        }
    }
    assert!(caught > 0, "the model did not see the race in any of the runs");
}

/// Runs `cfg` with `m` planted, a few seeds; the first violation the model reports, if any.
fn caught_with(m: Mutation, cfg: Config, seeds: u64) -> Option<String> {
    (0..seeds).find_map(|s| {
        let cfg = Config { seed: cfg.seed + s, ..cfg };
        mutation::with(m, || Driver::new(cfg).run()).err()
    })
}

/// (a) A fault path that ignores the current flush target: the fold or promotion it makes
/// flushes ASID 0 with the local forms, so the process's old small entries stay on every CPU
/// (the executing one included: ASID 0 is not the process's).
#[test]
fn planted_fault_flush_that_ignores_the_target_is_caught() {
    for (cpus, range) in [(2, true), (4, false)] {
        let mut cfg = config(cpus, 3, 3, range, 0, 0x5eed_0400);
        cfg.ops = 5_000;
        let e = caught_with(Mutation::FaultFlushIgnoresTarget, cfg, 4);
        let e = e.unwrap_or_else(|| panic!("{cpus} CPUs: a fault flush with a stale target was not caught"));
        println!("caught: {}", e.lines().next().unwrap_or_default());
    }
}

/// A fork that write-protects the parent without the flush: CPUs running the parent keep
/// writable entries for frames the child now shares (a write through one would reach the
/// child's memory).
#[test]
fn planted_fork_without_the_parent_flush_is_caught() {
    for cpus in [2, 4] {
        let mut cfg = config(cpus, 3, 3, true, 0, 0x5eed_0500);
        cfg.ops = 5_000;
        let e = caught_with(Mutation::ForkWithoutFlush, cfg, 4);
        let e = e.unwrap_or_else(|| panic!("{cpus} CPUs: a fork without the parent's flush was not caught"));
        println!("caught: {}", e.lines().next().unwrap_or_default());
    }
}

/// A move that takes the pages out of the source without the flush: CPUs keep usable entries
/// for the old addresses, which the tables no longer map.
#[test]
fn planted_move_without_the_flush_is_caught() {
    for cpus in [2, 4] {
        let mut cfg = config(cpus, 3, 3, true, 0, 0x5eed_0b10);
        cfg.ops = 5_000;
        cfg.move_percent = 20;
        let e = caught_with(Mutation::MoveWithoutFlush, cfg, 4);
        let e = e.unwrap_or_else(|| panic!("{cpus} CPUs: a move without the flush was not caught"));
        assert!(e.contains("stale entry"), "caught, but not as a stale entry: {e}");
        println!("caught: {}", e.lines().next().unwrap_or_default());
    }
}

/// The shared zero frame mapped with the area's protection (writable where the area is): a
/// write through such an entry would change the page every process reads as zeros.
#[test]
fn planted_writable_zero_entry_is_caught() {
    let mut cfg = config(2, 3, 3, true, 0, 0x5eed_0800);
    cfg.ops = 2_000;
    let e = caught_with(Mutation::ZeroEntryWritable, cfg, 4);
    let e = e.unwrap_or_else(|| panic!("a writable zero entry was not caught"));
    assert!(e.contains("zero frame"), "caught, but not as a writable zero entry: {e}");
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// `mprotect(PROT_READ | PROT_WRITE)` that leaves a private file mapping's page-cache frames
/// writable (as for private anonymous memory, whose pages are the process's own): a write
/// through one would change the file for every process. (Seed 0x5eed_0a08: 0x5eed_0a00's eight
/// runs stopped catching it with 16 KiB pages and LPA2 once destroying a table read every entry
/// left below its root, the model drawing on every table access; 0x5eed_0a08 catches it in the
/// 4K, 16K, 64K, LPA2 and 16K+LPA2 builds.)
#[test]
fn planted_writable_cache_frame_after_mprotect_is_caught() {
    let mut cfg = config(2, 3, 3, true, 0, 0x5eed_0a08);
    cfg.ops = 4_000;
    cfg.file_percent = 50;
    let e = caught_with(Mutation::ObjectPageWritableAtMprotect, cfg, 8);
    let e = e.unwrap_or_else(|| panic!("a writable page-cache frame after mprotect was not caught"));
    assert!(e.contains("page-cache frame"), "caught, but not as a writable page-cache frame: {e}");
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// An unmap (or `MADV_DONTNEED`, or an exit) that hands the shared zero frame back to the
/// allocator: every other process still maps it.
#[test]
fn planted_free_of_the_zero_frame_is_caught() {
    let mut cfg = config(2, 3, 3, true, 0, 0x5eed_0900);
    cfg.ops = 2_000;
    let e = caught_with(Mutation::ZeroFreedAtUnmap, cfg, 4);
    let e = e.unwrap_or_else(|| panic!("a free of the zero frame was not caught"));
    assert!(e.contains("zero frame"), "caught, but not as a free of the zero frame: {e}");
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// A zero block or run mapped with the area's protection: every page of the region writable
/// through it.
#[test]
fn planted_writable_zero_block_is_caught() {
    let mut cfg = config(2, 3, 3, true, 0, 0x5eed_0a00);
    cfg.ops = 2_000;
    let e = caught_with(Mutation::ZeroBlockWritable, cfg, 4);
    let e = e.unwrap_or_else(|| panic!("a writable zero block was not caught"));
    assert!(e.contains("zero region"), "caught, but not as a writable zero block: {e}");
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// An unmap (or `MADV_DONTNEED`, an exit, a split block's page going) that knows only the zero
/// region's first page and hands the others back to the allocator.
#[test]
fn planted_free_of_a_zero_block_page_is_caught() {
    let mut cfg = config(2, 3, 3, true, 0, 0x5eed_0b00);
    cfg.ops = 2_000;
    let e = caught_with(Mutation::ZeroBlockPageFreed, cfg, 4);
    let e = e.unwrap_or_else(|| panic!("a free of a zero block's page was not caught"));
    assert!(e.contains("zero region"), "caught, but not as a free of the zero region: {e}");
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// Guard markers cleared without the record covering their pages: a table that held only
/// markers is detached by an unmap or a guard removal, and freed while the walk caches of the
/// CPUs that ran the process still point at it.
#[test]
fn planted_guard_clear_without_cover_is_caught() {
    // Seed 0x5eed_0709: 0x5eed_0700's run stopped catching it with 16 KiB pages once
    // populations stepped a leaf at a time (another sequence of states, not a weaker check),
    // nor 0x5eed_0702's once a change that staged nothing stopped walking its range again, nor
    // 0x5eed_0704's (64K) once `finish` stopped widening its walk to whole runs when no run was
    // cut (the model draws on every table access), nor 0x5eed_0708's (16K+LPA2) once fork
    // copied and write-protected pages in one pass, nor 0x5eed_0709's (16K, 16K+LPA2) once the
    // engine passed over runs of empty entries in one go; 0x5eed_070d catches it in the 4K, 16K,
    // 64K, LPA2 and 16K+LPA2 builds.
    let mut cfg = config(4, 3, 3, true, 0, 0x5eed_070d);
    cfg.ops = 5_000;
    cfg.guard_percent = 10;
    let e = caught_with(Mutation::GuardClearUncovered, cfg, 4);
    let e = e.unwrap_or_else(|| panic!("a guard clear without the covering flush was not caught"));
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// A shrink of a memfd that unmaps the pages past the end without the flush: CPUs running a
/// process that mapped them keep entries for frames now free.
#[test]
fn planted_truncation_without_the_flush_is_caught() {
    for cpus in [2, 4] {
        let mut cfg = config(cpus, 3, 3, true, 0, 0x5eed_0600);
        cfg.ops = 8_000;
        let e = caught_with(Mutation::TruncateWithoutFlush, cfg, 6);
        let e = e.unwrap_or_else(|| panic!("{cpus} CPUs: a truncation without the flush was not caught"));
        println!("caught: {}", e.lines().next().unwrap_or_default());
    }
}

/// (b) "Local forms after a migration": the reach decision looks only at where the process
/// runs now. A process that left a CPU leaves its entries there; a local flush on the CPU it
/// runs on now misses them.
#[test]
fn planted_reach_that_ignores_migration_is_caught() {
    for cpus in [2, 4] {
        let mut cfg = config(cpus, 3, 3, true, 0, 0x5eed_0300);
        cfg.ops = 5_000;
        let e = caught_with(Mutation::ReachIgnoresMigration, cfg, 4);
        let e = e.unwrap_or_else(|| panic!("{cpus} CPUs: a reach that ignores migrations was not caught"));
        println!("caught: {}", e.lines().next().unwrap_or_default());
    }
}

/// A rollover without the CPU's local flush: a recycled ASID finds the old owner's entries.
#[test]
fn planted_rollover_without_flush_is_caught() {
    let mut cfg = config(2, 2, 3, true, 0, 0x5eed_0500);
    cfg.ops = 5_000;
    let e =
        caught_with(Mutation::RolloverFlushSkipped, cfg, 4).expect("a skipped rollover flush was not caught");
    println!("caught: {}", e.lines().next().unwrap_or_default());
}

/// The planner's planted bugs that change what a user flush removes are caught here too,
/// through the stale entries and frame releases they cause on other CPUs (the others over-
/// invalidate, or concern ranges of 4 GiB and more, global entries or CPU errata).
#[test]
fn planner_bugs_that_reach_user_flushes_are_caught() {
    use Mutation::*;
    let cases = [
        (SinglePageDropped, true),
        (LeafFormsAlways, true),
        (LeafFormsAlways, false),
        (RangeOpWithoutRPrefix, true),
        (TgZero, true),
        (BaseShift14, true),
        (AsidOmitted, true),
        (AsidOmitted, false),
        (MissingFinalDsb, true),
        (MissingFinalDsb, false),
    ];
    for (m, range) in cases {
        // The 16 KiB build's BaseADDR is VA >> 14 already: there the mutation changes nothing.
        if m == BaseShift14 && crate::granule::Format::BUILD.range_base_shift() == 14 {
            continue;
        }
        let mut cfg = config(4, 3, 3, range, 0, 0x5eed_0200);
        cfg.ops = 3_000;
        assert!(caught_with(m, cfg, 3).is_some(), "{m:?} (FEAT_TLBIRANGE {range}) not caught");
    }
}

/// A page cache that frees a truncated page's frame once the first process that mapped it has
/// unmapped it and flushed, while others still map it: the frame check finds their mappings.
#[test]
fn planted_page_cache_free_after_the_first_flush_is_caught() {
    for cpus in [2, 4] {
        let e = page_cache_violation(CacheBug::FreeAfterFirstFlush, cpus, 0x5eed_0800);
        assert!(e.contains("still maps it"), "{e}");
    }
}

/// A truncation that skips the flush in the second process mapping the file: the frames go
/// back while CPUs keep entries for them under that process's ASID.
#[test]
fn planted_truncation_without_the_second_space_flush_is_caught() {
    for cpus in [2, 4] {
        let e = page_cache_violation(CacheBug::SecondSpaceUnflushed, cpus, 0x5eed_0900);
        assert!(e.contains("can still reach it"), "{e}");
    }
}

/// Runs file-heavy configurations with `bug` planted, seed after seed (8 at most), until the
/// model reports a page-cache frame freed while still reachable (a seed may first trip another
/// check: a skipped flush also leaves walk-cache entries of freed tables); that report.
fn page_cache_violation(bug: CacheBug, cpus: usize, seed: u64) -> String {
    let mut cfg = config(cpus, 3, 3, true, 0, seed);
    cfg.ops = 4_000;
    cfg.file_percent = 50;
    cfg.cache_bug = Some(bug);
    let e = (0..8).find_map(|s| {
        let e = Driver::new(Config { seed: cfg.seed + s, ..cfg }).run().err()?;
        let line = e.lines().next().unwrap_or_default();
        println!("caught: {line}");
        line.contains("page-cache frame").then_some(e)
    });
    e.unwrap_or_else(|| {
        panic!("{cpus} CPUs: {bug:?} not reported as a page-cache frame freed while reachable")
    })
}
