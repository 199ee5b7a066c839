//! What this CPU can do, read once from the ID registers, for the boot report and for mm.
//!
//! aarch64-cpu models most ID fields, but not ID_AA64ISAR0_EL1.TLB (range TLBI), and its TGran4
//! enum lacks the value 0b0001 (4 KiB granule with LPA2) that QEMU `-cpu max` reports, so the
//! fields are decoded here from the raw register values, which also makes the decoding visible.
use aarch64_cpu::registers::{
    ID_AA64ISAR0_EL1, ID_AA64MMFR0_EL1, ID_AA64MMFR1_EL1, ID_AA64MMFR2_EL1, MIDR_EL1, MPIDR_EL1, Readable,
};
use core::fmt;

/// Memory-management features of the boot CPU.
#[derive(Clone, Copy, Debug)]
pub struct CpuFeatures {
    /// MIDR_EL1.
    pub midr: u64,
    /// MPIDR_EL1.
    pub mpidr: u64,
    /// ID_AA64ISAR0_EL1.TLB: 0 none, 1 TLBI outer-shareable, 2 outer-shareable and range.
    pub tlb: u8,
    /// ASID width in bits (8 or 16).
    pub asid_bits: u8,
    /// ID_AA64MMFR1_EL1.PAN: 0 none, 1 PAN, 2 PAN + AT S1E1xP, 3 + EPAN.
    pub pan: u8,
    /// FEAT_TTL (TTL hints in TLBI operands).
    pub ttl: bool,
    /// Physical address size in bits.
    pub pa_bits: u8,
    /// 4 KiB granule: supported, and whether with LPA2 (52-bit).
    pub gran4: Granule,
    /// 16 KiB granule.
    pub gran16: Granule,
    /// 64 KiB granule.
    pub gran64: Granule,
}

/// Support for one translation granule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granule {
    /// Not implemented.
    No,
    /// Implemented, 48-bit addresses.
    Yes,
    /// Implemented, with 52-bit addresses (LPA2 for 4 and 16 KiB, LPA for 64 KiB).
    Yes52,
}

impl CpuFeatures {
    /// Reads the ID registers of the running CPU.
    pub fn read() -> Self {
        Self::decode(
            MIDR_EL1.get(),
            MPIDR_EL1.get(),
            ID_AA64ISAR0_EL1.get(),
            ID_AA64MMFR0_EL1.get(),
            ID_AA64MMFR1_EL1.get(),
            ID_AA64MMFR2_EL1.get(),
        )
    }

    /// Decodes raw ID register values (Arm ARM D19 field layouts).
    pub fn decode(midr: u64, mpidr: u64, isar0: u64, mmfr0: u64, mmfr1: u64, mmfr2: u64) -> Self {
        let field = |reg: u64, shift: u32| ((reg >> shift) & 0xf) as u8;
        let pa_bits = crate::arch::aarch64::translation::pa_size_bits(mmfr0 & 0xf) as u8;
        Self {
            midr,
            mpidr,
            tlb: field(isar0, 56),
            asid_bits: if field(mmfr0, 4) == 2 { 16 } else { 8 },
            pan: field(mmfr1, 20),
            ttl: field(mmfr2, 48) != 0,
            pa_bits,
            gran4: match field(mmfr0, 28) {
                0 => Granule::Yes,
                1 => Granule::Yes52,
                _ => Granule::No,
            },
            gran16: match field(mmfr0, 20) {
                0 => Granule::No,
                1 => Granule::Yes,
                _ => Granule::Yes52,
            },
            gran64: match field(mmfr0, 24) {
                0 => Granule::Yes,
                _ => Granule::No,
            },
        }
    }

    /// FEAT_TLBIRANGE: the range forms of TLBI.
    pub fn has_range_tlbi(&self) -> bool {
        self.tlb >= 2
    }

    /// The core's name, from MIDR_EL1 (implementer and part number).
    pub fn core_name(&self) -> &'static str {
        let implementer = (self.midr >> 24) & 0xff;
        let part = (self.midr >> 4) & 0xfff;
        match (implementer, part) {
            (0x41, 0xd03) => "Cortex-A53",
            (0x41, 0xd04) => "Cortex-A35",
            (0x41, 0xd05) => "Cortex-A55",
            (0x41, 0xd07) => "Cortex-A57",
            (0x41, 0xd08) => "Cortex-A72",
            (0x41, 0xd09) => "Cortex-A73",
            (0x41, 0xd0a) => "Cortex-A75",
            (0x41, 0xd0b) => "Cortex-A76",
            (0x41, 0xd0c) => "Neoverse-N1",
            (0x41, 0xd0d) => "Cortex-A77",
            (0x41, 0xd41) => "Cortex-A78",
            (0x41, 0xd46) => "Cortex-A510",
            (0x41, 0xd47) => "Cortex-A710",
            (0x41, 0xd49) => "Neoverse-N2",
            (0x41, 0xd4f) => "Neoverse-V2",
            (0x61, _) => "Apple",
            (0x00, 0x051) => "QEMU max",
            _ => "unknown core",
        }
    }
}

