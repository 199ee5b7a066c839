//! Mutations of QEMU virt's trees (tests/fixtures): header fields, structure tokens and property
//! fields at extremes, every truncation, a NOP at every token boundary (which must read the
//! same), and random byte, bit and word changes. No input may panic the reader.
//!
//! Default: over 10^5 mutations in a few seconds. Longer: `DTB_MUTATIONS=2000000 cargo test
//! --release -p devicetree --test mutations` (random mutations per fixture; see docs/TESTING.md).
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
    for (i, (name, blob)) in FIXTURES.iter().enumerate() {
        let report = mutate_all(name, blob, random, 0x9e37_79b9_7f4a_7c15 ^ i as u64);
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
