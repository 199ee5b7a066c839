//! An ACPI machine described as a device tree, so the kernel's one discovery path (the
//! `devicetree` crate) serves both.
//!
//! When UEFI firmware hands over ACPI and no device tree (edk2 on QEMU `virt` by default, arm64
//! servers), the EFI stub reads the tables ([`crate::acpi::Platform`]) and writes a small tree
//! with the standard bindings (Linux Documentation/devicetree/bindings/): `/chosen/stdout-path`
//! to the SPCR console (the interface types Linux's drivers/acpi/spcr.c gives an earlycon:
//! `arm,pl011` for 3 and 0x10 (BCM2835: the Pi's PL011), `arm,sbsa-uart` for 0x0d/0x0e,
//! `ns16550a` for 0, 1, 5 and 0x12 with `reg-shift`/`reg-io-width` from the address's access size,
//! as `mmio`/`mmio16`/`mmio32` set the earlycon's register shift),
//! `/cpus/cpu@MPIDR` with `enable-method = "psci"` from the MADT's enabled GICC entries, `/psci`
//! with the FADT's conduit, the GIC from the MADT's GICD (and GICC or GICR) entries
//! (`arm,cortex-a15-gic` for GICv2, `arm,gic-v3`), and `/timer` (`arm,armv8-timer`) with the
//! GTDT's PPIs. Linux's EFI stub also hands an ACPI kernel a generated tree (with only
//! `/chosen`); here the tree carries the discoveries instead, and the boot report says where
//! they came from (the tree's `model`).

use crate::acpi::{Platform, PsciConduit};
use crate::fdt_writer::{FdtWriter, hex};

/// The `model` of a tree made from ACPI (the kernel reports it).
pub const MODEL: &[u8] = b"UEFI ACPI machine (device tree made from MADT, GTDT, SPCR, FADT)";
const GIC_PHANDLE: u32 = 1;

fn cells(value: u64) -> [u32; 2] {
    [(value >> 32) as u32, value as u32]
}

/// A GSIV as a device-tree interrupt specifier: SPIs (32..1019) as `<0 n 4>`, PPIs (16..31) as
/// `<1 n 4>` (level-high; the GIC binding's cells: type, number, flags).
fn interrupt(gsiv: u32) -> Option<[u32; 3]> {
    match gsiv {
        16..=31 => Some([1, gsiv - 16, 4]),
        32..=1019 => Some([0, gsiv - 32, 4]),
        _ => None,
    }
}

