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
    /// Arm's SBSA generic UART: the PL011's data, flag and interrupt registers only (no control
    /// or baud registers to program).
    SbsaUart,
    /// BCM2835 auxiliary mini UART.
    MiniUart,
    /// The 8250/16550 family (DesignWare APB, Rockchip, Allwinner, NVIDIA, MediaTek, TI, Layerscape
    /// and plain `ns16550a`), registers spaced by `reg-shift`, accessed `reg-io-width` wide.
    Ns16550,
    /// Amlogic Meson UART (and its always-on variant).
    Meson,
    /// The i.MX UART (imx21 register layout: i.MX 6, 7, 8M).
    Imx,
    /// NXP LPUART, 32-bit registers (i.MX 7ULP, 8QXP, 8ULP, 93; Layerscape LS1028A).
    Lpuart,
    /// Cadence UART (Xilinx Zynq and ZynqMP).
    Cadence,
    /// Marvell Armada 3700 standard UART.
    Mvebu,
    /// Qualcomm GENI serial engine as a UART (the debug UART, or a high-speed one the loader
    /// used as its console).
    QcomGeni,
    /// Qualcomm UARTDM (msm_serial, version 1.3 and 1.4).
    QcomUartDm,
    /// Samsung Exynos UART (Exynos 4210 FIFO status layout).
    Exynos,
    /// Apple's S5L UART (the Samsung S3C layout with the older FIFO status bits): the console
    /// m1n1 hands over on Apple silicon.
    AppleS5l,
    /// Renesas SCIF and HSCIF (R-Car, RZ/G2).
    Scif,
}

impl UartFamily {
    /// The driver's name, for the boot report and the survey.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pl011 => "PL011",
            Self::SbsaUart => "SBSA generic UART",
            Self::MiniUart => "BCM2835 mini UART",
            Self::Ns16550 => "16550",
            Self::Meson => "Amlogic Meson UART",
            Self::Imx => "i.MX UART",
            Self::Lpuart => "LPUART",
            Self::Cadence => "Cadence UART",
            Self::Mvebu => "Armada 3700 UART",
            Self::QcomGeni => "Qualcomm GENI UART",
            Self::QcomUartDm => "Qualcomm UARTDM",
            Self::Exynos => "Exynos UART",
            Self::AppleS5l => "Apple S5L UART",
            Self::Scif => "Renesas SCIF",
        }
    }

    /// Bytes from the base (after [`UartConfig::reg_offset`]) the driver touches: at least this
    /// much must be mapped.
    pub fn span(self, reg_shift: u32, reg_io_width: u32) -> u64 {
        match self {
            Self::Pl011 | Self::SbsaUart => 0x48,
            Self::MiniUart => 0x2c,
            // Registers 0..7 (THR/RBR .. SCR).
            Self::Ns16550 => (7u64 << reg_shift) + u64::from(reg_io_width),
            Self::Meson => 0x18,
            Self::Imx => 0xb8,
            Self::Lpuart => 0x20,
            Self::Cadence => 0x48,
            Self::Mvebu => 0x10,
            Self::QcomGeni => 0x800,
            Self::QcomUartDm => 0x74,
            Self::Exynos | Self::AppleS5l => 0x2c,
            Self::Scif => 0x28,
        }
    }
}

