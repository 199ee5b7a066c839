//! The kernel's TLB maintenance: the mm crate's planner and issuer on this CPU.
//!
//! Capabilities (FEAT_TLBIRANGE, the repeat-TLBI errata from MIDR_EL1) are read once at boot, and
//! every invalidation in the kernel goes through [`flush`], so the counters in [`stats`] see all
//! of them (the test image reads them, and `SYS_MM_STATS` will give them to user programs).
#![cfg_attr(
    not(feature = "test-image"),
    allow(dead_code, reason = "the test image uses all of it today; user address spaces will")
)]

use mm::tlb::issue::{Aarch64Tlb, read_id_aa64isar0_el1, read_midr_el1};
use mm::tlb::plan::full_flush;
use mm::tlb::{Scope, TlbCaps, TlbIssuer, TlbPlan, TlbRequest, TlbStats, plan};
use spin::{Mutex, Once};

static CAPS: Once<TlbCaps> = Once::new();
static ISSUER: Mutex<Option<TlbIssuer<Aarch64Tlb>>> = Mutex::new(None);

/// Reads the capabilities from the ID registers. Called once, by the boot CPU.
pub fn init() -> TlbCaps {
    *CAPS.call_once(|| {
        let caps = TlbCaps::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1());
        *ISSUER.lock() = Some(TlbIssuer::new(Aarch64Tlb, caps.errata));
        caps
    })
}

/// The capabilities read at boot (broadcast forms).
pub fn caps() -> TlbCaps {
    *CAPS.get().expect("tlb::init runs at boot")
}

/// Plans and issues the invalidation of `req`; `needs_isb` when kernel or executable mappings
/// changed. Returns the plan (the tests look at its shape).
pub fn flush(req: &TlbRequest, caps: TlbCaps, needs_isb: bool) -> TlbPlan {
    let plan = plan(req, caps);
    issue(&plan, needs_isb);
    plan
}

/// Issues a whole-ASID (`Scope::Asid`) or whole-TLB (`Scope::Global`) flush.
pub fn flush_all(scope: Scope, caps: TlbCaps) -> TlbPlan {
    let plan = full_flush(scope, caps);
    issue(&plan, true);
    plan
}

fn issue(plan: &TlbPlan, needs_isb: bool) {
    if let Some(issuer) = ISSUER.lock().as_mut() {
        issuer.issue(plan, needs_isb);
    }
}

/// The counts of issued TLB maintenance since boot.
pub fn stats() -> TlbStats {
    ISSUER.lock().as_ref().map_or(TlbStats::ZERO, |i| *i.stats())
}
