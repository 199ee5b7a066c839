//! The independent checker of the planner's tests, written once for every translation format
//! ([`Format`]): `check` decodes every planned instruction with the model (Arm rules) and
//! verifies exact cover, the bounds, the instruction forms and the operand fields;
//! `overlap_min` is an independent lower bound (met by a construction) for the fewest
//! instructions that cover a range exactly; `model_check` fills a model TLB around the range and
//! sees what a plan leaves; `issuer_check` records what the issuer executes; `battery` is what the
//! mutation test runs. Nothing here calls the planner's helpers: the expected values are
//! recomputed from the request, the format and the Arm rules.

use super::model::{AsidMatch, ModelEntry, decode_in};
use super::operand::RangeOperand;
use super::test_caps::Caps;
use super::*;
use crate::addr::VirtAddr;
use crate::granule::{Format, Granule};
use std::format;
use std::string::String;
use std::sync::OnceLock;
use std::vec;
use std::vec::Vec;

/// Start offsets of the sweeps, in pages from a 2 MiB-aligned base (for 4 KiB pages: 0, 4 KiB,
/// 60 KiB, 64 KiB, 2 MiB − 4 KiB; with `DS` they put the start before, at and after a 64 KiB
/// boundary).
pub(super) const ALIGN_PAGES: [u64; 5] = [0, 1, 15, 16, 511];
/// Bases: a low and a high user address (TTBR0), the kernel linear map and the top of the
/// kernel half (TTBR1, sign bits set). Aligned to 1 GiB, and valid with 48- and 52-bit VAs.
pub(super) const BASES: [u64; 4] =
    [0x0000_0000_4000_0000, 0x0000_7ff0_0000_0000, 0xffff_8000_0000_0000, 0xffff_fffc_0000_0000];
pub(super) const USER_ASID: u16 = 0x1234;
pub(super) const OTHER_ASID: u16 = 0x0042;

pub(super) const RANGE: Caps = Caps { range: true, broadcast: true, errata: Errata::NONE };
pub(super) const NO_RANGE: Caps = Caps { range: false, broadcast: true, errata: Errata::NONE };

/// Page size of `f` in bytes.
pub(super) const fn page(f: Format) -> u64 {
    1 << f.granule.shift()
}

/// The start offsets of [`ALIGN_PAGES`] in bytes.
pub(super) fn aligns(f: Format) -> [u64; 5] {
    ALIGN_PAGES.map(|p| p * page(f))
}

/// The largest page count planned with range ops: 4 GiB less one page, written out per granule.
pub(super) const fn bound(f: Format) -> u64 {
    match f.granule {
        Granule::K4 => (1 << 20) - 1,
        Granule::K16 => (1 << 18) - 1,
        Granule::K64 => (1 << 16) - 1,
    }
}

/// Page counts at the scale boundaries, at the range bound and past it.
pub(super) fn boundary_counts(f: Format) -> [u64; 16] {
    let b = bound(f);
    [1, 2, 3, 63, 64, 65, 2047, 2048, 2049, 65535, 65536, 65537, b, b + 1, 2 * (b + 1), 2 * (b + 1) + 1]
}

/// `pages` pages of `f` from `start`.
pub(super) fn req(f: Format, start: u64, pages: u64, scope: Scope) -> TlbRequest {
    TlbRequest::new(VirtAddr(start), VirtAddr(start.wrapping_add(pages * page(f))), scope)
}

/// [`plan_in`] of `req` with the reach and features of `caps`.
pub(super) fn plan_f(f: Format, req: &TlbRequest, caps: Caps) -> TlbPlan {
    plan_in(f, &req.with_reach(caps.reach()), caps.features())
}

/// The rounded range a request must cover, computed here without the planner's helpers.
pub(super) struct Expected {
    pub start: u128,
    pub end: u128,
    pub unit: u128,
    pub pages: u128,
    pub full: bool,
}

pub(super) fn expected(f: Format, r: &TlbRequest, caps: Caps) -> Option<Expected> {
    if r.start == r.end {
        return None;
    }
    let unit = u128::from(r.stride.bytes_in(f));
    let start = u128::from(r.start.0) / unit * unit;
    let end_raw = if r.end.0 == 0 { 1u128 << 64 } else { u128::from(r.end.0) };
    let end = end_raw.div_ceil(unit) * unit;
    let pages = (end - start) / u128::from(page(f));
    let full = if caps.range { pages > u128::from(bound(f)) } else { (end - start) / unit >= 512 };
    Some(Expected { start, end, unit, pages, full })
}

