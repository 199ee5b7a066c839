//! The bootargs edit against QEMU's own trees (the `devicetree` crate's fixtures) and trees
//! written for the purpose: the new `bootargs` read back, everything else the same, `/chosen`
//! made when missing, and no panic on any corrupted byte.

extern crate std;
use std::string::String;
use std::vec::Vec;

use super::*;
use crate::fdt_writer::FdtWriter;

/// (node path, property name, value).
type Property = (String, String, Vec<u8>);

/// Every property of a tree, in order, and its memory reservations.
fn contents(blob: &[u8]) -> (Vec<Property>, Vec<(u64, u64)>) {
    let fdt = devicetree::Fdt::new(blob).unwrap();
    let mut walk = fdt.walk();
    let mut all = Vec::new();
    while let Some(node) = walk.next() {
        let path = walk.path();
        for p in node.properties() {
            all.push((path.clone(), String::from(p.name), p.value.to_vec()));
        }
    }
    (all, fdt.reservations().collect())
}

fn edit(src: &[u8], bootargs: &[u8]) -> Vec<u8> {
    let mut out = std::vec![0u8; src.len() + 4096];
    let n = with_bootargs(src, bootargs, &mut out).unwrap();
    out.truncate(n);
    out
}

const QEMU_TREES: [&[u8]; 3] = [
    include_bytes!("../../../devicetree/tests/fixtures/virt.dtb"),
    include_bytes!("../../../devicetree/tests/fixtures/virt-gicv3.dtb"),
    include_bytes!("../../../devicetree/tests/fixtures/virt-with-dtb.dtb"),
];

#[test]
fn qemu_trees_get_the_new_bootargs_and_keep_everything_else() {
    for src in QEMU_TREES {
        let out = edit(src, b"rdinit=/busybox -- sh -c 'echo hi'");
        let fdt = devicetree::Fdt::new(&out).unwrap();
        let chosen = fdt.find_node("/chosen").unwrap();
        assert_eq!(chosen.str_property("bootargs"), Some("rdinit=/busybox -- sh -c 'echo hi'"));
        assert_eq!(chosen.properties().filter(|p| p.name == "bootargs").count(), 1);
        let (before, rsv_before) = contents(src);
        let (after, rsv_after) = contents(&out);
        let others = |all: &[Property]| -> Vec<Property> {
            all.iter().filter(|(path, name, _)| !(path == "/chosen" && name == "bootargs")).cloned().collect()
        };
        assert_eq!(others(&before), others(&after));
        assert_eq!(rsv_before, rsv_after);
        let m = devicetree::Machine::from_fdt(fdt);
        assert_eq!(m.bootargs, "rdinit=/busybox -- sh -c 'echo hi'");
    }
}

