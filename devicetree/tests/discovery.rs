//! Discovery on QEMU virt's own trees (known answers), on QEMU's `-dtb` tree with its NOP'd
//! node, on hand-built trees for what QEMU does not make, and the reader's errors.
mod common;

use common::*;
use devicetree::fdt::{MAX_DEPTH, StructureProblem};
use devicetree::{EnableMethod, Error, Fdt, Machine, PsciMethod};

fn machine(blob: &[u8]) -> Machine<'_> {
    Machine::from_fdt(Fdt::new(blob).expect("a valid tree"))
}

#[test]
fn qemu_virt_trees_give_memory_console_cpus_psci_and_gic() {
    let cases: [(&[u8], usize, PsciMethod, &str); 4] = [
        (VIRT, 1, PsciMethod::Hvc, "arm,cortex-a15-gic"),
        (VIRT_SMP4, 4, PsciMethod::Hvc, "arm,cortex-a15-gic"),
        (VIRT_GICV3, 1, PsciMethod::Hvc, "arm,gic-v3"),
        (VIRT_EL2, 1, PsciMethod::Smc, "arm,cortex-a15-gic"),
    ];
    for (blob, cpus, psci, gic) in cases {
        let m = machine(blob);
        assert_eq!(m.model, "linux,dummy-virt");
        assert_eq!(m.memory.ranges(), &[(0x4000_0000, 0x6000_0000)], "512 MiB at 1 GiB");
        let console = m.console.as_ref().expect("a console");
        assert_eq!(
            (console.path.as_str(), console.compatible.as_str(), console.pa),
            ("/pl011@9000000", "arm,pl011", 0x900_0000)
        );
        assert_eq!(m.psci, Some(psci));
        assert_eq!(
            m.interrupt_controller.as_ref().map(|(c, base)| (c.as_str(), *base)),
            Some((gic, 0x800_0000))
        );
        assert_eq!(m.cpus.len(), cpus);
        let mpidrs: Vec<u64> = m.cpus.iter().map(|c| c.mpidr).collect();
        assert_eq!(mpidrs, (0..cpus as u64).collect::<Vec<_>>());
        if cpus > 1 {
            assert!(m.cpus.iter().all(|c| c.enable_method == EnableMethod::Psci));
        }
        assert!(
            m.reserved.is_empty() && m.initrd.is_none() && m.problems.is_empty() && m.bootargs.is_empty()
        );
        let fdt = m.fdt;
        let (path, node) = devicetree::find_compatible_path(&fdt, &[gic]).expect("the GIC");
        assert_eq!(path, "/intc@8000000");
        assert_eq!(
            devicetree::reg_translated(&fdt, &path, node, 1).unwrap().0,
            if gic == "arm,gic-v3" { 0x80a_0000 } else { 0x801_0000 }
        );
        assert_eq!(devicetree::describe_interrupt_controller(&fdt).unwrap(), format!("intc@8000000 ({gic})"));
    }
}

/// QEMU given `-dtb` NOPs the old memory node out and adds a new one; the fdt 0.1.5 crate then
/// lost every later child of the root (memory, /chosen, /cpus).
#[test]
fn qemus_dtb_tree_with_a_nopped_node_reads_like_the_original() {
    let (_, structs, _) = blocks(VIRT_WITH_DTB);
    let nops = tokens(&structs).iter().filter(|&&(_, t)| t == 4).count();
    assert!(nops >= 50, "the fixture has its NOPs ({nops})");
    assert_eq!(summary(&machine(VIRT_WITH_DTB)), summary(&machine(VIRT)));
    let names = |blob| Fdt::new(blob).unwrap().walk().map(|n| n.name().to_string()).collect::<Vec<_>>();
    let (mut a, mut b) = (names(VIRT), names(VIRT_WITH_DTB));
    a.sort();
    b.sort();
    assert_eq!(a, b, "the same nodes");
}

