//! Counters of issued TLB maintenance, kept by the issuer. A plain struct of `u64`s: the kernel
//! wraps it (per CPU, or behind its own lock) and reports it; the benchmarks compare it against
//! the minimum.

use super::op::{OpKind, TlbiOp};

/// Counts of issued instructions by kind and shareability. Errata repeats are counted apart, in
/// [`TlbStats::repeated`], not in the per-kind counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TlbStats {
    /// Range ops (`RVAE1IS`, …), broadcast.
    pub range_broadcast: u64,
    /// Range ops, local.
    pub range_local: u64,
    /// Single-VA ops (`VAE1IS`, …), broadcast.
    pub page_broadcast: u64,
    /// Single-VA ops, local.
    pub page_local: u64,
    /// Whole-ASID flushes (`ASIDE1IS`), broadcast.
    pub asid_broadcast: u64,
    /// Whole-ASID flushes (`ASIDE1`), local.
    pub asid_local: u64,
    /// Whole-TLB flushes (`VMALLE1IS`), broadcast.
    pub all_broadcast: u64,
    /// Whole-TLB flushes (`VMALLE1`), local.
    pub all_local: u64,
    /// Extra TLBIs issued for an erratum that needs each one repeated.
    pub repeated: u64,
    /// `DSB` instructions issued.
    pub dsb: u64,
    /// `ISB` instructions issued.
    pub isb: u64,
    /// Non-empty plans issued.
    pub plans: u64,
}

impl TlbStats {
    /// All counters zero.
    pub const ZERO: Self = Self {
        range_broadcast: 0,
        range_local: 0,
        page_broadcast: 0,
        page_local: 0,
        asid_broadcast: 0,
        asid_local: 0,
        all_broadcast: 0,
        all_local: 0,
        repeated: 0,
        dsb: 0,
        isb: 0,
        plans: 0,
    };

    /// Counts one planned instruction (not an errata repeat).
    pub fn record(&mut self, op: TlbiOp) {
        // Each arm names its field (no pointer to a chosen field), so that a count kept on the
        // stack for one flush stays in registers.
        match (op.kind(), op.is_broadcast()) {
            (OpKind::Range, true) => self.range_broadcast += 1,
            (OpKind::Range, false) => self.range_local += 1,
            (OpKind::Page, true) => self.page_broadcast += 1,
            (OpKind::Page, false) => self.page_local += 1,
            (OpKind::Asid, true) => self.asid_broadcast += 1,
            (OpKind::Asid, false) => self.asid_local += 1,
            (OpKind::All, true) => self.all_broadcast += 1,
            (OpKind::All, false) => self.all_local += 1,
        }
    }

    /// Adds every counter of `other` to `self`.
    pub fn add(&mut self, other: &Self) {
        self.range_broadcast += other.range_broadcast;
        self.range_local += other.range_local;
        self.page_broadcast += other.page_broadcast;
        self.page_local += other.page_local;
        self.asid_broadcast += other.asid_broadcast;
        self.asid_local += other.asid_local;
        self.all_broadcast += other.all_broadcast;
        self.all_local += other.all_local;
        self.repeated += other.repeated;
        self.dsb += other.dsb;
        self.isb += other.isb;
        self.plans += other.plans;
    }

    /// The counts issued since `earlier` (a snapshot of the same counters): `self - earlier`,
    /// field by field (saturating, so a reset in between gives zeros rather than wrapping).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            range_broadcast: self.range_broadcast.saturating_sub(earlier.range_broadcast),
            range_local: self.range_local.saturating_sub(earlier.range_local),
            page_broadcast: self.page_broadcast.saturating_sub(earlier.page_broadcast),
            page_local: self.page_local.saturating_sub(earlier.page_local),
            asid_broadcast: self.asid_broadcast.saturating_sub(earlier.asid_broadcast),
            asid_local: self.asid_local.saturating_sub(earlier.asid_local),
            all_broadcast: self.all_broadcast.saturating_sub(earlier.all_broadcast),
            all_local: self.all_local.saturating_sub(earlier.all_local),
            repeated: self.repeated.saturating_sub(earlier.repeated),
            dsb: self.dsb.saturating_sub(earlier.dsb),
            isb: self.isb.saturating_sub(earlier.isb),
            plans: self.plans.saturating_sub(earlier.plans),
        }
    }

    /// Planned TLBI instructions issued, all kinds (errata repeats excluded).
    pub const fn planned_tlbis(&self) -> u64 {
        self.range_broadcast
            + self.range_local
            + self.page_broadcast
            + self.page_local
            + self.asid_broadcast
            + self.asid_local
            + self.all_broadcast
            + self.all_local
    }

    /// Every TLBI executed, errata repeats included.
    pub const fn total_tlbis(&self) -> u64 {
        self.planned_tlbis() + self.repeated
    }

    /// Whole flushes (ASID or whole TLB), the plans that fell back.
    pub const fn full_flushes(&self) -> u64 {
        self.asid_broadcast + self.asid_local + self.all_broadcast + self.all_local
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_the_field_by_field_difference() {
        let mut a = TlbStats::ZERO;
        a.range_broadcast = 5;
        a.page_local = 7;
        a.plans = 3;
        let mut b = a;
        b.range_broadcast = 9;
        b.page_local = 8;
        b.all_local = 1;
        b.plans = 4;
        let d = b.since(&a);
        assert_eq!((d.range_broadcast, d.page_local, d.all_local, d.plans), (4, 1, 1, 1));
        assert_eq!(a.since(&b).range_broadcast, 0);
        let mut sum = a;
        sum.add(&d);
        assert_eq!(sum, b);
    }
}
