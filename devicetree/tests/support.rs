//! `devicetree::support`: which console driver a node gets (the whole `compatible` list walked),
//! the layout properties read and checked, the interrupt controller chosen, the GICv3 frames, and
//! the CPU start checks, on trees written for the purpose. Every odd input is a message, never a
//! panic.
mod common;

use common::Builder;
use devicetree::support::{
    GicV3Layout, IntcFamily, UartFamily, cpu_start_problem, gicv3_layout, interrupt_controller, uart_config,
    uart_family,
};
use devicetree::{Fdt, Machine};

fn compat(list: &[&str]) -> Vec<u8> {
    list.iter().flat_map(|s| s.bytes().chain([0])).collect()
}

/// A root with two-cell addresses, one-cell sizes, and one UART node `serial@1000` that `edit`
/// fills (after its `compatible`).
fn uart_tree(compatible: &[&str], edit: impl FnOnce(&mut Builder)) -> Vec<u8> {
    let mut b = Builder::new();
    b.begin("").cells("#address-cells", &[2]).cells("#size-cells", &[1]);
    b.begin("serial@1000").prop("compatible", &compat(compatible));
    edit(&mut b);
    b.end().end();
    b.finish()
}

fn config(blob: &[u8]) -> Result<devicetree::support::UartConfig, String> {
    let fdt = Fdt::new(blob).unwrap();
    let node = fdt.find_node("/serial@1000").unwrap();
    uart_config(&fdt, "/serial@1000", &node)
}

fn with_reg(b: &mut Builder) {
    b.cells("reg", &[0, 0xfe66_0000, 0x100]);
}

#[test]
fn the_whole_compatible_list_is_walked_most_specific_first() {
    // Rockchip: the first string is unknown, the second is the DesignWare 16550.
    let blob = uart_tree(&["rockchip,rk3399-uart", "snps,dw-apb-uart"], |b| {
        with_reg(b);
        b.cells("reg-shift", &[2]).cells("reg-io-width", &[4]);
    });
    let c = config(&blob).unwrap();
    assert_eq!((c.family, c.compatible.as_str()), (UartFamily::Ns16550, "snps,dw-apb-uart"));
    assert_eq!((c.pa, c.size, c.reg_shift, c.reg_io_width, c.reg_offset), (0xfe66_0000, 0x100, 2, 4, 0));
    assert!(c.notes.is_empty());
    // i.MX 8M Mini: the SoC string first, the imx6q layout second.
    let blob = uart_tree(&["fsl,imx8mm-uart", "fsl,imx6q-uart"], with_reg);
    let fdt = Fdt::new(&blob).unwrap();
    let node = fdt.find_node("/serial@1000").unwrap();
    assert_eq!(uart_family(&node), Some((UartFamily::Imx, "fsl,imx6q-uart")));
    // When two strings are both known, the earlier one decides.
    let blob = uart_tree(&["amlogic,meson-gx-uart", "amlogic,meson-ao-uart"], with_reg);
    assert_eq!(config(&blob).unwrap().compatible, "amlogic,meson-gx-uart");
    let blob = uart_tree(&["xlnx,zynqmp-uart", "cdns,uart-r1p12"], with_reg);
    assert_eq!(config(&blob).unwrap().family, UartFamily::Cadence);
    // Renesas R-Car: the SoC string, the generation's, then the generic SCIF.
    let blob = uart_tree(&["renesas,scif-r8a774a1", "renesas,rcar-gen3-scif", "renesas,scif"], with_reg);
    assert_eq!(
        (config(&blob).unwrap().family, config(&blob).unwrap().compatible.as_str()),
        (UartFamily::Scif, "renesas,rcar-gen3-scif")
    );
    let blob = uart_tree(&["renesas,hscif-r8a7795", "renesas,rcar-gen3-hscif", "renesas,hscif"], with_reg);
    assert_eq!(config(&blob).unwrap().family, UartFamily::Scif);
    // RZ/G2L's SCIF has another layout: not taken for a SCIF.
    let blob = uart_tree(&["renesas,scif-r9a07g044"], with_reg);
    assert!(config(&blob).is_err());
    // A high-speed GENI UART named as the console is driven like the debug one.
    let blob = uart_tree(&["qcom,geni-uart"], with_reg);
    assert!(config(&blob).is_err(), "a 0x100 reg is smaller than the GENI registers");
    let blob = uart_tree(&["qcom,geni-uart"], |b| {
        b.cells("reg", &[0, 0x0089_8000, 0x4000]);
    });
    assert_eq!(config(&blob).unwrap().family, UartFamily::QcomGeni);
    let blob = uart_tree(&["qcom,msm-uartdm-v1.4", "qcom,msm-uartdm"], with_reg);
    assert_eq!(config(&blob).unwrap().family, UartFamily::QcomUartDm);
    let blob = uart_tree(&["marvell,armada-3700-uart"], with_reg);
    assert_eq!(config(&blob).unwrap().family, UartFamily::Mvebu);
    // The Armada 3700's extended UART has another layout: not taken.
    assert!(config(&uart_tree(&["marvell,armada-3700-uart-ext"], with_reg)).is_err());
}

