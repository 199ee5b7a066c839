//! Apple silicon's FIQ sources: the architected timers, the fast IPIs and the performance
//! counters all raise FIQ, not IRQ, and nothing says which one did. As Linux's
//! drivers/irqchip/irq-apple-aic.c (`aic_handle_fiq`, `aic_init_cpu`, `aic_ipi_send_fast`) does,
//! the handler asks each source in turn: a fast IPI pending in `IPI_SR`, a timer whose
//! `CNTx_CTL_EL0` says enabled, not masked and ISTATUS, a PMC interrupt active in `PMCR0`, an
//! uncore PMC one in `UPMSR`. Any source left firing would storm, so the sources this kernel does
//! not use (the physical timer, both PMCs) are switched off when they fire, as Linux does for the
//! uncore PMC.
//!
//! Written against [`SystemRegisters`] rather than `mrs`/`msr` directly, so that the very logic
//! the kernel runs is host-tested against a model of the registers (tools/uart-check,
//! `tests/aic.rs`): no Apple machine model exists in QEMU.
//!
//! The IMP-DEF registers (Linux's names and encodings, `op0_op1_Cn_Cm_op2`):
//! - `SYS_IMP_APL_IPI_RR_LOCAL_EL1` `s3_5_c15_c0_0`: send to CPU `Aff0` (bits 7:0) of this cluster;
//! - `SYS_IMP_APL_IPI_RR_GLOBAL_EL1` `s3_5_c15_c0_1`: send to CPU bits 7:0 of cluster bits 23:16;
//! - `SYS_IMP_APL_IPI_SR_EL1` `s3_5_c15_c1_1`: bit 0 a fast IPI is pending, write 1 to clear;
//! - `SYS_IMP_APL_PMCR0_EL1` `s3_1_c15_c0_0`: IMODE bits 10:8 (0 off, 4 FIQ), IACT bit 11;
//! - `SYS_IMP_APL_UPMCR0_EL1` `s3_7_c15_c0_4`: IMODE bits 18:16 (4 FIQ);
//! - `SYS_IMP_APL_UPMSR_EL1` `s3_7_c15_c6_4`: IACT bit 0.

/// A system register the FIQ handling reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// `SYS_IMP_APL_IPI_SR_EL1`: fast IPI pending (bit 0, write one to clear).
    IpiStatus,
    /// `SYS_IMP_APL_IPI_RR_LOCAL_EL1`: send a fast IPI within this cluster.
    IpiRequestLocal,
    /// `SYS_IMP_APL_IPI_RR_GLOBAL_EL1`: send a fast IPI to any cluster.
    IpiRequestGlobal,
    /// `CNTV_CTL_EL0`: the virtual timer, the kernel's tick.
    VirtualTimerControl,
    /// `CNTP_CTL_EL0`: the physical timer (unused by this kernel).
    PhysicalTimerControl,
    /// `SYS_IMP_APL_PMCR0_EL1`: the core PMC's interrupt mode and active bit.
    Pmcr0,
    /// `SYS_IMP_APL_UPMCR0_EL1`: the uncore PMC's interrupt mode.
    Upmcr0,
    /// `SYS_IMP_APL_UPMSR_EL1`: the uncore PMC's active bit.
    Upmsr,
}

/// Access to this CPU's system registers (the kernel: `mrs`/`msr`; the host test: a model).
pub trait SystemRegisters {
    /// Reads `reg`.
    fn read(&mut self, reg: Reg) -> u64;
    /// Writes `reg`.
    fn write(&mut self, reg: Reg, value: u64);
    /// Makes the writes so far take effect (`isb`) before the next access.
    fn synchronize(&mut self);
}

const IPI_SR_PENDING: u64 = 1 << 0;
/// CNTx_CTL_EL0: ENABLE, IMASK, ISTATUS (Arm ARM D13.8.x).
const TIMER_ENABLE: u64 = 1 << 0;
const TIMER_IMASK: u64 = 1 << 1;
const TIMER_ISTATUS: u64 = 1 << 2;
const PMCR0_IMODE: u64 = 0b111 << 8;
const PMCR0_IACT: u64 = 1 << 11;
const UPMCR0_IMODE: u64 = 0b111 << 16;
const UPMCR0_IMODE_FIQ: u64 = 4 << 16;
const UPMSR_IACT: u64 = 1 << 0;