/// Every root child NOP'd out in turn, as libfdt's `fdt_nop_node` does: the rest is still found.
#[test]
fn any_node_nopped_out_leaves_the_others() {
    let (rsv, structs, strings) = blocks(VIRT);
    let toks = tokens(&structs);
    let fdt = Fdt::new(VIRT).unwrap();
    let all: Vec<String> = fdt.walk().map(|n| n.name().to_string()).collect();
    // Root children: BEGIN tokens at depth 1, with their subtree's end.
    let mut depth = 0;
    let mut starts = Vec::new();
    for (i, &(off, t)) in toks.iter().enumerate() {
        match t {
            1 => {
                if depth == 1 {
                    starts.push((i, off));
                }
                depth += 1;
            }
            2 => depth -= 1,
            _ => {}
        }
    }
    assert!(starts.len() > 40);
    for &(i, off) in &starts {
        let mut d = 0;
        let end = toks[i..]
            .iter()
            .find_map(|&(o, t)| {
                match t {
                    1 => d += 1,
                    2 => {
                        d -= 1;
                        if d == 0 {
                            return Some(o + 4);
                        }
                    }
                    _ => {}
                }
                None
            })
            .unwrap();
        let mut s = structs.clone();
        for w in (off..end).step_by(4) {
            put32(&mut s, w, 4);
        }
        let blob = layout(&rsv, &s, &strings, [Block::Reservations, Block::Structure, Block::Strings]);
        let m = machine(&blob);
        let gone = Fdt::new(VIRT)
            .unwrap()
            .root()
            .children()
            .find(|c| structs[off + 4..].starts_with(c.name().as_bytes()))
            .unwrap()
            .name();
        let names: Vec<String> = m.fdt.walk().map(|n| n.name().to_string()).collect();
        assert!(!names.contains(&gone.to_string()), "{gone} is gone");
        assert!(names.len() < all.len());
        if !gone.starts_with("memory") {
            assert_eq!(m.memory.total(), 512 << 20, "memory with {gone} NOP'd");
        }
        if gone != "cpus" {
            assert_eq!(m.cpus.len(), 1, "cpus with {gone} NOP'd");
        }
        if gone != "chosen" && !gone.starts_with("pl011") {
            assert!(m.console.is_ok(), "console with {gone} NOP'd");
        }
    }
}

#[test]
fn blocks_in_any_order_read_the_same() {
    use Block::*;
    let (rsv, structs, strings) = blocks(VIRT_SMP4);
    let want = summary(&machine(VIRT_SMP4));
    for order in [
        [Reservations, Structure, Strings],
        [Reservations, Strings, Structure],
        [Structure, Reservations, Strings],
        [Structure, Strings, Reservations],
        [Strings, Reservations, Structure],
        [Strings, Structure, Reservations],
    ] {
        let blob = layout(&rsv, &structs, &strings, order);
        assert_eq!(summary(&machine(&blob)), want, "{order:?}");
    }
}

#[test]
fn version_16_header_without_struct_size_reads_the_same() {
    let (rsv, structs, strings) = blocks(VIRT);
    let mut blob = layout(&rsv, &structs, &strings, [Block::Reservations, Block::Structure, Block::Strings]);
    put32(&mut blob, 20, 16);
    put32(&mut blob, 36, 0xdead_beef); // not a field in version 16
    assert_eq!(summary(&machine(&blob)), summary(&machine(VIRT)));
}

