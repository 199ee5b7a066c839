//! A shadow model checks the allocator: per CPU, a model TLB of (ASID tag → contexts with
//! entries), the owed flushes, and what each CPU runs. After every step: current contexts
//! have distinct ASIDs, every CPU running a context uses the context's ASID, the CPUs that
//! may use an entry of a context are in its CPU set (so "local" is never chosen wrongly),
//! and no invalidation leaves a usable stale entry. At a switch: no CPU uses an ASID while
//! holding entries of another context under it, a CPU flushes exactly when a rollover
//! happened since its last switch, and a context keeps its ASID over a rollover exactly when
//! it was running at the rollover.

use super::*;
use proptest::prelude::*;
use std::vec;
use std::vec::Vec;

/// Tags of the small-width simulations (ASIDs of at most 4 bits).
const TAGS: usize = 16;

#[derive(Clone, Copy, Debug)]
enum Op {
    /// The CPU switches to the context.
    Switch { cpu: usize, ctx: usize },
    /// The CPU touches memory of whatever it runs (fills its TLB).
    Touch { cpu: usize },
    /// The CPU invalidates a range of the context, local or broadcast as the allocator says.
    Invalidate { ctx: usize, cpu: usize },
    /// The CPU invalidates the context's whole ASID, locally or broadcast.
    FullFlush { ctx: usize, cpu: usize, broadcast: bool },
}

#[derive(Clone)]
struct Sim<const N: usize> {
    alloc: AsidAllocator<N, 1>,
    ctxs: Vec<AsidContext>,
    /// The context each CPU runs (the last one it switched to).
    running: [Option<usize>; N],
    running_asid: [u16; N],
    /// Model TLB: per CPU and ASID tag, the contexts (bitmask) with entries under that tag.
    tlb: [[u64; TAGS]; N],
    /// Shadow of the owed rollover flushes.
    pending: [bool; N],
    /// Per context: whether it was running at the last rollover, and its ASID then.
    kept: Vec<bool>,
    asid_then: Vec<u16>,
    rollovers: u64,
}

impl<const N: usize> Sim<N> {
    fn new(bits: u32, contexts: usize) -> Self {
        assert!(contexts <= 64);
        Self {
            alloc: AsidAllocator::new(bits),
            ctxs: vec![AsidContext::new(); contexts],
            running: [None; N],
            running_asid: [0; N],
            tlb: [[0; TAGS]; N],
            pending: [false; N],
            kept: vec![false; contexts],
            asid_then: vec![0; contexts],
            rollovers: 0,
        }
    }

