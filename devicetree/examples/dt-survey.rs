//! `dt-survey DIR [--goals C,I,P]`: the kernel's own discovery (this crate's `Machine` and
//! `support`) run over every `.dtb` under DIR, one line per tree, then the summary
//!
//! ```text
//! N trees: console driver C, interrupt controller I, CPUs startable P, all three A, panics 0
//! ```
//!
//! "console driver": `/chosen/stdout-path` names a node whose `compatible` list has a string the
//! kernel drives and whose registers it can read; "interrupt controller": one the kernel drives;
//! "CPUs startable": every CPU of a multi-CPU tree has an enable method the kernel can use (a
//! single CPU needs none). `--goals C,I,P` (percentages) makes the exit status fail when the
//! console figure is below C% of the trees that name a console, or the other two below I% and P%
//! of all trees, or anything panicked. `scripts/dt-survey` runs it; `scripts/test` checks it.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use devicetree::support::{IntcFamily, cpu_start_problem, gicv3_layout, interrupt_controller, uart_config};
use devicetree::{Fdt, Machine};

fn dtbs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            dtbs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "dtb") {
            out.push(path);
        }
    }
    Ok(())
}

/// What one tree gave.
#[derive(Default)]
struct Tree {
    line: String,
    names_console: bool,
    console_driver: bool,
    intc: bool,
    cpus: bool,
    /// The console's first compatible when no driver took it (for the table of what is missing).
    missing_console: Option<String>,
    missing_intc: Option<String>,
}

