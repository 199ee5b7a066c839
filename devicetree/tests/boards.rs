//! Every board tree of Debian's arm64 Linux package: each must be read (it is dtc's output, so a
//! rejection is a reader bug), none may panic, and the discovery counts are printed (memory,
//! console, CPUs, PSCI, interrupt controller). Then random mutations of each tree: no panic.
//!
//! Ignored by default (the corpus is downloaded): scripts/test unpacks the package's .dtb files
//! into target/boards/linux-dtbs and runs `DTB_CORPUS=target/boards/linux-dtbs cargo test -p
//! devicetree --test boards -- --ignored --nocapture`. `DTB_BOARD_MUTATIONS=N` sets the
//! mutations per tree (default 100).
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use devicetree::{Fdt, Machine};

fn dtbs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            dtbs(&path, out);
        } else if path.extension().is_some_and(|e| e == "dtb") {
            out.push(path);
        }
    }
}

#[test]
#[ignore = "needs the board corpus: DTB_CORPUS=dir (scripts/test sets it up)"]
fn every_debian_board_tree_is_read_without_panic() {
    let dir = std::env::var("DTB_CORPUS").expect("DTB_CORPUS names the directory of .dtb files");
    let mutations: usize =
        std::env::var("DTB_BOARD_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let mut files = Vec::new();
    dtbs(Path::new(&dir), &mut files);
    files.sort();
    assert!(files.len() >= 100, "only {} .dtb files under {dir}", files.len());
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (mut memory, mut console, mut cpus, mut psci, mut intc, mut spin) = (0, 0, 0, 0, 0, 0);
    let mut rejected = Vec::new();
    let mut panics = Vec::new();
    let mut console_problems: BTreeMap<String, usize> = BTreeMap::new();
    let (mut runs, mut mutated_read) = (0usize, 0usize);
    for (i, file) in files.iter().enumerate() {
        let name = file.strip_prefix(&dir).unwrap_or(file).display().to_string();
        let blob = std::fs::read(file).unwrap();
        match std::panic::catch_unwind(|| exercise(&blob)) {
            Err(_) => panics.push(name.clone()),
            Ok(Outcome::Rejected(e)) => rejected.push(format!("{name}: {e}")),
            Ok(Outcome::Read(_)) => {
                let m = Machine::from_fdt(Fdt::new(&blob).unwrap());
                memory += usize::from(m.memory.total() > 0);
                cpus += usize::from(!m.cpus.is_empty());
                psci += usize::from(m.psci.is_some());
                intc += usize::from(m.interrupt_controller.is_some());
                spin += usize::from(
                    m.cpus.iter().any(|c| c.enable_method == devicetree::EnableMethod::SpinTable),
                );
                match &m.console {
                    Ok(_) => console += 1,
                    Err(why) => {
                        // Group by the message's shape (paths and names vary by board).
                        let shape = why.split('"').step_by(2).collect::<Vec<_>>().join("\"…\"");
                        *console_problems.entry(shape).or_default() += 1;
                    }
                }
            }
        }
        let mut rng = Rng(0x5851_f42d_4c95_7f2d ^ (i as u64 + 1));
        let total = header(&blob, 1);
        for _ in 0..mutations {
            let mut b = blob.clone();
            match rng.below(4) {
                0 => {
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(b.len());
                        b[at] ^= 1 << rng.below(8);
                    }
                }
                1 => {
                    let at = (rng.below(b.len()) & !3).min(b.len() - 4);
                    let v = extremes(be32(&b, at), total);
                    let pick = v[rng.below(v.len())];
                    put32(&mut b, at, pick);
                }
                2 => {
                    let field = rng.below(10);
                    let v = extremes(header(&b, field), total);
                    let pick = v[rng.below(v.len())];
                    put32(&mut b, 4 * field, pick);
                }
                _ => b.truncate(rng.below(b.len())),
            }
            runs += 1;
            match std::panic::catch_unwind(|| {
                Fdt::new(&b).map(|fdt| common::summary(&Machine::from_fdt(fdt)))
            }) {
                Err(_) if panics.len() < 20 => panics.push(format!("{name}: mutation {runs}")),
                Ok(Ok(_)) => mutated_read += 1,
                _ => {}
            }
        }
    }
    std::panic::set_hook(hook);
    let n = files.len();
    println!(
        "{n} board trees: {} read, {} rejected, {} panics",
        n - rejected.len() - panics.len(),
        rejected.len(),
        panics.len()
    );
    println!(
        "  memory: {memory}, console: {console}, cpus: {cpus}, psci: {psci}, spin-table cpus: {spin}, interrupt controller: {intc}"
    );
    for (why, count) in &console_problems {
        println!("  no console ({count}): {why}");
    }
    println!("{runs} mutations of them: {mutated_read} still read as trees, 0 panics expected");
    assert!(panics.is_empty(), "panics: {panics:#?}");
    assert!(rejected.is_empty(), "valid trees rejected: {rejected:#?}");
    assert!(cpus > n * 9 / 10, "most board trees name their CPUs ({cpus} of {n})");
}