    /// Whether `cpu` holds an entry of context `k` that it could use: under the ASID it
    /// runs now, or under any ASID if it owes no flush (a fast-path switch could use it).
    fn dangerous(&self, cpu: usize, k: usize) -> bool {
        (0..TAGS).any(|tag| {
            self.tlb[cpu][tag] & (1 << k) != 0
                && (!self.pending[cpu]
                    || (self.running[cpu].is_some() && self.running_asid[cpu] == tag as u16))
        })
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Switch { cpu, ctx } => self.switch(cpu, ctx),
            Op::Touch { cpu } => {
                if let Some(k) = self.running[cpu] {
                    let tag = self.running_asid[cpu] as usize;
                    assert_eq!(
                        self.tlb[cpu][tag] & !(1 << k),
                        0,
                        "CPU {cpu} uses entries of another context"
                    );
                    self.tlb[cpu][tag] |= 1 << k;
                }
            }
            Op::Invalidate { ctx, cpu } => {
                self.invalidate(ctx, cpu, self.alloc.may_be_cached_elsewhere(&self.ctxs[ctx], cpu));
            }
            Op::FullFlush { ctx, cpu, broadcast } => {
                self.invalidate(ctx, cpu, broadcast);
                if broadcast {
                    self.alloc.note_full_flush(&mut self.ctxs[ctx]);
                } else {
                    self.alloc.note_local_full_flush(&mut self.ctxs[ctx], cpu);
                }
            }
        }
        self.check();
    }

    fn invalidate(&mut self, k: usize, cpu: usize, broadcast: bool) {
        let tag = self.ctxs[k].asid() as usize;
        for c in 0..N {
            if broadcast || c == cpu {
                self.tlb[c][tag] = 0;
            }
        }
        if broadcast || !self.alloc.may_be_cached_elsewhere(&self.ctxs[k], cpu) {
            for c in 0..N {
                assert!(!self.dangerous(c, k), "stale entry of context {k} usable on CPU {c}");
            }
        }
    }

    fn switch(&mut self, cpu: usize, k: usize) {
        let old = self.ctxs[k];
        let was_current = self.alloc.is_current(&old);
        let map_before = self.alloc.map[0];
        let (asid, flush) = self.alloc.switch_to(&mut self.ctxs[k], cpu);
        assert_eq!(asid, self.ctxs[k].asid());
        assert_ne!(asid, RESERVED_ASID);
        let rolled = self.alloc.rollovers() - self.rollovers;
        assert!(rolled <= 1, "more than one rollover in one switch");
        if rolled == 1 {
            self.rollovers += 1;
            assert!(!was_current);
            // Right after the rollover and this allocation, the taken ASIDs are exactly 0,
            // the ASIDs the CPUs were running, and the one just given out.
            let mut expect = 1u64 | 1 << asid;
            for (i, ctx) in self.ctxs.iter().enumerate() {
                let running = self.running.contains(&Some(i));
                self.kept[i] = running;
                self.asid_then[i] = if i == k { old.asid() } else { ctx.asid() };
                if running {
                    expect |= 1 << ctx.asid();
                }
            }
            assert_eq!(self.alloc.map[0], expect, "ASIDs taken after a rollover");
            assert!(!self.kept[k], "a stale context cannot be running");
            self.pending = [true; N];
        }
        if was_current {
            assert_eq!(asid, old.asid(), "fast path changed the ASID");
        } else if old.has_asid() && self.kept[k] {
            assert_eq!(asid, self.asid_then[k], "a context running at the rollover lost its ASID");
            assert_ne!(map_before & 1 << asid, 0, "a kept ASID must have been reserved");
        } else if rolled == 0 {
            assert_eq!(map_before & 1 << asid, 0, "a new ASID must have been free");
        }
        assert_eq!(
            flush, self.pending[cpu],
            "CPU {cpu}: flush iff a rollover happened since its last switch"
        );
        if flush {
            self.tlb[cpu] = [0; TAGS];
            self.pending[cpu] = false;
        }
        assert_eq!(
            self.tlb[cpu][asid as usize] & !(1 << k),
            0,
            "CPU {cpu} runs ASID {asid} while holding entries of another context under it"
        );
        self.tlb[cpu][asid as usize] |= 1 << k;
        self.running[cpu] = Some(k);
        self.running_asid[cpu] = asid;
    }

    fn check(&self) {
        // Distinct, non-zero ASIDs among the contexts of the current generation.
        let mut seen = 0u64;
        for ctx in self.ctxs.iter().filter(|c| self.alloc.is_current(c)) {
            assert_ne!(ctx.asid(), RESERVED_ASID);
            assert_eq!(seen & 1 << ctx.asid(), 0, "two current contexts share ASID {}", ctx.asid());
            assert_ne!(self.alloc.map[0] & 1 << ctx.asid(), 0, "a current ASID is not marked taken");
            seen |= 1 << ctx.asid();
        }
        // A context runs under one ASID everywhere: its own.
        for cpu in 0..N {
            if let Some(k) = self.running[cpu] {
                assert_eq!(self.running_asid[cpu], self.ctxs[k].asid(), "context {k} runs under two ASIDs");
            }
        }
        // The owed flushes are the model's.
        for cpu in 0..N {
            assert_eq!(self.alloc.flush_pending(cpu), self.pending[cpu]);
        }
        // The CPU set covers every CPU that may use an entry, so "local" is never wrong.
        for (k, ctx) in self.ctxs.iter().enumerate() {
            let set = self.alloc.cpus_may_cache(ctx);
            for c in 0..N {
                if self.dangerous(c, k) {
                    assert!(set.contains(c), "context {k}: CPU {c} may hold entries but is not in {set:?}");
                }
                assert_eq!(self.alloc.may_be_cached_elsewhere(ctx, c), !set.without(c).is_empty());
            }
        }
    }
}

