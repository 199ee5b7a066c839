//! ASID allocation with generation rollover, after Linux's `arch/arm64/mm/context.c`, plus a
//! record of the CPUs on which each address space may have TLB entries.
//!
//! # Allocation
//! Every user address space owns an [`AsidContext`]: a 64-bit *context id* `generation << bits |
//! asid` and two small CPU sets. [`AsidAllocator::switch_to`] is called (under the kernel's ASID
//! lock) before the CPU writes `TTBR0_EL1` for that address space:
//!
//! - **fast path**: the context's generation is current and the CPU has no pending flush: the
//!   ASID is returned as it is and nothing needs flushing;
//! - **new ASID**: the context is new or of an older generation: it takes the next free ASID of
//!   the current generation (ASID 0 is never handed out: it goes with the reserved TTBR0 and the
//!   kernel);
//! - **rollover**: when no ASID is free, the generation is bumped, the bitmap cleared, and the ASID
//!   each CPU is currently running is *reserved* in the new generation, so an address space
//!   running on some CPU keeps its ASID (all of its threads keep using one ASID, and the TLBIs for
//!   it keep reaching every CPU that runs it). Every CPU is marked as owing **one** full local TLB
//!   flush (`TLBI VMALLE1`), which it performs at its next switch, before it can use a recycled
//!   ASID (Linux's `tlb_flush_pending`). Outside rollovers, switching address spaces never needs a
//!   flush.
//!
//! Unlike Linux, a context of an older generation that was not running at the rollover does not
//! try to get its old ASID number back: it takes the next free one. (The attempt buys nothing:
//! its old TLB entries are dropped by the flushes either way.) So a context keeps its ASID across
//! a rollover exactly when it was running on some CPU at the rollover.
//!
//! # Where an address space may be cached (local vs broadcast TLBI)
//! For each context the allocator keeps the set of CPUs whose TLB may hold entries of it that the
//! CPU can still use ([`AsidAllocator::cpus_may_cache`]):
//! - every CPU it was switched in on, in its current generation, since its last full
//!   invalidation ([`AsidAllocator::note_full_flush`], [`AsidAllocator::note_local_full_flush`]);
//! - the CPUs that were running it when its ASID was carried over a rollover, for as long as they
//!   have not switched (and so flushed) since.
//!
//! Entries left on a CPU that owes a rollover flush and runs another ASID cannot be used before
//! that flush, so they are not counted. [`AsidAllocator::may_be_cached_elsewhere`] then tells
//! whether an invalidation issued on this CPU may use the local (non-shareable) TLBI forms: only
//! when no other CPU may hold usable entries. A process that migrated keeps the CPU it left in
//! its set, so its invalidations are broadcast until its next full invalidation.
//!
//! # Locking and ordering
//! Nothing here locks: the kernel wraps the allocator in one lock, taken around `switch_to`
//! (with the `TTBR0_EL1` write and the flush it asks for done before the lock is released or, at
//! least, before the CPU returns to user space) and around the local/broadcast decision. The
//! decision must be taken after the page-table change is visible (`DSB ISHST`) and under the
//! same lock as the switches, so that a CPU that switches in afterwards walks the new tables.

use crate::tlb::{FlushTarget, Reach};

/// Most CPUs an allocator can track (the width of a [`CpuSet`]).
pub const MAX_CPUS: usize = 64;

/// The ASID that is never handed out: it tags the reserved TTBR0 (no user mappings) used by the
/// kernel and idle threads.
pub const RESERVED_ASID: u16 = 0;

/// Bitmap words (64 ASIDs each) needed for 16-bit ASIDs: the default capacity of an allocator.
pub const BITMAP_WORDS_16BIT: usize = (1 << 16) / 64;

/// Bitmap words needed for 8-bit ASIDs.
pub const BITMAP_WORDS_8BIT: usize = (1 << 8) / 64;

