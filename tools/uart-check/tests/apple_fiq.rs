//! The Apple FIQ dispatch (`kernel/src/drivers/apple_fiq.rs`) against a model of the system
//! registers it reads and writes: each register a value, every write and `isb` logged in order.
//! What must hold is what Linux's irq-apple-aic.c does: a fast IPI is acknowledged (and the
//! acknowledgement synchronized) before anything else, a timer counts as firing only when
//! enabled, unmasked and ISTATUS, the sources the kernel does not use are switched off when they
//! fire (else the FIQ would storm), and IPIs go local within a cluster, global across.
use uart_check::apple_fiq::{self, Reg, Sources, SystemRegisters};

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Op {
    Write(Reg, u64),
    Isb,
}

#[derive(Default)]
struct Model {
    values: Vec<(Reg, u64)>,
    log: Vec<Op>,
}

impl Model {
    fn with(values: &[(Reg, u64)]) -> Self {
        Self { values: values.to_vec(), log: Vec::new() }
    }

    fn get(&self, reg: Reg) -> u64 {
        self.values.iter().rev().find(|(r, _)| *r == reg).map_or(0, |&(_, v)| v)
    }

    fn writes(&self) -> Vec<(Reg, u64)> {
        self.log.iter().filter_map(|op| if let Op::Write(r, v) = *op { Some((r, v)) } else { None }).collect()
    }
}

impl SystemRegisters for Model {
    fn read(&mut self, reg: Reg) -> u64 {
        self.get(reg)
    }

    fn write(&mut self, reg: Reg, value: u64) {
        self.log.push(Op::Write(reg, value));
        // IPI_SR is write-one-to-clear; the others hold what is written.
        let value = if reg == Reg::IpiStatus { self.get(reg) & !value } else { value };
        self.values.push((reg, value));
    }

    fn synchronize(&mut self) {
        self.log.push(Op::Isb);
    }
}

const ENABLE: u64 = 1;
const IMASK: u64 = 2;
const ISTATUS: u64 = 4;

#[test]
fn set_up_masks_every_per_cpu_source_and_keeps_other_bits() {
    let mut m = Model::with(&[
        (Reg::IpiStatus, 1),
        (Reg::VirtualTimerControl, ENABLE | ISTATUS),
        (Reg::PhysicalTimerControl, ENABLE),
        (Reg::Pmcr0, (4 << 8) | (1 << 11) | 0xff), // IMODE FIQ, IACT, counters enabled
        (Reg::Upmcr0, (4 << 16) | 0xf),
    ]);
    apple_fiq::init_cpu(&mut m, true);
    assert_eq!(m.get(Reg::IpiStatus), 0, "a stale fast IPI is dropped");
    assert_eq!(m.get(Reg::VirtualTimerControl), ENABLE | IMASK | ISTATUS);
    assert_eq!(m.get(Reg::PhysicalTimerControl), ENABLE | IMASK);
    assert_eq!(m.get(Reg::Pmcr0), 0xff, "PMC interrupt off (IMODE 0, IACT clear), counters kept");
    assert_eq!(m.get(Reg::Upmcr0), 0xf, "uncore PMC interrupt off");
    assert_eq!(m.log.last(), Some(&Op::Isb), "committed with an isb");
    // With register IPIs (a plain apple,aic) IPI_SR is not touched.
    let mut m = Model::with(&[(Reg::IpiStatus, 1)]);
    apple_fiq::init_cpu(&mut m, false);
    assert!(!m.writes().iter().any(|&(r, _)| r == Reg::IpiStatus));
}