fn switches(cpus: usize, contexts: usize) -> Vec<Op> {
    let mut ops = Vec::new();
    for cpu in 0..cpus {
        for ctx in 0..contexts {
            ops.push(Op::Switch { cpu, ctx });
        }
    }
    ops
}

/// Every sequence of `depth` operations from `alphabet`, depth first; returns the number of
/// states checked.
fn explore<const N: usize>(sim: &Sim<N>, alphabet: &[Op], depth: u32) -> u64 {
    let mut states = 0;
    for &op in alphabet {
        let mut next = sim.clone();
        next.step(op);
        states += 1;
        if depth > 1 {
            states += explore(&next, alphabet, depth - 1);
        }
    }
    states
}

#[test]
fn exhaustive_switches_2bit_1cpu() {
    let states = explore(&Sim::<1>::new(2, 4), &switches(1, 4), 8);
    assert_eq!(states, (1..=8).map(|d| 4u64.pow(d)).sum::<u64>());
}

#[test]
fn exhaustive_switches_2bit_2cpus() {
    // 3 usable ASIDs, 2 CPUs: every rollover keeps up to two ASIDs and leaves one free.
    explore(&Sim::<2>::new(2, 3), &switches(2, 3), 7);
}

#[test]
fn exhaustive_switches_and_invalidations_2bit_2cpus() {
    let mut alphabet = switches(2, 3);
    for ctx in 0..3 {
        for cpu in 0..2 {
            alphabet.push(Op::Invalidate { ctx, cpu });
        }
    }
    alphabet.push(Op::FullFlush { ctx: 0, cpu: 0, broadcast: true });
    alphabet.push(Op::FullFlush { ctx: 1, cpu: 1, broadcast: false });
    alphabet.push(Op::Touch { cpu: 0 });
    explore(&Sim::<2>::new(2, 3), &alphabet, 5);
}

#[test]
fn exhaustive_switches_3bit_3cpus() {
    // Start near exhaustion (6 of 7 ASIDs taken), then every sequence of 4 switches.
    let mut sim = Sim::<3>::new(3, 9);
    for k in 0..6 {
        sim.step(Op::Switch { cpu: k % 3, ctx: k });
    }
    explore(&sim, &switches(3, 9), 4);
}

/// xorshift64*: a fixed-seed generator for the long random runs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_op(rng: &mut Rng, cpus: usize, contexts: usize) -> Op {
    let (cpu, ctx) = (rng.below(cpus), rng.below(contexts));
    match rng.below(20) {
        0..=10 => Op::Switch { cpu, ctx },
        11..=13 => Op::Touch { cpu },
        14..=18 => Op::Invalidate { ctx, cpu },
        _ => Op::FullFlush { ctx, cpu, broadcast: rng.below(2) == 0 },
    }
}

fn random_run<const N: usize>(bits: u32, contexts: usize, steps: usize, seed: u64) -> u64 {
    let mut sim = Sim::<N>::new(bits, contexts);
    let mut rng = Rng(seed);
    for _ in 0..steps {
        let op = random_op(&mut rng, N, contexts);
        sim.step(op);
    }
    sim.alloc.rollovers()
}

#[test]
fn random_runs_4bit_1_to_4_cpus() {
    for (i, contexts) in [5usize, 16, 40].into_iter().enumerate() {
        let seed = 0x9e37_79b9_7f4a_7c15 ^ i as u64;
        assert!(random_run::<1>(4, contexts, 20_000, seed) > 0 || contexts < 15);
        assert!(random_run::<2>(4, contexts, 20_000, seed) > 0 || contexts < 15);
        assert!(random_run::<3>(4, contexts, 20_000, seed) > 0 || contexts < 15);
        assert!(random_run::<4>(4, contexts, 20_000, seed) > 0 || contexts < 15);
    }
}

