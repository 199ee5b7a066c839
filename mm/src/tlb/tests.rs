//! Host tests of the planner, the operands, the issuer and the errata table. The central piece
//! is `check`, an independent checker: it decodes every planned instruction with the model
//! (Arm rules) and verifies exact cover, the bounds, the instruction forms and the operand
//! fields; `overlap_min` is an independent lower bound (met by a construction) for the fewest instructions that cover a
//! range exactly. The mutation tests plant known bugs through the `mutant!` hooks and require
//! the same checks to catch each of them.

use super::model::{AsidMatch, ModelEntry, decode};
use super::mutation::{self, Mutation};
use super::operand::{RangeOperand, page_operand, page_operand_va};
use super::test_caps::{Caps, plan};
use super::*;
use crate::addr::VirtAddr;
use std::format;
use std::string::String;
use std::sync::OnceLock;
use std::vec;
use std::vec::Vec;

const K4: u64 = 4096;
const M2: u64 = 2 << 20;
/// Start alignments (offsets from a 2 MiB-aligned base) of the exhaustive sweep.
const ALIGNS: [u64; 5] = [0, K4, 60 << 10, 64 << 10, M2 - K4];
/// Bases: a low and a high user address (TTBR0), the kernel linear map and the top of the
/// kernel half (TTBR1, sign bits set).
const BASES: [u64; 4] =
    [0x0000_0000_4000_0000, 0x0000_7ff0_0000_0000, 0xffff_8000_0000_0000, 0xffff_fffc_0000_0000];
const USER_ASID: u16 = 0x1234;
const OTHER_ASID: u16 = 0x0042;
const BOUNDARY_COUNTS: [u64; 16] = [
    1,
    2,
    3,
    63,
    64,
    65,
    2047,
    2048,
    2049,
    65535,
    65536,
    65537,
    (1 << 20) - 1,
    1 << 20,
    1 << 21,
    (1 << 21) + 1,
];

const RANGE: Caps = Caps { range: true, broadcast: true, errata: Errata::NONE };
const NO_RANGE: Caps = Caps { range: false, broadcast: true, errata: Errata::NONE };

fn req(start: u64, pages: u64, scope: Scope) -> TlbRequest {
    TlbRequest::new(VirtAddr(start), VirtAddr(start.wrapping_add(pages * K4)), scope)
}

// ---------------------------------------------------------------------------------------------
// The independent checker.

/// The rounded range a request must cover, computed here without the planner's helpers.
struct Expected {
    start: u128,
    end: u128,
    unit: u128,
    pages: u128,
    full: bool,
}

fn expected(r: &TlbRequest, caps: Caps) -> Option<Expected> {
    if r.start == r.end {
        return None;
    }
    let unit = u128::from(r.stride.bytes());
    let start = u128::from(r.start.0) / unit * unit;
    let end_raw = if r.end.0 == 0 { 1u128 << 64 } else { u128::from(r.end.0) };
    let end = end_raw.div_ceil(unit) * unit;
    let pages = (end - start) / u128::from(K4);
    let full = if caps.range { pages >= 1 << 20 } else { (end - start) / unit >= 512 };
    Some(Expected { start, end, unit, pages, full })
}

