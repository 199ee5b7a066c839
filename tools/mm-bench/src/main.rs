//! `mm-bench`: host benchmark of the `mm` crate against the designs it replaces, in one run
//! (`docs/BENCHMARKS.md`).
//!
//! It prints the machine and the date, then:
//! - **TLBI instructions per invalidation** of a user range of 1 … 2^21 pages of 4 KiB: our
//!   planner with and without FEAT_TLBIRANGE, Linux's algorithm (v6.10–v6.16) with and without,
//!   and one TLBI per leaf (google's `aarch64-paging`, every page mapped by a 4 KiB leaf). These
//!   are counts of planned instructions, not timings; `*` marks a whole-ASID flush;
//! - **page-table throughput**: map, then unmap, N pages of 4 KiB one call per page, with
//!   sequential and with shuffled (fixed-seed Fisher–Yates) VAs, in `mm::paging::PageTable` and in
//!   `aarch64-paging` 0.12.x (`RootTable` + `IdTranslation`, `Constraints::NO_BLOCK_MAPPINGS`,
//!   unmap = `map_range` with no attributes at all (not even `VALID`, so the entries become 0),
//!   then one `compact_subtables` to free the empty tables,
//!   timed with the unmap), the fair use of that crate's API for page-by-page unmapping. The host has no
//!   TLB: this measures walking, allocation and freeing only. A third row maps and unmaps the
//!   whole range in one call each, to show the per-call share. Each configuration runs several
//!   times, alternating the two crates, and the fastest run is reported; the last column says
//!   how many times faster (or slower) `mm` is.
//!
//! What makes the comparison fair:
//! - **same allocator**: both take every table frame from the global allocator with the same
//!   layout (4096 bytes, 4096-aligned) and use the pointer as the "physical address", and both
//!   free empty tables back to it during the timed unmap. Each zeroes a new table exactly once:
//!   `aarch64-paging` through `alloc_zeroed` (its `IdTranslation`), `mm` with its own 512
//!   stores (its `Translation` contract leaves a new frame's contents unspecified, so the bench
//!   hands it uninitialised memory rather than zeroing it twice);
//! - **same descriptors**: both write the same leaf descriptors, bit for bit (checked on
//!   sample pages before the unmap): the attributes are `mm`'s
//!   `Attributes::user(ReadWrite)`, given to `aarch64-paging` as raw bits, and `mm` runs with
//!   `NO_BLOCKS | NO_CONTIGUOUS`, since `aarch64-paging` sets neither blocks (with
//!   `NO_BLOCK_MAPPINGS`) nor the contiguous hint;
//! - **same work per call**: one `map`/`map_range` per page, one `unmap`/`map_range` per page,
//!   the `mm` record released after each unmap (on a table that is not live no flush is due).
//!
//! Run it in release mode (debug builds measure nothing useful):
//!
//! ```text
//! cargo run --release -p mm-bench              # N = 2^20 pages (4 GiB of VA), 5 runs each
//! cargo run --release -p mm-bench -- --quick   # N = 2^16 pages, 1 run each
//! cargo run --release -p mm-bench -- --only shuffled   # one workload (sequential, shuffled,
//!                                                      # one-call), without the TLBI table
//! cargo run --release -p mm-bench -- --pages 18 --runs 1   # 2^18 pages, 1 run each (for
//!                                                          # cachegrind and callgrind)
//! ```
//!
//! The full run takes a few seconds on a 2-core machine.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::ptr::NonNull;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{
    Constraints as ApConstraints, El1And0, MemoryRegion, PageTable as ApPageTable, RootTable,
    Translation as ApTranslation, VaRange as ApVaRange,
};
use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::{Attributes, UserAccess};
use mm::paging::{AlignedTable, Constraints, ENTRIES_PER_TABLE, PageTable, Translation, VaRange};
use mm::tlb::compare::{
    LINUX_MAX_DVM_OPS, LINUX_MAX_TLBI_RANGE_PAGES, linux_plan_count, one_per_leaf_count, partition_plan_count,
};
use mm::tlb::{RANGE_BOUND_PAGES, Scope, TlbFeatures, TlbRequest, plan};