fn run_ops(bits: u32, cpus: usize, contexts: usize, raw: &[(u8, usize, usize, bool)]) {
    fn go<const N: usize>(bits: u32, contexts: usize, raw: &[(u8, usize, usize, bool)]) {
        let mut sim = Sim::<N>::new(bits, contexts);
        for &(kind, a, b, broadcast) in raw {
            let (cpu, ctx) = (a % N, b % contexts);
            sim.step(match kind % 8 {
                0..=3 => Op::Switch { cpu, ctx },
                4 => Op::Touch { cpu },
                5 | 6 => Op::Invalidate { ctx, cpu },
                _ => Op::FullFlush { ctx, cpu, broadcast },
            });
        }
    }
    match cpus {
        1 => go::<1>(bits, contexts, raw),
        2 => go::<2>(bits, contexts, raw),
        3 => go::<3>(bits, contexts, raw),
        _ => go::<4>(bits, contexts, raw),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants(
        bits in 2u32..=4,
        cpus in 1usize..=4,
        contexts in 1usize..=12,
        raw in proptest::collection::vec((any::<u8>(), 0usize..4, 0usize..12, any::<bool>()), 1..300),
    ) {
        // 2^bits - 1 usable ASIDs must exceed the number of CPUs.
        let cpus = cpus.min((1 << bits) - 2);
        run_ops(bits, cpus, contexts, &raw);
    }
}

#[test]
fn asid_width_from_mmfr0() {
    assert_eq!(asid_bits_from_mmfr0(0), 8);
    assert_eq!(asid_bits_from_mmfr0(0x20), 16);
    assert_eq!(asid_bits_from_mmfr0(0x10), 8);
    assert_eq!(asid_bits_from_mmfr0(0xffff_ffff_ffff_ff2f), 16);
}

#[test]
fn sixteen_bit_fast_path() {
    let mut alloc = AsidAllocator::<4>::new(16);
    let (mut a, mut b) = (AsidContext::new(), AsidContext::new());
    assert!(!alloc.may_be_cached_elsewhere(&a, 0));
    assert_eq!(alloc.switch_to(&mut a, 0), (1, false));
    assert_eq!(a.id(), 1 << 16 | 1);
    assert_eq!(alloc.switch_to(&mut b, 0), (2, false));
    assert_eq!(alloc.switch_to(&mut a, 1), (1, false));
    assert_eq!(alloc.switch_to(&mut a, 0), (1, false));
    assert_eq!(alloc.generation(), 1);
    assert_eq!(alloc.rollovers(), 0);
}

#[test]
fn eight_bit_rollover_keeps_running_asids() {
    let mut alloc = AsidAllocator::<2, BITMAP_WORDS_8BIT>::new(8);
    let mut ctxs = vec![AsidContext::new(); 256];
    for (i, ctx) in ctxs.iter_mut().take(255).enumerate() {
        assert_eq!(alloc.switch_to(ctx, i % 2), (i as u16 + 1, false));
    }
    // CPU 0 runs ASID 254, CPU 1 runs 255. The 256th context rolls over.
    let (asid, flush) = alloc.switch_to(&mut ctxs[255], 0);
    assert!(flush);
    assert_eq!(alloc.rollovers(), 1);
    assert_ne!(asid, 254);
    assert_ne!(asid, 255);
    assert!(alloc.flush_pending(1));
    // The context running on CPU 1 keeps its ASID; CPU 1 flushes once.
    assert_eq!(alloc.switch_to(&mut ctxs[254], 1), (255, true));
    assert_eq!(alloc.switch_to(&mut ctxs[254], 1), (255, false));
    // The one CPU 0 ran at the rollover keeps 254 too, although CPU 0 switched away since.
    assert_eq!(alloc.switch_to(&mut ctxs[253], 1), (254, false));
}

#[test]
fn eight_bit_round_robin_across_bitmap_words() {
    // 1 CPU, 600 contexts in turn: each rollover keeps the one running ASID, so 253 new
    // ASIDs fit between rollovers (254 after the first, when nothing is reserved yet).
    let mut alloc = AsidAllocator::<1, BITMAP_WORDS_8BIT>::new(8);
    let mut ctxs = vec![AsidContext::new(); 600];
    let mut switches = 0u64;
    for round in 0..3 {
        for k in 0..ctxs.len() {
            let (_, flush) = alloc.switch_to(&mut ctxs[k], 0);
            switches += 1;
            assert_eq!(
                flush,
                switches > 255 && (switches - 256).is_multiple_of(254),
                "round {round}, context {k}"
            );
            let mut seen = [false; 256];
            for ctx in ctxs.iter().filter(|c| alloc.is_current(c)) {
                assert!(!seen[ctx.asid() as usize], "ASID {} given twice", ctx.asid());
                seen[ctx.asid() as usize] = true;
            }
        }
    }
    assert_eq!(alloc.rollovers(), (switches - 256) / 254 + 1);
}

#[test]
fn migration_needs_broadcast() {
    let mut alloc = AsidAllocator::<4, BITMAP_WORDS_8BIT>::new(8);
    let (mut p, mut q) = (AsidContext::new(), AsidContext::new());
    alloc.switch_to(&mut p, 0);
    assert!(!alloc.may_be_cached_elsewhere(&p, 0));
    assert!(alloc.may_be_cached_elsewhere(&p, 1));
    assert_eq!(alloc.reach(&p, 0), Reach::Local);
    // p migrates to CPU 1; CPU 0 runs q but still holds p's entries.
    alloc.switch_to(&mut q, 0);
    alloc.switch_to(&mut p, 1);
    assert!(alloc.may_be_cached_elsewhere(&p, 1));
    assert_eq!(alloc.reach(&p, 1), Reach::Broadcast);
    assert_eq!(alloc.flush_target(&p, 1), FlushTarget::asid(p.asid(), Reach::Broadcast));
    assert_eq!(alloc.cpus_may_cache(&p), CpuSet::from_bits(0b11));
    // A broadcast ASIDE1IS leaves only the CPU running it.
    alloc.note_full_flush(&mut p);
    assert_eq!(alloc.cpus_may_cache(&p), CpuSet::single(1));
    assert!(!alloc.may_be_cached_elsewhere(&p, 1));
    // A local ASIDE1 on CPU 1, which runs p, changes nothing; on CPU 0 it removes CPU 0.
    alloc.switch_to(&mut p, 0);
    alloc.switch_to(&mut q, 0);
    alloc.note_local_full_flush(&mut p, 1);
    assert_eq!(alloc.cpus_may_cache(&p), CpuSet::from_bits(0b11));
    alloc.note_local_full_flush(&mut p, 0);
    assert_eq!(alloc.cpus_may_cache(&p), CpuSet::single(1));
}

#[test]
fn cpu_set_operations() {
    let s = CpuSet::EMPTY.with(3).with(0).with(63);
    assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63]);
    assert_eq!(s.len(), 3);
    assert!(s.contains(63) && !s.contains(64) && !s.contains(1));
    assert_eq!(s.without(3).union(CpuSet::single(5)).bits(), 1 | 1 << 5 | 1 << 63);
    assert_eq!(CpuSet::first(64).bits(), u64::MAX);
    assert_eq!(CpuSet::first(3).intersection(s), CpuSet::single(0));
    assert!(CpuSet::EMPTY.is_empty());
}

#[test]
#[should_panic(expected = "more usable ASIDs than CPUs")]
fn too_few_asids_for_the_cpus() {
    let _ = AsidAllocator::<3, 1>::new(2);
}

#[test]
#[should_panic(expected = "bitmap too small")]
fn bitmap_too_small() {
    let _ = AsidAllocator::<4, 1>::new(8);
}