/// The ASID width the hardware supports, from `ID_AA64MMFR0_EL1.ASIDBits` (bits `[7:4]`:
/// `0b0000` = 8 bits, `0b0010` = 16 bits; other values are reserved and read as 8 bits). Using 16
/// bits also needs `TCR_EL1.AS = 1`.
pub const fn asid_bits_from_mmfr0(id_aa64mmfr0: u64) -> u32 {
    if (id_aa64mmfr0 >> 4) & 0xf == 0b0010 { 16 } else { 8 }
}

/// A set of CPU numbers below [`MAX_CPUS`], as a bitmask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(u64);

impl CpuSet {
    /// No CPU.
    pub const EMPTY: Self = Self(0);

    /// The set whose bit `n` is bit `n` of `bits`.
    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }

    /// The set as a bitmask (bit `n` = CPU `n`).
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// The set of the first `n` CPUs (`n <= 64`).
    pub const fn first(n: usize) -> Self {
        if n >= 64 { Self(u64::MAX) } else { Self((1 << n) - 1) }
    }

    /// The set holding only `cpu` (`cpu < 64`).
    pub const fn single(cpu: usize) -> Self {
        Self(1 << cpu)
    }

    /// Whether `cpu` is in the set.
    pub const fn contains(self, cpu: usize) -> bool {
        cpu < 64 && self.0 & (1 << cpu) != 0
    }

    /// The set with `cpu` added.
    pub const fn with(self, cpu: usize) -> Self {
        Self(self.0 | 1 << cpu)
    }

    /// The set with `cpu` removed.
    pub const fn without(self, cpu: usize) -> Self {
        Self(self.0 & !(1 << cpu))
    }

    /// The CPUs in either set.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The CPUs in both sets.
    pub const fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of CPUs in the set.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The CPUs of the set, in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut bits = self.0;
        core::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let cpu = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(cpu)
        })
    }
}

/// The ASID state of one address space. Starts without an ASID ([`new`](Self::new)); the
/// allocator gives it one at its first [`switch_to`](AsidAllocator::switch_to).
///
/// Dropping a context needs no call: its ASID stays taken until the next rollover, as in Linux.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AsidContext {
    /// `generation << bits | asid`; 0 = never allocated.
    id: u64,
    /// The ASID part of `id`.
    asid: u16,
    /// CPUs it was switched in on, in the generation of `id`, since its last full invalidation.
    cpus: CpuSet,
    /// CPUs that were running it when its ASID was carried over the last rollover; they count
    /// only while they still owe their rollover flush (i.e. have not switched since).
    carried: CpuSet,
}

impl AsidContext {
    /// A context that has no ASID yet.
    pub const fn new() -> Self {
        Self { id: 0, asid: 0, cpus: CpuSet::EMPTY, carried: CpuSet::EMPTY }
    }

    /// The context id, `generation << bits | asid` (0 before the first switch).
    pub const fn id(&self) -> u64 {
        self.id
    }

    /// The ASID for `TTBR0_EL1[63:48]` and for TLBI operands: valid while the context's
    /// generation is current or it is running somewhere (then its ASID was reserved). 0 before
    /// the first switch.
    pub const fn asid(&self) -> u16 {
        self.asid
    }

    /// Whether the context was ever given an ASID.
    pub const fn has_asid(&self) -> bool {
        self.id != 0
    }
}

/// A generation-based ASID allocator for `CPUS` CPUs (at most [`MAX_CPUS`]) and ASIDs of up to
/// `WORDS * 64` values ([`BITMAP_WORDS_16BIT`] by default, 8 KiB of bitmap;
/// [`BITMAP_WORDS_8BIT`] suffices for 8-bit ASIDs). See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct AsidAllocator<const CPUS: usize = MAX_CPUS, const WORDS: usize = BITMAP_WORDS_16BIT> {
    /// ASID width in bits.
    bits: u32,
    /// Current generation (starts at 1, so that no valid context id is 0).
    generation: u64,
    /// ASIDs taken in the current generation (bit 0 always set).
    map: [u64; WORDS],
    /// Where the next search for a free ASID starts (Linux's `cur_idx`).
    next: u32,
    /// Per CPU: the context id it switched to last, or 0 if it has not switched since the last
    /// rollover (Linux's `active_asids`).
    active: [u64; CPUS],
    /// Per CPU: the context id it was running at the last rollover, updated when that context
    /// moves to the new generation (Linux's `reserved_asids`).
    reserved: [u64; CPUS],
    /// CPUs that owe a full local TLB flush before their next use of an ASID.
    pending: CpuSet,
    /// Number of rollovers so far.
    rollovers: u64,
}