#[test]
fn a_node_no_driver_knows_is_named_with_its_strings() {
    let blob = uart_tree(&["acme,mystery-uart", "acme,uart"], with_reg);
    let e = config(&blob).unwrap_err();
    assert_eq!(
        e,
        "/serial@1000: no driver for any of its compatible strings [\"acme,mystery-uart\", \"acme,uart\"]"
    );
}

#[test]
fn layout_defaults_follow_linux() {
    // Plain ns16550a: byte registers one byte apart.
    let c = config(&uart_tree(&["ns16550a"], with_reg)).unwrap();
    assert_eq!((c.reg_shift, c.reg_io_width), (0, 1));
    // MediaTek's earlycon fixes the layout at 32-bit registers 4 bytes apart ...
    let c = config(&uart_tree(&["mediatek,mt8173-uart", "mediatek,mt6577-uart"], with_reg)).unwrap();
    assert_eq!((c.reg_shift, c.reg_io_width), (2, 4));
    // ... TI's at a shift of 2; the tree's properties still win.
    let c = config(&uart_tree(&["ti,am654-uart"], |b| {
        with_reg(b);
        b.cells("reg-io-width", &[4]);
    }))
    .unwrap();
    assert_eq!((c.reg_shift, c.reg_io_width), (2, 4));
    // i.MX LPUARTs start 0x10 in; Layerscape's does not.
    assert_eq!(config(&uart_tree(&["fsl,imx8qxp-lpuart"], with_reg)).unwrap().reg_offset, 0x10);
    assert_eq!(config(&uart_tree(&["fsl,ls1028a-lpuart"], with_reg)).unwrap().reg_offset, 0);
    // Drivers other than the 16550 ignore the 8250 properties.
    let c = config(&uart_tree(&["arm,sbsa-uart"], |b| {
        with_reg(b);
        b.cells("reg-io-width", &[1]);
    }))
    .unwrap();
    assert_eq!((c.family, c.reg_shift, c.reg_io_width), (UartFamily::SbsaUart, 0, 4));
}

#[test]
fn odd_layouts_are_messages_not_panics() {
    let err = |edit: fn(&mut Builder)| config(&uart_tree(&["snps,dw-apb-uart"], edit)).unwrap_err();
    assert_eq!(err(|_| {}), "/serial@1000: no reg, or one with cells wider than 64 bits");
    assert_eq!(
        err(|b| {
            with_reg(b);
            b.cells("reg-io-width", &[3]);
        }),
        "/serial@1000: reg-io-width 3 is not 1, 2 or 4"
    );
    assert_eq!(
        err(|b| {
            with_reg(b);
            b.cells("reg-shift", &[9]);
        }),
        "/serial@1000: reg-shift 9 is beyond any 16550 (at most 4 here)"
    );
    assert_eq!(
        err(|b| {
            with_reg(b);
            b.prop("reg-shift", &[0, 2]);
        }),
        "/serial@1000: reg-shift is not one cell"
    );
    assert_eq!(
        err(|b| {
            with_reg(b);
            b.cells("reg-io-width", &[4]).flag("big-endian");
        }),
        "/serial@1000: big-endian 16550 registers are not driven"
    );
    // Registers 0..7 at shift 2, 4 bytes wide, need 0x20 bytes.
    assert_eq!(
        err(|b| {
            b.cells("reg", &[0, 0x1000, 0x10]).cells("reg-shift", &[2]).cells("reg-io-width", &[4]);
        }),
        "/serial@1000: reg size 0x10 is smaller than the 0x20 bytes of 16550 registers"
    );
    // A zero size is worked around (mapped as the driver needs) and said.
    let c = config(&uart_tree(&["snps,dw-apb-uart"], |b| {
        b.cells("reg", &[0, 0x1000, 0]).cells("reg-shift", &[2]).cells("reg-io-width", &[4]);
    }))
    .unwrap();
    assert_eq!(c.size, 0x20);
    assert_eq!(c.notes, ["/serial@1000: reg gives no size; mapping the driver's 0x20 bytes"]);
}