/// Writes the tree for `p` into `buf` (`bootargs` goes to `/chosen`); returns its size, or `None`
/// when `buf` is too small.
pub fn build(p: &Platform, bootargs: &[u8], buf: &mut [u8]) -> Option<usize> {
    let mut w = FdtWriter::new(buf);
    let mut digits = [0u8; 16];
    w.begin_node(b"", b"");
    w.prop_cells(b"#address-cells", &[2]);
    w.prop_cells(b"#size-cells", &[2]);
    w.prop_str(b"model", MODEL, b"");
    w.prop_str(b"compatible", b"acpi,generated", b"");
    if p.gicd.is_some() {
        w.prop_cells(b"interrupt-parent", &[GIC_PHANDLE]);
    }

    w.begin_node(b"chosen", b"");
    if let Some(c) = &p.console {
        let d = hex(c.base, &mut digits);
        w.prop_str(b"stdout-path", b"/serial@", d);
    }
    if !bootargs.is_empty() {
        w.prop_str(b"bootargs", bootargs, b"");
    }
    w.end_node();

    if let Some(c) = &p.console {
        // Each string goes through `black_box`: a match choosing among constants only is turned
        // into a table of their link-time addresses, which the EFI stub (running at the
        // firmware's address, with no relocations) cannot read (found the hard way: a fault in
        // memcpy inside edk2).
        let compatible: &[u8] = match c.interface {
            3 | 0x10 => core::hint::black_box(b"arm,pl011\0arm,primecell"),
            0x0d | 0x0e => core::hint::black_box(b"arm,sbsa-uart"),
            0 | 1 | 5 | 0x12 => core::hint::black_box(b"ns16550a"),
            _ => core::hint::black_box(b"acpi,spcr-unknown-interface"),
        };
        let d = hex(c.base, &mut digits);
        w.begin_node(b"serial@", d);
        w.prop_str(b"compatible", compatible, b"");
        let [hi, lo] = cells(c.base);
        w.prop_cells(b"reg", &[hi, lo, 0, 0x1000]);
        if matches!(c.interface, 0 | 1 | 5 | 0x12) {
            // Word and dword access space the registers 2 and 4 apart; anything else is byte
            // access, as Linux defaults an unexpected access size ("Defaulting to byte size").
            let (shift, width) = match c.access_size {
                2 => (1, 2),
                3 => (2, 4),
                _ => (0, 1),
            };
            w.prop_cells(b"reg-shift", &[shift]);
            w.prop_cells(b"reg-io-width", &[width]);
        }
        if let Some(irq) = interrupt(c.gsiv) {
            w.prop_cells(b"interrupts", &irq);
        }
        w.end_node();
    }

    if let Some(conduit) = p.psci {
        w.begin_node(b"psci", b"");
        w.prop_str(b"compatible", b"arm,psci-1.0\0arm,psci-0.2\0arm,psci", b"");
        w.prop_str(b"method", if conduit == PsciConduit::Hvc { b"hvc" } else { b"smc" }, b"");
        w.end_node();
    }

    w.begin_node(b"cpus", b"");
    w.prop_cells(b"#address-cells", &[2]);
    w.prop_cells(b"#size-cells", &[0]);
    for cpu in p.cpus() {
        let d = hex(cpu.mpidr, &mut digits);
        w.begin_node(b"cpu@", d);
        w.prop_str(b"device_type", b"cpu", b"");
        w.prop_str(b"compatible", b"arm,armv8", b"");
        let [hi, lo] = cells(cpu.mpidr);
        w.prop_cells(b"reg", &[hi, lo]);
        if p.psci.is_some() {
            w.prop_str(b"enable-method", b"psci", b"");
        }
        w.end_node();
    }
    w.end_node();

    if let Some((gicd, version)) = p.gicd {
        let d = hex(gicd, &mut digits);
        w.begin_node(b"interrupt-controller@", d);
        let [dh, dl] = cells(gicd);
        // The redistributors: the MADT's GICR range, or the span of the per-CPU GICR bases
        // (each 128 KiB: RD and SGI frames).
        let per_cpu = p.cpus().iter().map(|c| c.gicr_base).filter(|&b| b != 0);
        let gicr = p.gicr.map(|(b, l)| (b, u64::from(l))).or_else(|| {
            let lo = per_cpu.clone().min()?;
            let hi = per_cpu.max()?;
            Some((lo, hi - lo + 0x2_0000))
        });
        match (version, gicr) {
            (3 | 4, Some((rb, rl))) => {
                w.prop_str(b"compatible", b"arm,gic-v3", b"");
                let [rh, rlo] = cells(rb);
                let [sh, sl] = cells(rl);
                w.prop_cells(b"reg", &[dh, dl, 0, 0x1_0000, rh, rlo, sh, sl]);
            }
            _ => {
                let gicc = p.cpus().first().map_or(0, |c| c.gicc_base);
                w.prop_str(b"compatible", b"arm,cortex-a15-gic", b"");
                let [ch, cl] = cells(gicc);
                w.prop_cells(b"reg", &[dh, dl, 0, 0x1000, ch, cl, 0, 0x2000]);
            }
        }
        w.prop(b"interrupt-controller", &[]);
        w.prop_cells(b"#interrupt-cells", &[3]);
        w.prop_cells(b"phandle", &[GIC_PHANDLE]);
        w.end_node();
    }

    if let Some(gsivs) = p.timer_gsivs {
        w.begin_node(b"timer", b"");
        w.prop_str(b"compatible", b"arm,armv8-timer", b"");
        let mut spec = [0u32; 12];
        let mut ok = true;
        for (i, &g) in gsivs.iter().enumerate() {
            match interrupt(g) {
                Some(irq) => spec[3 * i..3 * i + 3].copy_from_slice(&irq),
                None => ok = false,
            }
        }
        if ok {
            w.prop_cells(b"interrupts", &spec);
        }
        w.end_node();
    }
    w.end_node();
    w.finish()
}