impl<const CPUS: usize, const WORDS: usize> AsidAllocator<CPUS, WORDS> {
    /// An allocator for `asid_bits`-bit ASIDs (8 or 16 on hardware, see
    /// [`asid_bits_from_mmfr0`]; 2 to 16 are accepted so that tests can exhaust small spaces).
    ///
    /// # Panics
    ///
    /// If `CPUS` is 0 or above [`MAX_CPUS`], `asid_bits` is outside `2..=16`, the bitmap is too
    /// small (`2^asid_bits > WORDS * 64`), or there are not more usable ASIDs than CPUs
    /// (`2^asid_bits - 1 <= CPUS`: after a rollover every CPU may hold one reserved ASID and the
    /// switching CPU still needs a free one).
    pub const fn new(asid_bits: u32) -> Self {
        assert!(CPUS >= 1 && CPUS <= MAX_CPUS, "CPUS must be in 1..=64");
        assert!(asid_bits >= 2 && asid_bits <= 16, "ASID width must be in 2..=16 bits");
        assert!((1usize << asid_bits) <= WORDS * 64, "ASID bitmap too small for the ASID width");
        assert!((1usize << asid_bits) - 1 > CPUS, "need more usable ASIDs than CPUs");
        let mut map = [0; WORDS];
        map[0] = 1; // ASID 0 is reserved.
        Self {
            bits: asid_bits,
            generation: 1,
            map,
            next: 1,
            active: [0; CPUS],
            reserved: [0; CPUS],
            pending: CpuSet::EMPTY,
            rollovers: 0,
        }
    }

    /// The ASID width in bits.
    pub const fn asid_bits(&self) -> u32 {
        self.bits
    }

    /// The current generation (1 before the first rollover).
    pub const fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of rollovers so far.
    pub const fn rollovers(&self) -> u64 {
        self.rollovers
    }

    /// Whether `cpu` owes a full local TLB flush (it will be asked for at its next switch).
    pub const fn flush_pending(&self, cpu: usize) -> bool {
        self.pending.contains(cpu)
    }

    /// Whether the context holds an ASID of the current generation (its next switch takes the
    /// fast path unless the CPU owes a flush).
    pub const fn is_current(&self, ctx: &AsidContext) -> bool {
        ctx.id != 0 && ctx.id >> self.bits == self.generation
    }

    const fn asid_mask(&self) -> u64 {
        (1 << self.bits) - 1
    }

    const fn count(&self) -> u32 {
        1 << self.bits
    }

    /// Prepares `cpu` to run the address space of `ctx`: returns its ASID and whether the CPU
    /// must first flush its whole TLB locally (`DSB NSHST; TLBI VMALLE1; DSB NSH; ISB`, as Linux's
    /// `local_flush_tlb_all`), which happens once per CPU after each rollover. Then write
    /// `TTBR0_EL1` with the ASID in bits `[63:48]`.
    ///
    /// Loading the reserved TTBR0 (ASID 0: kernel threads, idle) needs no call: the CPU's last
    /// context keeps counting as running there, which only keeps its ASID reserved and this CPU
    /// in its set a little longer (conservative, as Linux's lazy TLB). Calling `switch_to` again
    /// for the context already running is cheap and correct.
    ///
    /// # Panics
    ///
    /// If `cpu >= CPUS`.
    pub fn switch_to(&mut self, ctx: &mut AsidContext, cpu: usize) -> (u16, bool) {
        assert!(cpu < CPUS, "CPU number out of range");
        if !self.is_current(ctx) {
            self.new_context(ctx);
        }
        let flush = self.pending.contains(cpu);
        if flush {
            self.pending = self.pending.without(cpu);
        }
        self.active[cpu] = ctx.id;
        ctx.cpus = ctx.cpus.with(cpu);
        (ctx.asid, mutant!(flush, RolloverFlushSkipped => false))
    }