/// A Raspberry Pi 3 shaped tree: a console behind an alias and a bus with `ranges`, spin-table
/// CPUs, reservations of all kinds, an initrd, one-cell root addresses.
fn pi_like(initrd_cells: usize) -> Vec<u8> {
    let mut b = Builder::new();
    b.reserve(0, 0x1000).reserve(0x3b40_0000, 0x0400_0000);
    b.begin("")
        .cells("#address-cells", &[1])
        .cells("#size-cells", &[1])
        .string("model", "Pi-like")
        .cells("interrupt-parent", &[7]);
    b.begin("aliases").string("serial1", "/soc/serial@7e215040").string("loop", "loop").end();
    let mut chosen = Builder::new();
    let _ = &mut chosen;
    b.begin("chosen")
        .string("stdout-path", "serial1:115200n8")
        .string("bootargs", "quiet selftest=fault -- a b");
    if initrd_cells == 1 {
        b.cells("linux,initrd-start", &[0x0200_0000]).cells("linux,initrd-end", &[0x0210_0000]);
    } else {
        b.cells("linux,initrd-start", &[0, 0x0200_0000]).cells("linux,initrd-end", &[0, 0x0210_0000]);
    }
    b.end();
    b.begin("cpus").cells("#address-cells", &[1]).cells("#size-cells", &[0]);
    for i in 0..4u32 {
        b.begin(&format!("cpu@{i}"))
            .string("device_type", "cpu")
            .cells("reg", &[i])
            .string("enable-method", "spin-table");
        if i != 2 {
            b.cells("cpu-release-addr", &[0, 0xd8 + 8 * i]);
        }
        b.end();
    }
    b.begin("cpu-map").end(); // not a cpu node
    b.end();
    b.begin("memory@0").string("device_type", "memory").cells("reg", &[0, 0x3b40_0000]).end();
    b.begin("memory@80000000")
        .string("device_type", "memory")
        .string("status", "disabled")
        .cells("reg", &[0x8000_0000, 0x1000_0000])
        .end();
    b.begin("reserved-memory").cells("#address-cells", &[1]).cells("#size-cells", &[1]).flag("ranges");
    b.begin("linux,cma").cells("size", &[0x400_0000]).flag("reusable").end(); // dynamic: placed by the OS
    b.begin("firmware@1000").cells("reg", &[0x1000, 0x1000]).flag("no-map").end();
    b.begin("off@2000").cells("reg", &[0x2000, 0x1000]).string("status", "disabled").end();
    b.end();
    b.begin("soc")
        .string("compatible", "simple-bus")
        .cells("#address-cells", &[1])
        .cells("#size-cells", &[1]);
    b.cells("ranges", &[0x7e00_0000, 0x3f00_0000, 0x0100_0000, 0x4000_0000, 0x4000_0000, 0x0004_0000]);
    b.nop();
    b.begin("serial@7e215040")
        .string("compatible", "brcm,bcm2835-aux-uart")
        .cells("reg", &[0x7e21_5040, 0x40])
        .nop()
        .end();
    b.nop();
    b.begin("local_intc@40000000")
        .prop("compatible", b"brcm,bcm2836-l1-intc\0")
        .cells("reg", &[0x4000_0000, 0x100])
        .flag("interrupt-controller")
        .cells("phandle", &[7])
        .end();
    b.begin("timer").string("compatible", "arm,armv7-timer").end();
    b.begin("hidden").begin("deep@10").cells("reg", &[0x10, 4]).end().end();
    b.end();
    b.end();
    b.finish()
}

#[test]
fn pi_like_tree_gives_everything() {
    for cells in [1, 2] {
        let blob = pi_like(cells);
        let m = machine(&blob);
        assert_eq!(m.model, "Pi-like");
        assert_eq!(m.memory.ranges(), &[(0, 0x3b40_0000)], "the disabled memory node is left out");
        let console = m.console.as_ref().unwrap();
        assert_eq!(
            (console.path.as_str(), console.compatible.as_str(), console.pa),
            ("/soc/serial@7e215040", "brcm,bcm2835-aux-uart", 0x3f21_5040)
        );
        assert_eq!(m.psci, None);
        assert_eq!(m.interrupt_controller, Some(("brcm,bcm2836-l1-intc".to_string(), 0x4000_0000)));
        assert_eq!(m.cpus.len(), 4);
        assert!(m.cpus.iter().all(|c| c.enable_method == EnableMethod::SpinTable));
        let release: Vec<Option<u64>> = m.cpus.iter().map(|c| c.release_addr).collect();
        assert_eq!(release, [Some(0xd8), Some(0xe0), None, Some(0xf0)]);
        assert_eq!(m.initrd, Some((0x0200_0000, 0x0210_0000)));
        assert!(m.has_bootarg("selftest=fault") && !m.has_bootarg("selftest") && m.has_bootarg("--"));
        let reserved: Vec<(u64, u64, &str, bool)> =
            m.reserved.iter().map(|r| (r.start, r.end, r.what.as_str(), r.no_map)).collect();
        assert_eq!(
            reserved,
            [
                (0, 0x1000, "/memreserve/", false),
                (0x3b40_0000, 0x3f40_0000, "/memreserve/", false),
                (0x1000, 0x2000, "/reserved-memory/firmware@1000", true)
            ]
        );
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        let fdt = m.fdt;
        assert_eq!(
            devicetree::describe_interrupt_controller(&fdt).unwrap(),
            "local_intc@40000000 (brcm,bcm2836-l1-intc)"
        );
        let (path, node) = devicetree::find_compatible_path(&fdt, &["brcm,bcm2836-l1-intc"]).unwrap();
        assert_eq!(devicetree::reg_translated(&fdt, &path, node, 0).unwrap(), (0x4000_0000, 0x100));
        // Lookups without unit address, through an alias, and an alias that is not a path.
        assert_eq!(fdt.find_node("/memory").unwrap().name(), "memory@0");
        assert_eq!(fdt.find_node("/cpus/cpu").unwrap().name(), "cpu@0");
        assert_eq!(fdt.find_node("serial1").unwrap().name(), "serial@7e215040");
        assert!(
            fdt.find_node("loop").is_none()
                && fdt.find_node("nosuch").is_none()
                && fdt.find_node("/soc/nosuch").is_none()
        );
        assert_eq!(fdt.reservations().count(), 2);
        // A bus without `ranges` does not translate.
        let err = devicetree::translate(&fdt, "/soc/hidden/deep@10", 0x10).unwrap_err();
        assert!(err.contains("\"/soc/hidden\" has no ranges"), "{err}");
        let err = devicetree::translate(&fdt, "/soc/serial@7e215040", 0x1000).unwrap_err();
        assert!(err.contains("no ranges entry covers 0x1000"), "{err}");
        let walk: Vec<String> = {
            let mut w = fdt.walk();
            let mut v = Vec::new();
            while w.next().is_some() {
                v.push(format!("{}:{}", w.depth(), w.path()));
            }
            v
        };
        assert_eq!(walk[0], "0:/");
        assert!(walk.contains(&"3:/soc/hidden/deep@10".to_string()), "{walk:?}");
    }
}

