//! What this kernel has drivers for, decided from the tree alone: which console UART driver a
//! node needs and how its registers are laid out, which interrupt controller the kernel drives,
//! and whether each CPU can be started.
//!
//! One table per question, read by the kernel to choose its driver (`kernel/src/console.rs`,
//! `kernel/src/drivers/intc.rs`, `kernel/src/smp.rs`) and by the host survey over Debian's board
//! trees (`examples/dt-survey.rs`, `scripts/dt-survey`), so the survey counts what the kernel
//! would do. Nothing here panics on odd input: a `reg` that is missing, a zero size, a
//! `reg-io-width` no driver handles, each becomes a message naming the node.
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::fdt::{Fdt, Node};
use crate::machine::{CpuNode, EnableMethod, Machine, find_compatible_path, reg_translated};

/// A UART register layout this kernel drives (one driver each in `kernel/src/drivers/uart/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UartFamily {
    /// Arm PrimeCell PL011.
    Pl011,
    /// BCM2835 auxiliary mini UART.
    MiniUart,
}

impl UartFamily {
    /// The driver's name, for the boot report and the survey.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pl011 => "PL011",
            Self::MiniUart => "BCM2835 mini UART",
        }
    }

    /// Bytes of registers the driver touches: what is mapped when the tree gives no size.
    pub fn default_span(self) -> u64 {
        match self {
            Self::Pl011 => 0x1000,
            Self::MiniUart => 0x40,
        }
    }
}

/// `compatible` strings and the driver each needs. A node is matched by walking its whole
/// `compatible` list in order (most specific first, as the binding orders it) and taking the
/// first string found here, as Linux's `of_match_node` does for one driver.
pub const UART_COMPATIBLES: &[(&str, UartFamily)] = &[
    ("arm,pl011", UartFamily::Pl011),
    ("arm,primecell", UartFamily::Pl011),
    ("brcm,bcm2835-aux-uart", UartFamily::MiniUart),
];

/// The driver `node` needs, and the `compatible` string that chose it.
pub fn uart_family<'a>(node: &Node<'a>) -> Option<(UartFamily, &'a str)> {
    let compatible = node.property("compatible")?;
    compatible
        .strings()
        .find_map(|s| UART_COMPATIBLES.iter().find(|(c, _)| *c == s).map(|&(_, family)| (family, s)))
}

/// A UART as the driver needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UartConfig {
    /// The driver.
    pub family: UartFamily,
    /// The `compatible` string that chose it.
    pub compatible: String,
    /// CPU physical address of the registers.
    pub pa: u64,
    /// Bytes to map: the `reg` size, or the driver's span when the tree gives none.
    pub size: u64,
    /// Register `n` is at `pa + (n << reg_shift)` (8250 family; 0 elsewhere).
    pub reg_shift: u32,
    /// Access width in bytes: 1, 2 or 4 (8250 family; 4 elsewhere).
    pub reg_io_width: u32,
    /// What was odd and how it was worked around (a zero size), for the boot report.
    pub notes: Vec<String>,
}

/// Reads what the UART driver of the node at `path` needs.
///
/// # Errors
/// A message naming the node when no driver knows it, its `reg` is missing or untranslatable, or
/// a layout property has a value the driver cannot use.
pub fn uart_config(fdt: &Fdt<'_>, path: &str, node: &Node<'_>) -> Result<UartConfig, String> {
    let (family, compatible) = uart_family(node).ok_or_else(|| {
        let all: Vec<&str> = node.property("compatible").map(|p| p.strings().collect()).unwrap_or_default();
        format!("{path}: no driver for any of its compatible strings {all:?}")
    })?;
    let (pa, size) = reg_translated(fdt, path, *node, 0)?;
    let mut notes = Vec::new();
    let size = if size == 0 {
        notes.push(format!(
            "{path}: reg gives no size; mapping the driver's {:#x} bytes",
            family.default_span()
        ));
        family.default_span()
    } else {
        size
    };
    let (reg_shift, reg_io_width) = (0, 4);
    Ok(UartConfig { family, compatible: String::from(compatible), pa, size, reg_shift, reg_io_width, notes })
}

/// An interrupt controller this kernel drives (`kernel/src/drivers/intc.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IntcFamily {
    /// GICv2 (memory-mapped CPU interface).
    GicV2,
    /// GICv3 (system-register CPU interface, redistributors).
    GicV3,
    /// The BCM2836 per-core local controller (Pi 2, Pi 3).
    Bcm2836,
}

impl IntcFamily {
    /// Its name, for the boot report and the survey.
    pub fn name(self) -> &'static str {
        match self {
            Self::GicV2 => "GICv2",
            Self::GicV3 => "GICv3",
            Self::Bcm2836 => "BCM2836 local interrupt controller",
        }
    }

    /// The `compatible` strings of this family.
    pub fn compatibles(self) -> &'static [&'static str] {
        match self {
            Self::GicV2 => &["arm,cortex-a15-gic", "arm,gic-400", "arm,cortex-a9-gic", "arm,cortex-a7-gic"],
            Self::GicV3 => &["arm,gic-v3"],
            Self::Bcm2836 => &["brcm,bcm2836-l1-intc"],
        }
    }
}

/// The families in the order the kernel looks for them: a tree with a GIC and a BCM2836-style
/// local block (the Pi 4's has both) gets the GIC, which routes its devices.
pub const INTC_PREFERENCE: [IntcFamily; 3] = [IntcFamily::GicV2, IntcFamily::GicV3, IntcFamily::Bcm2836];

/// The interrupt controller the kernel would drive: its family, node path and node.
///
/// # Errors
/// A message naming the controller the tree has instead, or saying it has none.
pub fn interrupt_controller<'a>(fdt: &Fdt<'a>) -> Result<(IntcFamily, String, Node<'a>), String> {
    for family in INTC_PREFERENCE {
        if let Some((path, node)) = find_compatible_path(fdt, family.compatibles()) {
            return Ok((family, path, node));
        }
    }
    Err(match crate::machine::describe_interrupt_controller(fdt) {
        Some(what) => format!("unsupported interrupt controller {what}"),
        None => String::from("no interrupt controller in the device tree"),
    })
}

/// Why the kernel cannot start `cpu` from what the tree says, or `None` if it can try (PSCI
/// `CPU_ON` with a PSCI conduit, or a spin-table release through an aligned `cpu-release-addr`;
/// the kernel also checks at run time that the release word is reserved RAM outside its Image).
pub fn cpu_start_problem(machine: &Machine<'_>, cpu: &CpuNode) -> Option<String> {
    match &cpu.enable_method {
        EnableMethod::Psci if machine.psci.is_none() => {
            Some(String::from("enable-method psci, but no PSCI node with a known method"))
        }
        EnableMethod::Psci => None,
        EnableMethod::SpinTable => match cpu.release_addr {
            None => Some(String::from("spin-table CPU without cpu-release-addr")),
            Some(addr) if !addr.is_multiple_of(8) => {
                Some(format!("cpu-release-addr {addr:#x} is not 8-byte aligned"))
            }
            Some(_) => None,
        },
        EnableMethod::Other(name) => Some(format!("unknown enable-method {name:?}")),
        EnableMethod::Missing => Some(String::from("no enable-method")),
    }
}