    /// Gives `ctx` (new, or of an older generation) an ASID of the current generation.
    fn new_context(&mut self, ctx: &mut AsidContext) {
        let old = ctx.id;
        if old != 0 {
            let new = self.generation << self.bits | (old & self.asid_mask());
            // The CPUs still running it (they have not switched since the rollover), computed
            // before the reservations are renamed.
            let running = self.running_set(old);
            if self.update_reserved(old, new) {
                // It was running at the rollover: it keeps its ASID. Its entries on the CPUs that
                // still run it stay usable; every other CPU flushes before using this ASID.
                ctx.id = new;
                ctx.cpus = CpuSet::EMPTY;
                ctx.carried = running;
                return;
            }
        }
        let asid = match self.find_free(self.next) {
            Some(asid) => asid,
            None => {
                self.rollover();
                match self.find_free(1) {
                    Some(asid) => asid,
                    // At most CPUS ASIDs are reserved and `new` checked 2^bits - 1 > CPUS.
                    None => unreachable!("no free ASID right after a rollover"),
                }
            }
        };
        self.map[(asid / 64) as usize] |= 1 << (asid % 64);
        self.next = asid;
        ctx.id = self.generation << self.bits | u64::from(asid);
        ctx.asid = asid as u16;
        // No CPU has a usable entry for this ASID: it was free in this generation, and every CPU
        // that held entries for it from an older one flushes before its next switch.
        ctx.cpus = CpuSet::EMPTY;
        ctx.carried = CpuSet::EMPTY;
    }

    /// Starts a new generation: keeps the ASID each CPU runs, frees all others, and makes every
    /// CPU owe one full flush (Linux's `flush_context`).
    fn rollover(&mut self) {
        self.generation += 1;
        self.rollovers += 1;
        self.map = [0; WORDS];
        self.map[0] = 1;
        let mask = self.asid_mask();
        for cpu in 0..CPUS {
            // A CPU that has not switched since the previous rollover still runs the context it
            // reserved then: keep that one.
            let id = match core::mem::take(&mut self.active[cpu]) {
                0 => self.reserved[cpu],
                id => id,
            };
            let asid = id & mask;
            self.map[(asid / 64) as usize] |= 1 << (asid % 64);
            self.reserved[cpu] = id;
        }
        self.pending = CpuSet::first(CPUS);
        self.next = 1;
    }

    /// Renames the reservations of `old` to `new`; whether there was any.
    fn update_reserved(&mut self, old: u64, new: u64) -> bool {
        let mut hit = false;
        for r in self.reserved.iter_mut() {
            if *r == old {
                *r = new;
                hit = true;
            }
        }
        hit
    }

    /// The lowest free ASID at or above `from`, if any.
    fn find_free(&self, from: u32) -> Option<u32> {
        let count = self.count();
        let mut word = (from / 64) as usize;
        let mut skip = from % 64;
        while (word as u32) * 64 < count {
            let valid = if count - (word as u32) * 64 >= 64 { u64::MAX } else { (1 << (count % 64)) - 1 };
            let free = !self.map[word] & valid & (u64::MAX << skip);
            if free != 0 {
                return Some(word as u32 * 64 + free.trailing_zeros());
            }
            word += 1;
            skip = 0;
        }
        None
    }