fn survey(blob: &[u8]) -> Tree {
    let fdt = match Fdt::new(blob) {
        Ok(fdt) => fdt,
        Err(e) => return Tree { line: format!("rejected: {e}"), ..Tree::default() },
    };
    let m = Machine::from_fdt(fdt);
    let mut t = Tree::default();
    let console = match &m.console {
        Err(why) => format!("console none ({why})"),
        Ok(c) => {
            t.names_console = true;
            let node = m.fdt.find_node(&c.path);
            match node.map(|n| uart_config(&m.fdt, &c.path, &n)) {
                Some(Ok(u)) => {
                    t.console_driver = true;
                    let layout = if u.reg_shift != 0 || u.reg_io_width != 4 {
                        format!(" reg-shift {} io-width {}", u.reg_shift, u.reg_io_width)
                    } else {
                        String::new()
                    };
                    format!("console {} -> {} ({}{layout})", c.path, u.family.name(), u.compatible)
                }
                Some(Err(why)) => {
                    t.missing_console = Some(c.compatible.clone());
                    format!("console {} ({}) -> none: {why}", c.path, c.compatible)
                }
                None => format!("console {} -> none: node vanished", c.path),
            }
        }
    };
    let intc = match interrupt_controller(&m.fdt) {
        Ok((IntcFamily::GicV3, path, node)) => match gicv3_layout(&m.fdt, &path, &node) {
            Ok(l) => {
                t.intc = true;
                let stride = l.stride.map_or(String::new(), |s| format!(", stride {s:#x}"));
                format!(
                    "intc {path} GICv3 supported ({} redistributor regions{stride})",
                    l.redistributor_regions.len()
                )
            }
            Err(why) => {
                t.missing_intc = Some(why.clone());
                format!("intc unsupported: {why}")
            }
        },
        Ok((family, path, _)) => {
            t.intc = true;
            format!("intc {path} {} supported", family.name())
        }
        Err(why) => {
            t.missing_intc = Some(why.clone());
            format!("intc unsupported: {why}")
        }
    };
    let mut methods: Vec<String> = m.cpus.iter().map(|c| c.enable_method.to_string()).collect();
    methods.sort();
    methods.dedup();
    let problems: Vec<String> = m.cpus.iter().filter_map(|c| cpu_start_problem(&m, c)).collect();
    t.cpus = m.cpus.len() == 1 || (!m.cpus.is_empty() && problems.is_empty());
    let cpus = format!(
        "cpus {} ({}) {}",
        m.cpus.len(),
        methods.join(","),
        if t.cpus {
            String::from("startable")
        } else {
            format!("not startable: {}", problems.first().map_or("no CPUs", String::as_str))
        }
    );
    let memory = match m.memory.total() {
        0 => String::from("memory from the loader"),
        total => format!("memory {} MiB", total >> 20),
    };
    t.line = format!("{console} | {intc} | {cpus} | {memory}");
    t
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: dt-survey DIR [--goals CONSOLE%,INTC%,CPUS%]");
        return ExitCode::from(2);
    };
    let goals: Option<Vec<usize>> = match args.get(1).map(String::as_str) {
        Some("--goals") => {
            match args.get(2).map(|g| g.split(',').map(str::parse).collect::<Result<Vec<usize>, _>>()) {
                Some(Ok(g)) if g.len() == 3 => Some(g),
                _ => {
                    eprintln!("--goals takes three percentages: C,I,P");
                    return ExitCode::from(2);
                }
            }
        }
        Some(other) => {
            eprintln!("unknown argument {other:?}");
            return ExitCode::from(2);
        }
        None => None,
    };
    let mut files = Vec::new();
    if let Err(e) = dtbs(Path::new(dir), &mut files) {
        eprintln!("{dir}: {e}");
        return ExitCode::from(2);
    }
    files.sort();
    std::panic::set_hook(Box::new(|_| {}));
    let (mut named, mut console, mut intc, mut cpus, mut all, mut panics) = (0, 0, 0, 0, 0, 0);
    let mut missing_console: BTreeMap<String, usize> = BTreeMap::new();
    let mut missing_intc: BTreeMap<String, usize> = BTreeMap::new();
    for file in &files {
        let name = file.strip_prefix(dir).unwrap_or(file).display().to_string();
        let blob = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => {
                println!("{name}: unreadable: {e}");
                continue;
            }
        };
        match std::panic::catch_unwind(|| survey(&blob)) {
            Err(_) => {
                panics += 1;
                println!("{name}: PANIC");
            }
            Ok(t) => {
                println!("{name}: {}", t.line);
                named += usize::from(t.names_console);
                console += usize::from(t.console_driver);
                intc += usize::from(t.intc);
                cpus += usize::from(t.cpus);
                all += usize::from(t.console_driver && t.intc && t.cpus);
                if let Some(c) = t.missing_console {
                    *missing_console.entry(c).or_default() += 1;
                }
                if let Some(i) = t.missing_intc {
                    *missing_intc.entry(i).or_default() += 1;
                }
            }
        }
    }
    let n = files.len();
    let mut missing: Vec<(usize, String)> = missing_console.into_iter().map(|(c, k)| (k, c)).collect();
    missing.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (count, compatible) in missing.iter().take(15) {
        println!("  console without a driver: {compatible} ({count})");
    }
    let mut missing: Vec<(usize, String)> = missing_intc.into_iter().map(|(c, k)| (k, c)).collect();
    missing.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (count, why) in missing.iter().take(10) {
        println!("  interrupt controller: {why} ({count})");
    }
    let pct = |part: usize, whole: usize| (part * 100).checked_div(whole).unwrap_or(0);
    println!(
        "{named} of {n} trees name a console: {}% have its driver; interrupt controller {}%, CPUs startable {}% of all",
        pct(console, named),
        pct(intc, n),
        pct(cpus, n)
    );
    println!(
        "{n} trees: console driver {console}, interrupt controller {intc}, CPUs startable {cpus}, all three {all}, panics {panics}"
    );
    let mut ok = panics == 0 && n > 0;
    if let Some(g) = goals {
        for (what, part, whole, goal) in [
            ("console driver", console, named, g[0]),
            ("interrupt controller", intc, n, g[1]),
            ("CPUs startable", cpus, n, g[2]),
        ] {
            // part/whole >= goal% without rounding.
            if part * 100 < goal * whole {
                println!("goal missed: {what} {part} of {whole} is below {goal}%");
                ok = false;
            }
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