/// With `DS`: the single ops a range plan needs (the pages before the first 64 KiB boundary,
/// which no range op can reach, and an odd last page, which no range op can end on) and the
/// fewest and most range ops for the rest: none for nothing, one if it is one op's size, two if
/// it is a multiple of 64 KiB (two overlapping ops of the largest size, as without `DS`), else two
/// or three.
fn ds_expectations(f: Format, exp: &Expected) -> (u64, u64, u64) {
    let per_unit = (64 << 10) / page(f);
    let first = (exp.start / u128::from(page(f))) as u64;
    let pages = exp.pages as u64;
    let head = ((per_unit - first % per_unit) % per_unit).min(pages);
    let rest = pages - head;
    let body = rest - rest % 2;
    let (fewest, most) = if body == 0 {
        (0, 0)
    } else if op_sizes(f).contains(&(body as usize)) {
        (1, 1)
    } else if body.is_multiple_of(per_unit) {
        (2, 2)
    } else {
        (2, 3)
    };
    (head + rest % 2, fewest, most)
}

pub(super) fn check(f: Format, r: &TlbRequest, caps: Caps, p: &TlbPlan) -> Result<(), String> {
    let ops: Vec<TlbInstr> = p.iter().collect();
    if ops.len() != p.len() {
        return Err(format!("len() {} but iterator gave {}", p.len(), ops.len()));
    }
    if p.is_broadcast() != caps.broadcast {
        return Err(format!("plan says broadcast={}, caps {caps:?}", p.is_broadcast()));
    }
    let Some(exp) = expected(f, r, caps) else {
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
        let inv = decode_in(f, i);
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
                let o = RangeOperand::decode(i.operand);
                if u64::from(o.tg) != f.granule.tlbi_tg() || o.ttl != 0 {
                    return Err(format!("{i:x?}: TG {} TTL {} ({})", o.tg, o.ttl, f.name()));
                }
                if inv.ignored_by_qemu_7_2() {
                    return Err(format!("{i:x?}: range op of 4 GiB or more"));
                }
                per_scale[o.scale as usize] += 1;
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
        let ranges = ops.len() as u64 - singles;
        if f.ds() && r.stride == Stride::Page {
            let (want_singles, fewest, most) = ds_expectations(f, &exp);
            if singles != want_singles || ranges < fewest || ranges > most {
                return Err(format!(
                    "{singles} single and {ranges} range ops for {} pages with DS, want {want_singles} and {fewest} to {most}",
                    exp.pages
                ));
            }
        } else {
            if ops.len() > MAX_RANGE_PLAN_OPS {
                return Err(format!("{} ops with range", ops.len()));
            }
            let one = exp.pages == 1 && r.stride == Stride::Page;
            if singles != u64::from(one) {
                return Err(format!("{singles} single ops for {} pages", exp.pages));
            }
        }
        if ops.len() > range_plan_ops_bound(f) {
            return Err(format!("{} ops, more than the stated bound", ops.len()));
        }
        if p.shape() != PlanShape::Ranges {
            return Err(format!("shape {:?}", p.shape()));
        }
    } else if ops.len() as u128 != (exp.end - exp.start) / exp.unit || ops.len() > 511 {
        return Err(format!("{} ops for {} steps", ops.len(), (exp.end - exp.start) / exp.unit));
    }
    Ok(())
}

/// Legal single-op sizes in pages for the granule of `f`: one page, and every range op below
/// 4 GiB.
pub(super) fn op_sizes(f: Format) -> &'static [usize] {
    static SIZES: [OnceLock<Vec<usize>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = Granule::ALL.iter().position(|&g| g == f.granule).unwrap();
    SIZES[slot].get_or_init(|| {
        let mut sizes = vec![1usize];
        for scale in 0..4 {
            for num in 0..32usize {
                let size = (num + 1) << (5 * scale + 1);
                if size as u64 <= bound(f) && !sizes.contains(&size) {
                    sizes.push(size);
                }
            }
        }
        sizes.sort_unstable();
        sizes
    })
}

/// `overlap_min(f, n)`: the fewest ops (sizes from `op_sizes`) whose union is exactly `n` pages
/// when ops may overlap but not leave the range and may start on any page (no `DS`), for
/// `1 <= n <= bound`. A lower bound and a construction meet: with `m` the largest size at most
/// `n`, `k` ops cover at most `k * m` pages, so at least `ceil(n / m)` are needed; and
/// `ceil(n / m)` ops of size `m` placed at `min(i * m, n - m)` cover it. Computed from the
/// enumerated sizes, not from the planner.
pub(super) fn overlap_min(f: Format, n: u64) -> u64 {
    let sizes = op_sizes(f);
    let m = sizes[sizes.partition_point(|&s| s as u64 <= n) - 1] as u64;
    n.div_ceil(m)
}

/// `partition_min()`: the fewest ops that cover n pages exactly with disjoint ops (4 KiB sizes),
/// by dynamic programming over `op_sizes` (what a partitioning planner, Linux's included, can
/// reach at best). Tabulated for `n < 2^16` (the test comparing it needs no more).
pub(super) fn partition_min() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let sizes = op_sizes(Format::K4);
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