/// Checks one plan against the planner's rules (module documentation of `mm::tlb`). Returns a description of
/// the first violation.
fn check(r: &TlbRequest, caps: Caps, p: &TlbPlan) -> Result<(), String> {
    let ops: Vec<TlbInstr> = p.iter().collect();
    if ops.len() != p.len() {
        return Err(format!("len() {} but iterator gave {}", p.len(), ops.len()));
    }
    if p.is_broadcast() != caps.broadcast {
        return Err(format!("plan says broadcast={}, caps {caps:?}", p.is_broadcast()));
    }
    let Some(exp) = expected(r, caps) else {
        return if ops.is_empty() { Ok(()) } else { Err(format!("empty request, plan {ops:x?}")) };
    };
    if p.is_full_flush() != exp.full {
        return Err(format!("is_full_flush() {} for a plan of {} pages", p.is_full_flush(), exp.pages));
    }
    if exp.full {
        let [only] = ops[..] else {
            return Err(format!("expected one full flush, got {} ops", ops.len()));
        };
        let want = match (r.scope, caps.broadcast) {
            (Scope::Asid(a), true) => (TlbiOp::Aside1is, u64::from(a) << 48),
            (Scope::Asid(a), false) => (TlbiOp::Aside1, u64::from(a) << 48),
            (Scope::Global, true) => (TlbiOp::Vmalle1is, 0),
            (Scope::Global, false) => (TlbiOp::Vmalle1, 0),
        };
        if (only.op, only.operand) != want {
            return Err(format!("full flush {only:x?}, want {want:x?}"));
        }
        if !p.is_full_flush() {
            return Err("full flush not reported as such".into());
        }
        return Ok(());
    }
    let mut units: Vec<(u128, u128)> = Vec::with_capacity(ops.len());
    let mut per_scale = [0u32; 4];
    let mut singles = 0u64;
    for &i in &ops {
        let op = i.op;
        if op.is_broadcast() != caps.broadcast {
            return Err(format!("{op:?}: wrong shareability"));
        }
        match op.kind() {
            OpKind::Asid | OpKind::All => return Err(format!("unexpected full flush {op:?}")),
            OpKind::Range if !caps.range => return Err(format!("{op:?} without FEAT_TLBIRANGE")),
            _ => {}
        }
        if op.is_leaf_only() != r.leaf_only {
            return Err(format!("{op:?}: leaf-only form mismatch (leaf_only={})", r.leaf_only));
        }
        if op.is_all_asids() != (r.scope == Scope::Global) {
            return Err(format!("{op:?}: wrong ASID form for {:?}", r.scope));
        }
        let inv = decode(i);
        if !inv.effective || inv.level_hint.is_some() {
            return Err(format!("{i:x?}: invalid TG or TTL (decoded {inv:?})"));
        }
        match r.scope {
            Scope::Asid(a) if inv.asid != AsidMatch::AsidOrGlobal(a) => {
                return Err(format!("{i:x?}: ASID field is not {a:#x}"));
            }
            Scope::Global if i.operand >> 48 != 0 => {
                return Err(format!("{i:x?}: ASID field of an all-ASID op is not 0"));
            }
            _ => {}
        }
        match op.kind() {
            OpKind::Page => {
                if (i.operand >> 44) & 0xf != 0 {
                    return Err(format!("{i:x?}: TTL bits set"));
                }
                singles += 1;
            }
            OpKind::Range => {
                let f = RangeOperand::decode(i.operand);
                if f.tg != 1 || f.ttl != 0 {
                    return Err(format!("{i:x?}: TG {} TTL {}", f.tg, f.ttl));
                }
                if inv.ignored_by_qemu_7_2() {
                    return Err(format!("{i:x?}: range op of 4 GiB or more"));
                }
                per_scale[f.scale as usize] += 1;
            }
            _ => unreachable!(),
        }
        let (s, e) = inv.va_bounds().expect("VA op");
        units.push((s / exp.unit, e.div_ceil(exp.unit)));
    }
    // Cover: every stride unit of [start, end) hit at least once, nothing outside it. Range ops
    // may overlap; single-VA ops of a per-step loop may not (each step once).
    units.sort_unstable();
    let (first, last) = (exp.start / exp.unit, exp.end / exp.unit);
    let mut covered = first;
    for &(us, ue) in &units {
        if us < first || ue > last {
            return Err(format!(
                "cover: units {us:#x}..{ue:#x} outside the range {first:#x}..{last:#x} ({} pages)",
                exp.pages
            ));
        }
        if us > covered {
            return Err(format!("cover: units {covered:#x}..{us:#x} not invalidated ({} pages)", exp.pages));
        }
        if !caps.range && us < covered {
            return Err(format!("cover: unit {us:#x} invalidated twice by a per-step plan"));
        }
        covered = covered.max(ue);
    }
    if covered != last {
        return Err(format!("cover ends at unit {covered:#x}, want {last:#x}"));
    }
    if caps.range {
        if ops.len() > MAX_RANGE_PLAN_OPS {
            return Err(format!("{} ops with range", ops.len()));
        }
        let one = exp.pages == 1 && r.stride == Stride::Page;
        if singles != u64::from(one) {
            return Err(format!("{singles} single ops for {} pages", exp.pages));
        }
        if p.shape() != PlanShape::Ranges {
            return Err(format!("shape {:?}", p.shape()));
        }
    } else if ops.len() as u128 != (exp.end - exp.start) / exp.unit || ops.len() > 511 {
        return Err(format!("{} ops for {} steps", ops.len(), (exp.end - exp.start) / exp.unit));
    }
    Ok(())
}