    /// The CPUs running the context `id` now: those that switched to it last, and those that were
    /// running it at the last rollover and have not switched since.
    fn running_set(&self, id: u64) -> CpuSet {
        let mut set = CpuSet::EMPTY;
        if id == 0 {
            return set;
        }
        for cpu in 0..CPUS {
            if self.active[cpu] == id || (self.active[cpu] == 0 && self.reserved[cpu] == id) {
                set = set.with(cpu);
            }
        }
        set
    }

    /// The CPUs whose TLB may hold entries of `ctx` that they can still use: the CPUs a range
    /// invalidation of `ctx` must reach. Empty for a context never switched to.
    pub fn cpus_may_cache(&self, ctx: &AsidContext) -> CpuSet {
        if ctx.id == 0 {
            CpuSet::EMPTY
        } else if self.is_current(ctx) {
            ctx.cpus.union(ctx.carried.intersection(self.pending))
        } else {
            // An older generation: its entries are usable only where it still runs under its
            // reserved ASID; everywhere else they go with the rollover flush.
            self.running_set(ctx.id)
        }
    }

    /// Whether a CPU other than `this_cpu` may hold usable TLB entries of `ctx`: if so the
    /// invalidation must use the broadcast (inner-shareable) forms, otherwise the local forms on
    /// `this_cpu` suffice.
    pub fn may_be_cached_elsewhere(&self, ctx: &AsidContext, this_cpu: usize) -> bool {
        let cpus = mutant!(self.cpus_may_cache(ctx), ReachIgnoresMigration => self.running_set(ctx.id));
        !cpus.without(this_cpu).is_empty()
    }

    /// How far an invalidation of `ctx` issued on `this_cpu` must reach, as
    /// [`may_be_cached_elsewhere`] decides: [`Reach::Local`] only when no other CPU may hold
    /// usable entries of it.
    ///
    /// [`may_be_cached_elsewhere`]: Self::may_be_cached_elsewhere
    pub fn reach(&self, ctx: &AsidContext, this_cpu: usize) -> Reach {
        if self.may_be_cached_elsewhere(ctx, this_cpu) { Reach::Broadcast } else { Reach::Local }
    }

    /// The target of a flush of `ctx`'s translations issued on `this_cpu` now: its current ASID,
    /// with the [`reach`](Self::reach) the CPU set asks for. Ask for it at the moment of the
    /// flush, after the table change is visible (`DSB ISHST`), under the lock that serialises
    /// switches (module documentation).
    pub fn flush_target(&self, ctx: &AsidContext, this_cpu: usize) -> FlushTarget {
        FlushTarget::asid(ctx.asid(), self.reach(ctx, this_cpu))
    }

    /// Records that every entry of `ctx`'s ASID was invalidated on every CPU (`TLBI ASIDE1IS`,
    /// completed with `DSB ISH`): only the CPUs running it now may hold entries from here on.
    pub fn note_full_flush(&self, ctx: &mut AsidContext) {
        if self.is_current(ctx) {
            let mut set = CpuSet::EMPTY;
            for cpu in 0..CPUS {
                if self.active[cpu] == ctx.id {
                    set = set.with(cpu);
                }
            }
            ctx.cpus = set;
        }
    }

    /// Records that every entry of `ctx`'s ASID was invalidated on `cpu` only (`TLBI ASIDE1`,
    /// completed with `DSB NSH`). A CPU running `ctx` keeps it in the set.
    pub fn note_local_full_flush(&self, ctx: &mut AsidContext, cpu: usize) {
        if self.is_current(ctx) && cpu < CPUS && self.active[cpu] != ctx.id {
            ctx.cpus = ctx.cpus.without(cpu);
        }
    }
}

#[cfg(test)]
mod tests {
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
                    assert_eq!(
                        self.running_asid[cpu],
                        self.ctxs[k].asid(),
                        "context {k} runs under two ASIDs"
                    );
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
                        assert!(
                            set.contains(c),
                            "context {k}: CPU {c} may hold entries but is not in {set:?}"
                        );
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
}
