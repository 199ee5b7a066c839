//! The translation regime the boot CPU turns on, in one place: `TCR_EL1` for the build's
//! granule, whether the CPU offers that granule at all, and the TTBR values naming the tables.
//!
//! Why here and built so: the granule is a build choice (`granule-16k`, `granule-64k`; 4 KiB
//! otherwise), and everything about it comes from the mm crate's [`Format::BUILD`], so the
//! `TG0`/`TG1` encodings, the VA size, the table levels and the TTBR address layout ([`ttbr`])
//! cannot disagree with the tables mm builds. The functions are plain arithmetic on the ID register's value, because
//! [`crate::boot::early_map`] calls them with the MMU off, at the Image's physical address (no panic
//! path, no formatting: `kimage check`'s `early-code` check reads the generated code). Secondary
//! CPUs copy the boot CPU's `TCR_EL1` (`smp`), so this is the only place it is made.
//!
//! The CPU's offer is read from `ID_AA64MMFR0_EL1` (Arm ARM D19.2): `TGran4 [31:28]` (0b1111:
//! not implemented), `TGran16 [23:20]` (0b0000: not implemented) and `TGran64 [27:24]` (0b1111:
//! not implemented). A CPU without the granule would treat every walk as a fault (or worse: the
//! `TG` value is then IMPLEMENTATION DEFINED), so the kernel refuses to turn the MMU on and says
//! why; QEMU's cortex-a53 and cortex-a72, for example, have no 16 KiB granule.
use mm::granule::{Format, Granule};

/// The build's granule.
pub const GRANULE: Granule = Format::BUILD.granule;

/// Bits of virtual address of each half without FEAT_LPA2 (48); the `lpa2` build widens the
/// kernel half ([`LPA2_TCR`]). [`va_bits`] reads what a `TCR_EL1` value says.
const VA_BITS_48: u64 = 48;

/// The `TCR_EL1` fields that do not depend on the CPU: `T0SZ = T1SZ = 64 − 48`, walks
/// inner-shareable write-back cacheable in both halves, the build's `TG0` `[15:14]` and `TG1`
/// `[31:30]` (two different encodings of the same granule: [`Granule::tcr_tg0`],
/// [`Granule::tcr_tg1`]), `TBI0` (bit 37: user pointers may carry a tag in their top byte,
/// which MTE checks and the tagged-address ABI passes to system calls; the kernel half has no
/// `TBI1`), and what the `lpa2` build changes ([`LPA2_TCR`]).
const TCR_EL1_BASE: u64 = ((64 - VA_BITS_48) // T0SZ
    | (0b01 << 8) // IRGN0 write-back write-allocate
    | (0b01 << 10) // ORGN0
    | (0b11 << 12) // SH0 inner shareable
    | (GRANULE.tcr_tg0() << 14) // TG0
    | ((64 - VA_BITS_48) << 16) // T1SZ
    | (0b01 << 24) // IRGN1
    | (0b01 << 26) // ORGN1
    | (0b11 << 28) // SH1
    | (GRANULE.tcr_tg1() << 30) // TG1
    | (1 << 37)) // TBI0: the top byte of user addresses is ignored, as Linux's arm64 ABI has it
    ^ LPA2_TCR;

/// What FEAT_LPA2 changes in TCR_EL1 (`mm::paging::lpa2`): `DS`, a 52-bit kernel half (T1SZ 12
/// instead of 16) and the user half's T0SZ (16 with 4 KiB pages, 12 with 16 KiB). Applied with
/// `^` to the 48-bit value, whose T0SZ and T1SZ are 16.
#[cfg(feature = "lpa2")]
const LPA2_TCR: u64 = {
    use mm::paging::lpa2;
    lpa2::TCR_DS | ((16 ^ lpa2::T1SZ_52) << 16) | (16 ^ lpa2::T0SZ)
};
/// Nothing without the `lpa2` feature.
#[cfg(not(feature = "lpa2"))]
const LPA2_TCR: u64 = 0;

/// The largest `TCR_EL1.IPS` programmed (the CPU's PARange, capped): 48 bits (0b101), 52 bits
/// (0b110) in the `lpa2` build, whose descriptors can hold them.
const TCR_IPS_MAX: u64 = if cfg!(feature = "lpa2") { 0b110 } else { 0b101 };

