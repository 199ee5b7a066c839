//! The machine, as the device tree describes it.
//!
//! Parsing is the `fdt` crate's; this module decides what the kernel needs and checks it, so that
//! a device tree that lacks something gets a message naming what is missing. Helpers of `fdt`
//! that panic on a missing node (`memory()`, `chosen()`, `root()`) are not used; nodes are looked
//! up and checked here instead. A structurally corrupt blob can still trip an assertion inside
//! `fdt`; the panic handler then names the boot phase ("reading the device tree"), so even that
//! ends with a clear message and a failing exit.
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use fdt::Fdt;
use fdt::node::FdtNode;
use mm::phys::RegionSet;

use crate::arch::psci::Conduit;

/// FDT header magic (big-endian 0xd00dfeed).
pub const FDT_MAGIC: u32 = 0xd00d_feed;
/// Largest device tree the boot protocol allows (booting.rst: at most 2 MiB).
pub const FDT_MAX_SIZE: usize = 2 << 20;

/// Why x0 is not a usable device tree.
#[derive(Debug)]
pub enum FdtProblem {
    /// x0 was zero, misaligned or beyond 48 bits, so it was not even mapped.
    NotMapped,
    /// The first word is not the FDT magic.
    BadMagic(u32),
    /// `totalsize` is out of bounds.
    BadSize(u32),
    /// The `fdt` crate refused the header.
    Rejected(fdt::FdtError),
}

/// A reserved physical range and why it is reserved.
#[derive(Clone, Debug)]
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
#[derive(Clone, Debug)]
pub struct ConsoleNode {
    /// Full node path (`stdout-path` with options stripped and an alias resolved).
    pub path: String,
    /// First `compatible` string.
    pub compatible: String,
    /// CPU physical address of its registers (translated through the buses' `ranges`).
    pub pa: u64,
}

/// What the kernel needs from the device tree.
pub struct Machine {
    /// The parsed tree.
    pub fdt: Fdt<'static>,
    /// `/model`, or "(no model)".
    pub model: String,
    /// RAM, from every node with `device_type = "memory"`.
    pub memory: RegionSet<64>,
    /// `/memreserve/` entries and `/reserved-memory` children with a `reg`.
    pub reserved: Vec<Reserved>,
    /// The console, or why there is none usable.
    pub console: Result<ConsoleNode, String>,
    /// PSCI conduit, if there is a `/psci` node with a known `method`.
    pub psci: Option<Conduit>,
    /// The interrupt controller the root's `interrupt-parent` names: compatible and register base
    /// (bus address), for the boot report (the driver finds its own node: `drivers::intc`).
    pub interrupt_controller: Option<(String, u64)>,
    /// `/chosen/bootargs`.
    pub bootargs: String,
    /// Number of `cpu` nodes under `/cpus`.
    pub cpus: usize,
    /// The initrd (`/chosen` `linux,initrd-start` and `linux,initrd-end`), physical.
    pub initrd: Option<(u64, u64)>,
}

impl core::fmt::Display for FdtProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotMapped => write!(f, "it is zero, not 8-byte aligned, or beyond 48 bits"),
            Self::BadMagic(magic) => {
                write!(f, "its first word is {magic:#010x}, not the FDT magic {FDT_MAGIC:#010x}")
            }
            Self::BadSize(size) => write!(
                f,
                "its totalsize {size} is below 40 bytes or above the 2 MiB the boot protocol allows"
            ),
            Self::Rejected(e) => write!(f, "the fdt crate rejects its header: {e:?}"),
        }
    }
}

/// Checks the blob at `va` (mapped, at least `window` bytes readable) and parses it.
///
/// # Errors
/// An [`FdtProblem`] saying what is wrong with it.
///
/// # Safety
/// `[va, va + window)` is mapped readable for the kernel's life and not written by anyone.
pub unsafe fn open(va: u64, window: usize) -> Result<Fdt<'static>, FdtProblem> {
    // SAFETY: the caller guarantees the window is mapped; the header is 8-byte aligned (x0 was).
    let magic = u32::from_be(unsafe { (va as *const u32).read_volatile() });
    if magic != FDT_MAGIC {
        return Err(FdtProblem::BadMagic(magic));
    }
    // SAFETY: as above; totalsize is the second header word.
    let size = u32::from_be(unsafe { ((va + 4) as *const u32).read_volatile() });
    if (size as usize) < 40 || size as usize > FDT_MAX_SIZE || size as usize > window {
        return Err(FdtProblem::BadSize(size));
    }
    // SAFETY: `size` bytes from `va` lie inside the mapped, immutable window.
    let bytes = unsafe { core::slice::from_raw_parts(va as *const u8, size as usize) };
    Fdt::new(bytes).map_err(FdtProblem::Rejected)
}

fn reg_first(node: FdtNode<'_, '_>) -> Option<(u64, u64)> {
    let region = node.reg()?.next()?;
    Some((region.starting_address as u64, region.size.unwrap_or(0) as u64))
}

