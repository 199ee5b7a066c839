//! Host tests of the planner, the operands, the issuer and the errata table, for every
//! translation format ([`Format::ALL`]: 4, 16 and 64 KiB pages, 48 and 52 bits). The checker they
//! use is in `check.rs`: it decodes every planned instruction with the model (Arm rules) and
//! verifies exact cover, the bounds, the instruction forms and the operand fields. The mutation
//! tests plant known bugs through the `mutant!` hooks and require the same checks to catch each
//! of them. The build's format gets the full sweeps; the others the same sweeps over fewer page
//! counts where a sweep would only repeat itself (stated at each test).
//!
//! One file: every test goes through the same checker (`check.rs`) and sweeps.

use super::check::*;
use super::model::{ModelEntry, decode, decode_in};
use super::mutation::{self, Mutation};
use super::operand::{RangeOperand, page_operand, page_operand_va};
use super::test_caps::plan;
use super::*;
use crate::addr::VirtAddr;
use crate::granule::Format;
use crate::test_support::{per_granule, per_lpa2};
use std::vec::Vec;

const K4: u64 = 4096;
const M2: u64 = 2 << 20;
// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn operand_fields() {
    // Non-range: TTBR1 sign bits never reach TTL [47:44]; VA[55:12] comes back sign-extended.
    for va in [0xffff_8000_0000_0000u64, 0xffff_ffff_ffff_f000, 0x0000_7fff_ffff_f000, 0x1000] {
        let x = page_operand(0xabcd, VirtAddr(va));
        assert_eq!(x >> 48, 0xabcd);
        assert_eq!((x >> 44) & 0xf, 0, "TTL of {va:#x}");
        assert_eq!(page_operand_va(x), VirtAddr(va));
    }
    // Range, the build's format: every field in place, BaseADDR masked, TTBR1 start decoded
    // back. (TG, BaseADDR shift) of the build's granule: (1, 12), (2, 14), (3, 16); with LPA2's
    // `DS` BaseADDR is in 64 KiB units (shift 16), so the start is on that grid.
    let (tg, shift) = per_granule((1, 12), (2, 14), (3, 16));
    let shift = per_lpa2(shift, 16);
    let va = VirtAddr(0xffff_8000_1234_5000 & !((1 << shift) - 1));
    let x = RangeOperand::new(0x00ff, va, 3, 14).encode();
    assert_eq!(x >> 48, 0x00ff);
    assert_eq!((x >> 46) & 3, tg, "TG");
    assert_eq!((x >> 44) & 3, 3);
    assert_eq!((x >> 39) & 0x1f, 14);
    assert_eq!((x >> 37) & 3, 0, "TTL");
    assert_eq!(x & ((1 << 37) - 1), (va.0 >> shift) & ((1 << 37) - 1));
    let f = RangeOperand::decode(x);
    assert_eq!(f.start(), va);
    assert_eq!(f.pages(), 15 << 16);
    // Per format: TG names the granule, BaseADDR is the VA in pages (in 64 KiB units with DS),
    // and the start comes back, sign bits included. (TG, BaseADDR shift) written out.
    let rows = [(Format::K4, 1, 12), (Format::K4_LPA2, 1, 16), (Format::K16, 2, 14)];
    let rows =
        rows.into_iter().chain([(Format::K16_LPA2, 2, 16), (Format::K64, 3, 16), (Format::K64_52, 3, 16)]);
    for (fmt, tg, shift) in rows {
        for va in [0xffff_8000_1234_0000u64, 0x0000_7fff_ffff_0000, 0xfff0_0000_0000_0000, 0x1_0000] {
            if fmt.va_bits() == 48 && va == 0xfff0_0000_0000_0000 {
                continue;
            }
            let x = RangeOperand::new_in(fmt, 0x00ff, VirtAddr(va), 1, 7).encode();
            assert_eq!((x >> 46) & 3, tg, "TG {}", fmt.name());
            assert_eq!(x & ((1 << 37) - 1), (va >> shift) & ((1 << 37) - 1), "BaseADDR {}", fmt.name());
            let o = RangeOperand::decode(x);
            assert_eq!(o.start_in(fmt), VirtAddr(va), "{}", fmt.name());
            assert_eq!(o.bytes_in(fmt), 8u128 << 6 << fmt.granule.shift(), "SCALE 1, NUM 7: 512 pages");
        }
    }
    // Encodings as objdump shows them, Xt = x0 or xzr.
    assert_eq!(TlbiOp::Rvae1is.encoding(0), 0xd508_8220);
    assert_eq!(TlbiOp::Rvaae1is.encoding(0), 0xd508_8260);
    assert_eq!(TlbiOp::Rvale1is.encoding(0), 0xd508_82a0);
    assert_eq!(TlbiOp::Rvaale1is.encoding(0), 0xd508_82e0);
    assert_eq!(TlbiOp::Vae1is.encoding(0), 0xd508_8320);
    assert_eq!(TlbiOp::Vaae1is.encoding(0), 0xd508_8360);
    assert_eq!(TlbiOp::Vale1is.encoding(0), 0xd508_83a0);
    assert_eq!(TlbiOp::Vaale1is.encoding(0), 0xd508_83e0);
    assert_eq!(TlbiOp::Aside1is.encoding(0), 0xd508_8340);
    assert_eq!(TlbiOp::Vmalle1is.encoding(31), 0xd508_831f);
    assert_eq!(TlbiOp::Vmalle1.encoding(31), 0xd508_871f);
    assert_eq!(TlbiOp::Rvae1.encoding(0), 0xd508_8620);
    // Every op is classified consistently.
    for op in TlbiOp::ALL {
        assert_eq!(op.mnemonic().ends_with("is"), op.is_broadcast(), "{op:?}");
        assert_eq!(op.mnemonic().starts_with('r'), op.kind() == OpKind::Range, "{op:?}");
        let m = op.mnemonic().trim_start_matches('r');
        assert_eq!(m.starts_with("vale") || m.starts_with("vaale"), op.is_leaf_only(), "{op:?}");
    }
}

