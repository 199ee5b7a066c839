//! The machine's ASID allocator (`mm::asid`, Linux's generation scheme) behind one lock.
//!
//! Switching to an address space costs no TLB flush unless the ASID space rolled over since this
//! CPU last switched (then one local `TLBI VMALLE1`, as Linux). The allocator also knows, per
//! address space, which CPUs may still hold its translations, and so decides whether a flush
//! needs the broadcast forms or the local ones: [`AsidTargets`] asks it at the moment of each
//! flush of a user address space, so no flush ever uses an ASID or a reach decided earlier.
use alloc::sync::Arc;

use mm::asid::{AsidAllocator, AsidContext, asid_bits_from_mmfr0};
use mm::space::FlushTargets;
use mm::tlb::{FlushTarget, Reach, Scope, TlbStats};
use spin::Mutex;

use crate::cpu::MAX_CPUS;

static ALLOCATOR: Mutex<Option<AsidAllocator<MAX_CPUS>>> = Mutex::new(None);

/// Sets the allocator up for the ASID width the CPU implements. Called once at boot.
pub fn init() -> u32 {
    use aarch64_cpu::registers::{ID_AA64MMFR0_EL1, Readable};
    let bits = asid_bits_from_mmfr0(ID_AA64MMFR0_EL1.get());
    *ALLOCATOR.lock() = Some(AsidAllocator::new(bits));
    bits
}

/// Gives `ctx` a current ASID for running on `cpu`; flushes this CPU's TLB first if the
/// allocator says a rollover left it stale entries. Returns the ASID for TTBR0.
pub fn switch_to(ctx: &Mutex<AsidContext>, cpu: usize) -> u16 {
    let (asid, flush) = {
        let mut allocator = ALLOCATOR.lock();
        let allocator = allocator.as_mut().expect("asids::init at boot");
        allocator.switch_to(&mut ctx.lock(), cpu)
    };
    if flush {
        crate::memory::tlb::flush_all(FlushTarget { scope: Scope::Global, reach: Reach::Local });
    }
    asid
}

/// The target of a flush of `ctx`'s translations issued on `cpu` now: its current ASID, local
/// forms when no other CPU may hold its entries.
pub fn flush_target(ctx: &Mutex<AsidContext>, cpu: usize) -> FlushTarget {
    let allocator = ALLOCATOR.lock();
    let allocator = allocator.as_ref().expect("asids::init at boot");
    allocator.flush_target(&ctx.lock(), cpu)
}

/// The flush targets of one user address space: asked at each flush, on the CPU that issues it,
/// under the allocator's lock (so a switch cannot slip between the decision and the TLBIs'
/// start; the space has made its table writes visible with `DSB ISHST` before it asks). What the
/// space issued goes to the kernel's counters.
pub struct AsidTargets {
    ctx: Arc<Mutex<AsidContext>>,
}

impl AsidTargets {
    /// The targets of the address space whose ASID state is `ctx`.
    pub fn new(ctx: Arc<Mutex<AsidContext>>) -> Self {
        Self { ctx }
    }
}

impl FlushTargets for AsidTargets {
    fn target(&mut self) -> FlushTarget {
        flush_target(&self.ctx, crate::cpu::current_cpu())
    }

    fn issued(&mut self, stats: &TlbStats) {
        crate::memory::tlb::account(stats);
    }
}

/// Invalidates every translation of `ctx` on every CPU (ASIDE1IS) and records it; used when an
/// address space dies.
pub fn flush_everywhere(ctx: &Mutex<AsidContext>) {
    let allocator = ALLOCATOR.lock();
    let allocator = allocator.as_ref().expect("asids::init at boot");
    let mut ctx = ctx.lock();
    if ctx.has_asid() {
        crate::memory::tlb::flush_all(FlushTarget::asid(ctx.asid(), Reach::Broadcast));
        allocator.note_full_flush(&mut ctx);
    }
}