/// A tree with a root property, an optional `/chosen` (with or without `bootargs`, and a child
/// holding a `bootargs` of its own), and a node after it.
fn tree(chosen: bool, bootargs: bool) -> Vec<u8> {
    let mut buf = std::vec![0u8; 2048];
    let mut w = FdtWriter::new(&mut buf);
    w.begin_node(b"", b"");
    w.prop_cells(b"#address-cells", &[2]);
    if chosen {
        w.begin_node(b"chosen", b"");
        w.prop_str(b"stdout-path", b"/pl011@9000000", b"");
        if bootargs {
            w.prop_str(b"bootargs", b"from the tree", b"");
        }
        w.begin_node(b"child", b"");
        w.prop_str(b"bootargs", b"not the kernel's", b"");
        w.end_node();
        w.end_node();
    }
    w.begin_node(b"memory@", b"40000000");
    w.prop_cells(b"reg", &[0, 0x4000_0000, 0, 0x2000_0000]);
    w.end_node();
    w.end_node();
    let n = w.finish().unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn bootargs_are_replaced_added_or_made_with_their_chosen() {
    for (chosen, bootargs) in [(true, true), (true, false), (false, false)] {
        let src = tree(chosen, bootargs);
        let out = edit(&src, b"console=x test=boot::");
        let fdt = devicetree::Fdt::new(&out).unwrap();
        let node = fdt.find_node("/chosen").unwrap();
        assert_eq!(node.str_property("bootargs"), Some("console=x test=boot::"), "{chosen} {bootargs}");
        assert_eq!(node.properties().filter(|p| p.name == "bootargs").count(), 1);
        if chosen {
            assert_eq!(node.str_property("stdout-path"), Some("/pl011@9000000"));
            let child = fdt.find_node("/chosen/child").unwrap();
            assert_eq!(
                child.str_property("bootargs"),
                Some("not the kernel's"),
                "a child's is not /chosen's"
            );
        }
        assert!(fdt.find_node("/memory@40000000").is_some());
        assert_eq!(fdt.root().u32_property("#address-cells"), Some(2));
        // Edited twice: the same tree (the string `bootargs` is found, not added again).
        let again = edit(&out, b"console=x test=boot::");
        assert_eq!(again, out);
    }
}

#[test]
fn nops_are_dropped_and_reservations_kept() {
    // A tree with a reservation and NOPs in its structure block (as libfdt leaves them).
    let mut src = tree(true, true);
    let struct_at = u32::from_be_bytes(src[8..12].try_into().unwrap()) as usize;
    // Turn the root's #address-cells property (its first token) into NOPs: 4 words of it.
    let first_prop = struct_at + 8; // after BEGIN_NODE and the root's empty, padded name
    assert_eq!(u32::from_be_bytes(src[first_prop..first_prop + 4].try_into().unwrap()), 3);
    for word in 0..4 {
        src[first_prop + 4 * word..first_prop + 4 * word + 4].copy_from_slice(&4u32.to_be_bytes());
    }
    // One reservation entry before the terminating one: shift the blocks by 16 bytes.
    let mut with_rsv = src[..40].to_vec();
    with_rsv.extend_from_slice(&0x4800_0000u64.to_be_bytes());
    with_rsv.extend_from_slice(&0x1000u64.to_be_bytes());
    with_rsv.extend_from_slice(&src[40..]);
    for field in [1usize, 2, 3] {
        let v = u32::from_be_bytes(with_rsv[4 * field..4 * field + 4].try_into().unwrap()) + 16;
        with_rsv[4 * field..4 * field + 4].copy_from_slice(&v.to_be_bytes());
    }
    let out = edit(&with_rsv, b"x");
    let fdt = devicetree::Fdt::new(&out).unwrap();
    assert_eq!(fdt.reservations().collect::<Vec<_>>(), [(0x4800_0000, 0x1000)]);
    assert_eq!(fdt.root().property("#address-cells").map(|p| p.value.len()), None);
    assert_eq!(fdt.find_node("/chosen").unwrap().str_property("bootargs"), Some("x"));
    assert!(out.len() < with_rsv.len() + 8, "16 bytes of NOPs gone, a shorter value written");
}

#[test]
fn too_small_a_buffer_and_bad_trees_are_errors() {
    let src = tree(true, true);
    let need = edit(&src, b"abc").len();
    for size in 0..need {
        let mut out = std::vec![0u8; size];
        assert_eq!(with_bootargs(&src, b"abc", &mut out), Err(EditError::NoRoom), "{size}");
    }
    let mut out = std::vec![0u8; 8192];
    assert_eq!(with_bootargs(&[], b"", &mut out), Err(EditError::NotATree));
    assert_eq!(with_bootargs(&src[..src.len() - 1], b"", &mut out), Err(EditError::NotATree), "truncated");
    let mut old = src.clone();
    old[20..24].copy_from_slice(&16u32.to_be_bytes()); // version 16: no size_dt_struct
    assert_eq!(with_bootargs(&old, b"", &mut out), Err(EditError::NotATree));
}

#[test]
fn every_corrupted_byte_is_an_error_or_a_tree_never_a_panic() {
    // One QEMU tree (the others differ in the GIC and CPU nodes only) and the two small ones.
    let sources = [QEMU_TREES[0].to_vec(), tree(true, true), tree(false, false)];
    let mut out = std::vec![0u8; 1 << 20];
    for src in sources.iter() {
        let mut bad = src.clone();
        for at in 0..src.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                bad[at] ^= flip;
                let edited = with_bootargs(&bad, b"test=x", &mut out);
                bad[at] ^= flip;
                if let Ok(n) = edited {
                    // What comes out is a tree the reader takes or refuses, without a panic.
                    if let Ok(fdt) = devicetree::Fdt::new(&out[..n]) {
                        let _ = devicetree::Machine::from_fdt(fdt);
                    }
                }
            }
        }
    }
}