/// Every page count 0..=4096 at five start alignments, four bases (two TTBR1), both scopes,
/// with and without range ops; leaf-only and local forms alternate with the count. The build's
/// format sweeps every count; the others every count to 700 (all SCALE 0 shapes and the first
/// SCALE 1 ones, every 64 KiB head and tail of DS) and then every 13th.
#[test]
fn exhaustive_small_ranges() {
    for f in Format::ALL {
        let step = if f == Format::BUILD { 1 } else { 13 };
        let counts = (0..=700u64).chain((701..=4096).step_by(step));
        let counts: Vec<u64> = if f == Format::BUILD { (0..=4096).collect() } else { counts.collect() };
        for &base in &BASES {
            for align in aligns(f) {
                for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                    for caps in [RANGE, NO_RANGE] {
                        for &pages in &counts {
                            let caps = if pages % 3 == 1 { caps.local() } else { caps };
                            let r = req(f, base + align, pages, scope).with_leaf_only(pages % 2 == 1);
                            if let Err(e) = check_all(f, &r, caps) {
                                panic!("{e}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn boundary_counts_every_format() {
    for f in Format::ALL {
        for &base in &BASES {
            for align in aligns(f) {
                for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                    for caps in [RANGE, NO_RANGE, RANGE.local(), NO_RANGE.local()] {
                        for pages in boundary_counts(f) {
                            for leaf in [false, true] {
                                let r = req(f, base + align, pages, scope).with_leaf_only(leaf);
                                if let Err(e) = check_all(f, &r, caps) {
                                    panic!("{e}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // Thresholds, spelled out: 4 GiB less a page is ranges, 4 GiB a whole flush, per granule.
    for (f, last) in [(Format::K4, (1 << 20) - 1), (Format::K16, (1 << 18) - 1), (Format::K64, (1 << 16) - 1)]
    {
        let u = |pages| plan_f(f, &req(f, BASES[1], pages, Scope::Asid(7)), RANGE);
        assert_eq!(u(last).shape(), PlanShape::Ranges, "{}", f.name());
        assert_eq!(u(last).len(), 2, "{}", f.name());
        assert_eq!(u(last + 1).shape(), PlanShape::FullFlush, "{}", f.name());
        assert_eq!(range_bound_pages(f), last);
        // Without range ops: 511 steps at most, whatever the page size.
        let n = |pages| plan_f(f, &req(f, BASES[1], pages, Scope::Asid(7)), NO_RANGE);
        assert_eq!((n(511).shape(), n(511).len()), (PlanShape::PerStep, 511));
        assert_eq!((n(512).shape(), n(512).len()), (PlanShape::FullFlush, 1));
    }
    // The build's planner (`plan`, over `Format::BUILD`) has its granule's bound.
    let last = per_granule((1 << 20) - 1, (1 << 18) - 1, (1 << 16) - 1);
    assert_eq!(RANGE_BOUND_PAGES, last);
    assert_eq!(Format::ALL.map(range_plan_ops_bound), [2, 19, 2, 7, 2, 2]);
    let b = Format::BUILD;
    let u = |pages| plan(&req(b, BASES[1], pages, Scope::Asid(7)), RANGE);
    assert_eq!(u(last).shape(), PlanShape::Ranges);
    assert_eq!(u(last + 1).shape(), PlanShape::FullFlush);
    let k = plan(&req(b, BASES[2], last + 1, Scope::Global), RANGE);
    assert_eq!(k.iter().next().map(|i| i.op), Some(TlbiOp::Vmalle1is));
    let k = plan(&req(b, BASES[2], 512, Scope::Global), NO_RANGE.local());
    assert_eq!(k.iter().next().map(|i| i.op), Some(TlbiOp::Vmalle1));
}

/// With DS, a range that starts one page past a 64 KiB boundary: the pages to the next boundary
/// are single ops, then range ops from the boundary; an odd last page is a single op (Linux's
/// `__flush_tlb_range_op` with `lpa2`). Spelled out for 4 KiB and 16 KiB pages.
#[test]
fn lpa2_heads_and_tails() {
    let base = BASES[1] + K4;
    // 4 KiB, DS: 15 singles to 64 KiB, then 1000 − 15 = 985 pages: 984 in ranges, one single.
    let p = plan_f(Format::K4_LPA2, &req(Format::K4_LPA2, base, 1000, Scope::Asid(1)), RANGE);
    let kinds: Vec<OpKind> = p.iter().map(|i| i.op.kind()).collect();
    assert_eq!(kinds.iter().filter(|&&k| k == OpKind::Page).count(), 16, "{kinds:?}");
    assert!(kinds[..15].iter().all(|&k| k == OpKind::Page));
    assert_eq!(*kinds.last().unwrap(), OpKind::Page);
    for i in p.iter().filter(|i| i.op.kind() == OpKind::Range) {
        let start = decode_in(Format::K4_LPA2, i).va_bounds().unwrap().0;
        assert_eq!(start % (64 << 10), 0, "range op starts on 64 KiB");
    }
    // The same range without DS: two overlapping range ops, nothing else.
    let p = plan_f(Format::K4, &req(Format::K4, base, 1000, Scope::Asid(1)), RANGE);
    assert_eq!(p.iter().map(|i| i.op.kind()).collect::<Vec<_>>(), [OpKind::Range, OpKind::Range]);
    // 16 KiB, DS: 3 singles to 64 KiB; then 61 pages: 60 (one SCALE 0 op) and a single.
    let f = Format::K16_LPA2;
    let p = plan_f(f, &req(f, BASES[1] + (16 << 10), 64, Scope::Global), RANGE);
    let kinds: Vec<OpKind> = p.iter().map(|i| i.op.kind()).collect();
    assert_eq!(kinds, [OpKind::Page, OpKind::Page, OpKind::Page, OpKind::Range, OpKind::Page]);
    // 64 KiB pages with 52 bits: BaseADDR is in pages anyway, no head.
    let f = Format::K64_52;
    let p = plan_f(f, &req(f, BASES[1] + (64 << 10), 3, Scope::Global), RANGE);
    assert_eq!(p.iter().map(|i| i.op.kind()).collect::<Vec<_>>(), [OpKind::Range, OpKind::Range]);
}

/// Never more instructions than Linux for the same range, in every format (Linux's counts from
/// `compare::linux_plan_count_in`: its granule's `MAX_DVM_OPS`, the LPA2 single ops until the
/// start is 64 KiB-aligned), with and without range ops, at every start offset of the sweeps.
#[test]
fn never_more_than_linux_in_any_format() {
    for f in Format::ALL {
        for align in aligns(f) {
            let start = BASES[1] + align;
            for pages in (0..=2200u64).chain((2201..70_000).step_by(61)) {
                for caps in [RANGE, NO_RANGE] {
                    let ours = plan_f(f, &req(f, start, pages, Scope::Asid(1)), caps).len() as u64;
                    let linux = compare::linux_plan_count_in(f, VirtAddr(start), pages, 1, caps.range);
                    assert!(
                        ours <= linux,
                        "{}: {pages} pages from {start:#x}: ours {ours}, Linux {linux}",
                        f.name()
                    );
                }
            }
        }
    }
    // With DS Linux needs the single ops too (more in `linux_counts_worked_by_hand`).
    assert_eq!(compare::linux_plan_count_in(Format::K4_LPA2, VirtAddr(BASES[1] + K4), 16, 1, true), 16);
    assert_eq!(compare::linux_plan_count_in(Format::K4, VirtAddr(BASES[1] + K4), 16, 1, true), 1);
    assert_eq!(compare::linux_plan_count_in(Format::K64, VirtAddr(BASES[1]), 8191, 1, false), 8191);
}

/// Every page count to 70 000 (all four scales), then every 97th up to the bound: cover,
/// bounds and minimality, kernel addresses; for every format (16 and 64 KiB granules reach
/// their bound, 2^18 and 2^16 pages, within the every-count part or just after).
#[test]
fn counts_up_to_the_bound() {
    for f in Format::ALL {
        let base = BASES[3] - (1 << 33) + aligns(f)[2];
        let top = bound(f) + 3;
        let every = if f == Format::BUILD { 70_000 } else { 5_000 };
        for pages in (0..every.min(top)).chain((every.min(top)..top).step_by(97)).chain(top - 3..top) {
            let r = req(f, base, pages, Scope::Global);
            if let Err(e) = check_all(f, &r, RANGE) {
                panic!("{e}");
            }
        }
    }
}

/// Every page count up to past the range bound. About 5 s in a debug build; run with
/// `cargo test -p mm -- --ignored every_count_up_to_the_bound`.
#[test]
#[ignore]
fn every_count_up_to_the_bound() {
    for f in Format::ALL {
        let base = BASES[3] - (1 << 33) + aligns(f)[2];
        for pages in 0..bound(f) + 3 {
            let r = req(f, base, pages, Scope::Global);
            if let Err(e) = check_all(f, &r, RANGE) {
                panic!("{e}");
            }
        }
    }
}

/// The overlap minimum is at most 2 everywhere below the bound and below the partition minimum
/// where a partition needs more (the examples: 511 pages need 3 disjoint ops but 2 overlapping,
/// 262,143 need 5 disjoint but 2 overlapping), and our plan is never worse than Linux's.
#[test]
fn overlapping_covers_beat_partitions() {
    let dp = partition_min();
    for n in 1..(1u64 << 16) {
        let o = overlap_min(Format::K4, n);
        assert!(
            o <= 2 && o <= u64::from(dp[n as usize]),
            "{n} pages: overlap {o}, partition {}",
            dp[n as usize]
        );
    }
    let om = |n| overlap_min(Format::K4, n);
    assert_eq!((om(1), om(2), om(3), om(65)), (1, 1, 2, 2));
    assert_eq!((dp[511], om(511)), (3, 2));
    assert_eq!((compare::partition_plan_count(262_143), om(262_143)), (5, 2));
    assert_eq!(om((1 << 20) - 1), 2);
    // The 16 and 64 KiB granules, whose bounds cut SCALE 3 to 3 units and to none: still 2.
    for f in [Format::K16, Format::K64] {
        assert!((1..=bound(f)).step_by(7).chain([bound(f)]).all(|n| overlap_min(f, n) <= 2), "{}", f.name());
    }
    // The build's planner (`our_plan_count`, over `Format::BUILD`) against Linux's count for
    // the same granule and against the best partition.
    let b = Format::BUILD;
    for pages in (1..70_000u64).chain([(1 << 20) - 1]) {
        let ours = compare::our_plan_count(&req(b, BASES[1], pages, Scope::Asid(1)), RANGE.features());
        let linux = compare::linux_plan_count_in(b, VirtAddr(BASES[1]), pages, 1, true);
        assert!(ours <= linux, "{pages} pages");
        assert!(ours <= compare::partition_plan_count(pages), "{pages} pages");
        if pages < 1 << 16 {
            assert_eq!(compare::partition_plan_count(pages), u64::from(dp[pages as usize]), "{pages} pages");
        }
    }
}

#[test]
fn block_strides() {
    for f in Format::ALL {
        let pg = page(f);
        for &base in &BASES {
            for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                for caps in [RANGE, NO_RANGE] {
                    for (stride, counts) in [
                        (Stride::Block2M, &[0u64, 1, 2, 3, 64, 511, 512, 513, 2047, 2048][..]),
                        (Stride::Block1G, &[0, 1, 2, 3, 4, 5][..]),
                    ] {
                        for &n in counts {
                            // Unaligned start and end: rounded out to whole blocks.
                            let step = stride.bytes_in(f);
                            let start = base.wrapping_add(step.wrapping_mul(2)).wrapping_add(pg);
                            let end = start.wrapping_add(n.wrapping_mul(step)).wrapping_sub(2 * pg);
                            let r =
                                TlbRequest::new(VirtAddr(start), VirtAddr(end), scope).with_stride(stride);
                            let r = if n == 0 { TlbRequest { end: r.start, ..r } } else { r };
                            if r.end.0 != 0 && r.end < r.start {
                                continue; // a level-1 entry of 64 KiB pages is 4 TiB: past the top
                            }
                            if let Err(e) = check_all(f, &r, caps) {
                                panic!("{e}");
                            }
                        }
                    }
                }
            }
        }
        // A level-2 block promotion is one instruction either way (2 MiB, 32 MiB, 512 MiB).
        let l2 = f.entry_span(2);
        let r = TlbRequest::new(VirtAddr(BASES[1]), VirtAddr(BASES[1] + l2), Scope::Asid(3));
        assert_eq!(plan_f(f, &r, RANGE).len(), 1, "{}", f.name());
        assert_eq!(plan_f(f, &r.with_stride(Stride::Block2M), NO_RANGE).len(), 1);
    }
    assert_eq!(Stride::Block2M.bytes(), per_granule(M2, 32 << 20, 512 << 20));
    assert_eq!(Format::ALL.map(|f| Stride::Block2M.bytes_in(f) >> 20), [2, 2, 32, 32, 512, 512]);
    assert_eq!(Format::ALL.map(|f| Stride::Block1G.bytes_in(f) >> 30), [1, 1, 64, 64, 4096, 4096]);
}

/// The model TLB around each range, for every format: the build's format with the counts to 66
/// and at the scale boundaries, the others with every count to 40 (every head and tail of DS at
/// the five start offsets) and a few larger ones.
#[test]
fn model_tlb_sees_exactly_the_range() {
    let full: Vec<u64> = (0..=66).chain([127, 128, 129, 255, 511, 512, 513, 2049]).collect();
    let short: Vec<u64> = (0..=40).chain([63, 64, 65, 129, 513]).collect();
    for f in Format::ALL {
        let counts = if f == Format::BUILD { &full } else { &short };
        for &base in &BASES {
            for align in aligns(f) {
                for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                    for caps in [RANGE, NO_RANGE] {
                        for leaf in [false, true] {
                            for &pages in counts {
                                let r = req(f, base + align, pages, scope).with_leaf_only(leaf);
                                if let Err(e) = model_check(f, &r, caps) {
                                    panic!("{e}\n  {r:?} {caps:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn top_of_the_address_space_and_odd_requests() {
    // A range that ends at 2^64 is written with end = 0.
    for f in Format::ALL {
        for pages in [1u64, 2, 3, 64, 4095] {
            let start = 0u64.wrapping_sub(pages * page(f));
            let r = TlbRequest::new(VirtAddr(start), VirtAddr(0), Scope::Global);
            for caps in [RANGE, NO_RANGE] {
                check_all(f, &r, caps).unwrap();
                model_check(f, &r, caps).unwrap();
            }
        }
    }
    // Empty, and unaligned bounds inside one page.
    let r = TlbRequest::new(VirtAddr(0x1234), VirtAddr(0x1234), Scope::Asid(1));
    assert!(plan(&r, RANGE).is_empty());
    let r = TlbRequest::new(VirtAddr(0x1234), VirtAddr(0x1235), Scope::Asid(1));
    assert_eq!(plan(&r, RANGE).len(), 1);
    for f in Format::ALL {
        check_all(f, &r, RANGE).unwrap();
    }
    // The plan is a value: iterating it twice gives the same instructions, and planning never
    // changes the request (Linux f7edb07ad7c6: the macro consumed its arguments).
    let r = req(Format::K4, BASES[2], 12345, Scope::Global);
    let copy = r;
    let p = plan(&r, RANGE);
    assert_eq!(r, copy);
    assert_eq!(p.iter().collect::<Vec<_>>(), p.iter().collect::<Vec<_>>());
    assert_eq!(p.iter().len(), p.len());
}

/// Linux's instruction counts, worked out by hand from `__flush_tlb_range_op()` and
/// `__flush_tlb_range_nosync()` (arch/arm64/include/asm/tlbflush.h, v6.10–v6.16): SCALE from 3
/// down, `NUM = min(pages, 32 << (5·SCALE + 1)) >> (5·SCALE + 1) − 1`, an op where `NUM ≥ 0`; a
/// single op for a last page and, with LPA2, while the start is off 64 KiB; one whole flush past
/// `MAX_TLBI_RANGE_PAGES` = 2^21 pages, or without range ops from `MAX_DVM_OPS` (=
/// `PTRS_PER_PTE`: 512, 2048, 8192) steps. Pinned here, so that `linux_plan_count` (which
/// delegates to `linux_plan_count_in`) and the formats' counts are checked against numbers
/// rather than against each other.
#[test]
fn linux_counts_worked_by_hand() {
    let (k4, k16, k64) = (Format::K4, Format::K16, Format::K64);
    // (format, start offset from BASES[1], pages, stride in pages, FEAT_TLBIRANGE, Linux's count)
    let rows = [
        (k4, 0, 1, 1, true, 1),
        (k4, 0, 2, 1, true, 1),             // SCALE 0, NUM 0
        (k4, 0, 3, 1, true, 2),             // 1·2 + a single
        (k4, 0, 511, 1, true, 3),           // 7·2^6 + 31·2 + a single
        (k4, 0, 1000, 1, true, 2),          // 15·2^6 + 20·2
        (k4, 0, 65_536, 1, true, 1),        // 1·2^16
        (k4, 0, 70_000, 1, true, 4),        // 1·2^16 + 2·2^11 + 5·2^6 + 24·2
        (k4, 0, 262_143, 1, true, 5),       // 3·2^16 + 31·2^11 + 31·2^6 + 31·2 + a single
        (k4, 0, (1 << 20) - 1, 1, true, 5), // 15·2^16 + 31·2^11 + 31·2^6 + 31·2 + a single
        (k4, 0, 1 << 21, 1, true, 1),       // SCALE 3, NUM 31: exactly MAX_TLBI_RANGE_PAGES
        (k4, 0, (1 << 21) + 1, 1, true, 1), // past it: flush_tlb_mm
        (k4, 0, 511, 1, false, 511),
        (k4, 0, 512, 1, false, 1),           // MAX_DVM_OPS steps: flush_tlb_mm
        (k4, 0, 511 * 512, 512, false, 511), // 2 MiB strides
        (k4, 0, 512 * 512, 512, false, 1),
        // Range ops count pages, whatever their size: the same decompositions without DS.
        (k16, 0, 511, 1, true, 3),
        (k64, 0, 262_143, 1, true, 5),
        // MAX_DVM_OPS is PTRS_PER_PTE.
        (k16, 0, 2047, 1, false, 2047),
        (k16, 0, 2048, 1, false, 1),
        (k64, 0, 8191, 1, false, 8191),
        (k64, 0, 8192, 1, false, 1),
        // LPA2: from one page past 64 KiB, 15 (4 KiB) or 3 (16 KiB) singles first.
        (Format::K4_LPA2, K4, 16, 1, true, 16), // 15 singles, then the last page
        (Format::K4_LPA2, K4, 1000, 1, true, 18), // 15 singles, 15·2^6, 12·2, a single
        (Format::K4_LPA2, 0, 511, 1, true, 3),  // aligned: as without DS
        (Format::K16_LPA2, 16 << 10, 64, 1, true, 5), // 3 singles, 30·2, a single
    ];
    for (f, offset, pages, stride, range, want) in rows {
        let start = VirtAddr(BASES[1] + offset);
        let got = compare::linux_plan_count_in(f, start, pages, stride, range);
        assert_eq!(
            got,
            want,
            "{}: {pages} pages from +{offset:#x}, stride {stride}, range {range}",
            f.name()
        );
        if f == Format::K4 {
            assert_eq!(compare::linux_plan_count(pages, stride, range), want, "{pages} pages");
        }
    }
}

#[test]
fn linux_bugs() {
    // e3ba51ab24fd: exactly 2^21 pages gave NUM = -1 at every scale and a garbage operand
    // (ASID 0xffff, SCALE 3, NUM 1). Here: a whole flush, and no op ever has ASID 0xffff.
    for scope in [Scope::Asid(5), Scope::Global] {
        let p = plan(&req(Format::K4, BASES[1], 1 << 21, scope), RANGE);
        assert!(p.is_full_flush());
        assert!(p.iter().all(|i| i.operand >> 48 != 0xffff));
    }
    // Ryan Roberts' review of the C rewrite: a range operand must never go out with a non-range
    // instruction. Every op whose operand has TG set is a range op.
    for pages in 2..=4096 {
        for i in &plan(&req(Format::K4, BASES[2], pages, Scope::Global), RANGE) {
            assert_eq!((i.operand >> 46) & 3 != 0, i.op.kind() == OpKind::Range, "{i:x?}");
        }
    }
    // Linux's own count equals the partition count below our bound (same decomposition), and is
    // at most 5.
    for pages in (0..70_000u64).chain([(1 << 20) - 1, 1 << 21]) {
        let linux = compare::linux_plan_count(pages, 1, true);
        assert!(linux <= 5);
        if pages < 1 << 20 {
            assert_eq!(linux, compare::partition_plan_count(pages), "{pages} pages");
        }
    }
    assert_eq!(compare::linux_plan_count(511, 1, false), 511);
    assert_eq!(compare::linux_plan_count(512, 1, false), 1);
    assert_eq!(compare::linux_plan_count(511 * 512, 512, false), 511);
    assert_eq!(compare::linux_plan_count(1 << 21, 1, true), 1, "one op: SCALE 3, NUM 31");
    assert_eq!(compare::linux_plan_count((1 << 21) + 1, 1, true), 1);
    assert_eq!(compare::one_per_leaf_count(VirtAddr(0), VirtAddr(3 * M2), M2), 3);
    assert_eq!(compare::one_per_leaf_count(VirtAddr(K4), VirtAddr(M2 + K4), M2), 2);
    assert_eq!(compare::one_per_page_count(512), 512);
}

#[test]
fn full_flush_forms() {
    for (caps, asid_op, all_op) in
        [(RANGE, TlbiOp::Aside1is, TlbiOp::Vmalle1is), (NO_RANGE.local(), TlbiOp::Aside1, TlbiOp::Vmalle1)]
    {
        let p = plan(&req(Format::K4, BASES[1], 1 << 21, Scope::Asid(0x77)), caps);
        assert_eq!(p.iter().collect::<Vec<_>>(), [TlbInstr { op: asid_op, operand: 0x77 << 48 }]);
        let p = plan(&req(Format::K4, BASES[2], 1 << 21, Scope::Global), caps);
        assert_eq!(p.iter().collect::<Vec<_>>(), [TlbInstr { op: all_op, operand: 0 }]);
    }
    // In the model, ASIDE1IS keeps global entries; VMALLE1IS does not.
    let global = ModelEntry { va: VirtAddr(BASES[2]), level: 3, leaf: true, asid: None };
    let aside = decode(TlbInstr { op: TlbiOp::Aside1is, operand: 0 });
    let vmall = decode(TlbInstr { op: TlbiOp::Vmalle1is, operand: 0 });
    assert!(!aside.hits(&global));
    assert!(vmall.hits(&global));
}

#[test]
fn issuer_sequences_and_stats() {
    for caps in [RANGE, NO_RANGE, RANGE.local(), NO_RANGE.local()] {
        for pages in [0, 1, 2, 3, 100, 511, 512, 1 << 20] {
            let p = plan(&req(Format::BUILD, BASES[2], pages, Scope::Global), caps);
            for errata in [Errata::NONE, Errata { repeat_tlbi: true }] {
                for isb in [false, true] {
                    issuer_check(&p, errata, isb).unwrap();
                }
            }
        }
    }
    let mut issuer = TlbIssuer::new(Recorder::default(), Errata { repeat_tlbi: true });
    issuer.issue(&plan(&req(Format::BUILD, BASES[1], 3, Scope::Asid(9)), RANGE), false);
    issuer.issue(&plan(&req(Format::BUILD, BASES[1], 3, Scope::Asid(9)), NO_RANGE.local()), true);
    issuer.issue(&plan(&req(Format::BUILD, BASES[1], 1 << 20, Scope::Asid(9)), RANGE), false);
    issuer.issue(&plan(&req(Format::BUILD, BASES[2], 1 << 20, Scope::Global), RANGE.local()), true);
    issuer.issue(&TlbPlan::EMPTY, true);
    let s = *issuer.stats();
    // Three pages with range ops (the build's pages): two overlapping 2-page ops; with LPA2's
    // `DS` the second would start off the 64 KiB grid, so one 2-page op and one single.
    let three_pages = per_lpa2((2, 0), (1, 1));
    assert_eq!((s.range_broadcast, s.page_broadcast, s.page_local), (three_pages.0, three_pages.1, 3));
    assert_eq!((s.asid_broadcast, s.all_local, s.asid_local, s.all_broadcast), (1, 1, 0, 0));
    assert_eq!((s.planned_tlbis(), s.repeated, s.total_tlbis()), (7, 7, 14));
    assert_eq!((s.plans, s.isb, s.full_flushes()), (4, 2, 2));
    assert_eq!(s.dsb, 4 * 2 + 7);
    issuer.reset_stats();
    assert_eq!(*issuer.stats(), TlbStats::ZERO);
    assert!(issuer.errata().repeat_tlbi);
    assert!(issuer.into_hw().0.len() > 20);
}

#[test]
fn errata_table() {
    use super::issue::{MIDR_IMPLEMENTER_ARM as ARM, MIDR_IMPLEMENTER_QCOM as QCOM, Midr};
    let m = Midr::encode;
    // (midr, needs repeat)
    let cases = [
        (m(ARM, 0xd0b, 0, 0), true),  // Cortex-A76 r0p0 (1286807)
        (m(ARM, 0xd0b, 3, 0), true),  // Cortex-A76 r3p0
        (m(ARM, 0xd0b, 4, 1), true),  // Cortex-A76 r4p1 (4118414: all revisions)
        (m(ARM, 0xd05, 0, 0), true),  // Cortex-A55 r0p0 (2441007)
        (m(ARM, 0xd05, 2, 1), true),  // Cortex-A55 r2p1
        (m(ARM, 0xd46, 0, 0), true),  // Cortex-A510 r0p0 (2441009)
        (m(ARM, 0xd46, 1, 1), true),  // Cortex-A510 r1p1
        (m(ARM, 0xd46, 1, 2), false), // Cortex-A510 r1p2: fixed
        (m(ARM, 0xd46, 1, 3), false), // Cortex-A510 r1p3
        (m(ARM, 0xd0c, 4, 1), true),  // Neoverse-N1 (4118414)
        (m(ARM, 0xd4f, 0, 2), true),  // Neoverse-V2 (4118414)
        (m(ARM, 0xd03, 0, 4), false), // Cortex-A53
        (m(ARM, 0xd08, 0, 3), false), // Cortex-A72
        (m(ARM, 0xd80, 0, 1), false), // Cortex-A520
        (m(ARM, 0xd8e, 0, 0), false), // Neoverse-N3
        (m(QCOM, 0x800, 0, 0), true), // Falkor v1 r0p0 (1009)
        (m(QCOM, 0x800, 0, 1), false),
        (m(QCOM, 0x201, 0, 0), true),     // Kryo (is_kryo_midr)
        (m(QCOM, 0x2ff, 1, 2), true),     // Kryo
        (m(QCOM, 0x804, 0xc, 0xe), true), // Kryo4xx Gold rcpe
        (m(QCOM, 0x804, 0xf, 0xe), true), // Kryo4xx Gold rfpe
        (m(QCOM, 0x804, 0xf, 0xf), false),
        (m(QCOM, 0x804, 0xc, 0xd), false),
        (m(0x61, 0x022, 0, 0), false), // Apple M1 Icestorm
        (0x000f_0000, false),          // implementer 0
    ];
    for (midr, want) in cases {
        assert_eq!(repeat_tlbi_needed(midr), want, "{:?}", Midr::decode(midr));
        assert_eq!(Errata::from_midr(midr).repeat_tlbi, want);
    }
    // Architecture field other than 0xf: never matches (Linux compares it too).
    assert!(!repeat_tlbi_needed(m(ARM, 0xd05, 0, 0) & !(0xf << 16)));
}

#[test]
fn caps_from_id_registers() {
    // QEMU 7.2 -cpu max.
    let qemu = TlbFeatures::from_id_registers(0x1221_1111_1021_2120, 0);
    assert!(qemu.range && !qemu.errata.repeat_tlbi);
    assert!(!TlbFeatures::from_id_registers(0, 0).range);
    assert!(!TlbFeatures::from_id_registers(1 << 56, 0).range, "FEAT_TLBIOS only");
    let a55 = TlbFeatures::from_id_registers(2 << 56, super::issue::Midr::encode(0x41, 0xd05, 2, 0));
    assert!(a55.range && a55.errata.repeat_tlbi);
    let no_range = TlbFeatures::from_id_registers(0, 0);
    let system = qemu.combine(a55).combine(no_range);
    assert!(!system.range && system.errata.repeat_tlbi);
    assert_eq!(TlbFeatures::BASELINE, no_range);
    assert!(Reach::Broadcast.is_broadcast() && !Reach::Local.is_broadcast());
}

#[test]
fn unmutated_code_passes_the_battery() {
    for f in Format::ALL {
        battery(f).unwrap();
    }
}

/// The battery over every format, the build's first: the bugs that only show with another
/// granule or with DS (a TG always 0b01, a BaseADDR in pages under DS, range ops from unaligned
/// starts under DS) are caught by the later formats.
fn every_battery() -> Result<(), std::string::String> {
    Format::ALL.into_iter().try_for_each(battery)
}

/// Plants each bug of `mutation.rs` in turn and requires the battery to catch it.
#[test]
fn planted_bugs_are_caught() {
    let mut survivors = Vec::new();
    for m in Mutation::ALL {
        match mutation::with(m, every_battery) {
            Ok(()) => survivors.push(m),
            Err(e) => {
                let first = e.lines().next().unwrap_or_default();
                std::println!("{m:?} caught: {first}");
            }
        }
    }
    assert!(survivors.is_empty(), "mutations not caught: {survivors:?}");
}

/// 10^6 random ranges anywhere in both halves, up to 2^22 pages, each in a format of its own.
/// About 6 s in a debug build; run with `cargo test -p mm -- --ignored random_ranges`.
#[test]
#[ignore]
fn random_ranges() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..1_000_000 {
        let f = Format::ALL[(next() % 6) as usize];
        let upper = next() & 1 == 1;
        let start = (next() & 0x0000_7fff_ffff_f000) | if upper { 0xffff_8000_0000_0000 } else { 0 };
        let pages = match next() % 4 {
            0 => next() % 64,
            1 => next() % 4096,
            2 => next() % (1 << 20),
            _ => next() % (1 << 22),
        };
        let start = start & !(page(f) - 1);
        let end = start.saturating_add(pages * page(f));
        let scope = if upper { Scope::Global } else { Scope::Asid(next() as u16) };
        let r = TlbRequest::new(VirtAddr(start), VirtAddr(end), scope).with_leaf_only(next() & 1 == 0);
        for caps in [RANGE, NO_RANGE] {
            if let Err(e) = check_all(f, &r, caps) {
                panic!("{e}");
            }
        }
    }
}

/// The figures of the report: TLBI instructions per range, ours against Linux's formula, for
/// every format, from a 2 MiB-aligned start and from one page past it (where LPA2 needs its
/// single ops), with FEAT_TLBIRANGE (and ours without it); `*` marks a whole flush. Prints a
/// table and checks ours <= Linux on each row. Run with
/// `cargo test -p mm --release -- --ignored --nocapture tlbi_counts_per_format`.
#[test]
#[ignore]
fn tlbi_counts_per_format() {
    use std::println;
    let counts = [1u64, 2, 3, 15, 16, 17, 64, 100, 511, 512, 1000, 2048, 65_535, 65_536, 262_143, 1 << 20];
    for f in Format::ALL {
        println!(
            "{}: pages | from aligned: ours, Linux | from +1 page: ours, Linux | ours without range",
            f.name()
        );
        for pages in counts {
            let mut row = std::format!("  {pages:>9}");
            for offset in [0, page(f)] {
                let start = BASES[1] + offset;
                let p = plan_f(f, &req(f, start, pages, Scope::Asid(1)), RANGE);
                let linux = compare::linux_plan_count_in(f, VirtAddr(start), pages, 1, true);
                assert!(p.len() as u64 <= linux, "{} {pages} pages", f.name());
                let star = if p.is_full_flush() { "*" } else { " " };
                row += &std::format!(" | {:>3}{star} {linux:>4}", p.len());
            }
            let n = plan_f(f, &req(f, BASES[1], pages, Scope::Asid(1)), NO_RANGE);
            row += &std::format!(" | {:>3}{}", n.len(), if n.is_full_flush() { "*" } else { " " });
            println!("{row}");
        }
    }
}
