//! The auxiliary vector's keys (`linux/auxvec.h`, arm64 `asm/auxvec.h`) and arm64's hardware
//! capability bits (`asm/hwcap.h`) that the kernel reports in `AT_HWCAP`/`AT_HWCAP2`.

/// End of the vector.
pub const AT_NULL: u64 = 0;
/// Entry to ignore.
pub const AT_IGNORE: u64 = 1;
/// The program's descriptor (binfmt_misc).
pub const AT_EXECFD: u64 = 2;
/// Address of the program headers.
pub const AT_PHDR: u64 = 3;
/// Size of one program header.
pub const AT_PHENT: u64 = 4;
/// Number of program headers.
pub const AT_PHNUM: u64 = 5;
/// Page size.
pub const AT_PAGESZ: u64 = 6;
/// Base address of the interpreter.
pub const AT_BASE: u64 = 7;
/// Flags (0).
pub const AT_FLAGS: u64 = 8;
/// The program's entry point.
pub const AT_ENTRY: u64 = 9;
/// The program is not ELF.
pub const AT_NOTELF: u64 = 10;
/// Real user id.
pub const AT_UID: u64 = 11;
/// Effective user id.
pub const AT_EUID: u64 = 12;
/// Real group id.
pub const AT_GID: u64 = 13;
/// Effective group id.
pub const AT_EGID: u64 = 14;
/// Address of the platform string.
pub const AT_PLATFORM: u64 = 15;
/// Hardware capabilities.
pub const AT_HWCAP: u64 = 16;
/// Clock ticks per second (`times`).
pub const AT_CLKTCK: u64 = 17;
/// Secure mode (setuid).
pub const AT_SECURE: u64 = 23;
/// Address of the base platform string.
pub const AT_BASE_PLATFORM: u64 = 24;
/// Address of 16 random bytes.
pub const AT_RANDOM: u64 = 25;
/// More hardware capabilities.
pub const AT_HWCAP2: u64 = 26;
/// Speculation control (Linux 6.x).
pub const AT_RSEQ_FEATURE_SIZE: u64 = 27;
/// rseq area alignment (Linux 6.3).
pub const AT_RSEQ_ALIGN: u64 = 28;
/// Address of the executable's path.
pub const AT_EXECFN: u64 = 31;
/// Address of the vDSO's ELF header.
pub const AT_SYSINFO_EHDR: u64 = 33;
/// The smallest signal stack the kernel's frames need.
pub const AT_MINSIGSTKSZ: u64 = 51;

/// `AT_HWCAP`: floating point.
pub const HWCAP_FP: u64 = 1 << 0;
/// `AT_HWCAP`: Advanced SIMD.
pub const HWCAP_ASIMD: u64 = 1 << 1;
/// `AT_HWCAP`: the generic timer is readable from EL0.
pub const HWCAP_EVTSTRM: u64 = 1 << 2;
/// `AT_HWCAP`: AES instructions.
pub const HWCAP_AES: u64 = 1 << 3;
/// `AT_HWCAP`: PMULL.
pub const HWCAP_PMULL: u64 = 1 << 4;
/// `AT_HWCAP`: SHA-1.
pub const HWCAP_SHA1: u64 = 1 << 5;
/// `AT_HWCAP`: SHA-256.
pub const HWCAP_SHA2: u64 = 1 << 6;
/// `AT_HWCAP`: CRC32.
pub const HWCAP_CRC32: u64 = 1 << 7;
/// `AT_HWCAP`: LSE atomics.
pub const HWCAP_ATOMICS: u64 = 1 << 8;
/// `AT_HWCAP`: half-precision floating point.
pub const HWCAP_FPHP: u64 = 1 << 9;
/// `AT_HWCAP`: half-precision SIMD.
pub const HWCAP_ASIMDHP: u64 = 1 << 10;
/// `AT_HWCAP`: MRS emulation of the ID registers.
pub const HWCAP_CPUID: u64 = 1 << 11;
/// `AT_HWCAP`: rounding doubling multiply.
pub const HWCAP_ASIMDRDM: u64 = 1 << 12;
/// `AT_HWCAP`: JavaScript conversion.
pub const HWCAP_JSCVT: u64 = 1 << 13;
/// `AT_HWCAP`: complex numbers.
pub const HWCAP_FCMA: u64 = 1 << 14;
/// `AT_HWCAP`: LDAPR.
pub const HWCAP_LRCPC: u64 = 1 << 15;
/// `AT_HWCAP`: DC CVAP.
pub const HWCAP_DCPOP: u64 = 1 << 16;
/// `AT_HWCAP`: SHA-3.
pub const HWCAP_SHA3: u64 = 1 << 17;
/// `AT_HWCAP`: SM3.
pub const HWCAP_SM3: u64 = 1 << 18;
/// `AT_HWCAP`: SM4.
pub const HWCAP_SM4: u64 = 1 << 19;
/// `AT_HWCAP`: dot product.
pub const HWCAP_ASIMDDP: u64 = 1 << 20;
/// `AT_HWCAP`: SHA-512.
pub const HWCAP_SHA512: u64 = 1 << 21;
/// `AT_HWCAP`: SVE.
pub const HWCAP_SVE: u64 = 1 << 22;
/// `AT_HWCAP`: FMLAL.
pub const HWCAP_ASIMDFHM: u64 = 1 << 23;
/// `AT_HWCAP`: data independent timing.
pub const HWCAP_DIT: u64 = 1 << 24;
/// `AT_HWCAP`: unaligned atomics.
pub const HWCAP_USCAT: u64 = 1 << 25;
/// `AT_HWCAP`: LDAPUR.
pub const HWCAP_ILRCPC: u64 = 1 << 26;
/// `AT_HWCAP`: flag manipulation.
pub const HWCAP_FLAGM: u64 = 1 << 27;
/// `AT_HWCAP`: speculative store bypass safe.
pub const HWCAP_SSBS: u64 = 1 << 28;
/// `AT_HWCAP`: speculation barrier.
pub const HWCAP_SB: u64 = 1 << 29;
/// `AT_HWCAP`: pointer authentication, address keys.
pub const HWCAP_PACA: u64 = 1 << 30;
/// `AT_HWCAP`: pointer authentication, generic key.
pub const HWCAP_PACG: u64 = 1 << 31;

/// `AT_HWCAP2`: DC CVADP.
pub const HWCAP2_DCPODP: u64 = 1 << 0;
/// `AT_HWCAP2`: SVE2.
pub const HWCAP2_SVE2: u64 = 1 << 1;
/// `AT_HWCAP2`: flag manipulation 2.
pub const HWCAP2_FLAGM2: u64 = 1 << 7;
/// `AT_HWCAP2`: FRINT.
pub const HWCAP2_FRINT: u64 = 1 << 8;
/// `AT_HWCAP2`: random numbers (RNDR).
pub const HWCAP2_RNG: u64 = 1 << 16;
/// `AT_HWCAP2`: branch target identification.
pub const HWCAP2_BTI: u64 = 1 << 17;
/// `AT_HWCAP2`: memory tagging.
pub const HWCAP2_MTE: u64 = 1 << 18;
/// `AT_HWCAP2`: MTE asymmetric tag checking (FEAT_MTE3).
pub const HWCAP2_MTE3: u64 = 1 << 22;