/// Legal single-op sizes in pages: one page, and every range op below 4 GiB.
fn op_sizes() -> &'static [usize] {
    static SIZES: OnceLock<Vec<usize>> = OnceLock::new();
    SIZES.get_or_init(|| {
        let mut sizes = vec![1usize];
        for scale in 0..4 {
            for num in 0..32usize {
                let size = (num + 1) << (5 * scale + 1);
                if size < 1 << 20 && !sizes.contains(&size) {
                    sizes.push(size);
                }
            }
        }
        sizes.sort_unstable();
        sizes
    })
}

/// `overlap_min(n)`: the fewest ops (sizes from `op_sizes`) whose union is exactly `n` pages
/// when ops may overlap but not leave the range, for `1 <= n < 2^20`. A lower bound and a
/// construction meet: with `m` the largest size at most `n`, `k` ops cover at most `k * m`
/// pages, so at least `ceil(n / m)` are needed; and `ceil(n / m)` ops of size `m` placed at
/// `min(i * m, n - m)` cover it. Computed from the enumerated sizes, not from the planner.
fn overlap_min(n: u64) -> u64 {
    let sizes = op_sizes();
    let m = sizes[sizes.partition_point(|&s| s as u64 <= n) - 1] as u64;
    n.div_ceil(m)
}

/// `partition_min(n)`: the fewest ops that cover n pages exactly with disjoint ops, by dynamic
/// programming over `op_sizes` (what a partitioning planner, Linux's included, can reach at
/// best). Tabulated for `n < 2^16` (the test comparing it needs no more).
fn partition_min() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let sizes = op_sizes();
        let n = 1usize << 16;
        let mut dp = vec![u8::MAX; n];
        dp[0] = 0;
        for i in 1..n {
            let mut best = u8::MAX;
            for &s in sizes.iter().take_while(|&&s| s <= i) {
                best = best.min(dp[i - s]);
            }
            dp[i] = best + 1;
        }
        dp
    })
}

fn check_minimal(r: &TlbRequest, caps: Caps, p: &TlbPlan) -> Result<(), String> {
    if let Some(exp) = expected(r, caps)
        && caps.range
        && !exp.full
        && r.stride == Stride::Page
    {
        let want = overlap_min(exp.pages as u64);
        if p.len() as u64 != want {
            return Err(format!("{} ops for {} pages, minimum {want}", p.len(), exp.pages));
        }
    }
    Ok(())
}