fn str_prop<'a>(node: FdtNode<'_, 'a>, name: &str) -> Option<&'a str> {
    let value = node.property(name)?.value;
    let value = value.strip_suffix(&[0]).unwrap_or(value);
    core::str::from_utf8(value).ok()
}

/// Reads `cells` big-endian 32-bit cells from `bytes` as one number (at most 2 cells).
fn read_cells(bytes: &[u8], cells: usize) -> Option<u64> {
    if cells > 2 || bytes.len() < cells * 4 {
        return None;
    }
    Some(
        bytes[..cells * 4]
            .chunks_exact(4)
            .fold(0u64, |acc, c| (acc << 32) | u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]))),
    )
}

/// Translates `addr`, a `reg` address of the node at `path`, to a CPU physical address through
/// the `ranges` of every ancestor bus (devicetree specification 2.3.8), innermost first.
///
/// The `fdt` crate reads `reg` with the parent's cell sizes but does not translate. An ancestor
/// with an empty `ranges` maps 1:1; one without `ranges` (other than the root) means the address
/// is not reachable from the CPU, which is an error naming the bus.
///
/// # Errors
/// A message naming the bus that does not translate the address.
pub fn translate(fdt: &Fdt<'_>, path: &str, addr: u64) -> Result<u64, String> {
    // Ancestors from the root down: "/", "/soc", ... (the node itself excluded).
    let mut ancestors: Vec<&str> = Vec::new();
    for (i, c) in path.char_indices().skip(1) {
        if c == '/' {
            ancestors.push(&path[..i]);
        }
    }
    let mut addr = addr;
    // Innermost bus first: the node's parent translates into the grandparent's space, and so on.
    for (depth, bus_path) in ancestors.iter().enumerate().rev() {
        let bus = fdt.find_node(bus_path).ok_or_else(|| alloc::format!("no node {bus_path:?}"))?;
        let parent_path = if depth == 0 { "/" } else { ancestors[depth - 1] };
        let parent = fdt.find_node(parent_path).ok_or_else(|| alloc::format!("no node {parent_path:?}"))?;
        let child_cells = bus.cell_sizes().address_cells;
        let size_cells = bus.cell_sizes().size_cells;
        let parent_cells = parent.cell_sizes().address_cells;
        let Some(ranges) = bus.property("ranges") else {
            return Err(alloc::format!("bus {bus_path:?} has no ranges: {addr:#x} is not a CPU address"));
        };
        if ranges.value.is_empty() {
            continue; // identity
        }
        let entry = (child_cells + parent_cells + size_cells) * 4;
        let found = ranges.value.chunks_exact(entry.max(4)).find_map(|e| {
            let child = read_cells(e, child_cells)?;
            let parent_addr = read_cells(&e[child_cells * 4..], parent_cells)?;
            let size = read_cells(&e[(child_cells + parent_cells) * 4..], size_cells)?;
            (addr >= child && addr - child < size).then(|| parent_addr + (addr - child))
        });
        addr = found.ok_or_else(|| alloc::format!("bus {bus_path:?}: no ranges entry covers {addr:#x}"))?;
    }
    Ok(addr)
}

/// The first node (depth first, in tree order) whose `compatible` list holds one of `compatible`,
/// with its full path (the `fdt` crate's own search does not give paths, which [`translate`]
/// needs).
pub fn find_compatible_path<'b, 'a>(
    fdt: &'b Fdt<'a>,
    compatible: &[&str],
) -> Option<(String, FdtNode<'b, 'a>)> {
    fn walk<'b, 'a>(
        node: FdtNode<'b, 'a>,
        path: &mut String,
        want: &[&str],
    ) -> Option<(String, FdtNode<'b, 'a>)> {
        for child in node.children() {
            let len = path.len();
            if !path.ends_with('/') {
                path.push('/');
            }
            path.push_str(child.name);
            if child.compatible().is_some_and(|c| c.all().any(|s| want.contains(&s))) {
                return Some((path.clone(), child));
            }
            if let Some(found) = walk(child, path, want) {
                return Some(found);
            }
            path.truncate(len);
        }
        None
    }
    let root = fdt.find_node("/")?;
    walk(root, &mut String::from("/"), compatible)
}

/// The first `reg` address of the node at `path`, translated to a CPU physical address, and the
/// region's size.
///
/// # Errors
/// A message naming what is missing or untranslatable.
pub fn reg_translated(
    fdt: &Fdt<'_>,
    path: &str,
    node: FdtNode<'_, '_>,
    index: usize,
) -> Result<(u64, u64), String> {
    let region = node
        .reg()
        .and_then(|mut r| r.nth(index))
        .ok_or_else(|| alloc::format!("{path}: no reg entry {index}"))?;
    let pa = translate(fdt, path, region.starting_address as u64)?;
    Ok((pa, region.size.unwrap_or(0) as u64))
}