/// What one FIQ turned out to be (several sources may fire together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// A fast IPI arrived (already acknowledged): the kernel's pending IPIs are to be read.
    pub fast_ipi: bool,
    /// The virtual timer fired: the tick (the kernel's handler re-arms it, which ends the FIQ).
    pub virtual_timer: bool,
    /// The physical timer fired and was masked (the kernel does not use it).
    pub physical_timer_masked: bool,
    /// A core PMC interrupt was active and the PMC interrupt switched off.
    pub pmc_off: bool,
    /// An uncore PMC interrupt was active and switched off.
    pub uncore_pmc_off: bool,
}

fn firing(control: u64) -> bool {
    control & (TIMER_ENABLE | TIMER_IMASK | TIMER_ISTATUS) == TIMER_ENABLE | TIMER_ISTATUS
}

/// Masks every per-CPU FIQ source on this CPU (`aic_init_cpu`): drops a stale fast IPI, masks
/// both timers' interrupts (the kernel's tick unmasks the virtual one when it arms it), and
/// switches both PMC interrupts off.
pub fn init_cpu(regs: &mut impl SystemRegisters, fast_ipis: bool) {
    if fast_ipis {
        regs.write(Reg::IpiStatus, IPI_SR_PENDING);
    }
    for timer in [Reg::PhysicalTimerControl, Reg::VirtualTimerControl] {
        let control = regs.read(timer);
        regs.write(timer, control | TIMER_IMASK);
    }
    let pmcr0 = regs.read(Reg::Pmcr0);
    regs.write(Reg::Pmcr0, pmcr0 & !(PMCR0_IMODE | PMCR0_IACT));
    let upmcr0 = regs.read(Reg::Upmcr0);
    regs.write(Reg::Upmcr0, upmcr0 & !UPMCR0_IMODE);
    regs.synchronize();
}

/// Finds and quiets the sources of one FIQ, in `aic_handle_fiq`'s order. A fast IPI is
/// acknowledged (and the acknowledgement synchronized) before the caller reads what was sent,
/// so that an IPI raised after that read raises a new FIQ.
pub fn handle(regs: &mut impl SystemRegisters, fast_ipis: bool) -> Sources {
    let mut found = Sources::default();
    if fast_ipis && regs.read(Reg::IpiStatus) & IPI_SR_PENDING != 0 {
        regs.write(Reg::IpiStatus, IPI_SR_PENDING);
        regs.synchronize();
        found.fast_ipi = true;
    }
    let physical = regs.read(Reg::PhysicalTimerControl);
    if firing(physical) {
        regs.write(Reg::PhysicalTimerControl, physical | TIMER_IMASK);
        found.physical_timer_masked = true;
    }
    found.virtual_timer = firing(regs.read(Reg::VirtualTimerControl));
    let pmcr0 = regs.read(Reg::Pmcr0);
    if pmcr0 & PMCR0_IACT != 0 {
        regs.write(Reg::Pmcr0, pmcr0 & !(PMCR0_IMODE | PMCR0_IACT));
        found.pmc_off = true;
    } else {
        let upmcr0 = regs.read(Reg::Upmcr0);
        if upmcr0 & UPMCR0_IMODE == UPMCR0_IMODE_FIQ && regs.read(Reg::Upmsr) & UPMSR_IACT != 0 {
            regs.write(Reg::Upmcr0, upmcr0 & !UPMCR0_IMODE);
            found.uncore_pmc_off = true;
        }
    }
    if found.physical_timer_masked || found.pmc_off || found.uncore_pmc_off {
        regs.synchronize();
    }
    found
}

/// Raises a fast IPI on the CPU whose MPIDR is `target`, from the CPU whose MPIDR is `this`
/// (`aic_ipi_send_fast`): the local request register within a cluster (Aff1), the global one
/// with the cluster number otherwise.
pub fn send(regs: &mut impl SystemRegisters, this: u64, target: u64) {
    let cpu = target & 0xff;
    let cluster = (target >> 8) & 0xff;
    if (this >> 8) & 0xff == cluster {
        regs.write(Reg::IpiRequestLocal, cpu);
    } else {
        regs.write(Reg::IpiRequestGlobal, cpu | (cluster << 16));
    }
    regs.synchronize();
}