#[test]
fn console_of_a_tree_through_machine_discovery() {
    let mut b = Builder::new();
    b.begin("").cells("#address-cells", &[2]).cells("#size-cells", &[2]);
    b.begin("chosen").string("stdout-path", "serial0:115200n8").end();
    b.begin("aliases").string("serial0", "/soc/serial@ff000000").end();
    b.begin("soc").cells("#address-cells", &[2]).cells("#size-cells", &[2]).flag("ranges");
    b.begin("serial@ff000000")
        .prop("compatible", &compat(&["xlnx,zynqmp-uart", "cdns,uart-r1p12"]))
        .cells("reg", &[0, 0xff00_0000, 0, 0x1000])
        .end();
    b.end().end();
    let blob = b.finish();
    let m = Machine::from_fdt(Fdt::new(&blob).unwrap());
    let console = m.console.as_ref().unwrap();
    let node = m.fdt.find_node(&console.path).unwrap();
    let c = uart_config(&m.fdt, &console.path, &node).unwrap();
    assert_eq!((c.family, c.pa, c.size), (UartFamily::Cadence, 0xff00_0000, 0x1000));
}

fn gic_tree(edit: impl FnOnce(&mut Builder)) -> Vec<u8> {
    let mut b = Builder::new();
    b.begin("").cells("#address-cells", &[2]).cells("#size-cells", &[2]);
    b.begin("interrupt-controller@17a00000").string("compatible", "arm,gic-v3").flag("interrupt-controller");
    edit(&mut b);
    b.end().end();
    b.finish()
}

fn layout(blob: &[u8]) -> Result<GicV3Layout, String> {
    let fdt = Fdt::new(blob).unwrap();
    let (family, path, node) = interrupt_controller(&fdt).unwrap();
    assert_eq!(family, IntcFamily::GicV3);
    gicv3_layout(&fdt, &path, &node)
}

#[test]
fn gicv3_redistributor_regions_and_stride_come_from_the_tree() {
    // One region, no stride: QEMU virt's shape.
    let l = layout(&gic_tree(|b| {
        b.cells("reg", &[0, 0x0800_0000, 0, 0x1_0000, 0, 0x080a_0000, 0, 0xf6_0000]);
    }))
    .unwrap();
    assert_eq!(l.distributor, (0x0800_0000, 0x1_0000));
    assert_eq!(l.redistributor_regions, [(0x080a_0000, 0xf6_0000)]);
    assert_eq!(l.stride, None);
    // Two regions and a padded stride (Qualcomm's SDM845 has 0x20000 with 0x40000 here for the
    // test), the GICC/GICH/GICV frames after them left alone.
    let l = layout(&gic_tree(|b| {
        b.cells("#redistributor-regions", &[2]).cells("redistributor-stride", &[0, 0x4_0000]).cells(
            "reg",
            &[
                0,
                0x17a0_0000,
                0,
                0x1_0000,
                0,
                0x17a6_0000,
                0,
                0x10_0000,
                0,
                0x17b0_0000,
                0,
                0x8_0000,
                0,
                0x17c0_0000,
                0,
                0x2000,
            ],
        );
    }))
    .unwrap();
    assert_eq!(l.redistributor_regions, [(0x17a6_0000, 0x10_0000), (0x17b0_0000, 0x8_0000)]);
    assert_eq!(l.stride, Some(0x4_0000));
}

#[test]
fn odd_gicv3_layouts_are_messages() {
    let reg = [0, 0x0800_0000, 0, 0x1_0000, 0, 0x080a_0000, 0, 0xf6_0000];
    let e = layout(&gic_tree(|b| {
        b.cells("reg", &reg).cells("#redistributor-regions", &[2]);
    }))
    .unwrap_err();
    assert_eq!(e, "GICv3 redistributor region: /interrupt-controller@17a00000: no reg entry 2");
    let e = layout(&gic_tree(|b| {
        b.cells("reg", &reg).cells("#redistributor-regions", &[0]);
    }))
    .unwrap_err();
    assert_eq!(e, "/interrupt-controller@17a00000: #redistributor-regions 0 is not between 1 and 64");
    let e = layout(&gic_tree(|b| {
        b.cells("reg", &reg).cells("redistributor-stride", &[0, 0x1_8000]);
    }))
    .unwrap_err();
    assert_eq!(
        e,
        "/interrupt-controller@17a00000: redistributor-stride 0x18000 is not a non-zero multiple of 64 KiB"
    );
    let e = layout(&gic_tree(|_| {})).unwrap_err();
    assert_eq!(
        e,
        "GICv3 distributor: /interrupt-controller@17a00000: no reg, or one with cells wider than 64 bits"
    );
    // A zero-sized frame gets the architectural 64 KiB.
    let l = layout(&gic_tree(|b| {
        b.cells("reg", &[0, 0x0800_0000, 0, 0, 0, 0x080a_0000, 0, 0x2_0000]);
    }))
    .unwrap();
    assert_eq!(l.distributor, (0x0800_0000, 0x1_0000));
}