fn console_error(edit: impl Fn(&mut Builder)) -> String {
    let mut b = Builder::new();
    b.begin("");
    edit(&mut b);
    b.begin("uart@1000").cells("reg", &[0, 0x1000, 0x100]).end();
    b.begin("bare@2000").string("compatible", "x,y").end();
    b.end();
    let blob = b.finish();
    machine(&blob).console.unwrap_err()
}

#[test]
fn console_errors_name_what_is_missing() {
    assert_eq!(console_error(|_| {}), "no /chosen node");
    assert_eq!(
        console_error(|b| {
            b.begin("chosen").end();
        }),
        "/chosen has no stdout-path"
    );
    let e = console_error(|b| {
        b.begin("chosen").string("stdout-path", "serial9").end();
    });
    assert_eq!(e, "stdout-path \"serial9\" is neither a path nor an alias");
    let e = console_error(|b| {
        b.begin("chosen").string("stdout-path", "/nowhere:115200").end();
    });
    assert_eq!(e, "stdout-path \"/nowhere\" names no node");
    let e = console_error(|b| {
        b.begin("chosen").string("linux,stdout-path", "/uart@1000").end();
    });
    assert_eq!(e, "console node \"/uart@1000\" has no compatible");
    let e = console_error(|b| {
        b.begin("chosen").string("stdout-path", "/bare").end();
    });
    assert_eq!(e, "console node: /bare@2000: no reg, or one with cells wider than 64 bits");
}

#[test]
fn odd_memory_is_reported_not_trusted() {
    let mut b = Builder::new();
    b.begin("").cells("#address-cells", &[2]).cells("#size-cells", &[2]);
    b.begin("memory@0")
        .string("device_type", "memory")
        .cells("reg", &[0xffff_ffff, 0xffff_f000, 0, 0x10_0000])
        .end();
    b.begin("wide")
        .cells("#address-cells", &[3])
        .begin("memory@0")
        .string("device_type", "memory")
        .cells("reg", &[0, 0, 0, 1])
        .end()
        .end();
    b.begin("memory@1").string("device_type", "memory").cells("#address-cells", &[3]).end();
    b.begin("memory@2").string("device_type", "memory").cells("reg", &[0, 0x1000, 0]).end(); // one cell short
    b.end();
    let blob = b.finish();
    let m = machine(&blob);
    assert_eq!(m.memory.ranges(), &[(0xffff_ffff_ffff_f000, u64::MAX)]);
    assert_eq!(m.problems.len(), 3, "{:?}", m.problems);
    assert!(m.problems[0].contains("wraps"), "{:?}", m.problems);
    assert!(m.problems[1].contains("memory@1: no readable reg"), "{:?}", m.problems);
    assert!(m.problems[2].contains("memory@2: no readable reg"), "{:?}", m.problems);
}

#[test]
fn too_many_memory_ranges_are_reported() {
    let mut b = Builder::new();
    b.begin("");
    let reg: Vec<u32> = (0..100u32).flat_map(|i| [0, i * 0x20_0000, 0x10_0000]).collect();
    b.begin("memory@0").string("device_type", "memory").cells("reg", &reg).end();
    b.end();
    let blob = b.finish();
    let m = machine(&blob);
    assert_eq!(m.memory.ranges().len(), 64);
    assert_eq!(m.problems.len(), 36);
    assert!(m.problems[0].contains("too many ranges"));
}

