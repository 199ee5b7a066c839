//! The issuer: executes a [`TlbPlan`] with the barriers the architecture requires, repeats every
//! TLBI on CPUs whose errata need it, and counts what it issued. [`TlbHardware`] is the only
//! seam that touches the machine; `Aarch64Tlb` implements it with `asm!`, the tests with a
//! recorder.
//!
//! Sequence for a broadcast plan: `DSB ISHST` (the page-table stores are visible to every
//! walker before any invalidation), the TLBIs, `DSB ISH` (they have completed on every CPU),
//! then `ISB` when the caller changed kernel or executable mappings (so this CPU does not keep
//! using an instruction fetched or a translation looked up before). A local plan uses
//! `DSB NSHST` / `DSB NSH`. With [`Errata::repeat_tlbi`] every TLBI is followed by
//! `DSB ISH; TLBI` again (Linux's `ARM64_WORKAROUND_REPEAT_TLBI`, `__TLBI_0`/`__TLBI_1` in
//! `arch/arm64/include/asm/tlbflush.h`, which uses `DSB ISH` for local ops too).

use super::TlbPlan;
use super::op::TlbiOp;
use super::stats::TlbStats;

/// The machine operations the issuer needs. Implemented by `Aarch64Tlb` on the target and by
/// recorders in tests. Every method must execute exactly the named instruction.
pub trait TlbHardware {
    /// `DSB ISHST`: prior stores are visible to the inner-shareable domain.
    fn dsb_ishst(&mut self);
    /// `DSB ISH`: prior memory accesses and TLB maintenance have completed in the
    /// inner-shareable domain.
    fn dsb_ish(&mut self);
    /// `DSB NSHST`: prior stores are visible to this CPU's table walker.
    fn dsb_nshst(&mut self);
    /// `DSB NSH`: prior memory accesses and local TLB maintenance have completed.
    fn dsb_nsh(&mut self);
    /// `ISB`: refetch everything after this point.
    fn isb(&mut self);
    /// `TLBI <op>, Xt` with `Xt = operand` (`TLBI VMALLE1IS` and `TLBI VMALLE1` take none and
    /// ignore `operand`).
    fn tlbi(&mut self, op: TlbiOp, operand: u64);
}

/// CPU errata that change how TLB maintenance is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Errata {
    /// Every TLBI must be followed by `DSB ISH` and issued again (see [`repeat_tlbi_needed`]).
    pub repeat_tlbi: bool,
}

impl Errata {
    /// No workaround.
    pub const NONE: Self = Self { repeat_tlbi: false };

    /// The workarounds one CPU needs, from its `MIDR_EL1`.
    pub const fn from_midr(midr: u64) -> Self {
        Self { repeat_tlbi: repeat_tlbi_needed(midr) }
    }
}

/// Implementer code of Arm Ltd. in `MIDR_EL1[31:24]`.
pub const MIDR_IMPLEMENTER_ARM: u8 = 0x41;
/// Implementer code of Qualcomm in `MIDR_EL1[31:24]`.
pub const MIDR_IMPLEMENTER_QCOM: u8 = 0x51;

/// The fields of `MIDR_EL1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Midr {
    /// Implementer, bits `[31:24]` (0x41 Arm, 0x51 Qualcomm, …).
    pub implementer: u8,
    /// Variant (the `r` of `rNpM`), bits `[23:20]`.
    pub variant: u8,
    /// Architecture, bits `[19:16]` (0xf: described by the ID registers).
    pub architecture: u8,
    /// Primary part number, bits `[15:4]`.
    pub part: u16,
    /// Revision (the `p` of `rNpM`), bits `[3:0]`.
    pub revision: u8,
}

impl Midr {
    /// Splits a `MIDR_EL1` value.
    pub const fn decode(midr: u64) -> Self {
        Self {
            implementer: (midr >> 24) as u8,
            variant: ((midr >> 20) & 0xf) as u8,
            architecture: ((midr >> 16) & 0xf) as u8,
            part: ((midr >> 4) & 0xfff) as u16,
            revision: (midr & 0xf) as u8,
        }
    }

