//! The machine's ASID allocator (`mm::asid`, Linux's generation scheme) behind one lock.
//!
//! Switching to an address space costs no TLB flush unless the ASID space rolled over since this
//! CPU last switched (then one local `TLBI VMALLE1`, as Linux). The allocator also knows, per
//! address space, which CPUs may still hold its translations, and so decides whether a flush
//! needs the broadcast forms or the local ones.
use mm::asid::{AsidAllocator, AsidContext, asid_bits_from_mmfr0};
use mm::tlb::{Scope, TlbCaps};
use spin::Mutex;

use crate::smp::MAX_CPUS;

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
        crate::memory::tlb::flush_all(Scope::Global, crate::memory::tlb::caps().local());
    }
    asid
}

/// The scope and capabilities for invalidating `ctx`'s translations from `cpu`: local forms
/// when no other CPU may hold them.
pub fn flush_target(ctx: &Mutex<AsidContext>, cpu: usize) -> (Scope, TlbCaps) {
    let allocator = ALLOCATOR.lock();
    let allocator = allocator.as_ref().expect("asids::init at boot");
    let ctx = ctx.lock();
    (Scope::Asid(ctx.asid()), allocator.tlb_caps(&ctx, cpu, crate::memory::tlb::caps()))
}

/// Invalidates every translation of `ctx` on every CPU (ASIDE1IS) and records it; used when an
/// address space dies.
pub fn flush_everywhere(ctx: &Mutex<AsidContext>) {
    let allocator = ALLOCATOR.lock();
    let allocator = allocator.as_ref().expect("asids::init at boot");
    let mut ctx = ctx.lock();
    if ctx.has_asid() {
        crate::memory::tlb::flush_all(Scope::Asid(ctx.asid()), crate::memory::tlb::caps());
        allocator.note_full_flush(&mut ctx);
    }
}