/// Resolves `/chosen/stdout-path` to a node: strips `:options`, resolves an alias, and
/// translates its `reg` address through the buses above it.
fn console(fdt: &Fdt<'static>) -> Result<ConsoleNode, String> {
    let chosen = fdt.find_node("/chosen").ok_or_else(|| String::from("no /chosen node"))?;
    let path = str_prop(chosen, "stdout-path")
        .or_else(|| str_prop(chosen, "linux,stdout-path"))
        .ok_or_else(|| String::from("/chosen has no stdout-path"))?;
    let path = path.split(':').next().unwrap_or(path);
    let full = if path.starts_with('/') {
        Some(path)
    } else {
        fdt.find_node("/aliases").and_then(|aliases| str_prop(aliases, path))
    }
    .ok_or_else(|| alloc::format!("stdout-path {path:?} is neither a path nor an alias"))?;
    let node = fdt.find_node(full).ok_or_else(|| alloc::format!("stdout-path {path:?} names no node"))?;
    let compatible = node
        .compatible()
        .map(|c| String::from(c.first()))
        .ok_or_else(|| alloc::format!("console node {full:?} has no compatible"))?;
    let (bus_addr, _) = reg_first(node).ok_or_else(|| alloc::format!("console node {full:?} has no reg"))?;
    let pa = translate(fdt, full, bus_addr)?;
    Ok(ConsoleNode { path: String::from(full), compatible, pa })
}

impl Machine {
    /// Reads what the kernel needs from a parsed device tree.
    pub fn from_fdt(fdt: Fdt<'static>) -> Self {
        let mut memory = RegionSet::new();
        let mut reserved = Vec::new();
        // Memory nodes are children of the root (devicetree spec §3.4), and the root's
        // `interrupt-parent` names the interrupt controller: no walk over every node (the fdt
        // crate parses each property name again on every lookup, which made a full walk the
        // slowest part of boot).
        let root = fdt.find_node("/");
        for node in root.iter().flat_map(|r| r.children()) {
            if str_prop(node, "device_type") == Some("memory") {
                for r in node.reg().into_iter().flatten() {
                    let start = r.starting_address as u64;
                    let _ = memory.add(start, start.saturating_add(r.size.unwrap_or(0) as u64));
                }
            }
        }
        let interrupt_controller = root
            .and_then(|r| r.property("interrupt-parent"))
            .and_then(|p| p.as_usize())
            .and_then(|phandle| fdt.find_phandle(phandle as u32))
            .or_else(|| {
                // No root interrupt-parent: look for a controller we know by compatible.
                fdt.find_compatible(&[
                    "arm,gic-v3",
                    "arm,cortex-a15-gic",
                    "arm,gic-400",
                    "brcm,bcm2836-l1-intc",
                ])
            })
            .and_then(|node| {
                let compatible = node.compatible()?.first();
                Some((String::from(compatible), reg_first(node).map_or(0, |(pa, _)| pa)))
            });
        for r in fdt.memory_reservations() {
            let start = r.address() as u64;
            let what = String::from("/memreserve/");
            reserved.push(Reserved { start, end: start + r.size() as u64, what, no_map: false });
        }
        if let Some(node) = fdt.find_node("/reserved-memory") {
            for child in node.children() {
                for r in child.reg().into_iter().flatten() {
                    let start = r.starting_address as u64;
                    let mut what = String::from("/reserved-memory/");
                    let _ = what.write_str(child.name);
                    let no_map = child.property("no-map").is_some();
                    let end = start + r.size.unwrap_or(0) as u64;
                    reserved.push(Reserved { start, end, what, no_map });
                }
            }
        }
        let psci = fdt.find_node("/psci").and_then(|n| match str_prop(n, "method") {
            Some("hvc") => Some(Conduit::Hvc),
            Some("smc") => Some(Conduit::Smc),
            _ => None,
        });
        let model = fdt.find_node("/").and_then(|n| str_prop(n, "model")).unwrap_or("(no model)");
        let bootargs = fdt.find_node("/chosen").and_then(|n| str_prop(n, "bootargs")).unwrap_or("");
        let cpus = fdt
            .find_node("/cpus")
            .map_or(0, |n| n.children().filter(|c| str_prop(*c, "device_type") == Some("cpu")).count());
        let console = console(&fdt);
        let initrd = fdt.find_node("/chosen").and_then(|chosen| {
            let cell = |name: &str| {
                let v = chosen.property(name)?.value;
                match v.len() {
                    4 => Some(u64::from(u32::from_be_bytes(v.try_into().ok()?))),
                    8 => Some(u64::from_be_bytes(v.try_into().ok()?)),
                    _ => None,
                }
            };
            let (start, end) = (cell("linux,initrd-start")?, cell("linux,initrd-end")?);
            (start < end).then_some((start, end))
        });
        Self {
            model: String::from(model),
            bootargs: String::from(bootargs),
            memory,
            reserved,
            console,
            psci,
            interrupt_controller,
            cpus,
            initrd,
            fdt,
        }
    }

    /// Whether `/chosen/bootargs` holds `word` as a whole word (e.g. `selftest=fault`).
    pub fn has_bootarg(&self, word: &str) -> bool {
        self.bootargs.split_ascii_whitespace().any(|w| w == word)
    }
}