/// Page counts of the TLBI table.
const RANGES: [u64; 15] =
    [1, 2, 3, 16, 17, 64, 511, 512, 513, 2048, 65536, 262_143, (1 << 20) - 1, 1 << 20, 1 << 21];
/// First VA of every workload (1 GiB aligned, user half).
const BASE_VA: u64 = 0x4000_0000;
/// First PA mapped (the mapping is VA + this offset - BASE_VA, whatever the order of the calls).
const BASE_PA: u64 = 0x8_0000_0000;
/// The workloads of the throughput table, as `--only` names them.
const WORKLOADS: [&str; 3] = ["sequential", "shuffled", "one-call"];
/// Seed of the shuffle.
const SEED: u64 = 0x6d6d_2d62_656e_6368;

fn main() -> ExitCode {
    let (mut quick, mut only, mut log2_pages, mut runs) = (false, None, None, None);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        match (args[i].as_str(), args.get(i + 1).map(String::as_str)) {
            ("--quick", _) => quick = true,
            ("--only", Some(name)) if WORKLOADS.contains(&name) => {
                only = Some(name.to_string());
                i += 1;
            }
            ("--pages", Some(n)) if n.parse::<u32>().is_ok_and(|n| (4..=24).contains(&n)) => {
                log2_pages = n.parse::<u32>().ok();
                i += 1;
            }
            ("--runs", Some(n)) if n.parse::<usize>().is_ok_and(|n| n > 0) => {
                runs = n.parse::<usize>().ok();
                i += 1;
            }
            _ => {
                eprintln!(
                    "usage: mm-bench [--quick] [--only {}] [--pages LOG2 (4..=24)] [--runs N]",
                    WORKLOADS.join("|")
                );
                return ExitCode::from(2);
            }
        }
        i += 1;
    }
    let (pages, default_runs) = if quick { (1usize << 16, 1) } else { (1usize << 20, 5) };
    let pages = log2_pages.map_or(pages, |n| 1usize << n);
    let runs = runs.unwrap_or(default_runs);
    if cfg!(debug_assertions) {
        eprintln!("warning: debug build; use `cargo run --release -p mm-bench`");
    }

    println!("mm-bench  {}", utc_now());
    println!("machine   {}, {} logical CPUs", cpu_model(), logical_cpus());
    println!();
    if only.is_none() {
        tlbi_table();
        println!();
    }
    if !throughput(pages, runs, only.as_deref()) {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

// ---- a) TLBI instructions per invalidation --------------------------------------------------

/// Prints the instruction counts of each design for each range of [`RANGES`].
fn tlbi_table() {
    let with_range = TlbFeatures { range: true, ..TlbFeatures::BASELINE };
    let without = TlbFeatures::BASELINE;
    println!("a) TLBI instructions to invalidate N pages of 4 KiB (user ASID, non-leaf forms, broadcast)");
    println!("   * = one whole-ASID flush (ASIDE1IS) instead of a per-range plan");
    println!("   mm +range: overlapping covers (the minimum); partition: the best disjoint cover");
    println!(
        "   {:>9} {:>12} {:>12} {:>12} {:>14} {:>14} {:>14}",
        "pages", "mm +range", "partition", "mm", "Linux +range", "Linux", "one per leaf"
    );
    for pages in RANGES {
        let start = VirtAddr(BASE_VA);
        let end = VirtAddr(BASE_VA + pages * PAGE_SIZE);
        let req = TlbRequest::new(start, end, Scope::Asid(1));
        let ours = |caps| {
            let p = plan(&req, caps);
            mark(p.len() as u64, p.is_full_flush())
        };
        let linux = |range: bool| {
            let full = if range { pages > LINUX_MAX_TLBI_RANGE_PAGES } else { pages >= LINUX_MAX_DVM_OPS };
            mark(linux_plan_count(pages, 1, range), full)
        };
        let partition =
            if pages > RANGE_BOUND_PAGES { mark(1, true) } else { mark(partition_plan_count(pages), false) };
        println!(
            "   {:>9} {:>12} {:>12} {:>12} {:>14} {:>14} {:>14}",
            pages,
            ours(with_range),
            partition,
            ours(without),
            linux(true),
            linux(false),
            one_per_leaf_count(start, end, PAGE_SIZE)
        );
    }
}

/// `n`, with a `*` when it is a whole flush.
fn mark(n: u64, full: bool) -> String {
    if full { format!("{n}*") } else { format!("{n} ") }
}

// ---- b) map/unmap throughput ----------------------------------------------------------------

/// Table frames from the global allocator for `mm`: a boxed, 4 KiB-aligned [`AlignedTable`]
/// whose pointer serves as the "physical address" (user pointers are below 2^48 on the hosts we
/// run on; checked at allocation). Counts frames.
#[derive(Default)]
struct HeapFrames {
    allocated: u64,
    live: u64,
    peak: u64,
}

// SAFETY: every frame is a fresh, exclusively owned, 4 KiB-aligned heap allocation of 4096 bytes
// below 2^48 (checked), valid until `deallocate_table` frees it; `table_ptr` returns that pointer.
unsafe impl Translation for HeapFrames {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        // The engine zeroes new tables itself, so the frame may start uninitialised.
        let frame: Box<MaybeUninit<AlignedTable>> = Box::new_uninit();
        let pa = Box::into_raw(frame) as u64;
        assert!(pa < 1 << 48, "heap pointer above 2^48 cannot serve as a physical address");
        self.allocated += 1;
        self.live += 1;
        self.peak = self.peak.max(self.live);
        Some(PhysAddr(pa))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        self.live -= 1;
        // SAFETY: `pa` was returned by `allocate_table` (the engine hands back only its own
        // frames, once), so it is the pointer of a live `Box<MaybeUninit<AlignedTable>>`.
        drop(unsafe { Box::from_raw(pa.0 as *mut MaybeUninit<AlignedTable>) });
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        NonNull::new(pa.0 as *mut [u64; ENTRIES_PER_TABLE]).expect("frame address 0")
    }
}