    /// Builds a `MIDR_EL1` value (architecture 0xf), for tests and tables.
    pub const fn encode(implementer: u8, part: u16, variant: u8, revision: u8) -> u64 {
        (implementer as u64) << 24
            | ((variant as u64) & 0xf) << 20
            | 0xf << 16
            | ((part as u64) & 0xfff) << 4
            | ((revision as u64) & 0xf)
    }

    /// Variant and revision as one ordered number, `rNpM` → `N << 4 | M`.
    const fn rv(&self) -> u8 {
        self.variant << 4 | self.revision
    }
}

/// One line of an errata table: a part and an inclusive `rNpM` range.
struct Affected {
    implementer: u8,
    part: u16,
    /// Lowest affected `variant << 4 | revision`.
    from: u8,
    /// Highest affected `variant << 4 | revision`.
    to: u8,
}

const fn arm(part: u16, from: u8, to: u8) -> Affected {
    Affected { implementer: MIDR_IMPLEMENTER_ARM, part, from, to }
}

const ALL_REVISIONS: (u8, u8) = (0x00, 0xff);

/// CPUs that need every TLBI repeated: the `arm64_repeat_tlbi_list` of Linux
/// (`arch/arm64/kernel/cpu_errata.c`, `ARM64_WORKAROUND_REPEAT_TLBI`), as of the 2026 stable
/// backports (commit cfd391e74134, "arm64: errata: Mitigate TLBI errata on various Arm CPUs").
const REPEAT_TLBI: &[Affected] = &[
    // Qualcomm Falkor erratum 1009 (QCOM_FALKOR_ERRATUM_1009): Falkor v1, r0p0 only.
    Affected { implementer: MIDR_IMPLEMENTER_QCOM, part: 0x800, from: 0x00, to: 0x00 },
    // Arm erratum 1286807 (ARM64_ERRATUM_1286807): Cortex-A76 r0p0..r3p0.
    arm(0xd0b, 0x00, 0x30),
    // Same erratum on Qualcomm Kryo4xx Gold (rcpe..rfpe = r0p0..r3p0).
    Affected { implementer: MIDR_IMPLEMENTER_QCOM, part: 0x804, from: 0xce, to: 0xfe },
    // Arm erratum 2441007 (ARM64_ERRATUM_2441007): Cortex-A55, all revisions.
    arm(0xd05, ALL_REVISIONS.0, ALL_REVISIONS.1),
    // Arm erratum 2441009 (ARM64_ERRATUM_2441009): Cortex-A510 r0p0..r1p1 (fixed in r1p2).
    arm(0xd46, 0x00, 0x11),
    // ARM64_ERRATUM_4118414 (CVE-2025-10263, "completion of affected memory accesses might not
    // be guaranteed by completion of a TLBI"), all revisions of: C1-Premium, C1-Ultra,
    // Cortex-A76, -A76AE, -A77, -A78, -A78AE, -A78C, -A710, -X1, -X1C, -X2, -X3, -X4, -X925,
    // Neoverse-N1, -N2, -V1, -V2, -V3, -V3AE. Part numbers from Linux's cputype.h.
    arm(0xd90, 0x00, 0xff), // C1-Premium
    arm(0xd8c, 0x00, 0xff), // C1-Ultra
    arm(0xd0b, 0x00, 0xff), // Cortex-A76
    arm(0xd0e, 0x00, 0xff), // Cortex-A76AE
    arm(0xd0d, 0x00, 0xff), // Cortex-A77
    arm(0xd41, 0x00, 0xff), // Cortex-A78
    arm(0xd42, 0x00, 0xff), // Cortex-A78AE
    arm(0xd4b, 0x00, 0xff), // Cortex-A78C
    arm(0xd47, 0x00, 0xff), // Cortex-A710
    arm(0xd44, 0x00, 0xff), // Cortex-X1
    arm(0xd4c, 0x00, 0xff), // Cortex-X1C
    arm(0xd48, 0x00, 0xff), // Cortex-X2
    arm(0xd4e, 0x00, 0xff), // Cortex-X3
    arm(0xd82, 0x00, 0xff), // Cortex-X4
    arm(0xd85, 0x00, 0xff), // Cortex-X925
    arm(0xd0c, 0x00, 0xff), // Neoverse-N1
    arm(0xd49, 0x00, 0xff), // Neoverse-N2
    arm(0xd40, 0x00, 0xff), // Neoverse-V1
    arm(0xd4f, 0x00, 0xff), // Neoverse-V2
    arm(0xd84, 0x00, 0xff), // Neoverse-V3
    arm(0xd83, 0x00, 0xff), // Neoverse-V3AE
];

