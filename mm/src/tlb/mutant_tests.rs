//! Tests added for mutants that `cargo mutants` (scripts/mutants) found alive in the planner,
//! the operands and the ops: each asserts a specified behaviour that the battery of `tests.rs`
//! did not pin down (the operand layout as a bijection, the TTL decoding of the model, which
//! ops take a register, the behaviour of a reversed request in release builds).

use super::model::{decode, decode_in};
use super::op::{OpKind, TlbInstr, TlbiOp};
use super::operand::{RangeOperand, page_operand, page_operand_ttl};
use super::test_caps::{Caps, plan};
use super::{Scope, TlbRequest};
use crate::addr::VirtAddr;
use crate::granule::Format;
use crate::test_support::values;

/// The range operand's fields tile the 64 bits (ASID [63:48], TG [47:46], SCALE [45:44],
/// NUM [43:39], TTL [38:37], BaseADDR [36:0], Arm ARM C5.5.36): decoding then encoding any value
/// gives it back, and each field is where the architecture puts it.
#[test]
fn range_operand_fields_tile_the_register() {
    for x in values(20_000) {
        let f = RangeOperand::decode(x);
        assert_eq!(f.asid, (x >> 48) as u16, "{x:#x}");
        assert_eq!(u64::from(f.tg), (x >> 46) & 0b11, "{x:#x}");
        assert_eq!(u64::from(f.scale), (x >> 44) & 0b11, "{x:#x}");
        assert_eq!(u64::from(f.num), (x >> 39) & 0x1f, "{x:#x}");
        assert_eq!(u64::from(f.ttl), (x >> 37) & 0b11, "{x:#x}");
        assert_eq!(f.base, x & ((1 << 37) - 1), "{x:#x}");
        assert_eq!(f.encode(), x, "encode(decode({x:#x}))");
    }
    // A hand-built operand with every field non-zero, TTL included (the planner never sets TTL,
    // but the encoder must still put it in [38:37]).
    let f = RangeOperand { asid: 0xbeef, tg: 1, scale: 2, num: 17, ttl: 3, base: 0x1_2345_6789 };
    let want = 0xbeef << 48 | 1 << 46 | 2 << 44 | 17 << 39 | 3 << 37 | 0x1_2345_6789;
    assert_eq!(f.encode(), want);
    assert_eq!(RangeOperand::decode(want), f);
    // Fields wider than their slot are cut to it, never spilled into a neighbour.
    let wide = RangeOperand { asid: 0, tg: 0xfd, scale: 0xfe, num: 0xff, ttl: 0xfe, base: u64::MAX };
    let x = wide.encode();
    assert_eq!(x >> 48, 0, "nothing spills into the ASID");
    assert_eq!(
        RangeOperand::decode(x),
        RangeOperand { asid: 0, tg: 1, scale: 2, num: 31, ttl: 2, base: (1 << 37) - 1 }
    );
}