/// `aarch64-paging`'s own [`IdTranslation`], with frame counters.
struct CountingId {
    inner: IdTranslation<El1Attributes>,
    allocated: u64,
    live: u64,
    peak: u64,
}

impl ApTranslation<El1Attributes> for CountingId {
    fn allocate_table(&mut self) -> (NonNull<ApPageTable<El1Attributes>>, PhysicalAddress) {
        self.allocated += 1;
        self.live += 1;
        self.peak = self.peak.max(self.live);
        self.inner.allocate_table()
    }

    unsafe fn deallocate_table(&mut self, page_table: NonNull<ApPageTable<El1Attributes>>) {
        self.live -= 1;
        // SAFETY: our caller guarantees that `page_table` came from `allocate_table` on this
        // translation, which got it from `self.inner`, and was not freed yet.
        unsafe { self.inner.deallocate_table(page_table) }
    }

    fn physical_to_virtual(&self, pa: PhysicalAddress) -> NonNull<ApPageTable<El1Attributes>> {
        self.inner.physical_to_virtual(pa)
    }
}

/// One measured run: map and unmap times, frames allocated, peak frames in use, frames still in
/// use at the end.
#[derive(Clone, Copy)]
struct RunResult {
    map: Duration,
    unmap: Duration,
    allocated: u64,
    peak: u64,
    left: u64,
}

impl RunResult {
    fn best(a: Option<Self>, b: Self) -> Self {
        match a {
            Some(a) if a.map + a.unmap <= b.map + b.unmap => a,
            _ => b,
        }
    }
}

/// The attributes of every page of the workload.
const ATTRS: Attributes = Attributes::user(UserAccess::ReadWrite);
/// `mm`'s layout constraints: 4 KiB pages without the contiguous hint, as `aarch64-paging` lays
/// them out.
const MM_CONSTRAINTS: Constraints = Constraints::NO_BLOCKS.union(Constraints::NO_CONTIGUOUS);
/// Descriptor bits of a valid level-3 page descriptor (`VALID | TABLE_OR_PAGE`).
const PAGE_TYPE: u64 = 0b11;

