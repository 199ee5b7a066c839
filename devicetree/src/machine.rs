//! What the kernel needs to know about the machine, read from a validated tree: RAM, reserved
//! ranges, the console, the CPUs and how to start them, PSCI, the interrupt controller, the
//! initrd and the command line.
//!
//! Each query follows the binding Linux follows (named at each function), checks what it reads,
//! and turns a missing or unreadable piece into a message that names it: the caller decides what
//! is fatal. Nothing here indexes without a check or does unchecked arithmetic on tree values.
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use mm::phys::RegionSet;

use crate::fdt::{Fdt, Node, read_cells};

/// The MPIDR affinity fields (Aff3 in bits 39:32, Aff2..Aff0 in 23:0): a `cpu` node's `reg`
/// holds only these (Linux Documentation/devicetree/bindings/arm/cpus.yaml).
pub const MPIDR_AFFINITY: u64 = 0xff_00ff_ffff;

/// A reserved physical range and why it is reserved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// Start.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// Where the reservation comes from.
    pub what: String,
    /// `no-map`: not even the linear map may cover it (firmware-owned memory whose speculative
    /// access can fault).
    pub no_map: bool,
}

/// The console the device tree names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleNode {
    /// Full node path (`stdout-path` with options stripped and an alias resolved).
    pub path: String,
    /// First `compatible` string.
    pub compatible: String,
    /// CPU physical address of its registers (translated through the buses' `ranges`).
    pub pa: u64,
}

/// How PSCI calls reach the firmware (`/psci` `method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsciMethod {
    /// `hvc`: a hypervisor call.
    Hvc,
    /// `smc`: a secure monitor call.
    Smc,
}

/// How a secondary CPU is started (`enable-method`, Linux arm64 `cpu_read_ops`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnableMethod {
    /// PSCI `CPU_ON`.
    Psci,
    /// A spin-table release: the entry address is written to `cpu-release-addr`.
    SpinTable,
    /// Something else (named as the tree has it).
    Other(String),
    /// No `enable-method`.
    Missing,
}

impl core::fmt::Display for EnableMethod {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Psci => f.write_str("psci"),
            Self::SpinTable => f.write_str("spin-table"),
            Self::Other(name) => f.write_str(name),
            Self::Missing => f.write_str("(none)"),
        }
    }
}

/// A CPU the device tree describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuNode {
    /// MPIDR affinity (the node's `reg`, masked with [`MPIDR_AFFINITY`]).
    pub mpidr: u64,
    /// How to start it.
    pub enable_method: EnableMethod,
    /// `cpu-release-addr` (spin-table CPUs).
    pub release_addr: Option<u64>,
}

/// What the kernel needs from the device tree.
#[derive(Debug)]
pub struct Machine<'a> {
    /// The tree.
    pub fdt: Fdt<'a>,
    /// `/model`, or "(no model)".
    pub model: &'a str,
    /// RAM: the `reg` of every available root child with `device_type = "memory"`.
    pub memory: RegionSet<64>,
    /// `/memreserve/` entries and available `/reserved-memory` children with a `reg`.
    pub reserved: Vec<Reserved>,
    /// The console, or why there is none usable.
    pub console: Result<ConsoleNode, String>,
    /// PSCI method, if there is a PSCI node with a known `method`.
    pub psci: Option<PsciMethod>,
    /// The interrupt controller the root's `interrupt-parent` names (or a known one found by
    /// compatible): its first compatible and first `reg` address (bus address), for the report.
    pub interrupt_controller: Option<(String, u64)>,
    /// `/chosen/bootargs` ("" without).
    pub bootargs: &'a str,
    /// The CPUs under `/cpus` that have a readable `reg`.
    pub cpus: Vec<CpuNode>,
    /// The initrd (`/chosen` `linux,initrd-start` and `linux,initrd-end`), physical, when it
    /// lies inside one range of `memory`.
    pub initrd: Option<(u64, u64)>,
    /// What was found odd and left out (an unreadable `reg`, a range that wraps, too many memory
    /// ranges), for the boot report.
    pub problems: Vec<String>,
}

