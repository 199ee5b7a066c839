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
mod tests;