#[test]
fn a_fast_ipi_is_acknowledged_and_synchronized_first() {
    let mut m = Model::with(&[(Reg::IpiStatus, 1), (Reg::VirtualTimerControl, ENABLE | ISTATUS)]);
    let found = apple_fiq::handle(&mut m, true);
    assert_eq!(found, Sources { fast_ipi: true, virtual_timer: true, ..Sources::default() });
    assert_eq!(m.log[..2], [Op::Write(Reg::IpiStatus, 1), Op::Isb]);
    assert_eq!(m.get(Reg::IpiStatus), 0);
    // The tick's timer is left for the kernel to re-arm, not masked.
    assert_eq!(m.get(Reg::VirtualTimerControl), ENABLE | ISTATUS);
    // Fast IPIs not in use: IPI_SR is neither read as an IPI nor written.
    let mut m = Model::with(&[(Reg::IpiStatus, 1)]);
    assert_eq!(apple_fiq::handle(&mut m, false), Sources::default());
    assert!(m.log.is_empty());
}

#[test]
fn a_timer_fires_only_when_enabled_unmasked_and_asserted() {
    for (control, fires) in [
        (ENABLE | ISTATUS, true),
        (ENABLE | IMASK | ISTATUS, false),
        (ISTATUS, false),
        (ENABLE, false),
        (0, false),
    ] {
        let mut m = Model::with(&[(Reg::VirtualTimerControl, control)]);
        assert_eq!(apple_fiq::handle(&mut m, true).virtual_timer, fires, "CNTV_CTL {control:#b}");
        let mut m = Model::with(&[(Reg::PhysicalTimerControl, control)]);
        let found = apple_fiq::handle(&mut m, true);
        assert_eq!(found.physical_timer_masked, fires, "CNTP_CTL {control:#b}");
        assert!(!found.virtual_timer);
        if fires {
            // The unused physical timer is masked, else its level FIQ would be taken forever.
            assert_eq!(m.get(Reg::PhysicalTimerControl), control | IMASK);
            assert_eq!(m.log.last(), Some(&Op::Isb));
        } else {
            assert!(m.log.is_empty(), "nothing written for a timer that does not fire");
        }
    }
}

#[test]
fn performance_counter_interrupts_are_switched_off() {
    let mut m =
        Model::with(&[(Reg::Pmcr0, (4 << 8) | (1 << 11) | 0x3), (Reg::Upmcr0, 4 << 16), (Reg::Upmsr, 1)]);
    let found = apple_fiq::handle(&mut m, true);
    assert_eq!(found, Sources { pmc_off: true, ..Sources::default() }, "the core PMC first, as Linux");
    assert_eq!(m.get(Reg::Pmcr0), 0x3);
    assert_eq!(m.get(Reg::Upmcr0), 4 << 16, "the uncore PMC waits for the next FIQ");
    let found = apple_fiq::handle(&mut m, true);
    assert_eq!(found, Sources { uncore_pmc_off: true, ..Sources::default() });
    assert_eq!(m.get(Reg::Upmcr0), 0);
    // An uncore PMC active but not in FIQ mode (IMODE 2: through the AIC) is not this FIQ's.
    let mut m = Model::with(&[(Reg::Upmcr0, 2 << 16), (Reg::Upmsr, 1)]);
    assert_eq!(apple_fiq::handle(&mut m, true), Sources::default());
    assert!(m.writes().is_empty());
}

#[test]
fn fast_ipis_go_local_within_a_cluster_and_global_across() {
    let mut m = Model::default();
    // From CPU 0 of cluster 1 (an M1's P-cores) to CPU 3 of the same cluster.
    apple_fiq::send(&mut m, 0x8000_0100, 0x8000_0103);
    assert_eq!(m.log, [Op::Write(Reg::IpiRequestLocal, 3), Op::Isb]);
    let mut m = Model::default();
    // To CPU 2 of cluster 0: the global register names the cluster in bits 23:16.
    apple_fiq::send(&mut m, 0x8000_0100, 0x8000_0002);
    assert_eq!(m.log, [Op::Write(Reg::IpiRequestGlobal, 2), Op::Isb]);
    let mut m = Model::default();
    apple_fiq::send(&mut m, 0x8000_0001, 0x8000_0105);
    assert_eq!(m.log, [Op::Write(Reg::IpiRequestGlobal, (1 << 16) | 5), Op::Isb]);
}