fn check_all(r: &TlbRequest, caps: Caps) -> Result<(), String> {
    let p = plan(r, caps);
    check(r, caps, &p).and_then(|()| check_minimal(r, caps, &p)).map_err(|e| {
        format!(
            "{e}\n  request {:?}..{:?} {:?} {:?} leaf={} caps={caps:?}",
            r.start, r.end, r.stride, r.scope, r.leaf_only
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Model TLB check: fill a model TLB around the range, apply the plan, see what is left.

fn model_check(r: &TlbRequest, caps: Caps) -> Result<(), String> {
    let p = plan(r, caps);
    let Some(exp) = expected(r, caps) else {
        return Ok(());
    };
    let invs: Vec<_> = p.iter().map(decode).collect();
    let asid = match r.scope {
        Scope::Asid(a) => a,
        Scope::Global => USER_ASID,
    };
    let lo = exp.start.saturating_sub(3 * u128::from(K4));
    let hi = (exp.end + 3 * u128::from(K4)).min(1 << 64);
    let mut entries = Vec::new();
    let mut va = lo;
    while va < hi {
        for tag in [Some(asid), Some(OTHER_ASID), None] {
            entries.push(ModelEntry { va: VirtAddr(va as u64), level: 3, leaf: true, asid: tag });
        }
        va += u128::from(K4);
    }
    let mut va = lo / u128::from(M2) * u128::from(M2);
    while va < hi {
        for tag in [Some(asid), None] {
            entries.push(ModelEntry { va: VirtAddr(va as u64), level: 2, leaf: false, asid: tag });
        }
        va += u128::from(M2);
    }
    for e in &entries {
        let hit = invs.iter().any(|i| i.hits(e));
        let es = u128::from(e.va.0);
        let inside = es < exp.end && exp.start < es + u128::from(e.size());
        let want: Option<bool> = if exp.full {
            Some(match r.scope {
                Scope::Asid(a) => e.asid == Some(a),
                Scope::Global => true,
            })
        } else if !inside {
            Some(false)
        } else {
            match (r.scope, e.asid) {
                // VAE1IS(a) may also drop global entries of the range: allowed.
                (Scope::Asid(_), None) => None,
                (Scope::Asid(a), Some(t)) if t != a => Some(false),
                _ => Some(e.leaf || !r.leaf_only),
            }
        };
        if let Some(w) = want
            && w != hit
        {
            return Err(format!(
                "model: entry {e:?} hit={hit}, want {w} ({} ops, first {:x?})",
                p.len(),
                p.iter().take(6).collect::<Vec<_>>()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Issuer check with a recording TlbHardware.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    DsbIshst,
    DsbIsh,
    DsbNshst,
    DsbNsh,
    Isb,
    Tlbi(TlbiOp, u64),
}

#[derive(Default)]
struct Recorder(Vec<Ev>);

impl TlbHardware for Recorder {
    fn dsb_ishst(&mut self) {
        self.0.push(Ev::DsbIshst);
    }
    fn dsb_ish(&mut self) {
        self.0.push(Ev::DsbIsh);
    }
    fn dsb_nshst(&mut self) {
        self.0.push(Ev::DsbNshst);
    }
    fn dsb_nsh(&mut self) {
        self.0.push(Ev::DsbNsh);
    }
    fn isb(&mut self) {
        self.0.push(Ev::Isb);
    }
    fn tlbi(&mut self, op: TlbiOp, operand: u64) {
        self.0.push(Ev::Tlbi(op, operand));
    }
}

fn issuer_check(p: &TlbPlan, errata: Errata, needs_isb: bool) -> Result<(), String> {
    let mut hw = Recorder::default();
    let stats = issue(p, &mut hw, errata, needs_isb);
    let mut want = Vec::new();
    if !p.is_empty() {
        // The barriers' shareability follows the instructions', not the plan's own flag.
        let broadcast = p.iter().all(|i| i.op.is_broadcast());
        if p.is_broadcast() != broadcast {
            return Err(format!("plan says broadcast={} for {:?}", p.is_broadcast(), p.iter().next()));
        }
        want.push(if broadcast { Ev::DsbIshst } else { Ev::DsbNshst });
        for i in p {
            want.push(Ev::Tlbi(i.op, i.operand));
            if errata.repeat_tlbi {
                want.push(Ev::DsbIsh);
                want.push(Ev::Tlbi(i.op, i.operand));
            }
        }
        want.push(if broadcast { Ev::DsbIsh } else { Ev::DsbNsh });
        if needs_isb {
            want.push(Ev::Isb);
        }
    }
    if hw.0 != want {
        return Err(format!("issued {:x?}\n want {want:x?}", hw.0));
    }
    let n = p.len() as u64;
    if stats.planned_tlbis() != n || stats.repeated != if errata.repeat_tlbi { n } else { 0 } {
        return Err(format!("stats {stats:?} for {n} ops"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The battery the mutation test runs (and the baseline must pass).

fn battery() -> Result<(), String> {
    // Issuer first: cheap, and the only place the barrier mutations show.
    for caps in [RANGE, NO_RANGE, RANGE.local()] {
        for pages in [1, 3, 64, 700] {
            let p = plan(&req(BASES[2], pages, Scope::Global), caps);
            for errata in [Errata::NONE, Errata { repeat_tlbi: true }] {
                issuer_check(&p, errata, pages == 3)?;
            }
        }
    }
    for &base in &BASES {
        for scope in [Scope::Asid(USER_ASID), Scope::Global] {
            for caps in [RANGE, NO_RANGE] {
                for leaf in [false, true] {
                    for &pages in BOUNDARY_COUNTS.iter().chain(&[511, 512, 513]) {
                        check_all(&req(base + ALIGNS[2], pages, scope).with_leaf_only(leaf), caps)?;
                    }
                    for pages in [1, 2, 3, 5, 64, 65, 300, 511, 512, 513] {
                        model_check(&req(base + ALIGNS[4], pages, scope).with_leaf_only(leaf), caps)?;
                    }
                }
                for &align in &ALIGNS {
                    for pages in 0..=300 {
                        check_all(&req(base + align, pages, scope), caps)?;
                    }
                }
            }
        }
    }
    Ok(())
}

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
    // Range: every field in place, BaseADDR masked, TTBR1 start decoded back.
    let va = VirtAddr(0xffff_8000_1234_5000);
    let x = RangeOperand::new(0x00ff, va, 3, 14).encode();
    assert_eq!(x >> 48, 0x00ff);
    assert_eq!((x >> 46) & 3, 1, "TG 4K");
    assert_eq!((x >> 44) & 3, 3);
    assert_eq!((x >> 39) & 0x1f, 14);
    assert_eq!((x >> 37) & 3, 0, "TTL");
    assert_eq!(x & ((1 << 37) - 1), (va.0 >> 12) & ((1 << 37) - 1));
    let f = RangeOperand::decode(x);
    assert_eq!(f.start(), va);
    assert_eq!(f.pages(), 15 << 16);
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
/// with and without range ops; leaf-only and local forms alternate with the count.
#[test]
fn exhaustive_small_ranges() {
    for &base in &BASES {
        for &align in &ALIGNS {
            for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                for caps in [RANGE, NO_RANGE] {
                    for pages in 0..=4096u64 {
                        let caps = if pages % 3 == 1 { caps.local() } else { caps };
                        let r = req(base + align, pages, scope).with_leaf_only(pages % 2 == 1);
                        if let Err(e) = check_all(&r, caps) {
                            panic!("{e}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn boundary_counts() {
    for &base in &BASES {
        for &align in &ALIGNS {
            for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                for caps in [RANGE, NO_RANGE, RANGE.local(), NO_RANGE.local()] {
                    for &pages in &BOUNDARY_COUNTS {
                        for leaf in [false, true] {
                            let r = req(base + align, pages, scope).with_leaf_only(leaf);
                            if let Err(e) = check_all(&r, caps) {
                                panic!("{e}");
                            }
                        }
                    }
                }
            }
        }
    }
    // Thresholds, spelled out.
    let u = |pages| plan(&req(BASES[1], pages, Scope::Asid(7)), RANGE);
    assert_eq!(u((1 << 20) - 1).shape(), PlanShape::Ranges);
    assert!(u((1 << 20) - 1).len() <= 5);
    assert_eq!(u(1 << 20).shape(), PlanShape::FullFlush);
    let n = |pages| plan(&req(BASES[1], pages, Scope::Asid(7)), NO_RANGE);
    assert_eq!((n(511).shape(), n(511).len()), (PlanShape::PerStep, 511));
    assert_eq!((n(512).shape(), n(512).len()), (PlanShape::FullFlush, 1));
    let k = plan(&req(BASES[2], 1 << 20, Scope::Global), RANGE);
    assert_eq!(k.iter().next().map(|i| i.op), Some(TlbiOp::Vmalle1is));
    let k = plan(&req(BASES[2], 512, Scope::Global), NO_RANGE.local());
    assert_eq!(k.iter().next().map(|i| i.op), Some(TlbiOp::Vmalle1));
}

/// Every page count to 70 000 (all four scales), then every 97th up to the bound: cover,
/// bounds and minimality, kernel addresses.
#[test]
fn counts_up_to_the_bound() {
    let base = BASES[3] - (1 << 33) + ALIGNS[2];
    let top = (1u64 << 20) + 2;
    for pages in (0..70_000).chain((70_000..top).step_by(97)).chain(top - 3..top) {
        let r = req(base, pages, Scope::Global);
        if let Err(e) = check_all(&r, RANGE) {
            panic!("{e}");
        }
    }
}

/// Every page count up to past the range bound. About 5 s in a debug build; run with
/// `cargo test -p mm -- --ignored every_count_up_to_the_bound`.
#[test]
#[ignore]
fn every_count_up_to_the_bound() {
    let base = BASES[3] - (1 << 33) + ALIGNS[2];
    for pages in 0..(1u64 << 20) + 2 {
        let r = req(base, pages, Scope::Global);
        if let Err(e) = check_all(&r, RANGE) {
            panic!("{e}");
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
        let o = overlap_min(n);
        assert!(
            o <= 2 && o <= u64::from(dp[n as usize]),
            "{n} pages: overlap {o}, partition {}",
            dp[n as usize]
        );
    }
    assert_eq!((overlap_min(1), overlap_min(2), overlap_min(3), overlap_min(65)), (1, 1, 2, 2));
    assert_eq!((dp[511], overlap_min(511)), (3, 2));
    assert_eq!((compare::partition_plan_count(262_143), overlap_min(262_143)), (5, 2));
    assert_eq!(overlap_min((1 << 20) - 1), 2);
    for pages in (1..70_000u64).chain([(1 << 20) - 1]) {
        let ours = compare::our_plan_count(&req(BASES[1], pages, Scope::Asid(1)), RANGE.features());
        assert!(ours <= compare::linux_plan_count(pages, 1, true), "{pages} pages");
        assert!(ours <= compare::partition_plan_count(pages), "{pages} pages");
        if pages < 1 << 16 {
            assert_eq!(compare::partition_plan_count(pages), u64::from(dp[pages as usize]), "{pages} pages");
        }
    }
}

#[test]
fn block_strides() {
    for &base in &BASES {
        for scope in [Scope::Asid(USER_ASID), Scope::Global] {
            for caps in [RANGE, NO_RANGE] {
                for (stride, counts) in [
                    (Stride::Block2M, &[0u64, 1, 2, 3, 64, 511, 512, 513, 2047, 2048][..]),
                    (Stride::Block1G, &[0, 1, 2, 3, 4, 5][..]),
                ] {
                    for &n in counts {
                        // Unaligned start and end: rounded out to whole blocks.
                        let start = base + stride.bytes() * 2 + K4;
                        let end = start.wrapping_add(n * stride.bytes()).wrapping_sub(2 * K4);
                        let r = TlbRequest::new(VirtAddr(start), VirtAddr(end), scope).with_stride(stride);
                        let r = if n == 0 { TlbRequest { end: r.start, ..r } } else { r };
                        if let Err(e) = check_all(&r, caps) {
                            panic!("{e}");
                        }
                    }
                }
            }
        }
    }
    // A 2 MiB promotion is one instruction either way.
    let r = TlbRequest::new(VirtAddr(BASES[1]), VirtAddr(BASES[1] + M2), Scope::Asid(3));
    assert_eq!(plan(&r, RANGE).len(), 1);
    assert_eq!(plan(&r.with_stride(Stride::Block2M), NO_RANGE).len(), 1);
}

#[test]
fn model_tlb_sees_exactly_the_range() {
    for &base in &BASES {
        for &align in &ALIGNS {
            for scope in [Scope::Asid(USER_ASID), Scope::Global] {
                for caps in [RANGE, NO_RANGE] {
                    for leaf in [false, true] {
                        for pages in (0..=66).chain([127, 128, 129, 255, 511, 512, 513, 2049]) {
                            let r = req(base + align, pages, scope).with_leaf_only(leaf);
                            if let Err(e) = model_check(&r, caps) {
                                panic!("{e}\n  {r:?} {caps:?}");
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
    for pages in [1u64, 2, 3, 64, 4095] {
        let start = 0u64.wrapping_sub(pages * K4);
        let r = TlbRequest::new(VirtAddr(start), VirtAddr(0), Scope::Global);
        for caps in [RANGE, NO_RANGE] {
            check_all(&r, caps).unwrap();
            model_check(&r, caps).unwrap();
        }
    }
    // Empty, and unaligned bounds inside one page.
    let r = TlbRequest::new(VirtAddr(0x1234), VirtAddr(0x1234), Scope::Asid(1));
    assert!(plan(&r, RANGE).is_empty());
    let r = TlbRequest::new(VirtAddr(0x1234), VirtAddr(0x1235), Scope::Asid(1));
    assert_eq!(plan(&r, RANGE).len(), 1);
    check_all(&r, RANGE).unwrap();
    // The plan is a value: iterating it twice gives the same instructions, and planning never
    // changes the request (Linux f7edb07ad7c6: the macro consumed its arguments).
    let r = req(BASES[2], 12345, Scope::Global);
    let copy = r;
    let p = plan(&r, RANGE);
    assert_eq!(r, copy);
    assert_eq!(p.iter().collect::<Vec<_>>(), p.iter().collect::<Vec<_>>());
    assert_eq!(p.iter().len(), p.len());
}

/// Bugs Linux fixed in its range-TLBI code, each as a direct assertion.
#[test]
fn linux_bugs() {
    // e3ba51ab24fd: exactly 2^21 pages gave NUM = -1 at every scale and a garbage operand
    // (ASID 0xffff, SCALE 3, NUM 1). Here: a whole flush, and no op ever has ASID 0xffff.
    for scope in [Scope::Asid(5), Scope::Global] {
        let p = plan(&req(BASES[1], 1 << 21, scope), RANGE);
        assert!(p.is_full_flush());
        assert!(p.iter().all(|i| i.operand >> 48 != 0xffff));
    }
    // Ryan Roberts' review of the C rewrite: a range operand must never go out with a non-range
    // instruction. Every op whose operand has TG set is a range op.
    for pages in 2..=4096 {
        for i in &plan(&req(BASES[2], pages, Scope::Global), RANGE) {
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
        let p = plan(&req(BASES[1], 1 << 21, Scope::Asid(0x77)), caps);
        assert_eq!(p.iter().collect::<Vec<_>>(), [TlbInstr { op: asid_op, operand: 0x77 << 48 }]);
        let p = plan(&req(BASES[2], 1 << 21, Scope::Global), caps);
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
            let p = plan(&req(BASES[2], pages, Scope::Global), caps);
            for errata in [Errata::NONE, Errata { repeat_tlbi: true }] {
                for isb in [false, true] {
                    issuer_check(&p, errata, isb).unwrap();
                }
            }
        }
    }
    let mut issuer = TlbIssuer::new(Recorder::default(), Errata { repeat_tlbi: true });
    issuer.issue(&plan(&req(BASES[1], 3, Scope::Asid(9)), RANGE), false);
    issuer.issue(&plan(&req(BASES[1], 3, Scope::Asid(9)), NO_RANGE.local()), true);
    issuer.issue(&plan(&req(BASES[1], 1 << 20, Scope::Asid(9)), RANGE), false);
    issuer.issue(&plan(&req(BASES[2], 1 << 20, Scope::Global), RANGE.local()), true);
    issuer.issue(&TlbPlan::EMPTY, true);
    let s = *issuer.stats();
    // Three pages with range ops: two overlapping 2-page ops.
    assert_eq!((s.range_broadcast, s.page_broadcast, s.page_local), (2, 0, 3));
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
    battery().unwrap();
}

/// Plants each bug of `mutation.rs` in turn and requires the battery to catch it.
#[test]
fn planted_bugs_are_caught() {
    let mut survivors = Vec::new();
    for m in Mutation::ALL {
        match mutation::with(m, battery) {
            Ok(()) => survivors.push(m),
            Err(e) => {
                let first = e.lines().next().unwrap_or_default();
                std::println!("{m:?} caught: {first}");
            }
        }
    }
    assert!(survivors.is_empty(), "mutations not caught: {survivors:?}");
}

/// 10^6 random ranges anywhere in both halves, up to 2^22 pages. About 6 s in a debug build;
/// run with `cargo test -p mm -- --ignored random_ranges`.
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
        let upper = next() & 1 == 1;
        let start = (next() & 0x0000_7fff_ffff_f000) | if upper { 0xffff_8000_0000_0000 } else { 0 };
        let pages = match next() % 4 {
            0 => next() % 64,
            1 => next() % 4096,
            2 => next() % (1 << 20),
            _ => next() % (1 << 22),
        };
        let end = start.saturating_add(pages * K4);
        let scope = if upper { Scope::Global } else { Scope::Asid(next() as u16) };
        let r = TlbRequest::new(VirtAddr(start), VirtAddr(end), scope).with_leaf_only(next() & 1 == 0);
        for caps in [RANGE, NO_RANGE] {
            if let Err(e) = check_all(&r, caps) {
                panic!("{e}");
            }
        }
    }
}