/// Whether the CPU with this `MIDR_EL1` needs every TLBI issued twice (`TLBI; DSB ISH; TLBI`).
///
/// Source: Linux `arm64_repeat_tlbi_list` (`arch/arm64/kernel/cpu_errata.c`), which matches
/// implementer, architecture (0xf) and part exactly and the `rNpM` range inclusively:
/// - Qualcomm Falkor v1 r0p0 (erratum 1009) and every Qualcomm Kryo part `0x2xx` (Linux's
///   `is_kryo_midr`, same erratum);
/// - Cortex-A76 r0p0..r3p0 and Kryo4xx Gold rcpe..rfpe (erratum 1286807);
/// - Cortex-A55, all revisions (erratum 2441007);
/// - Cortex-A510 r0p0..r1p1 (erratum 2441009);
/// - all revisions of the Arm cores of ARM64_ERRATUM_4118414 (CVE-2025-10263, 2026 backports):
///   C1-Premium/Ultra, Cortex-A76/A76AE/A77/A78/A78AE/A78C/A710/X1/X1C/X2/X3/X4/X925,
///   Neoverse-N1/N2/V1/V2/V3/V3AE.
pub const fn repeat_tlbi_needed(midr: u64) -> bool {
    let m = Midr::decode(midr);
    if m.architecture != 0xf {
        return false;
    }
    // Kryo: implementer Qualcomm, part 0x2xx (Linux masks the part with 0xf00).
    if m.implementer == MIDR_IMPLEMENTER_QCOM && m.part & 0xf00 == 0x200 {
        return true;
    }
    let rv = m.rv();
    let mut i = 0;
    while i < REPEAT_TLBI.len() {
        let a = &REPEAT_TLBI[i];
        if a.implementer == m.implementer && a.part == m.part && rv >= a.from && rv <= a.to {
            return true;
        }
        i += 1;
    }
    false
}

/// Issues `plan` on `hw`: barrier, the TLBIs (each repeated when `errata.repeat_tlbi`), barrier,
/// and `ISB` when `needs_isb` (kernel or executable mappings changed). An empty plan issues
/// nothing. Returns the counts of what was issued.
pub fn issue<H: TlbHardware + ?Sized>(
    plan: &TlbPlan,
    hw: &mut H,
    errata: Errata,
    needs_isb: bool,
) -> TlbStats {
    let mut stats = TlbStats::default();
    if plan.is_empty() {
        return stats;
    }
    let broadcast = plan.is_broadcast();
    if broadcast {
        hw.dsb_ishst();
    } else {
        hw.dsb_nshst();
    }
    stats.dsb += 1;
    let repeat = mutant!(errata.repeat_tlbi, IgnoreRepeatErratum => false);
    for instr in plan {
        hw.tlbi(instr.op, instr.operand);
        stats.record(instr.op);
        if repeat {
            hw.dsb_ish();
            hw.tlbi(instr.op, instr.operand);
            stats.dsb += 1;
            stats.repeated += 1;
        }
    }
    if broadcast {
        mutant!(hw.dsb_ish(), MissingFinalDsb => ());
    } else {
        hw.dsb_nsh();
    }
    stats.dsb += 1;
    if needs_isb {
        hw.isb();
        stats.isb += 1;
    }
    stats.plans += 1;
    stats
}

