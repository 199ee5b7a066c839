//! The kernel's TLB maintenance: the mm crate's planner and issuer on this CPU.
//!
//! Capabilities (FEAT_TLBIRANGE, the repeat-TLBI errata from MIDR_EL1) are read once at boot and
//! combined over the CPUs as they come up. Kernel-wide flushes go through [`flush`] and
//! [`flush_all`]; user address spaces (`mm::space`) issue their own plans and add what they issued
//! with [`account`], so the counters in [`stats`] see every instruction (the test image reads
//! them, and user programs through `SYS_MM_STATS`).
use mm::tlb::issue::{Aarch64Tlb, read_id_aa64isar0_el1, read_midr_el1};
use mm::tlb::plan::full_flush;
use mm::tlb::{Scope, TlbCaps, TlbPlan, TlbRequest, TlbStats, plan};
use spin::{Mutex, Once};

static CAPS: Once<Mutex<TlbCaps>> = Once::new();
static STATS: Mutex<TlbStats> = Mutex::new(TlbStats::ZERO);

/// Reads the capabilities from the ID registers. Called once, by the boot CPU.
pub fn init() -> TlbCaps {
    *CAPS
        .call_once(|| Mutex::new(TlbCaps::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1())))
        .lock()
}

/// Folds the capabilities of the calling (secondary) CPU into the system's: range TLBI only if
/// every CPU has it, each erratum workaround if any CPU needs it.
pub fn add_cpu() {
    let this = TlbCaps::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1());
    if let Some(caps) = CAPS.get() {
        let mut caps = caps.lock();
        *caps = caps.combine(this);
    }
}

/// The capabilities read at boot (broadcast forms).
pub fn caps() -> TlbCaps {
    *CAPS.get().expect("tlb::init runs at boot").lock()
}

#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "range flushes of the kernel's own table are made by the test image only")
)]
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
    let errata = caps().errata;
    let issued = mm::tlb::issue(plan, &mut Aarch64Tlb, errata, needs_isb);
    STATS.lock().add(&issued);
}

/// Adds maintenance issued elsewhere (an address space's own issuer) to the counters.
pub fn account(issued: &TlbStats) {
    STATS.lock().add(issued);
}

/// The counts of issued TLB maintenance since boot.
pub fn stats() -> TlbStats {
    *STATS.lock()
}