/// Translates `addr`, a `reg` address of the node at `path`, to a CPU physical address through
/// the `ranges` of every ancestor bus (devicetree specification 2.3.8), innermost first.
///
/// An ancestor with an empty `ranges` maps 1:1; one without `ranges` (other than the root) means
/// the address is not reachable from the CPU.
///
/// # Errors
/// A message naming the bus that does not translate the address.
pub fn translate(fdt: &Fdt<'_>, path: &str, addr: u64) -> Result<u64, String> {
    // Ancestors below the root, outermost first: "/soc", "/soc/bus", ... (the node excluded).
    let ancestors: Vec<&str> =
        path.char_indices().skip(1).filter(|&(_, c)| c == '/').filter_map(|(i, _)| path.get(..i)).collect();
    let mut addr = addr;
    for bus_path in ancestors.iter().rev() {
        let bus = fdt.find_node(bus_path).ok_or_else(|| format!("no node {bus_path:?}"))?;
        let child = bus.child_cells();
        let parent_cells = bus.cells().address;
        let Some(ranges) = bus.property("ranges") else {
            return Err(format!("bus {bus_path:?} has no ranges: {addr:#x} is not a CPU address"));
        };
        if ranges.value.is_empty() {
            continue; // identity
        }
        if child.address > 2 || parent_cells > 2 || child.size > 2 {
            return Err(format!("bus {bus_path:?}: ranges with more than 64-bit cells are not read"));
        }
        let entry = (child.address + parent_cells + child.size) as usize * 4;
        if entry == 0 {
            return Err(format!("bus {bus_path:?}: ranges with zero-cell entries"));
        }
        let found = ranges.value.chunks_exact(entry).find_map(|e| {
            let child_addr = read_cells(e, child.address)?;
            let parent_addr = read_cells(e.get(child.address as usize * 4..)?, parent_cells)?;
            let size = read_cells(e.get((child.address + parent_cells) as usize * 4..)?, child.size)?;
            let offset = addr.checked_sub(child_addr)?;
            if offset < size { parent_addr.checked_add(offset) } else { None }
        });
        addr = found.ok_or_else(|| format!("bus {bus_path:?}: no ranges entry covers {addr:#x}"))?;
    }
    Ok(addr)
}

/// The first node (depth first, in tree order) whose `compatible` holds one of `compatible`,
/// with its full path (which [`translate`] needs).
pub fn find_compatible_path<'a>(fdt: &Fdt<'a>, compatible: &[&str]) -> Option<(String, Node<'a>)> {
    let mut walk = fdt.walk();
    while let Some(node) = walk.next() {
        if node.is_compatible(compatible) {
            return Some((walk.path(), node));
        }
    }
    None
}

/// `reg` entry `index` of the node at `path`, translated to a CPU physical address, and its size
/// (0 when the bus gives none).
///
/// # Errors
/// A message naming what is missing or untranslatable.
pub fn reg_translated(fdt: &Fdt<'_>, path: &str, node: Node<'_>, index: usize) -> Result<(u64, u64), String> {
    let region = node
        .reg()
        .ok_or_else(|| format!("{path}: no reg, or one with cells wider than 64 bits"))?
        .nth(index)
        .ok_or_else(|| format!("{path}: no reg entry {index}"))?;
    let pa = translate(fdt, path, region.address)?;
    Ok((pa, region.size.unwrap_or(0)))
}

/// The interrupt parent of the node at `path`: its own `interrupt-parent`, else the nearest
/// ancestor's (spec 2.4.1: the property is inherited).
pub fn interrupt_parent<'a>(fdt: &Fdt<'a>, path: &str) -> Option<Node<'a>> {
    let mut here = path;
    loop {
        if let Some(phandle) = fdt.find_node(here)?.u32_property("interrupt-parent") {
            return fdt.find_phandle(phandle);
        }
        if here == "/" {
            return None;
        }
        here = match here.rfind('/') {
            Some(0) => "/",
            Some(i) => here.get(..i)?,
            None => return None,
        };
    }
}