/// An issuer that owns the hardware handle, the errata flags and the running statistics.
#[derive(Debug)]
pub struct TlbIssuer<H> {
    hw: H,
    errata: Errata,
    stats: TlbStats,
}

impl<H: TlbHardware> TlbIssuer<H> {
    /// An issuer for `hw` with the given workarounds.
    pub const fn new(hw: H, errata: Errata) -> Self {
        Self { hw, errata, stats: TlbStats::ZERO }
    }

    /// Issues `plan` (see [`issue()`]), adds its counts to the statistics and returns them.
    pub fn issue(&mut self, plan: &TlbPlan, needs_isb: bool) -> TlbStats {
        let s = issue(plan, &mut self.hw, self.errata, needs_isb);
        self.stats.add(&s);
        s
    }

    /// The counts so far.
    pub const fn stats(&self) -> &TlbStats {
        &self.stats
    }

    /// Resets the counts to zero.
    pub fn reset_stats(&mut self) {
        self.stats = TlbStats::ZERO;
    }

    /// The workarounds in force.
    pub const fn errata(&self) -> Errata {
        self.errata
    }

    /// The hardware handle.
    pub const fn hw(&self) -> &H {
        &self.hw
    }

    /// The hardware handle, mutably.
    pub fn hw_mut(&mut self) -> &mut H {
        &mut self.hw
    }

    /// Gives the hardware handle back.
    pub fn into_hw(self) -> H {
        self.hw
    }
}

#[cfg(target_arch = "aarch64")]
pub use self::aarch64::{Aarch64Tlb, read_id_aa64isar0_el1, read_midr_el1};

#[cfg(target_arch = "aarch64")]
mod aarch64 {
    //! The real instructions. Range ops need FEAT_TLBIRANGE, which LLVM's assembler only accepts
    //! with the `tlb-rmi` extension enabled; `.arch_extension tlb-rmi` inside the template does
    //! that for one `asm!` block without changing the crate's target features.

    use super::super::op::TlbiOp;
    use super::TlbHardware;
    use core::arch::asm;

    /// [`TlbHardware`] on the executing CPU (EL1). Zero-sized.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Aarch64Tlb;

    /// Reads `ID_AA64ISAR0_EL1` (for [`super::super::TlbFeatures::from_id_registers`]). Must run at
    /// EL1 or above; at EL0 the read traps.
    #[inline]
    pub fn read_id_aa64isar0_el1() -> u64 {
        let v: u64;
        // SAFETY: reading an ID register has no side effect and touches no memory.
        unsafe {
            asm!("mrs {v}, id_aa64isar0_el1", v = out(reg) v, options(nomem, nostack, preserves_flags))
        };
        v
    }

