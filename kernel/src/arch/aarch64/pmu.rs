//! The performance monitors (PMUv3, Arm ARM D13 "The Performance Monitors Extension"): event
//! counter 0 counts instructions architecturally executed (event 0x08, INST_RETIRED) at EL0 and
//! EL1, and EL0 may read it.
//!
//! Why: the benchmark program (userland mode `ops`) reports instructions per system call, read in
//! the guest on this kernel and on Linux alike; Linux offers the count through
//! `perf_event_open`, this kernel through one register EL0 may read (`mrs PMEVCNTR0_EL0`, allowed
//! by PMUSERENR_EL0.ER). Nothing else uses the PMU, so counter 0 is given to this for good. Only
//! reads are opened to EL0 (not EN, which would let a program reprogram or stop the counter). The
//! count says how much work the machine did, not what another process did: this exposes no more
//! than the generic counter already does. QEMU's TCG counts event 0x08 only with `-icount
//! shift=N` (a fixed instructions-to-time ratio); without it the event is not implemented and the
//! counter stays 0.
use aarch64_cpu::registers::{ID_AA64DFR0_EL1, Readable};

/// INST_RETIRED, the common event "instruction architecturally executed".
const INST_RETIRED: u64 = 0x08;
/// PMUSERENR_EL0.ER (event counter reads) and .CR (cycle counter reads).
const USER_READS: u64 = (1 << 3) | (1 << 2);

/// Starts event counter 0 on INST_RETIRED and lets EL0 read it; false when the CPU has no
/// PMUv3 (ID_AA64DFR0_EL1.PMUVer 0 or IMPLEMENTATION DEFINED) or no event counter.
pub fn enable_instruction_counter() -> bool {
    let ver = ID_AA64DFR0_EL1.read(ID_AA64DFR0_EL1::PMUVer);
    if ver == 0 || ver == 0xf {
        return false;
    }
    let pmcr: u64;
    // SAFETY: reading PMCR_EL0 at EL1 has no side effect; PMUv3 is present.
    unsafe { core::arch::asm!("mrs {}, pmcr_el0", out(reg) pmcr, options(nomem, nostack)) };
    if (pmcr >> 11) & 0x1f == 0 {
        return false; // PMCR_EL0.N: no event counter
    }
    // SAFETY: programs only the PMU, which nothing else in the kernel uses: no overflow
    // interrupts (PMINTENCLR_EL1, PMOVSCLR_EL0), counter 0 on INST_RETIRED with no filter
    // (P = U = 0: EL1 and EL0 counted), counter 0 enabled, the counters reset (P) and enabled
    // (E), EL0 reads allowed. None of this touches memory.
    unsafe {
        core::arch::asm!(
            "msr pmintenclr_el1, {all}",
            "msr pmovsclr_el0, {all}",
            "msr pmevtyper0_el0, {event}",
            "msr pmcntenset_el0, {one}",
            "msr pmcr_el0, {pmcr}",
            "msr pmuserenr_el0, {user}",
            "isb",
            all = in(reg) u64::from(u32::MAX),
            event = in(reg) INST_RETIRED,
            one = in(reg) 1u64,
            pmcr = in(reg) (pmcr & !0xff) | 0b11, // E and P; cycle counter left alone
            user = in(reg) USER_READS,
            options(nomem, nostack)
        );
    }
    true
}