impl fmt::Display for Granule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Granule::No => "no",
            Granule::Yes => "yes",
            Granule::Yes52 => "yes+52-bit",
        })
    }
}

/// Turns on Privileged Access Never where the CPU has it: the kernel then faults on any access to
/// user memory it did not explicitly ask for (SCTLR_EL1.SPAN = 0 keeps PAN set on every exception
/// entry).
pub fn enable_pan(features: &CpuFeatures) -> bool {
    if features.pan == 0 {
        return false;
    }
    use aarch64_cpu::registers::{SCTLR_EL1, Writeable};
    // SPAN is bit 23; aarch64-cpu does not model it, so clear it through the raw value.
    SCTLR_EL1.set(SCTLR_EL1.get() & !(1 << 23));
    // SAFETY: `msr pan, #1` (encoded, as the baseline assembler target lacks FEAT_PAN) only
    // restricts EL1's access to EL0 pages; the kernel has none yet.
    unsafe { core::arch::asm!(".inst 0xd500419f", options(nomem, nostack)) };
    true
}

/// Whether the CPU has FEAT_BTI (ID_AA64PFR1_EL1.BT).
pub fn has_bti() -> bool {
    let pfr1: u64;
    // SAFETY: reading an ID register has no side effect.
    unsafe { core::arch::asm!("mrs {}, id_aa64pfr1_el1", out(reg) pfr1, options(nomem, nostack)) };
    pfr1 & 0xf >= 1
}

/// The `AT_HWCAP` bits (Linux `arch/arm64/include/uapi/asm/hwcap.h`) for what this CPU has and
/// EL0 may use: FP, ASIMD, and the ISAR0 crypto/atomics/CRC extensions.
pub fn hwcaps() -> u64 {
    use aarch64_cpu::registers::ID_AA64PFR0_EL1;
    let pfr0 = ID_AA64PFR0_EL1.get();
    let isar0 = ID_AA64ISAR0_EL1.get();
    let field = |reg: u64, shift: u32| (reg >> shift) & 0xf;
    let mut caps = 0;
    if field(pfr0, 16) != 0xf {
        caps |= 1 << 0; // HWCAP_FP
    }
    if field(pfr0, 20) != 0xf {
        caps |= 1 << 1; // HWCAP_ASIMD
    }
    if field(isar0, 4) >= 1 {
        caps |= 1 << 3; // HWCAP_AES
    }
    if field(isar0, 4) >= 2 {
        caps |= 1 << 4; // HWCAP_PMULL
    }
    if field(isar0, 8) >= 1 {
        caps |= 1 << 5; // HWCAP_SHA1
    }
    if field(isar0, 12) >= 1 {
        caps |= 1 << 6; // HWCAP_SHA2
    }
    if field(isar0, 16) >= 1 {
        caps |= 1 << 7; // HWCAP_CRC32
    }
    if field(isar0, 20) >= 2 {
        caps |= 1 << 8; // HWCAP_ATOMICS
    }
    if super::pauth::has_address_auth() {
        caps |= 1 << 30; // HWCAP_PACA
    }
    if super::pauth::has_generic_auth() {
        caps |= 1 << 31; // HWCAP_PACG
    }
    caps
}

/// The `AT_HWCAP2` bits: BTI (`HWCAP2_BTI`), MTE with tag storage (`HWCAP2_MTE`, FEAT_MTE2)
/// and its asymmetric mode (`HWCAP2_MTE3`).
pub fn hwcaps2() -> u64 {
    use linux_abi::auxv::{HWCAP2_BTI, HWCAP2_MTE, HWCAP2_MTE3};
    let mut caps = 0;
    if has_bti() {
        caps |= HWCAP2_BTI;
    }
    if super::mte::supported() {
        caps |= HWCAP2_MTE;
        if super::mte::has_mte3() {
            caps |= HWCAP2_MTE3;
        }
    }
    caps
}

/// Makes EL0 able to do what Linux lets it do: read the virtual counter (CNTKCTL_EL1.EL0VCTEN),
/// clean and invalidate caches by VA and read CTR_EL0 (SCTLR_EL1.UCI, UCT; a JIT publishes its
/// code this way), use DC ZVA (DZE), and WFI/WFE without trapping (nTWI, nTWE). Per CPU.
pub fn init_el0_controls() {
    use aarch64_cpu::registers::{CNTKCTL_EL1, ReadWriteable, Readable, SCTLR_EL1, Writeable};
    CNTKCTL_EL1.modify(CNTKCTL_EL1::EL0VCTEN::SET);
    SCTLR_EL1.modify(
        SCTLR_EL1::UCI::DontTrap
            + SCTLR_EL1::UCT::DontTrap
            + SCTLR_EL1::DZE::DontTrap
            + SCTLR_EL1::NTWI::DontTrap
            + SCTLR_EL1::NTWE::DontTrap,
    );
    if has_bti() {
        // SCTLR_EL1.BT0 (bit 35), as Linux's `bti_enable`: in EL0's guarded pages PACIASP and
        // PACIBSP are landing pads for calls only, so a jump (BR through another register than
        // x16/x17) onto a function's PACIASP is caught too.
        SCTLR_EL1.set(SCTLR_EL1.get() | 1 << 35);
    }
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}