/// Names the interrupt controller a tree has, for a report when no driver knows it: the timer's
/// interrupt parent (the controller the tick would need), else the root's, else any node with
/// `interrupt-controller`: "name (first compatible)".
pub fn describe_interrupt_controller(fdt: &Fdt<'_>) -> Option<String> {
    let timer = find_compatible_path(fdt, &["arm,armv8-timer", "arm,armv7-timer"]);
    let node = timer
        .and_then(|(path, _)| interrupt_parent(fdt, &path))
        .or_else(|| interrupt_parent(fdt, "/"))
        .or_else(|| fdt.walk().find(|n| n.property("interrupt-controller").is_some()))?;
    Some(format!("{} ({})", node.name(), node.first_compatible().unwrap_or("no compatible")))
}

/// The CPUs in `/cpus` (children with `device_type = "cpu"` and a one- or two-cell `reg`).
pub fn cpu_nodes(fdt: &Fdt<'_>) -> Vec<CpuNode> {
    let Some(cpus) = fdt.find_node("/cpus") else { return Vec::new() };
    cpus.children()
        .filter(|node| node.str_property("device_type") == Some("cpu"))
        .filter_map(|node| {
            let mpidr = node.property("reg")?.as_u64()? & MPIDR_AFFINITY;
            let enable_method = match node.str_property("enable-method") {
                Some("psci") => EnableMethod::Psci,
                Some("spin-table") => EnableMethod::SpinTable,
                Some(other) => EnableMethod::Other(String::from(other)),
                None => EnableMethod::Missing,
            };
            // Always two cells in the binding; one cell is read too (some old trees).
            let release_addr = node.property("cpu-release-addr").and_then(|p| p.as_u64());
            Some(CpuNode { mpidr, enable_method, release_addr })
        })
        .collect()
}

/// Resolves `/chosen/stdout-path` to a node: strips `:options`, resolves an alias, and
/// translates its `reg` address through the buses above it (Linux `of_console_check`,
/// `early_init_dt_scan_chosen_stdout`).
fn console(fdt: &Fdt<'_>, chosen: Option<Node<'_>>) -> Result<ConsoleNode, String> {
    let chosen = chosen.ok_or_else(|| String::from("no /chosen node"))?;
    let path = chosen
        .str_property("stdout-path")
        .or_else(|| chosen.str_property("linux,stdout-path"))
        .ok_or_else(|| String::from("/chosen has no stdout-path"))?;
    let path = path.split(':').next().unwrap_or(path);
    let full = if path.starts_with('/') {
        Some(path)
    } else {
        let alias = path.split('/').next().unwrap_or(path);
        fdt.find_node("/aliases").and_then(|aliases| aliases.str_property(alias)).map(|_| path)
    }
    .ok_or_else(|| format!("stdout-path {path:?} is neither a path nor an alias"))?;
    let (real, node) =
        fdt.find_node_path(full).ok_or_else(|| format!("stdout-path {path:?} names no node"))?;
    let compatible = node
        .first_compatible()
        .map(String::from)
        .ok_or_else(|| format!("console node {real:?} has no compatible"))?;
    let (pa, _) = reg_translated(fdt, &real, node, 0).map_err(|e| format!("console node: {e}"))?;
    Ok(ConsoleNode { path: real, compatible, pa })
}