/// The TTL field of a single-VA operand ([47:44], C5.5.60) as the model reads it: 0b00xx is no
/// hint, 0b01xx is a 4 KiB level hint, 0b10xx / 0b11xx name another granule and the op need not
/// invalidate anything. The checker relies on this to reject plans with TTL bits set.
#[test]
fn single_va_ttl_is_decoded() {
    let va = VirtAddr(0x0000_7fff_1234_0000);
    let base = page_operand(0x42, va);
    assert_eq!(page_operand_ttl(base), 0);
    // Per format, the TTL values that hint a level (all others but 0b00xx name another granule
    // or a reserved level): TG in [3:2], level in [1:0], level 0 only for 4 KiB with DS.
    let hinted: [(Format, &[u64]); 6] = [
        (Format::K4, &[0b0101, 0b0110, 0b0111]),
        (Format::K4_LPA2, &[0b0100, 0b0101, 0b0110, 0b0111]),
        (Format::K16, &[0b1001, 0b1010, 0b1011]),
        (Format::K16_LPA2, &[0b1001, 0b1010, 0b1011]),
        (Format::K64, &[0b1101, 0b1110, 0b1111]),
        (Format::K64_52, &[0b1101, 0b1110, 0b1111]),
    ];
    for (format, hinted) in hinted {
        for ttl in 0..16u64 {
            let x = base | ttl << 44;
            assert_eq!(page_operand_ttl(x), ttl);
            let inv = decode_in(format, TlbInstr { op: TlbiOp::Vae1is, operand: x });
            let (effective, hint) = if ttl >> 2 == 0 {
                (true, None)
            } else if hinted.contains(&ttl) {
                (true, Some((ttl & 3) as u8))
            } else {
                (false, None)
            };
            assert_eq!(
                (inv.effective, inv.level_hint),
                (effective, hint),
                "{} TTL {ttl:#06b}",
                format.name()
            );
        }
    }
    // The build's decoder is its granule's: a level-3 hint of its own TG is one, another
    // granule's TG (16 KiB's for the 4 KiB build, 4 KiB's otherwise) is not effective.
    let own = Format::BUILD.granule.tlbi_tg() << 2 | 3;
    let own = decode(TlbInstr { op: TlbiOp::Vae1is, operand: base | own << 44 });
    assert_eq!((own.effective, own.level_hint), (true, Some(3)));
    let other = crate::test_support::per_granule(0b1001, 0b0101, 0b0101);
    assert!(!decode(TlbInstr { op: TlbiOp::Vae1is, operand: base | other << 44 }).effective);
    // Bits outside [47:44] do not leak into the TTL.
    assert_eq!(page_operand_ttl(!(0xf << 44)), 0);
    assert_eq!(page_operand_ttl(0xf << 44), 0xf);
}

/// Only `TLBI VMALLE1IS` / `TLBI VMALLE1` take no register (their encoding has Rt = XZR); every
/// other form needs its operand, which the issuer must pass.
#[test]
fn which_ops_take_a_register() {
    for op in TlbiOp::ALL {
        assert_eq!(op.has_operand(), op.kind() != OpKind::All, "{op:?}");
    }
    assert!(!TlbiOp::Vmalle1is.has_operand() && !TlbiOp::Vmalle1.has_operand());
    assert!(TlbiOp::Aside1is.has_operand() && TlbiOp::Rvaale1.has_operand());
}

const RANGE: Caps = Caps { range: true, broadcast: true, errata: super::Errata::NONE };

/// A reversed request (end below start) is a caller bug: debug builds panic on it.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "end below start")]
fn reversed_request_panics_in_debug_builds() {
    // Two pages, and half a page below: the end rounds up to the start (0x2000, 0x1800 with
    // 4 KiB pages).
    let page = crate::addr::PAGE_SIZE;
    let r = TlbRequest::new(VirtAddr(2 * page), VirtAddr(2 * page - page / 2), Scope::Asid(1));
    let _ = plan(&r, RANGE);
}

/// … and release builds over-invalidate: one whole flush, never nothing. Includes a request whose
/// rounded ends meet (start one page, end half a page: both round to the page). Runs with
/// `cargo test -p mm --release`.
#[test]
#[cfg(not(debug_assertions))]
fn reversed_request_is_a_whole_flush_in_release_builds() {
    let page = crate::addr::PAGE_SIZE;
    for (start, end) in [
        (page, page / 2),
        (2 * page, 2 * page - page / 2),
        (1024 * page, page),
        (u64::MAX - (page - 1), page),
    ] {
        for caps in [RANGE, Caps::BASELINE] {
            let r = TlbRequest::new(VirtAddr(start), VirtAddr(end), Scope::Asid(3));
            let p = plan(&r, caps);
            assert!(p.is_full_flush(), "{start:#x}..{end:#x}: {:x?}", p.iter().collect::<std::vec::Vec<_>>());
            assert_eq!(p.iter().next(), Some(TlbInstr { op: TlbiOp::Aside1is, operand: 3 << 48 }));
        }
    }
}