#[test]
fn depth_limit() {
    for depth in [MAX_DEPTH, MAX_DEPTH + 1] {
        let mut b = Builder::new();
        b.begin("");
        for i in 1..depth {
            b.begin(&format!("n{i}"));
        }
        for _ in 0..depth {
            b.end();
        }
        let blob = b.finish();
        match Fdt::new(&blob) {
            Ok(fdt) => {
                assert_eq!(depth, MAX_DEPTH);
                let mut w = fdt.walk();
                assert_eq!(w.by_ref().count(), MAX_DEPTH);
            }
            Err(e) => {
                assert_eq!(depth, MAX_DEPTH + 1);
                assert!(matches!(e, Error::Structure { problem: StructureProblem::TooDeep, .. }), "{e}");
            }
        }
    }
}

fn structure_error(build: impl Fn(&mut Builder)) -> StructureProblem {
    let mut b = Builder::new();
    build(&mut b);
    let blob = b.finish();
    match Fdt::new(&blob) {
        Err(Error::Structure { problem, .. }) => problem,
        other => panic!("expected a structure error, got {other:?}"),
    }
}

#[test]
fn structure_errors() {
    use StructureProblem::*;
    assert_eq!(
        structure_error(|b| {
            b.begin("").string("a", "b").begin("c").end().string("d", "e").end();
        }),
        MisplacedProperty
    );
    assert_eq!(
        structure_error(|b| {
            b.string("a", "b");
        }),
        MisplacedProperty
    );
    assert_eq!(
        structure_error(|b| {
            b.begin("").end().end();
        }),
        UnbalancedEnd
    );
    assert_eq!(
        structure_error(|b| {
            b.begin("").end().begin("").end();
        }),
        NotOneRoot
    );
    assert_eq!(
        structure_error(|b| {
            b.begin("root").end();
        }),
        NotOneRoot
    );
    assert_eq!(
        structure_error(|b| {
            b.begin("").begin("a");
        }),
        EarlyEnd
    );
    assert_eq!(
        structure_error(|b| {
            b.nop();
        }),
        EarlyEnd
    );
    // Hand-edited blobs for the rest.
    let good = {
        let mut b = Builder::new();
        b.begin("").string("name", "v").begin("child").end().end();
        b.finish()
    };
    let (rsv, structs, strings) = blocks(&good);
    let relayout =
        |s: &[u8], t: &[u8]| layout(&rsv, s, t, [Block::Reservations, Block::Structure, Block::Strings]);
    let problem = |blob: Vec<u8>| match Fdt::new(&blob) {
        Err(Error::Structure { offset, problem }) => (offset, problem),
        other => panic!("expected a structure error, got {other:?}"),
    };
    let toks = tokens(&structs);
    let prop = toks.iter().find(|t| t.1 == 3).unwrap().0;
    let mut s = structs.clone();
    put32(&mut s, prop, 7);
    assert_eq!(problem(relayout(&s, &strings)), (prop, UnknownToken(7)));
    let mut s = structs.clone();
    put32(&mut s, prop + 4, 0xffff_fff0);
    assert_eq!(problem(relayout(&s, &strings)), (prop, ValuePastEnd(0xffff_fff0)));
    let mut s = structs.clone();
    put32(&mut s, prop + 8, strings.len() as u32);
    assert_eq!(problem(relayout(&s, &strings)), (prop, NameOffsetOutside(strings.len() as u32)));
    let mut t = strings.clone();
    t[0] = 0xff;
    assert_eq!(problem(relayout(&structs, &t)), (prop, NameNotUtf8));
    let child = toks.iter().filter(|t| t.1 == 1).nth(1).unwrap().0;
    let mut s = structs.clone();
    s[child + 4] = 0xc3;
    assert_eq!(problem(relayout(&s, &strings)), (child, NameNotUtf8));
    s[child + 4] = b'/';
    assert_eq!(problem(relayout(&s, &strings)), (child, BadNodeName));
    assert_eq!(
        structure_error(|b| {
            b.begin("").begin("").end().end();
        }),
        BadNodeName
    );
    // A name running to the block's end, a block cut inside a token, one without FDT_END.
    let s = structs[..child + 6].to_vec();
    assert_eq!(problem(relayout(&s, &strings)), (child, UnterminatedName));
    let s = structs[..prop + 6].to_vec();
    assert_eq!(problem(relayout(&s, &strings)), (prop, Truncated));
    let s = structs[..structs.len() - 4].to_vec();
    assert_eq!(problem(relayout(&s, &strings)), (structs.len() - 4, NoEnd));
    for p in [
        Truncated,
        UnknownToken(7),
        UnterminatedName,
        NameNotUtf8,
        BadNodeName,
        ValuePastEnd(1),
        NameOffsetOutside(1),
        MisplacedProperty,
        UnbalancedEnd,
        TooDeep,
        NotOneRoot,
        EarlyEnd,
        NoEnd,
    ] {
        let e = Error::Structure { offset: 0x40, problem: p }.to_string();
        assert!(e.starts_with("structure block offset 0x40: ") && e.len() > 35, "{e}");
    }
}