/// `compatible` strings and the driver each needs. A node is matched by walking its whole
/// `compatible` list in order (most specific first, as the binding orders it) and taking the
/// first string found here, as Linux's `of_match_node` does for one driver: a Rockchip UART
/// (`"rockchip,rk3399-uart", "snps,dw-apb-uart"`) is found by its second string.
pub const UART_COMPATIBLES: &[(&str, UartFamily)] = &[
    ("arm,pl011", UartFamily::Pl011),
    ("arm,primecell", UartFamily::Pl011),
    ("arm,sbsa-uart", UartFamily::SbsaUart),
    ("brcm,bcm2835-aux-uart", UartFamily::MiniUart),
    // Linux drivers/tty/serial/8250/8250_early.c declares these earlycons; of_serial.c and
    // 8250_dw.c take the same nodes.
    ("ns16550a", UartFamily::Ns16550),
    ("ns16550", UartFamily::Ns16550),
    ("ns16450", UartFamily::Ns16550),
    ("ns8250", UartFamily::Ns16550),
    ("snps,dw-apb-uart", UartFamily::Ns16550),
    ("fsl,ns16550", UartFamily::Ns16550),
    ("fsl,16550-FIFO64", UartFamily::Ns16550),
    ("nvidia,tegra20-uart", UartFamily::Ns16550),
    ("mediatek,mt6577-uart", UartFamily::Ns16550),
    ("ti,am654-uart", UartFamily::Ns16550),
    ("ti,omap4-uart", UartFamily::Ns16550),
    ("ti,omap3-uart", UartFamily::Ns16550),
    // meson_uart.c
    ("amlogic,meson-gx-uart", UartFamily::Meson),
    ("amlogic,meson-ao-uart", UartFamily::Meson),
    ("amlogic,meson8-uart", UartFamily::Meson),
    ("amlogic,meson8b-uart", UartFamily::Meson),
    ("amlogic,meson6-uart", UartFamily::Meson),
    ("amlogic,meson-g12a-uart", UartFamily::Meson),
    ("amlogic,meson-s4-uart", UartFamily::Meson),
    // imx_earlycon.c
    ("fsl,imx6q-uart", UartFamily::Imx),
    ("fsl,imx21-uart", UartFamily::Imx),
    ("fsl,imx53-uart", UartFamily::Imx),
    // fsl_lpuart.c (the 32-bit ones; the i.MX ones start 0x10 in, see `reg_offset`)
    ("fsl,imx7ulp-lpuart", UartFamily::Lpuart),
    ("fsl,imx8ulp-lpuart", UartFamily::Lpuart),
    ("fsl,imx8qxp-lpuart", UartFamily::Lpuart),
    ("fsl,imxrt1050-lpuart", UartFamily::Lpuart),
    ("fsl,ls1028a-lpuart", UartFamily::Lpuart),
    // xilinx_uartps.c
    ("xlnx,zynqmp-uart", UartFamily::Cadence),
    ("cdns,uart-r1p12", UartFamily::Cadence),
    ("xlnx,xuartps", UartFamily::Cadence),
    ("cdns,uart-r1p8", UartFamily::Cadence),
    // mvebu-uart.c (the standard UART; the "-ext" one has another layout)
    ("marvell,armada-3700-uart", UartFamily::Mvebu),
    // qcom_geni_serial.c: only the debug UART has an earlycon, but a high-speed GENI UART is the
    // same serial engine, and one named as the console was left in FIFO mode by the loader.
    ("qcom,geni-debug-uart", UartFamily::QcomGeni),
    ("qcom,geni-uart", UartFamily::QcomGeni),
    // msm_serial.c
    ("qcom,msm-uartdm", UartFamily::QcomUartDm),
    ("qcom,msm-uartdm-v1.3", UartFamily::QcomUartDm),
    ("qcom,msm-uartdm-v1.4", UartFamily::QcomUartDm),
    // samsung_tty.c
    ("samsung,exynos4210-uart", UartFamily::Exynos),
    ("samsung,exynos5433-uart", UartFamily::Exynos),
    ("samsung,exynos850-uart", UartFamily::Exynos),
    ("apple,s5l-uart", UartFamily::AppleS5l),
    // sh-sci.c's earlycons (`renesas,scif`, `renesas,hscif`) and the R-Car family strings,
    // which share SCIF's register layout up to SCLSR. Not RZ/G2L's `renesas,scif-r9a07g044`:
    // another layout (`SCIx_RZ_SCIFA_REGTYPE`).
    ("renesas,scif", UartFamily::Scif),
    ("renesas,rcar-gen1-scif", UartFamily::Scif),
    ("renesas,rcar-gen2-scif", UartFamily::Scif),
    ("renesas,rcar-gen3-scif", UartFamily::Scif),
    ("renesas,rcar-gen4-scif", UartFamily::Scif),
    ("renesas,hscif", UartFamily::Scif),
    ("renesas,rcar-gen2-hscif", UartFamily::Scif),
    ("renesas,rcar-gen3-hscif", UartFamily::Scif),
    ("renesas,rcar-gen4-hscif", UartFamily::Scif),
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
    /// CPU physical address of the node's registers (its first `reg` entry).
    pub pa: u64,
    /// Bytes to map from `pa`: the `reg` size, or what the driver touches when the tree gives
    /// none.
    pub size: u64,
    /// The driver's registers start this far past `pa` (0x10 on i.MX LPUARTs, whose first four
    /// registers are identification words: Linux fsl_lpuart.c `IMX_REG_OFF`).
    pub reg_offset: u64,
    /// Register `n` is at `n << reg_shift` (8250 family; 0 elsewhere).
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
/// a layout property has a value the driver cannot use (`reg-io-width` other than 1, 2 or 4,
/// `reg-shift` above 4, big-endian registers, a `reg` smaller than the registers).
pub fn uart_config(fdt: &Fdt<'_>, path: &str, node: &Node<'_>) -> Result<UartConfig, String> {
    let (family, compatible) = uart_family(node).ok_or_else(|| {
        let all: Vec<&str> = node.property("compatible").map(|p| p.strings().collect()).unwrap_or_default();
        format!("{path}: no driver for any of its compatible strings {all:?}")
    })?;
    let (pa, size) = reg_translated(fdt, path, *node, 0)?;
    let mut notes = Vec::new();
    let reg_offset = match compatible {
        "fsl,imx7ulp-lpuart" | "fsl,imx8ulp-lpuart" | "fsl,imx8qxp-lpuart" | "fsl,imxrt1050-lpuart" => 0x10,
        _ => 0,
    };
    let (reg_shift, reg_io_width) = if family == UartFamily::Ns16550 {
        // Linux's defaults: of_serial.c reads both properties (shift 0, byte access without
        // them); the MediaTek and TI earlycons (8250_early.c, 8250_mtk.c) fix the shift at 2.
        let default_shift = match compatible {
            "mediatek,mt6577-uart" | "ti,am654-uart" | "ti,omap4-uart" | "ti,omap3-uart" => 2,
            _ => 0,
        };
        let default_width = if compatible == "mediatek,mt6577-uart" { 4 } else { 1 };
        let read = |name: &str, default: u32| match node.property(name) {
            None => Ok(default),
            Some(p) => p.as_u32().ok_or_else(|| format!("{path}: {name} is not one cell")),
        };
        let shift = read("reg-shift", default_shift)?;
        let width = read("reg-io-width", default_width)?;
        if shift > 4 {
            return Err(format!("{path}: reg-shift {shift} is beyond any 16550 (at most 4 here)"));
        }
        if !matches!(width, 1 | 2 | 4) {
            return Err(format!("{path}: reg-io-width {width} is not 1, 2 or 4"));
        }
        if node.property("big-endian").is_some() {
            return Err(format!("{path}: big-endian 16550 registers are not driven"));
        }
        (shift, width)
    } else {
        (0, 4)
    };
    let need = reg_offset + family.span(reg_shift, reg_io_width);
    let size = if size == 0 {
        notes.push(format!("{path}: reg gives no size; mapping the driver's {need:#x} bytes"));
        need
    } else if size < need {
        return Err(format!(
            "{path}: reg size {size:#x} is smaller than the {need:#x} bytes of {} registers",
            family.name()
        ));
    } else {
        size
    };
    Ok(UartConfig {
        family,
        compatible: String::from(compatible),
        pa,
        size,
        reg_offset,
        reg_shift,
        reg_io_width,
        notes,
    })
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
    /// Apple's AIC (`apple,aic`, M1) and AIC2 (`apple,aic2`, M1 Pro/Max/Ultra, M2): device
    /// interrupts through it, the timer and fast IPIs as FIQs.
    AppleAic,
}

impl IntcFamily {
    /// Its name, for the boot report and the survey.
    pub fn name(self) -> &'static str {
        match self {
            Self::GicV2 => "GICv2",
            Self::GicV3 => "GICv3",
            Self::Bcm2836 => "BCM2836 local interrupt controller",
            Self::AppleAic => "Apple AIC",
        }
    }

    /// The `compatible` strings of this family.
    pub fn compatibles(self) -> &'static [&'static str] {
        match self {
            // Qualcomm's QGIC2 is a GICv2 (Linux irq-gic.c takes it with the same driver).
            Self::GicV2 => &[
                "arm,cortex-a15-gic",
                "arm,gic-400",
                "arm,cortex-a9-gic",
                "arm,cortex-a7-gic",
                "qcom,msm-qgic2",
            ],
            Self::GicV3 => &["arm,gic-v3"],
            Self::Bcm2836 => &["brcm,bcm2836-l1-intc"],
            Self::AppleAic => &["apple,aic", "apple,aic2"],
        }
    }
}