    /// Reads `MIDR_EL1` (for [`super::repeat_tlbi_needed`]). Must run at EL1 or above.
    #[inline]
    pub fn read_midr_el1() -> u64 {
        let v: u64;
        // SAFETY: reading an ID register has no side effect and touches no memory.
        unsafe { asm!("mrs {v}, midr_el1", v = out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }

    macro_rules! tlbi {
        ($mnemonic:literal, $x:expr) => {
            // SAFETY: TLB maintenance only removes cached translations; it cannot make any
            // memory access unsound (the next access walks the tables again). No `nomem`: the
            // compiler must not move memory accesses across it.
            unsafe {
                asm!(concat!("tlbi ", $mnemonic, ", {x}"), x = in(reg) $x, options(nostack, preserves_flags))
            }
        };
    }

    macro_rules! rtlbi {
        ($mnemonic:literal, $x:expr) => {
            // SAFETY: as for `tlbi!`; `.arch_extension tlb-rmi` only lets the assembler accept
            // the FEAT_TLBIRANGE mnemonic, and the planner emits range ops only when every CPU
            // has FEAT_TLBIRANGE (else they are UNDEFINED and trap, which is not unsound).
            unsafe {
                asm!(
                    ".arch_extension tlb-rmi",
                    concat!("tlbi ", $mnemonic, ", {x}"),
                    x = in(reg) $x,
                    options(nostack, preserves_flags)
                )
            }
        };
    }

    impl TlbHardware for Aarch64Tlb {
        #[inline]
        fn dsb_ishst(&mut self) {
            // SAFETY: a barrier has no effect on memory contents.
            unsafe { asm!("dsb ishst", options(nostack, preserves_flags)) }
        }

        #[inline]
        fn dsb_ish(&mut self) {
            // SAFETY: a barrier has no effect on memory contents.
            unsafe { asm!("dsb ish", options(nostack, preserves_flags)) }
        }

        #[inline]
        fn dsb_nshst(&mut self) {
            // SAFETY: a barrier has no effect on memory contents.
            unsafe { asm!("dsb nshst", options(nostack, preserves_flags)) }
        }

        #[inline]
        fn dsb_nsh(&mut self) {
            // SAFETY: a barrier has no effect on memory contents.
            unsafe { asm!("dsb nsh", options(nostack, preserves_flags)) }
        }

        #[inline]
        fn isb(&mut self) {
            // SAFETY: a context synchronisation has no effect on memory contents.
            unsafe { asm!("isb", options(nostack, preserves_flags)) }
        }

        #[inline]
        fn tlbi(&mut self, op: TlbiOp, x: u64) {
            match op {
                TlbiOp::Vae1is => tlbi!("vae1is", x),
                TlbiOp::Vale1is => tlbi!("vale1is", x),
                TlbiOp::Vaae1is => tlbi!("vaae1is", x),
                TlbiOp::Vaale1is => tlbi!("vaale1is", x),
                TlbiOp::Aside1is => tlbi!("aside1is", x),
                TlbiOp::Vmalle1is => {
                    // SAFETY: as for `tlbi!`.
                    unsafe { asm!("tlbi vmalle1is", options(nostack, preserves_flags)) }
                }
                TlbiOp::Rvae1is => rtlbi!("rvae1is", x),
                TlbiOp::Rvale1is => rtlbi!("rvale1is", x),
                TlbiOp::Rvaae1is => rtlbi!("rvaae1is", x),
                TlbiOp::Rvaale1is => rtlbi!("rvaale1is", x),
                TlbiOp::Vae1 => tlbi!("vae1", x),
                TlbiOp::Vale1 => tlbi!("vale1", x),
                TlbiOp::Vaae1 => tlbi!("vaae1", x),
                TlbiOp::Vaale1 => tlbi!("vaale1", x),
                TlbiOp::Aside1 => tlbi!("aside1", x),
                TlbiOp::Vmalle1 => {
                    // SAFETY: as for `tlbi!`.
                    unsafe { asm!("tlbi vmalle1", options(nostack, preserves_flags)) }
                }
                TlbiOp::Rvae1 => rtlbi!("rvae1", x),
                TlbiOp::Rvale1 => rtlbi!("rvale1", x),
                TlbiOp::Rvaae1 => rtlbi!("rvaae1", x),
                TlbiOp::Rvaale1 => rtlbi!("rvaale1", x),
            }
        }
    }

    impl Aarch64Tlb {
        /// The TLB features of the executing CPU, from its ID registers. On a multi-CPU system
        /// combine every CPU's value with [`super::super::TlbFeatures::combine`].
        pub fn detect_features() -> super::super::TlbFeatures {
            super::super::TlbFeatures::from_id_registers(read_id_aa64isar0_el1(), read_midr_el1())
        }
    }
}