impl<'a> Machine<'a> {
    /// Reads what the kernel needs from a validated tree.
    pub fn from_fdt(fdt: Fdt<'a>) -> Self {
        let mut problems = Vec::new();
        let root = fdt.root();
        // Memory nodes are children of the root (spec 3.4; Linux `early_init_dt_scan_memory`
        // also skips unavailable ones).
        let mut memory = RegionSet::new();
        for node in root.children() {
            if node.str_property("device_type") != Some("memory") || !node.is_available() {
                continue;
            }
            let Some(reg) = node.reg() else {
                problems.push(format!("memory node {}: no readable reg", node.name()));
                continue;
            };
            for r in reg {
                let size = r.size.unwrap_or(0);
                let end = r.address.checked_add(size).unwrap_or_else(|| {
                    problems.push(format!(
                        "memory node {}: [{:#x} + {size:#x}) wraps",
                        node.name(),
                        r.address
                    ));
                    u64::MAX
                });
                if memory.add(r.address, end).is_err() {
                    problems.push(format!(
                        "memory node {}: too many ranges, [{:#x}, {end:#x}) left out",
                        node.name(),
                        r.address
                    ));
                }
            }
        }
        let mut reserved = Vec::new();
        let mut reserve = |start: u64, size: u64, what: String, no_map: bool, problems: &mut Vec<String>| {
            let end = start.checked_add(size).unwrap_or_else(|| {
                problems.push(format!("{what}: [{start:#x} + {size:#x}) wraps; reserved to the top"));
                u64::MAX
            });
            reserved.push(Reserved { start, end, what, no_map });
        };
        for (start, size) in fdt.reservations() {
            reserve(start, size, String::from("/memreserve/"), false, &mut problems);
        }
        if let Some(node) = fdt.find_node("/reserved-memory") {
            for child in node.children().filter(Node::is_available) {
                let what = format!("/reserved-memory/{}", child.name());
                let no_map = child.property("no-map").is_some();
                match child.reg() {
                    Some(reg) => {
                        for r in reg {
                            reserve(r.address, r.size.unwrap_or(0), what.clone(), no_map, &mut problems);
                        }
                    }
                    // A dynamic reservation (`size`, `alloc-ranges`) is the OS's to place: none here.
                    None if child.property("reg").is_none() => {}
                    None => problems.push(format!("{what}: unreadable reg")),
                }
            }
        }
        let interrupt_controller = root
            .u32_property("interrupt-parent")
            .and_then(|phandle| fdt.find_phandle(phandle))
            .or_else(|| {
                fdt.find_compatible(&[
                    "arm,gic-v3",
                    "arm,cortex-a15-gic",
                    "arm,gic-400",
                    "brcm,bcm2836-l1-intc",
                ])
            })
            .and_then(|node| {
                let compatible = node.first_compatible()?;
                let base = node.reg().and_then(|mut r| r.next()).map_or(0, |r| r.address);
                Some((String::from(compatible), base))
            });
        // The PSCI node is `/psci` by the binding (arm/psci.yaml); some trees put it elsewhere.
        let psci_node = fdt
            .find_node("/psci")
            .or_else(|| fdt.find_compatible(&["arm,psci-1.0", "arm,psci-0.2", "arm,psci"]));
        let psci = psci_node.and_then(|n| match n.str_property("method") {
            Some("hvc") => Some(PsciMethod::Hvc),
            Some("smc") => Some(PsciMethod::Smc),
            _ => None,
        });
        let chosen = fdt.find_node("/chosen");
        let initrd = chosen.and_then(|chosen| {
            let start = chosen.property("linux,initrd-start")?.as_u64()?;
            let end = chosen.property("linux,initrd-end")?.as_u64()?;
            (start < end).then_some((start, end))
        });
        // The kernel reads the initrd through its linear map of RAM: one outside RAM is left out
        // (Linux's arm64_memblock_init does the same: "initrd not fully accessible").
        let initrd = initrd.filter(|&(start, end)| {
            let inside = memory.ranges().iter().any(|&(s, e)| s <= start && end <= e);
            if !inside {
                problems.push(format!("initrd [{start:#x}, {end:#x}) is not inside the memory"));
            }
            inside
        });
        Self {
            model: root.str_property("model").unwrap_or("(no model)"),
            bootargs: chosen.and_then(|n| n.str_property("bootargs")).unwrap_or(""),
            memory,
            reserved,
            console: console(&fdt, chosen),
            psci,
            interrupt_controller,
            cpus: cpu_nodes(&fdt),
            initrd,
            problems,
            fdt,
        }
    }

    /// Whether `/chosen/bootargs` holds `word` as a whole word (e.g. `selftest=fault`).
    pub fn has_bootarg(&self, word: &str) -> bool {
        self.bootargs.split_ascii_whitespace().any(|w| w == word)
    }
}