/// `TCR_EL1` for a CPU whose `ID_AA64MMFR0_EL1` reads `mmfr0`: [`TCR_EL1_BASE`], IPS
/// `[34:32]` = the CPU's PARange capped at [`TCR_IPS_MAX`], and AS (bit 36, 16-bit ASIDs) where
/// the CPU has them.
pub const fn tcr_el1(mmfr0: u64) -> u64 {
    let parange = mmfr0 & 0xf;
    let ips = if parange > TCR_IPS_MAX { TCR_IPS_MAX } else { parange };
    let asid16 = (mmfr0 >> 4) & 0xf == 2;
    TCR_EL1_BASE | (ips << 32) | if asid16 { 1 << 36 } else { 0 }
}

/// The virtual-address bits of the kernel half (TTBR1) and of the user half (TTBR0) under
/// `tcr`: `64 − T1SZ`, `64 − T0SZ`.
pub const fn va_bits(tcr: u64) -> (u32, u32) {
    ((64 - ((tcr >> 16) & 0x3f)) as u32, (64 - (tcr & 0x3f)) as u32)
}

/// Physical-address bits the walks may output under `tcr` (its IPS field, `[34:32]`).
pub const fn ips_bits(tcr: u64) -> u32 {
    pa_size_bits((tcr >> 32) & 0b111)
}

/// The bits of a physical-address size encoding: `TCR_EL1.IPS` and `ID_AA64MMFR0_EL1.PARange`
/// share it (Arm ARM D19; 0b0110 is 52 bits, and later values are read as the largest).
pub const fn pa_size_bits(encoding: u64) -> u32 {
    match encoding {
        0 => 32,
        1 => 36,
        2 => 40,
        3 => 42,
        4 => 44,
        5 => 48,
        _ => 52,
    }
}

/// `TTBRn_EL1` naming the table at physical address `table`, with `asid` in bits `[63:48]` (0
/// for TTBR1 and the boot tables): the build's BADDR layout ([`Format::ttbr_baddr`]; with a
/// 52-bit OA `BADDR[51:48]` sits in bits `[5:2]`). Every TTBR0/TTBR1 value the kernel makes comes
/// from here; plain arithmetic, callable with the MMU off.
#[inline(always)]
pub const fn ttbr(table: u64, asid: u16) -> u64 {
    Format::BUILD.ttbr_baddr(table) | (asid as u64) << 48
}

/// The physical address of the table a `TTBRn_EL1` value names ([`ttbr`] undone).
#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the test image reads the live TTBRs back with it")
)]
#[inline(always)]
pub const fn ttbr_table(ttbr: u64) -> u64 {
    Format::BUILD.ttbr_table(ttbr)
}

/// The build's page size in KiB, for messages (4, 16 or 64).
pub const PAGE_KIB: u64 = GRANULE.size() >> 10;

/// Whether the CPU whose `ID_AA64MMFR0_EL1` reads `mmfr0` offers the build's granule for stage 1;
/// if not, the sentence the boot prints (a `'static` byte string, printable with the MMU off).
pub const fn granule_supported(mmfr0: u64) -> Result<(), &'static [u8]> {
    const fn field(mmfr0: u64, shift: u32) -> u64 {
        (mmfr0 >> shift) & 0xf
    }
    match GRANULE {
        Granule::K4 if field(mmfr0, 28) == 0b1111 => {
            Err(b"kernel: this CPU has no 4 KiB translation granule \
(ID_AA64MMFR0_EL1.TGran4 = 0b1111), and this kernel was built for 4 KiB pages; build it with \
--granule 16k or 64k\r\n")
        }
        Granule::K16 if field(mmfr0, 20) == 0b0000 => {
            Err(b"kernel: this CPU has no 16 KiB translation granule \
(ID_AA64MMFR0_EL1.TGran16 = 0b0000), and this kernel was built for 16 KiB pages; build it with \
--granule 4k or 64k\r\n")
        }
        Granule::K64 if field(mmfr0, 24) == 0b1111 => {
            Err(b"kernel: this CPU has no 64 KiB translation granule \
(ID_AA64MMFR0_EL1.TGran64 = 0b1111), and this kernel was built for 64 KiB pages; build it with \
--granule 4k or 16k\r\n")
        }
        _ => Ok(()),
    }
}

/// Reads `ID_AA64MMFR0_EL1` (an ID register: no side effect, readable at EL1 with the MMU off).
#[inline(always)]
pub fn read_mmfr0() -> u64 {
    let mmfr0: u64;
    // SAFETY: reading an ID register has no side effect and touches no memory.
    unsafe {
        core::arch::asm!("mrs {}, id_aa64mmfr0_el1", out(reg) mmfr0, options(nomem, nostack, preserves_flags))
    };
    mmfr0
}