#[test]
fn header_errors() {
    let good = VIRT.to_vec();
    let with = |word: usize, value: u32| {
        let mut b = good.clone();
        put32(&mut b, 4 * word, value);
        Fdt::new(&b).map(|_| ()).unwrap_err()
    };
    assert_eq!(Fdt::new(&good[..20]).unwrap_err(), Error::TooShort(20));
    assert_eq!(Fdt::new(&good[..2]).unwrap_err(), Error::TooShort(2));
    assert_eq!(with(0, 0x1234), Error::BadMagic(0x1234));
    assert_eq!(with(1, 39), Error::BadTotalSize { totalsize: 39, available: good.len() });
    assert_eq!(
        with(1, good.len() as u32 + 1),
        Error::BadTotalSize { totalsize: good.len() as u32 + 1, available: good.len() }
    );
    assert_eq!(with(5, 15), Error::Version { version: 15, last_compatible: 16 });
    assert_eq!(with(6, 18), Error::Version { version: 17, last_compatible: 18 });
    let total = good.len() as u32;
    assert_eq!(
        with(2, u32::MAX),
        Error::BlockOutside {
            block: "structure",
            offset: u32::MAX,
            size: header(&good, 9),
            totalsize: total
        }
    );
    assert_eq!(
        with(8, u32::MAX),
        Error::BlockOutside { block: "strings", offset: header(&good, 3), size: u32::MAX, totalsize: total }
    );
    assert_eq!(with(4, total - 8), Error::ReservationsUnterminated);
    assert!(matches!(with(4, total + 8), Error::BlockOutside { block: "memory reservation", .. }));
    // Trailing bytes past totalsize are ignored.
    let mut longer = good.clone();
    longer.extend_from_slice(&[0xff; 64]);
    assert_eq!(Fdt::new(&longer).unwrap().total_size(), good.len());
    for e in [with(0, 1), with(1, 0), with(5, 1), with(2, u32::MAX), with(4, total - 8), Error::TooShort(3)] {
        assert!(e.to_string().len() > 20, "{e}");
    }
}

#[test]
fn an_initrd_outside_memory_is_left_out() {
    for (start, end, kept) in
        [(0x4000_0000u32, 0x4010_0000u32, true), (0x5ff0_0000, 0x6000_0001, false), (0x10, 0x20, false)]
    {
        let mut b = Builder::new();
        b.begin("").cells("#address-cells", &[1]).cells("#size-cells", &[1]);
        b.begin("chosen").cells("linux,initrd-start", &[start]).cells("linux,initrd-end", &[end]).end();
        b.begin("memory@40000000")
            .string("device_type", "memory")
            .cells("reg", &[0x4000_0000, 0x2000_0000])
            .end();
        b.end();
        let blob = b.finish();
        let m = machine(&blob);
        assert_eq!(m.initrd.is_some(), kept, "[{start:#x}, {end:#x})");
        assert_eq!(m.problems.len(), usize::from(!kept));
        if !kept {
            assert!(
                m.problems[0].starts_with("initrd [") && m.problems[0].ends_with("is not inside the memory"),
                "{:?}",
                m.problems
            );
        }
    }
}

#[test]
fn find_node_path_gives_the_real_path() {
    let blob = pi_like(1);
    let fdt = Fdt::new(&blob).unwrap();
    for (asked, real) in [
        ("serial1", "/soc/serial@7e215040"),
        ("/soc/serial", "/soc/serial@7e215040"),
        ("//soc//serial@7e215040/", "/soc/serial@7e215040"),
        ("/", "/"),
        ("/cpus/cpu", "/cpus/cpu@0"),
    ] {
        let (path, node) = fdt.find_node_path(asked).unwrap();
        assert_eq!(path, real, "{asked}");
        assert!(node.same_node(&fdt.find_node(real).unwrap()));
    }
    assert!(fdt.find_node_path("serial1/nothing").is_none());
}
