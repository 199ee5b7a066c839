//! A host micro-benchmark of near placement against the probing loop user space needs without it
//! (Node.js' `AllocateCodeNear`: one `MAP_FIXED_NOREPLACE` attempt per page, 16 or 1024 pages in
//! each direction). It exists to show the cost is flat in the radius and in the number of
//! mappings, against the minimum a probing loop needs; the clock is the caller's, so the crate stays `no_std`.
//!
//! The probes here are in-process calls to [`VmMap::mmap`], so they cost a lookup each and none of
//! a system call's entry and exit: the comparison favours probing.

use alloc::vec::Vec;
use core::fmt;
use core::hint::black_box;

use super::flags::{MAP_ANONYMOUS, MAP_FIXED_NOREPLACE, MAP_PRIVATE};
use super::prot::{PROT_READ, PROT_WRITE};
use super::{Advice, AnonName, Layout, PAGE, Prot, VmMap, Vma, VmaFlags};

/// The target every measurement places around.
pub const BENCH_TARGET: u64 = 0x5555_0000_0000;

/// One line of [`bench_near`]'s results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NearBenchRow {
    /// Mappings in the address space.
    pub mappings: usize,
    /// Radius of the near request (0 for probing rows, whose reach is `probes` pages).
    pub radius: u64,
    /// `"map_near search"`, `"map_near+munmap"`, `"probe 16/dir"` or `"probe 1024/dir"`.
    pub method: &'static str,
    /// Mean time per call in nanoseconds.
    pub ns_per_call: u64,
    /// Whether the call found a place.
    pub found: bool,
}

impl fmt::Display for NearBenchRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = if self.radius == 0 {
            "-".into()
        } else if self.radius >= 1 << 30 {
            alloc::format!("{} GiB", self.radius >> 30)
        } else {
            alloc::format!("{} KiB", self.radius >> 10)
        };
        write!(
            f,
            "{:>6} mappings  radius {:>7}  {:<16} {:>9} ns/call  {}",
            self.mappings,
            r,
            self.method,
            self.ns_per_call,
            if self.found { "found" } else { "none" }
        )
    }
}

/// An address space with `n` mappings packed around [`BENCH_TARGET`], separated by one-page holes
/// (too small for the two-page requests of the benchmark), spanning at least 2 × 1024 pages so
/// every probe of the 1024-page loop fails, as in Node's exhausted case.
pub fn dense_layout(n: usize) -> VmMap {
    let mut m = VmMap::new(Layout::linux(0x1000_0000));
    let pages = (2100 / n as u64).max(3);
    let stride = (pages + 1) * PAGE;
    let first = BENCH_TARGET - (n as u64 / 2) * stride;
    for i in 0..n as u64 {
        let start = first + i * stride;
        let v = Vma {
            start,
            end: start + pages * PAGE,
            prot: Prot::RW,
            flags: VmaFlags::empty(),
            advice: Advice::Normal,
            name: AnonName::NONE,
        };
        m.map_kernel(v.start, v.len(), v.prot, v.flags).expect("bench layout");
    }
    m
}

fn probe(m: &mut VmMap, per_dir: u64, len: u64) -> bool {
    let f = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
    for i in 1..=per_dir {
        for a in [BENCH_TARGET + i * PAGE, BENCH_TARGET - i * PAGE] {
            if let Ok(done) = m.mmap(black_box(a), len, PROT_READ | PROT_WRITE, f, -1, 0) {
                m.munmap(done.addr, done.len).expect("bench munmap");
                return true;
            }
        }
    }
    false
}

/// Measures, for layouts of 100 and 10,000 mappings: the near search with radius 64 KiB (which
/// finds nothing: every hole is one page) and 2 GiB (which finds the edge of the packed block),
/// a full `map_near` + `munmap` at 2 GiB, and the probing loop with 16 and 1024 probes per
/// direction (all failing). `now_ns` is the caller's monotonic clock in nanoseconds.
pub fn bench_near(now_ns: &dyn Fn() -> u64) -> Vec<NearBenchRow> {
    let len = 2 * PAGE;
    let mut rows = Vec::new();
    for n in [100usize, 10_000] {
        let mut m = dense_layout(n);
        for radius in [64u64 << 10, 2 << 30] {
            let iters = 20_000;
            let t0 = now_ns();
            let mut found = false;
            for _ in 0..iters {
                found = black_box(m.find_near(black_box(BENCH_TARGET), len, radius, false)).is_ok();
            }
            let ns = (now_ns() - t0) / iters;
            rows.push(NearBenchRow {
                mappings: n,
                radius,
                method: "map_near search",
                ns_per_call: ns,
                found,
            });
        }
        let iters = 20_000;
        let flags = MAP_PRIVATE | MAP_ANONYMOUS;
        let t0 = now_ns();
        for _ in 0..iters {
            let done =
                m.map_near(BENCH_TARGET, len, 2 << 30, PROT_READ | PROT_WRITE, flags).expect("bench near");
            m.munmap(done.addr, done.len).expect("bench munmap");
        }
        let ns = (now_ns() - t0) / iters;
        rows.push(NearBenchRow {
            mappings: n,
            radius: 2 << 30,
            method: "map_near+munmap",
            ns_per_call: ns,
            found: true,
        });
        for (per_dir, iters, method) in [(16u64, 20_000u64, "probe 16/dir"), (1024, 300, "probe 1024/dir")] {
            let t0 = now_ns();
            let mut found = false;
            for _ in 0..iters {
                found = probe(&mut m, per_dir, len);
            }
            let ns = (now_ns() - t0) / iters;
            rows.push(NearBenchRow { mappings: n, radius: 0, method, ns_per_call: ns, found });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_layout_defeats_probing_but_not_the_search() {
        for n in [100, 10_000] {
            let mut m = dense_layout(n);
            m.check();
            assert_eq!(m.map_count(), n);
            assert!(!probe(&mut m, 1024, 2 * PAGE));
            assert!(m.find_near(BENCH_TARGET, 2 * PAGE, 64 << 10, false).is_err());
            assert!(m.find_near(BENCH_TARGET, 2 * PAGE, 2 << 30, false).is_ok());
        }
    }

    /// `cargo test -p mm --release -- --ignored --nocapture bench_near`
    #[test]
    #[ignore = "benchmark: run with --ignored --nocapture"]
    fn bench_near_prints() {
        let start = std::time::Instant::now();
        let now = move || start.elapsed().as_nanos() as u64;
        for row in bench_near(&now) {
            std::println!("{row}");
        }
    }
}
