//! Tests of the tree: searches against a brute-force oracle, every invariant after every
//! change, in-place rewrites, and the edges of the address space.

use super::*;
use crate::vm::{Advice, AnonName, Prot, VmaFlags};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::vec::Vec;

fn vma(s: u64, e: u64) -> Vma {
    Vma {
        start: s * PAGE,
        end: e * PAGE,
        prot: Prot::READ,
        flags: VmaFlags::empty(),
        advice: Advice::Normal,
        name: AnonName::NONE,
    }
}

/// Brute force over a sorted model: every page-aligned `x` in order, first that fits.
fn oracle(model: &BTreeMap<u64, u64>, q: &GapQuery) -> Option<u64> {
    let free = |s: u64, e: u64| model.iter().all(|(&a, &b)| b <= s || a >= e);
    let ok = |x: u64| {
        x.is_multiple_of(q.align)
            && x >= q.lo
            && x + q.len <= q.hi
            && q.no_cross.is_none_or(|b| q.len > b || x / b == (x + q.len - 1) / b)
            && q.exclude.is_none_or(|(x0, x1)| x + q.len <= x0 || x >= x1)
            && free(x, x + q.len)
    };
    let pages = (q.lo / PAGE)..=(q.hi / PAGE);
    match q.dir {
        Dir::Lowest => pages.map(|p| p * PAGE).find(|&x| ok(x)),
        Dir::Highest => pages.rev().map(|p| p * PAGE).find(|&x| ok(x)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn gap_search_matches_brute_force(
        ops in proptest::collection::vec((0u64..200, 1u64..8, any::<bool>()), 1..60),
        lo in 0u64..200, span in 1u64..220, len in 1u64..12,
        align_log in 0u32..4, cross in proptest::option::of(2u32..5),
        excl in proptest::option::of((0u64..200, 1u64..40)), highest in any::<bool>(),
    ) {
        let mut t = VmaTree::new();
        let mut model = BTreeMap::new();
        for (s, l, del) in ops {
            if del {
                if let Some(v) = t.first_ending_after(s * PAGE).copied() {
                    t.remove(v.start);
                    model.remove(&v.start);
                }
            } else if t.is_free(s * PAGE, (s + l) * PAGE) {
                t.insert(vma(s, s + l)).unwrap();
                model.insert(s * PAGE, (s + l) * PAGE);
            }
            t.check();
        }
        let listed: Vec<_> = t.iter().map(|v| (v.start, v.end)).collect();
        let expected: Vec<_> = model.iter().map(|(&a, &b)| (a, b)).collect();
        prop_assert_eq!(listed, expected);
        let q = GapQuery {
            lo: lo * PAGE, hi: (lo + span) * PAGE, len: len * PAGE, align: PAGE << align_log,
            no_cross: cross.map(|c| PAGE << c),
            exclude: excl.map(|(a, l)| (a * PAGE, (a + l) * PAGE)),
            dir: if highest { Dir::Highest } else { Dir::Lowest },
        };
        prop_assert_eq!(t.find_gap(&q), oracle(&model, &q));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// In-place rewrites (bounds moved within the neighbours, attributes changed) keep the
    /// order, the balance and every augmented value exact, and `neighbours` agrees with a
    /// sorted model.
    #[test]
    fn in_place_rewrites_keep_every_invariant(
        starts in proptest::collection::vec((0u64..300, 1u64..6), 1..60),
        edits in proptest::collection::vec((0u64..300, 0u64..8, 0u64..8, any::<bool>()), 1..40),
        probes in proptest::collection::vec(0u64..310, 1..10),
    ) {
        let mut t = VmaTree::new();
        let mut model = BTreeMap::new();
        for (s, l) in starts {
            if t.is_free(s * PAGE, (s + l) * PAGE) {
                t.insert(vma(s, s + l)).unwrap();
                model.insert(s * PAGE, (s + l) * PAGE);
            }
        }
        for (at, lo_shift, hi_shift, write) in edits {
            let Some(v) = t.first_ending_after(at * PAGE).copied() else { continue };
            let floor = t.last_starting_before(v.start).map_or(0, |p| p.end);
            let ceil = t.first_ending_after(v.end).map_or(400 * PAGE, |n| n.start);
            // Some start in [floor, end), some end in (start, ceil].
            let start = v.start.saturating_sub(lo_shift * PAGE).max(floor).min(v.end - PAGE);
            let start = if lo_shift % 2 == 1 { (start + lo_shift * PAGE).min(v.end - PAGE) } else { start };
            let end = (v.end + hi_shift * PAGE).min(ceil).max(start + PAGE);
            let prot = if write { Prot::RW } else { Prot::READ };
            let edited = t.replace(v.start, Vma { start, end, prot, ..v });
            prop_assert!(edited);
            model.remove(&v.start);
            model.insert(start, end);
            t.check();
            prop_assert_eq!(t.find(start).map(|f| f.prot), Some(prot));
        }
        let listed: Vec<_> = t.iter().map(|v| (v.start, v.end)).collect();
        let expected: Vec<_> = model.iter().map(|(&a, &b)| (a, b)).collect();
        prop_assert_eq!(listed, expected);
        prop_assert!(!t.replace(401 * PAGE, vma(401, 402)), "no mapping starts there");
        for p in probes {
            let a = p * PAGE;
            let (prev, next) = t.neighbours(a);
            let want_prev = model.range(..a).next_back().map(|(&s, &e)| (s, e));
            let want_next = model.range(a..).next().map(|(&s, &e)| (s, e));
            prop_assert_eq!(prev.map(|v| (v.start, v.end)), want_prev);
            prop_assert_eq!(next.map(|v| (v.start, v.end)), want_next);
        }
    }
}

#[test]
fn edges_of_the_address_space_do_not_overflow() {
    let mut t = VmaTree::new();
    let top = !(PAGE - 1);
    t.insert(Vma { start: top - 3 * PAGE, end: top - PAGE, ..vma(1, 2) }).unwrap();
    t.check();
    let q = GapQuery::new(top - 8 * PAGE, top, PAGE, Dir::Highest);
    assert_eq!(t.find_gap(&q), Some(top - PAGE));
    let q = GapQuery::new(0, 4 * PAGE, 4 * PAGE, Dir::Lowest);
    assert_eq!(t.find_gap(&q), Some(0));
    let q = GapQuery { align: 1 << 63, ..GapQuery::new(1, u64::MAX, PAGE, Dir::Lowest) };
    assert_eq!(t.find_gap(&q), Some(1 << 63));
}

/// The first fit of `q` over the model's free ranges, each placed on its own (what the tree's
/// search must find without looking at every range).
fn oracle_by_ranges(model: &BTreeMap<u64, u64>, q: &GapQuery) -> Option<u64> {
    let mut ranges = Vec::new();
    let mut prev = 0;
    for (&s, &e) in model {
        ranges.push((prev, s));
        prev = e;
    }
    ranges.push((prev, u64::MAX));
    if q.len == 0 || q.hi <= q.lo || q.hi - q.lo < q.len {
        return None;
    }
    match q.dir {
        Dir::Lowest => ranges.iter().find_map(|&(a, b)| q.place(a, b)),
        Dir::Highest => ranges.iter().rev().find_map(|&(a, b)| q.place(a, b)),
    }
}

/// Every lookup of the tree against the model, at `addr`.
fn lookups_agree(t: &VmaTree, model: &BTreeMap<u64, u64>, addr: u64) {
    let pair = |v: Option<&Vma>| v.map(|v| (v.start, v.end));
    let containing = model.range(..=addr).next_back().filter(|&(_, &e)| addr < e);
    assert_eq!(pair(t.find(addr)), containing.map(|(&s, &e)| (s, e)), "find {addr:#x}");
    let ending_after = model.iter().find(|&(_, &e)| e > addr);
    assert_eq!(pair(t.first_ending_after(addr)), ending_after.map(|(&s, &e)| (s, e)), "first_ending_after");
    let before = model.range(..addr).next_back().map(|(&s, &e)| (s, e));
    assert_eq!(pair(t.last_starting_before(addr)), before, "last_starting_before {addr:#x}");
    let (prev, next) = t.neighbours(addr);
    assert_eq!(pair(prev), before, "neighbours.0 {addr:#x}");
    assert_eq!(pair(next), model.range(addr..).next().map(|(&s, &e)| (s, e)), "neighbours.1 {addr:#x}");
    let around = t.around(addr);
    let pair_of = |v: Option<&Vma>| v.map(|v| (v.start, v.end));
    let at = containing.map(|(&s, &e)| (s, e));
    assert_eq!(pair_of(around.at()), at, "around.at {addr:#x}");
    let (lo, hi) = at.unwrap_or((addr, addr));
    assert_eq!(
        pair_of(around.prev()),
        model.range(..lo).next_back().map(|(&s, &e)| (s, e)),
        "around.prev {addr:#x}"
    );
    let after = if at.is_some() { model.range(hi..).next() } else { model.range(addr..).next() };
    assert_eq!(pair_of(around.next()), after.map(|(&s, &e)| (s, e)), "around.next {addr:#x}");
    let from: Vec<_> = t.iter_from(addr).take(20).map(|v| (v.start, v.end)).collect();
    let want: Vec<_> = model.iter().filter(|&(_, &e)| e > addr).take(20).map(|(&s, &e)| (s, e)).collect();
    assert_eq!(from, want, "iter_from {addr:#x}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Trees of three and four levels under random insertions, removals and in-place rewrites:
    /// every invariant after every change (order, fill, equal depth, every summary, counts), and
    /// every lookup and gap search as a sorted model answers it.
    #[test]
    fn many_levels_keep_every_invariant_and_answer_as_a_sorted_model(
        ops in proptest::collection::vec((0u8..8, 0u64..6000, 1u64..4, any::<u64>()), 500..3000),
    ) {
        let mut t = VmaTree::new();
        let mut model = BTreeMap::new();
        let mut max_height = 0;
        for (i, &(kind, s, l, r)) in ops.iter().enumerate() {
            match kind {
                0..=3 => {
                    if t.is_free(s * PAGE, (s + l) * PAGE) {
                        t.insert(vma(s, s + l)).unwrap();
                        model.insert(s * PAGE, (s + l) * PAGE);
                    }
                }
                4 | 5 => {
                    if let Some(v) = t.first_ending_after(s * PAGE).copied() {
                        prop_assert_eq!(t.remove(v.start), Some(v));
                        model.remove(&v.start);
                    }
                }
                _ => {
                    // Move one edge within the neighbours, or change only the attributes.
                    if let Some(v) = t.first_ending_after(s * PAGE).copied() {
                        let floor = t.last_starting_before(v.start).map_or(0, |p| p.end);
                        let ceil = t.first_ending_after(v.end).map_or(!(PAGE - 1), |n| n.start);
                        let step = (r % 3) * PAGE;
                        let (start, end) = match r % 5 {
                            0 => (v.start.saturating_sub(step).max(floor), v.end),
                            1 => ((v.start + step).min(v.end - PAGE), v.end),
                            2 => (v.start, (v.end + step).min(ceil)),
                            3 => (v.start, v.end.saturating_sub(step).max(v.start + PAGE)),
                            _ => (v.start, v.end),
                        };
                        let prot = if r & 8 == 0 { Prot::RW } else { Prot::READ };
                        let same = (start, end) == (v.start, v.end);
                        prop_assert_eq!(t.replace_attrs(v.start, Vma { start, end, prot, ..v }), same);
                        let edited = t.replace(v.start, Vma { start, end, prot, ..v });
                        prop_assert!(edited);
                        model.remove(&v.start);
                        model.insert(start, end);
                        prop_assert_eq!(t.find(start).map(|f| f.prot), Some(prot));
                    }
                }
            }
            t.check();
            max_height = max_height.max(t.height());
            lookups_agree(&t, &model, s * PAGE);
            if i % 64 == 0 {
                lookups_agree(&t, &model, (s + l) * PAGE - 1);
                let lo = (r % 6000) * PAGE;
                let q = GapQuery {
                    align: PAGE << (r >> 20 & 3),
                    no_cross: (r & 16 != 0).then_some(PAGE << 3),
                    exclude: (r & 32 != 0).then_some((lo + 64 * PAGE, lo + 512 * PAGE)),
                    ..GapQuery::new(lo, lo + ((r >> 8) % 3000 + 1) * PAGE, l * PAGE,
                        if r & 64 == 0 { Dir::Lowest } else { Dir::Highest })
                };
                prop_assert_eq!(t.find_gap(&q), oracle_by_ranges(&model, &q), "{:?}", q);
            }
        }
        let listed: Vec<_> = t.iter().map(|v| (v.start, v.end)).collect();
        let expected: Vec<_> = model.iter().map(|(&a, &b)| (a, b)).collect();
        prop_assert_eq!(listed, expected);
        prop_assert!(max_height >= 3 || ops.len() < 1500, "reached {} levels", max_height);
    }
}

#[test]
fn fifty_thousand_mappings_are_five_levels_and_go_away_in_any_order() {
    let mut t = VmaTree::new();
    let n = 50_000u64;
    for p in 0..n {
        t.insert(vma(2 * p, 2 * p + 1)).unwrap();
    }
    t.check();
    assert!((4..=5).contains(&t.height()), "{} levels", t.height());
    // Every gap is one page; a two-page request fits only above the last mapping or below
    // a removed one.
    assert_eq!(t.find_gap(&GapQuery::new(0, 2 * n * PAGE, 2 * PAGE, Dir::Lowest)), None);
    assert!(t.remove(2 * 777 * PAGE).is_some());
    assert_eq!(
        t.find_gap(&GapQuery::new(0, 2 * n * PAGE, 2 * PAGE, Dir::Lowest)),
        Some(2 * 776 * PAGE + PAGE)
    );
    assert_eq!(t.find_gap(&GapQuery::new(0, 2 * n * PAGE, 2 * PAGE, Dir::Highest)), Some(2 * 777 * PAGE));
    // Removal in a scattered order, to empty.
    let mut left: Vec<u64> = (0..n).filter(|&p| p != 777).collect();
    let mut x = 12345u64;
    for i in (1..left.len()).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        left.swap(i, (x >> 33) as usize % (i + 1));
    }
    for (i, p) in left.iter().enumerate() {
        assert!(t.remove(2 * p * PAGE).is_some());
        if i % 4999 == 0 {
            t.check();
        }
    }
    t.check();
    assert!(t.is_empty() && t.height() == 0 && t.iter().next().is_none());
    assert!(t.spares() <= t.spare_cap());
}

/// The account of an edit that moved the bounds of slot `j` from `old` to `new`.
fn edit_of(old: (u64, u64), new: (u64, u64), j: usize) -> Edit {
    if new == old {
        Edit::Kept
    } else if new.0 > old.0 || new.1 < old.1 {
        Edit::Freed(j)
    } else {
        Edit::Took(j)
    }
}

/// What one `edit_leaf` saw and did.
struct Seen {
    leaf: Vec<(u64, u64)>,
    beside: Beside,
    old: Vma,
    new: (u64, u64),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// `edit_leaf` reaches the leaf holding the last mapping starting at or below the address
    /// (the first leaf if none does), tells truly how far the mappings beside it reach, and a
    /// move of one bound within the neighbours keeps every invariant and summary exact, on trees
    /// of three and four levels; the gap search still answers as the model.
    #[test]
    fn edit_leaf_finds_its_leaf_and_keeps_every_summary(
        gaps in proptest::collection::vec(0u64..3, 300..2000),
        edits in proptest::collection::vec((0u64..7000, any::<u64>()), 1..300),
    ) {
        let mut t = VmaTree::new();
        let mut model = BTreeMap::new();
        let mut at = 1;
        for g in gaps {
            t.insert(vma(at, at + 1)).unwrap();
            model.insert(at * PAGE, (at + 1) * PAGE);
            at += 1 + g;
        }
        for (i, (a, r)) in edits.into_iter().enumerate() {
            let addr = a * PAGE + (r & 0xfff);
            let seen = t.edit_leaf(addr, |vs, beside| {
                let leaf: Vec<_> = vs.iter().map(|v| (v.start, v.end)).collect();
                let j = (r >> 16) as usize % vs.len();
                let floor = if j > 0 { vs[j - 1].end } else { beside.prev_end.unwrap_or(0) };
                let ceil = if j + 1 < vs.len() { vs[j + 1].start } else { beside.next_start.unwrap_or(1 << 40) };
                let old = vs[j];
                let step = (r % 3) * PAGE;
                let new = match (r >> 2) % 5 {
                    0 => (old.start.saturating_sub(step).max(floor), old.end),
                    1 => ((old.start + step).min(old.end - PAGE), old.end),
                    2 => (old.start, (old.end + step).min(ceil)),
                    3 => (old.start, (old.end - step).max(old.start + PAGE)),
                    _ => (old.start, old.end),
                };
                (vs[j].start, vs[j].end) = new;
                vs[j].prot = if r & 64 == 0 { Prot::RW } else { Prot::READ };
                (Seen { leaf, beside, old, new }, edit_of((old.start, old.end), new, j))
            });
            // The leaf: the one holding the last mapping starting at or below `addr`.
            let routed = model.range(..=addr).next_back().map_or_else(
                || model.keys().next().copied(),
                |(&s, _)| Some(s),
            );
            prop_assert!(routed.is_some_and(|s| seen.leaf.iter().any(|&(a, _)| a == s)), "leaf of {:#x}", addr);
            let (lo, hi) = (seen.leaf[0].0, seen.leaf[seen.leaf.len() - 1].1);
            prop_assert_eq!(seen.beside.prev_end, model.range(..lo).next_back().map(|(_, &e)| e));
            prop_assert_eq!(seen.beside.next_start, model.range(hi..).next().map(|(&s, _)| s));
            model.remove(&seen.old.start);
            model.insert(seen.new.0, seen.new.1);
            t.check();
            prop_assert_eq!(t.find(seen.new.0).map(|v| (v.start, v.end)), Some(seen.new));
            if i % 16 == 0 {
                let listed: Vec<_> = t.iter().map(|v| (v.start, v.end)).collect();
                let expected: Vec<_> = model.iter().map(|(&a, &b)| (a, b)).collect();
                prop_assert_eq!(listed, expected);
                let q = GapQuery::new((r % 6000) * PAGE, 8000 * PAGE, ((r >> 8) % 3 + 1) * PAGE,
                    if r & 128 == 0 { Dir::Lowest } else { Dir::Highest });
                prop_assert_eq!(t.find_gap(&q), oracle_by_ranges(&model, &q), "{:?}", q);
            }
        }
        prop_assert!(t.height() >= 3, "{} levels", t.height());
    }
}

#[test]
fn edit_leaf_of_an_empty_tree_sees_nothing() {
    let mut t = VmaTree::new();
    let (n, b) = t.edit_leaf(5 * PAGE, |vs, beside| ((vs.len(), beside), Edit::Kept));
    assert_eq!((n, b), (0, Beside::default()));
    t.check();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The hints never change an answer: top-down and bottom-up searches that learn from their
    /// answers, mixed with insertions (the learnt placement mapped or not, as an mmap that fails
    /// after placement), removals, in-place rewrites that grow or shrink a mapping and leaf edits,
    /// on trees of up to four levels; every answer as the brute-force oracle gives it, and the
    /// hints' claims and free ranges checked against every free range after every change
    /// (`check`).
    #[test]
    fn the_hints_never_change_an_answer(
        ops in proptest::collection::vec((0u8..10, 0u64..3000, 1u64..5, any::<u64>()), 200..1500),
    ) {
        let mut t = VmaTree::new();
        let mut model = BTreeMap::new();
        let top = 3200 * PAGE;
        let mut learnt = 0;
        for (kind, s, l, r) in ops {
            match kind {
                0 | 1 => {
                    if t.is_free(s * PAGE, (s + l) * PAGE) {
                        t.insert(vma(s, s + l)).unwrap();
                        model.insert(s * PAGE, (s + l) * PAGE);
                    }
                }
                2 => {
                    if let Some(v) = t.first_ending_after(s * PAGE).copied() {
                        prop_assert_eq!(t.remove(v.start), Some(v));
                        model.remove(&v.start);
                    }
                }
                3 | 4 => {
                    // Grow or shrink one end within the neighbours.
                    if let Some(v) = t.first_ending_after(s * PAGE).copied() {
                        let floor = t.last_starting_before(v.start).map_or(0, |p| p.end);
                        let ceil = t.first_ending_after(v.end).map_or(!(PAGE - 1), |n| n.start);
                        let step = (r % 4) * PAGE;
                        let (start, end) = match r >> 2 & 3 {
                            0 => (v.start.saturating_sub(step).max(floor), v.end),
                            1 => ((v.start + step).min(v.end - PAGE), v.end),
                            2 => (v.start, (v.end + step).min(ceil)),
                            _ => (v.start, v.end.saturating_sub(step).max(v.start + PAGE)),
                        };
                        let edited = t.replace(v.start, Vma { start, end, ..v });
                        prop_assert!(edited);
                        model.remove(&v.start);
                        model.insert(start, end);
                    }
                }
                5 => {
                    // A leaf edit that moves one bound (as munmap's cut and mmap's merge do).
                    let moved = t.edit_leaf(s * PAGE, |vs, beside| {
                        if vs.is_empty() {
                            return (None, Edit::Kept);
                        }
                        let j = (r >> 8) as usize % vs.len();
                        let floor = if j > 0 { vs[j - 1].end } else { beside.prev_end.unwrap_or(0) };
                        let ceil = if j + 1 < vs.len() { vs[j + 1].start } else { beside.next_start.unwrap_or(1 << 40) };
                        let old = vs[j];
                        let step = (r % 4) * PAGE;
                        let new = match r >> 2 & 3 {
                            0 => (old.start.saturating_sub(step).max(floor), old.end),
                            1 => ((old.start + step).min(old.end - PAGE), old.end),
                            2 => (old.start, (old.end + step).min(ceil)),
                            _ => (old.start, old.end.saturating_sub(step).max(old.start + PAGE)),
                        };
                        (vs[j].start, vs[j].end) = new;
                        (Some((old.start, new)), edit_of((old.start, old.end), new, j))
                    });
                    if let Some((was, (a, b))) = moved {
                        model.remove(&was);
                        model.insert(a, b);
                    }
                }
                _ => {
                    // A placement that learns, top-down as mmap asks it, or bottom-up from a
                    // target as near placement asks its search above (sometimes with an
                    // excluded range or a stronger alignment, which teach nothing but may use
                    // the hints).
                    let up = r & 64 != 0;
                    let q = GapQuery {
                        align: if r & 3 == 0 { PAGE << 2 } else { PAGE },
                        exclude: (r & 12 == 0).then_some((s * PAGE, (s + 200) * PAGE)),
                        ..if up {
                            GapQuery::new(PAGE * (s / 2 + (r >> 4 & 7)), top, l * PAGE, Dir::Lowest)
                        } else {
                            GapQuery::new(PAGE * (r >> 4 & 7), if r & 16 == 0 { top } else { top - 64 * PAGE }, l * PAGE, Dir::Highest)
                        }
                    };
                    let want = oracle_by_ranges(&model, &q);
                    let got = t.find_gap_and_learn(&q);
                    prop_assert_eq!(got, want, "{:?} with hints {:?}", q, t.hints());
                    if let Some(x) = got {
                        learnt += usize::from(if up { t.hints().up.above == x } else { t.hint().below == x + q.len });
                        if r & 32 == 0 {
                            t.insert(Vma { start: x, end: x + q.len, ..vma(0, 1) }).unwrap();
                            model.insert(x, x + q.len);
                        }
                    }
                }
            }
            t.check();
            // Any other question a hint may narrow, or answer from its free range.
            if r & 0xf00 == 0 {
                let len = (r >> 12) % 6 * PAGE + PAGE;
                for q in [GapQuery::new(0, top, len, Dir::Highest), GapQuery::new(PAGE * (s / 3), top, len, Dir::Lowest)] {
                    prop_assert_eq!(t.find_gap(&q), oracle_by_ranges(&model, &q), "{:?} with hints {:?}", q, t.hints());
                }
            }
        }
        prop_assert!(learnt > 0, "no search learnt anything");
    }
}

#[test]
fn a_run_of_top_down_placements_searches_below_the_last() {
    // Mappings from the top down with a large free range above the domain (a stack's):
    // after each placement the hint's `below` is the top of the next fit, and unmapping the
    // last one gives back exactly what it took.
    let mut t = VmaTree::new();
    let (base, stack) = (100_000 * PAGE, 120_000 * PAGE);
    t.insert(vma(10, 12)).unwrap();
    t.insert(Vma { start: stack, end: stack + 8 * PAGE, ..vma(0, 1) }).unwrap();
    let q = GapQuery::new(PAGE, base, PAGE, Dir::Highest);
    for i in 1..=3000 {
        let x = t.find_gap_and_learn(&q).unwrap();
        assert_eq!(x, base - i * PAGE);
        // The free range under `below` is the whole one down to the first mapping: the next
        // search takes its answer from it without a descent.
        assert_eq!(t.hint(), TopDownHint { hi: base, below: x + PAGE, longest: PAGE - 1, gap_lo: 12 * PAGE });
        t.insert(Vma { start: x, end: x + PAGE, ..vma(0, 1) }).unwrap();
        // The new mapping covers `below`: the claim now starts under it, with the same range.
        assert_eq!(t.hint(), TopDownHint { hi: base, below: x, longest: PAGE - 1, gap_lo: 12 * PAGE });
    }
    t.check();
    assert!(t.height() >= 3);
    let last = base - 3000 * PAGE;
    t.remove(last);
    t.check();
    // The range freed ends where the hint's claim starts: the claim stands.
    assert_eq!(t.hint().below, last + PAGE);
    assert_eq!(t.find_gap(&q), Some(last));
    // Freeing one in the middle opens a hole the next search must see: the claim gives way.
    t.remove(base - 10 * PAGE);
    t.check();
    assert_eq!(t.hint().below, base - 9 * PAGE);
    assert_eq!(t.find_gap_and_learn(&q), Some(base - 10 * PAGE));
    // A longer request than the claim covers is not narrowed.
    assert_eq!(t.find_gap(&GapQuery { len: 2 * PAGE, ..q }), Some(last - PAGE));
}

/// The largest gap of each branch is kept with the second largest (`Branch::top`, `second`):
/// shrinking the largest one page at a time from its top (as a run of top-down mmaps merging
/// into the mapping above it does) until it falls below two others of equal length, one of
/// them in another leaf, then giving the pages back, keeps every summary exact and every
/// search answering as the model (`check` compares both with a scan of every branch).
#[test]
fn the_largest_gap_shrinking_below_the_second_keeps_every_summary() {
    let mut t = VmaTree::new();
    let mut model = BTreeMap::new();
    // 2,000 one-page mappings with a page between each; three long gaps: 40 pages after the
    // 300th, 12 after the 900th and 12 after the 1,500th.
    let mut at = 1;
    let mut big = 0;
    for i in 0..2000 {
        t.insert(vma(at, at + 1)).unwrap();
        model.insert(at * PAGE, (at + 1) * PAGE);
        at += 2;
        match i {
            300 => {
                big = at;
                at += 39;
            }
            900 | 1500 => at += 11,
            _ => {}
        }
    }
    assert!(t.height() >= 3, "{} levels", t.height());
    // The mapping just above the 40-page gap reaches down into it, one page a step.
    let above = |t: &VmaTree| t.first_ending_after(big * PAGE).map(|v| v.start).unwrap();
    let answers = |t: &VmaTree, model: &BTreeMap<u64, u64>| {
        for len in [1, 11, 12, 13, 20, 39, 40, 41] {
            for dir in [Dir::Lowest, Dir::Highest] {
                let q = GapQuery::new(0, 1 << 40, len * PAGE, dir);
                assert_eq!(t.find_gap(&q), oracle_by_ranges(model, &q), "{q:?}");
            }
        }
    };
    for _ in 0..36 {
        let s = above(&t);
        t.edit_leaf(s, |vs, _| {
            let j = vs.iter().position(|v| v.start == s).unwrap();
            vs[j].start -= PAGE;
            ((), Edit::Took(j))
        });
        let e = model.remove(&s).unwrap();
        model.insert(s - PAGE, e);
        t.check();
        answers(&t, &model);
    }
    for _ in 0..36 {
        let s = above(&t);
        t.edit_leaf(s, |vs, _| {
            let j = vs.iter().position(|v| v.start == s).unwrap();
            vs[j].start += PAGE;
            ((), Edit::Freed(j))
        });
        let e = model.remove(&s).unwrap();
        model.insert(s + PAGE, e);
        t.check();
        answers(&t, &model);
    }
}