/// The families in the order the kernel looks for them: a tree with a GIC and a BCM2836-style
/// local block (the Pi 4's has both) gets the GIC, which routes its devices.
pub const INTC_PREFERENCE: [IntcFamily; 4] =
    [IntcFamily::GicV2, IntcFamily::GicV3, IntcFamily::Bcm2836, IntcFamily::AppleAic];

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
            // Apple's trees ship `<0 0>` for m1n1 to fill in: as shipped, nothing to release.
            Some(0) => Some(String::from("cpu-release-addr 0: a placeholder the loader did not fill in")),
            Some(addr) if !addr.is_multiple_of(8) => {
                Some(format!("cpu-release-addr {addr:#x} is not 8-byte aligned"))
            }
            Some(_) => None,
        },
        EnableMethod::Other(name) => Some(format!("unknown enable-method {name:?}")),
        EnableMethod::Missing => Some(String::from("no enable-method")),
    }
}

/// Where a GICv3's register frames are (binding arm,gic-v3.yaml): the distributor, then
/// `#redistributor-regions` redistributor regions (1 without the property), each a run of
/// redistributors `stride` apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GicV3Layout {
    /// Distributor (GICD): CPU physical address and size (0x1_0000 when the tree gives none).
    pub distributor: (u64, u64),
    /// Redistributor regions (GICR): CPU physical address and size each.
    pub redistributor_regions: Vec<(u64, u64)>,
    /// `redistributor-stride`, when the tree sets one (padding pages between redistributors);
    /// otherwise each redistributor's own GICR_TYPER says (two 64 KiB frames, four with VLPIs).
    pub stride: Option<u64>,
}