/// Pages whose descriptors are compared between the two crates: the first, a middle and the last
/// page of the workload.
fn sample_pages(vas: &[u64], len: u64) -> [u64; 3] {
    let last = vas.iter().max().expect("one VA") + len - PAGE_SIZE;
    let middle = vas[vas.len() / 2] + len / 2 / PAGE_SIZE * PAGE_SIZE;
    [BASE_VA, middle, last]
}

/// Maps `len` bytes at every VA of `vas` (one call each, in that order), then unmaps them in the
/// same order. Returns the run and the leaf descriptors of the [`sample_pages`]. Not inlined, so
/// that an instruction counter can be aimed at each crate's runs (`docs/BENCHMARKS.md`:
/// `valgrind --tool=callgrind --toggle-collect=mm_bench::run_mm`).
#[inline(never)]
fn run_mm(vas: &[u64], len: u64) -> (RunResult, [u64; 3]) {
    let mut pt = PageTable::new(HeapFrames::default(), VaRange::Lower).expect("root table");
    let t0 = Instant::now();
    for &va in vas {
        pt.map(VirtAddr(va), PhysAddr(va - BASE_VA + BASE_PA), len, ATTRS, MM_CONSTRAINTS).expect("map");
    }
    let map = t0.elapsed();
    let samples = sample_pages(vas, len).map(|va| {
        let leaf = pt.query(VirtAddr(va)).expect("sample page mapped");
        assert!(leaf.level == 3 && !leaf.contiguous);
        assert_eq!(leaf.pa, PhysAddr(va - BASE_VA + BASE_PA));
        leaf.pa.0 | leaf.attrs.bits() | PAGE_TYPE
    });
    let probe = samples[1];
    let t1 = Instant::now();
    for &va in vas {
        let record = pt.unmap(VirtAddr(va), len).expect("unmap");
        // The table was never live: no TLB to flush, the frames may go at once.
        record.release(pt.translation_mut());
    }
    let unmap = t1.elapsed();
    assert_eq!(pt.translate(VirtAddr(probe & !(PAGE_SIZE - 1))), None);
    let left = pt.translation().live;
    let (mut frames, record) = pt.destroy();
    record.release(&mut frames);
    (RunResult { map, unmap, allocated: frames.allocated, peak: frames.peak, left }, samples)
}

/// The same workload in `aarch64-paging`, with the same descriptor bits (not inlined, as
/// [`run_mm`]).
#[inline(never)]
fn run_ap(vas: &[u64], len: u64) -> (RunResult, [u64; 3]) {
    let flags = El1Attributes::from_bits_retain(ATTRS.bits() as usize) | El1Attributes::VALID;
    let translation = CountingId { inner: IdTranslation::new(), allocated: 0, live: 0, peak: 0 };
    let mut pt = RootTable::with_va_range(translation, 0, El1And0, ApVaRange::Lower);
    let t0 = Instant::now();
    for &va in vas {
        let region = MemoryRegion::new(va as usize, (va + len) as usize);
        let pa = PhysicalAddress((va - BASE_VA + BASE_PA) as usize);
        pt.map_range(&region, pa, flags, ApConstraints::NO_BLOCK_MAPPINGS).expect("map_range");
    }
    let map = t0.elapsed();
    let samples = sample_pages(vas, len).map(|va| {
        let mut bits = None;
        let region = MemoryRegion::new(va as usize, (va + PAGE_SIZE) as usize);
        pt.walk_range(&region, &mut |_, desc, level| {
            if level == 3 {
                bits = Some((desc.output_address().0 | desc.flags().bits()) as u64);
            }
            Ok(())
        })
        .expect("walk_range");
        bits.expect("sample page mapped")
    });
    let t1 = Instant::now();
    // Not `flags - VALID`: `compact_subtables` frees a table only when all its descriptors are
    // zero, so the unmapped entries must be written as 0.
    let unmapped = El1Attributes::empty();
    for &va in vas {
        let region = MemoryRegion::new(va as usize, (va + len) as usize);
        pt.map_range(&region, PhysicalAddress(0), unmapped, ApConstraints::NO_BLOCK_MAPPINGS).expect("unmap");
    }
    pt.compact_subtables();
    let unmap = t1.elapsed();
    let t = pt.translation();
    let result = RunResult { map, unmap, allocated: t.allocated, peak: t.peak, left: t.live };
    drop(black_box(pt));
    (result, samples)
}

