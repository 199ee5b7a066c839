//! Mutations of QEMU virt's trees (tests/fixtures): header fields, structure tokens and property
//! fields at extremes, every truncation, a NOP at every token boundary (which must read the
//! same), and random byte, bit and word changes. No input may panic the reader.
//!
//! Default: over 10^5 mutations (about 7 s of CPU). Longer: `DTB_MUTATIONS=200000 cargo test -p
//! devicetree --test mutations -- --nocapture` (random mutations per fixture, 10^6 in all; the
//! test profile optimises this crate but keeps overflow checks; see docs/TESTING.md).
mod common;

use common::*;

#[test]
fn mutations_of_qemu_virt_trees_never_panic() {
    let random: usize = std::env::var("DTB_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(4_000);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // counted and reported below instead
    let mut total = (0, 0, 0);
    let mut panics = Vec::new();
    let mut mismatches = Vec::new();
    // One thread per fixture: the work is independent and the machine has more than one core.
    let reports: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = FIXTURES
            .iter()
            .enumerate()
            .map(|(i, (name, blob))| {
                scope.spawn(move || mutate_all(name, blob, random, 0x9e37_79b9_7f4a_7c15 ^ i as u64))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a mutation thread")).collect()
    });
    for ((name, _), report) in FIXTURES.iter().zip(reports) {
        println!(
            "{name}: {} mutations, {} read as trees, {} panics",
            report.runs, report.accepted, report.panics
        );
        total = (total.0 + report.runs, total.1 + report.accepted, total.2 + report.panics);
        panics.extend(report.first_panics);
        mismatches.extend(report.nop_mismatches);
    }
    std::panic::set_hook(hook);
    println!("all: {} mutations, {} read as trees, {} panics", total.0, total.1, total.2);
    assert_eq!(total.2, 0, "panics: {panics:#?}");
    assert!(mismatches.is_empty(), "a NOP changed what was read: {mismatches:#?}");
    assert!(total.0 >= 100_000, "{} mutations: fewer than 10^5", total.0);
    assert!(total.1 > 1000, "some mutations still read as trees ({})", total.1);
}