#[test]
fn qcom_qgic2_is_driven_as_gicv2_apple_aic_as_aic_and_unknown_controllers_are_named() {
    let tree = |compatible: &str| {
        let mut b = Builder::new();
        b.begin("").cells("#address-cells", &[1]).cells("#size-cells", &[1]).cells("interrupt-parent", &[1]);
        b.begin("interrupt-controller@b000000")
            .string("compatible", compatible)
            .flag("interrupt-controller")
            .cells("phandle", &[1])
            .cells("reg", &[0x0b00_0000, 0x1000, 0x0b00_2000, 0x1000])
            .end();
        b.end();
        b.finish()
    };
    let blob = tree("qcom,msm-qgic2");
    let fdt = Fdt::new(&blob).unwrap();
    let (family, path, _) = interrupt_controller(&fdt).unwrap();
    assert_eq!((family, path.as_str()), (IntcFamily::GicV2, "/interrupt-controller@b000000"));
    // Apple's AIC and AIC2 are driven (by their generic strings, as the trees list them second).
    for compatible in ["apple,aic", "apple,aic2"] {
        let blob = tree(compatible);
        let fdt = Fdt::new(&blob).unwrap();
        assert_eq!(interrupt_controller(&fdt).unwrap().0, IntcFamily::AppleAic, "{compatible}");
    }
    let blob = tree("acme,mystery-intc");
    let fdt = Fdt::new(&blob).unwrap();
    assert_eq!(
        interrupt_controller(&fdt).unwrap_err(),
        "unsupported interrupt controller interrupt-controller@b000000 (acme,mystery-intc)"
    );
}

#[test]
fn cpus_without_a_usable_enable_method_are_named() {
    let tree = |psci: bool| {
        let mut b = Builder::new();
        b.begin("").cells("#address-cells", &[2]).cells("#size-cells", &[2]);
        if psci {
            b.begin("psci").string("compatible", "arm,psci-1.0").string("method", "smc").end();
        }
        b.begin("cpus").cells("#address-cells", &[1]).cells("#size-cells", &[0]);
        b.begin("cpu@0")
            .string("device_type", "cpu")
            .cells("reg", &[0])
            .string("enable-method", "psci")
            .end();
        b.begin("cpu@1")
            .string("device_type", "cpu")
            .cells("reg", &[1])
            .string("enable-method", "spin-table");
        b.cells("cpu-release-addr", &[0, 0xfff4]).end();
        b.begin("cpu@2").string("device_type", "cpu").cells("reg", &[2]).end();
        b.begin("cpu@3")
            .string("device_type", "cpu")
            .cells("reg", &[3])
            .string("enable-method", "acme,kick")
            .end();
        b.end().end();
        b.finish()
    };
    let blob = tree(true);
    let m = Machine::from_fdt(Fdt::new(&blob).unwrap());
    let problems: Vec<Option<String>> = m.cpus.iter().map(|c| cpu_start_problem(&m, c)).collect();
    assert_eq!(
        problems,
        [
            None,
            Some("cpu-release-addr 0xfff4 is not 8-byte aligned".into()),
            Some("no enable-method".into()),
            Some("unknown enable-method \"acme,kick\"".into()),
        ]
    );
    let blob = tree(false);
    let m = Machine::from_fdt(Fdt::new(&blob).unwrap());
    assert_eq!(
        cpu_start_problem(&m, &m.cpus[0]).as_deref(),
        Some("enable-method psci, but no PSCI node with a known method")
    );
    // An Apple tree as shipped: spin-table with the `<0 0>` that m1n1 fills in at boot.
    let mut b = Builder::new();
    b.begin("").cells("#address-cells", &[2]).cells("#size-cells", &[2]);
    b.begin("cpus").cells("#address-cells", &[2]).cells("#size-cells", &[0]);
    b.begin("cpu@10100").string("device_type", "cpu").cells("reg", &[0, 0x10100]);
    b.string("enable-method", "spin-table").cells("cpu-release-addr", &[0, 0]).end();
    b.end().end();
    let blob = b.finish();
    let m = Machine::from_fdt(Fdt::new(&blob).unwrap());
    assert_eq!(
        cpu_start_problem(&m, &m.cpus[0]).as_deref(),
        Some("cpu-release-addr 0: a placeholder the loader did not fill in")
    );
}