fn check_minimal(f: Format, r: &TlbRequest, caps: Caps, p: &TlbPlan) -> Result<(), String> {
    if let Some(exp) = expected(f, r, caps)
        && caps.range
        && !exp.full
        && r.stride == Stride::Page
        && !f.ds()
    {
        let want = overlap_min(f, exp.pages as u64);
        if p.len() as u64 != want {
            return Err(format!("{} ops for {} pages, minimum {want}", p.len(), exp.pages));
        }
    }
    Ok(())
}

pub(super) fn check_all(f: Format, r: &TlbRequest, caps: Caps) -> Result<(), String> {
    let p = plan_f(f, r, caps);
    check(f, r, caps, &p).and_then(|()| check_minimal(f, r, caps, &p)).map_err(|e| {
        format!(
            "{e}\n  {} request {:?}..{:?} {:?} {:?} leaf={} caps={caps:?}",
            f.name(),
            r.start,
            r.end,
            r.stride,
            r.scope,
            r.leaf_only
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Model TLB check: fill a model TLB around the range, apply the plan, see what is left.

pub(super) fn model_check(f: Format, r: &TlbRequest, caps: Caps) -> Result<(), String> {
    let p = plan_f(f, r, caps);
    let Some(exp) = expected(f, r, caps) else {
        return Ok(());
    };
    let invs: Vec<_> = p.iter().map(|i| decode_in(f, i)).collect();
    let asid = match r.scope {
        Scope::Asid(a) => a,
        Scope::Global => USER_ASID,
    };
    let pg = u128::from(page(f));
    let l2 = u128::from(f.entry_span(2));
    let lo = exp.start.saturating_sub(3 * pg);
    let hi = (exp.end + 3 * pg).min(1 << 64);
    let mut entries = Vec::new();
    let mut va = lo;
    while va < hi {
        for tag in [Some(asid), Some(OTHER_ASID), None] {
            entries.push(ModelEntry { va: VirtAddr(va as u64), level: 3, leaf: true, asid: tag });
        }
        va += pg;
    }
    let mut va = lo / l2 * l2;
    while va < hi {
        for tag in [Some(asid), None] {
            entries.push(ModelEntry { va: VirtAddr(va as u64), level: 2, leaf: false, asid: tag });
        }
        va += l2;
    }
    for e in &entries {
        let hit = invs.iter().any(|i| i.hits(e));
        let es = u128::from(e.va.0);
        let inside = es < exp.end && exp.start < es + u128::from(e.size_in(f.granule));
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
                "model {}: entry {e:?} hit={hit}, want {w} ({} ops, first {:x?})",
                f.name(),
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
pub(super) enum Ev {
    DsbIshst,
    DsbIsh,
    DsbNshst,
    DsbNsh,
    Isb,
    Tlbi(TlbiOp, u64),
}

#[derive(Default)]
pub(super) struct Recorder(pub Vec<Ev>);

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

pub(super) fn issuer_check(p: &TlbPlan, errata: Errata, needs_isb: bool) -> Result<(), String> {
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
// The battery the mutation test runs (and the baseline must pass), for one format.

pub(super) fn battery(f: Format) -> Result<(), String> {
    // Every count to 300 for the build's format, to 150 for the others (past SCALE 1, every
    // 64 KiB head and tail of DS).
    let small = if f == Format::BUILD { 300 } else { 150 };
    // Issuer first: cheap, and the only place the barrier mutations show.
    for caps in [RANGE, NO_RANGE, RANGE.local()] {
        for pages in [1, 3, 64, 700] {
            let p = plan_f(f, &req(f, BASES[2], pages, Scope::Global), caps);
            for errata in [Errata::NONE, Errata { repeat_tlbi: true }] {
                issuer_check(&p, errata, pages == 3)?;
            }
        }
    }
    let aligns = aligns(f);
    for &base in &BASES {
        for scope in [Scope::Asid(USER_ASID), Scope::Global] {
            for caps in [RANGE, NO_RANGE] {
                for leaf in [false, true] {
                    for &pages in boundary_counts(f).iter().chain(&[511, 512, 513]) {
                        check_all(f, &req(f, base + aligns[2], pages, scope).with_leaf_only(leaf), caps)?;
                    }
                    for pages in [1, 2, 3, 5, 64, 65, 300, 511, 512, 513] {
                        model_check(f, &req(f, base + aligns[4], pages, scope).with_leaf_only(leaf), caps)?;
                    }
                }
                for &align in &aligns {
                    for pages in 0..=small {
                        check_all(f, &req(f, base + align, pages, scope), caps)?;
                    }
                }
            }
        }
    }
    Ok(())
}