/// Runs and prints the throughput comparison; `false` if a run left tables behind.
fn throughput(pages: usize, runs: usize, only: Option<&str>) -> bool {
    let sequential: Vec<u64> = (0..pages as u64).map(|i| BASE_VA + i * PAGE_SIZE).collect();
    let mut shuffled = sequential.clone();
    let mut rng = XorShift(SEED);
    for i in (1..shuffled.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        shuffled.swap(i, j);
    }

    println!(
        "b) map then unmap {pages} pages of 4 KiB, one call per page, best of {runs} (ns per page; host, no TLB)"
    );
    println!(
        "   {:<10} {:<15} {:>8} {:>8} {:>8} {:>10} {:>10}  ratio",
        "VAs", "crate", "map", "unmap", "total", "frames", "peak"
    );
    let mut ok = true;
    let whole = [BASE_VA];
    for (name, vas, len) in [
        ("sequential", &sequential[..], PAGE_SIZE),
        ("shuffled", &shuffled[..], PAGE_SIZE),
        ("one call", &whole[..], pages as u64 * PAGE_SIZE),
    ] {
        if only.is_some_and(|only| only != name.replace(' ', "-")) {
            continue;
        }
        let (mut ours, mut theirs) = (None, None);
        for _ in 0..runs {
            let (run, our_samples) = run_mm(vas, len);
            ours = Some(RunResult::best(ours, run));
            let (run, their_samples) = run_ap(vas, len);
            theirs = Some(RunResult::best(theirs, run));
            if our_samples != their_samples {
                eprintln!(
                    "error: ({name}) the crates wrote different descriptors: {our_samples:x?} vs {their_samples:x?}"
                );
                ok = false;
            }
        }
        let (ours, theirs) = (ours.expect("one run"), theirs.expect("one run"));
        let per_page = |d: Duration| d.as_nanos() as f64 / pages as f64;
        let total = |r: &RunResult| per_page(r.map + r.unmap);
        let ratio = total(&theirs) / total(&ours);
        let mut verdict = if ratio >= 1.0 {
            format!("mm is {ratio:.2}x faster")
        } else {
            format!("mm is {:.2}x slower", 1.0 / ratio)
        };
        // The goal is for calls of one page (the per-call overhead is what a crate adds).
        if len == PAGE_SIZE {
            verdict += if ratio >= 2.0 { ": goal met" } else { ": goal NOT met" };
        }
        for (crate_name, r, shown) in [("mm", &ours, verdict), ("aarch64-paging", &theirs, String::new())] {
            println!(
                "   {:<10} {:<15} {:>8.1} {:>8.1} {:>8.1} {:>10} {:>10}  {}",
                name,
                crate_name,
                per_page(r.map),
                per_page(r.unmap),
                total(r),
                r.allocated,
                r.peak,
                shown
            );
            // After unmapping everything only the root table may remain.
            if r.left != 1 {
                eprintln!("error: {crate_name} ({name}) kept {} table frames after unmapping", r.left);
                ok = false;
            }
        }
    }
    println!("   frames = table frames allocated in the run (root included), peak = most in use at once;");
    println!(
        "   ratio = aarch64-paging total / mm total (goal, one call per page: mm at least 2x faster). Same"
    );
    println!("   allocator, same descriptors (checked). 'one call' maps and unmaps the whole range in one");
    println!("   call each (sequential VAs): the per-call overhead left out.");
    ok
}

/// xorshift64: the fixed-seed shuffle's generator.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

// ---- machine and date -----------------------------------------------------------------------

/// The CPU model from `/proc/cpuinfo` (Linux), or "unknown CPU".
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            matches!(key.trim(), "model name" | "Model" | "Hardware").then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| String::from("unknown CPU"))
}

/// Number of CPUs this process may run on.
fn logical_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The current UTC date and time, `YYYY-MM-DD HH:MM:SS UTC` (civil-from-days, H. Hinnant).
fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem / 60 % 60, rem % 60)
}
