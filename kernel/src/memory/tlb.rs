//! The kernel's TLB maintenance: the mm crate's planner and issuer on this CPU.
//!
//! The machine's fixed TLB features (FEAT_TLBIRANGE, the repeat-TLBI errata from MIDR_EL1) are
//! read once at boot and combined over the CPUs as they come up ([`features`]). How far each
//! invalidation reaches (this CPU or all) is not a feature but part of each request
//! (`TlbRequest::reach`, `FlushTarget::reach`): user address spaces ask the ASID allocator at the
//! moment they flush (`memory::asids`). Kernel-wide flushes go through [`flush`] and
//! [`flush_all`]; address spaces report what they issued through their flush-target provider,
//! which calls [`account`], so the counters in [`stats`] see every instruction (the test image
//! reads them, and user programs through `SYS_MM_STATS`).
use mm::tlb::issue::{Aarch64Tlb, read_id_aa64isar0_el1, read_midr_el1};
use mm::tlb::plan::full_flush;
use mm::tlb::{FlushTarget, TlbFeatures, TlbPlan, TlbRequest, TlbStats, plan};
use spin::{Mutex, Once};

static FEATURES: Once<Mutex<TlbFeatures>> = Once::new();
static STATS: Mutex<TlbStats> = Mutex::new(TlbStats::ZERO);

/// Reads the features from the ID registers. Called once, by the boot CPU.
pub fn init() -> TlbFeatures {
    *FEATURES
        .call_once(|| Mutex::new(TlbFeatures::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1())))
        .lock()
}

/// Folds the features of the calling (secondary) CPU into the system's: range TLBI only if
/// every CPU has it, each erratum workaround if any CPU needs it.
pub fn add_cpu() {
    let this = TlbFeatures::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1());
    if let Some(features) = FEATURES.get() {
        let mut features = features.lock();
        *features = features.combine(this);
    }
}

/// The machine's TLB features, read at boot.
pub fn features() -> TlbFeatures {
    *FEATURES.get().expect("tlb::init runs at boot").lock()
}

#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "range flushes of the kernel's own table are made by the test image only")
)]
/// Plans and issues the invalidation of `req` (its scope and reach included); `needs_isb` when
/// kernel or executable mappings changed. Returns the plan (the tests look at its shape).
pub fn flush(req: &TlbRequest, needs_isb: bool) -> TlbPlan {
    let plan = plan(req, features());
    issue(&plan, needs_isb);
    plan
}

/// Issues a whole-ASID (`Scope::Asid`) or whole-TLB (`Scope::Global`) flush, local or
/// broadcast as `target` says.
pub fn flush_all(target: FlushTarget) -> TlbPlan {
    let plan = full_flush(target);
    issue(&plan, true);
    plan
}

fn issue(plan: &TlbPlan, needs_isb: bool) {
    let errata = features().errata;
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