/// The most redistributor regions read (a GICv3 with more is not described by any tree known).
pub const MAX_REDISTRIBUTOR_REGIONS: u32 = 64;

/// Reads the GICv3 register layout of the node at `path`.
///
/// # Errors
/// A message naming the node when a frame is missing or untranslatable, the region count is out
/// of range, or the stride is not a non-zero multiple of 64 KiB.
pub fn gicv3_layout(fdt: &Fdt<'_>, path: &str, node: &Node<'_>) -> Result<GicV3Layout, String> {
    let regions = match node.property("#redistributor-regions") {
        None => 1,
        Some(p) => p.as_u32().ok_or_else(|| format!("{path}: #redistributor-regions is not one cell"))?,
    };
    if regions == 0 || regions > MAX_REDISTRIBUTOR_REGIONS {
        return Err(format!(
            "{path}: #redistributor-regions {regions} is not between 1 and {MAX_REDISTRIBUTOR_REGIONS}"
        ));
    }
    let frame = |index: usize, what: &str| {
        reg_translated(fdt, path, *node, index)
            .map(|(pa, size)| (pa, if size == 0 { 0x1_0000 } else { size }))
            .map_err(|e| format!("{what}: {e}"))
    };
    let distributor = frame(0, "GICv3 distributor")?;
    let redistributor_regions = (1..=regions as usize)
        .map(|i| frame(i, "GICv3 redistributor region"))
        .collect::<Result<Vec<_>, _>>()?;
    let stride = match node.property("redistributor-stride") {
        None => None,
        Some(p) => {
            let stride =
                p.as_u64().ok_or_else(|| format!("{path}: redistributor-stride is not one or two cells"))?;
            if stride == 0 || !stride.is_multiple_of(0x1_0000) {
                return Err(format!(
                    "{path}: redistributor-stride {stride:#x} is not a non-zero multiple of 64 KiB"
                ));
            }
            Some(stride)
        }
    };
    Ok(GicV3Layout { distributor, redistributor_regions, stride })
}
