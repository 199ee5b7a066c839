//! Pointer authentication for user space (FEAT_PAuth), as Linux's `arch/arm64/kernel/pointer_auth.c`
//! gives it: each thread has its own five 128-bit keys (instruction A and B, data A and B,
//! generic), random at `execve`, copied by `fork` and `clone`, loaded into the key registers when
//! the thread is switched in; and its own set of enabled address keys (SCTLR_EL1.EnIA, EnIB,
//! EnDA, EnDB, all four after `execve`; `prctl(PR_PAC_SET_ENABLED_KEYS)` changes them).
//!
//! With a key disabled, its `PAC*`/`AUT*` instructions are no-ops, as on a CPU without the
//! feature, which is what a program built with `-mbranch-protection=standard` runs as. With
//! keys enabled, `PACIASP` signs the return address with the thread's APIA key and `AUTIASP`
//! checks it: a corrupted return address either traps at the `AUT` (FEAT_FPAC: the exception
//! class 0x1C, `SIGILL`/`ILL_ILLOPN` from `trap`) or becomes a non-canonical address whose use
//! faults (`SIGSEGV`), as on Linux.
//!
//! The kernel itself does not sign its own return addresses: Rust's branch protection flag is
//! unstable, and the keys the kernel would need could not then be switched per thread. The keys
//! are the CPU's (the same registers serve EL1 and EL0), so the kernel writes the next thread's
//! keys before returning to EL0; nothing at EL1 uses them meanwhile.
use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};

/// `PR_PAC_APIAKEY` and friends: the bit of each key in `prctl`'s masks.
pub mod key {
    /// Instruction key A.
    pub const IA: u8 = 1 << 0;
    /// Instruction key B.
    pub const IB: u8 = 1 << 1;
    /// Data key A.
    pub const DA: u8 = 1 << 2;
    /// Data key B.
    pub const DB: u8 = 1 << 3;
    /// The generic key.
    pub const GA: u8 = 1 << 4;
    /// The four address keys (the ones that can be enabled and disabled).
    pub const ADDRESS: u8 = IA | IB | DA | DB;
}

/// What the CPU has, read once at boot: bit 0 address authentication, bit 1 generic, bit 2 FPAC;
/// 0x80 until read.
static SUPPORT: AtomicU8 = AtomicU8::new(0x80);

/// Reads ID_AA64ISAR1_EL1 (APA, API, GPA, GPI) and ID_AA64ISAR2_EL1 (APA3, GPA3).
fn read_support() -> u8 {
    let isar1: u64;
    let isar2: u64;
    // SAFETY: reading ID registers has no side effect; ID_AA64ISAR2_EL1 (s3_0_c0_c6_2) reads as 0
    // on CPUs that predate it (it is in the ID space, RAZ when unallocated).
    unsafe {
        asm!("mrs {}, id_aa64isar1_el1", out(reg) isar1, options(nomem, nostack));
        asm!("mrs {}, s3_0_c0_c6_2", out(reg) isar2, options(nomem, nostack));
    }
    let f = |reg: u64, shift: u32| (reg >> shift) & 0xf;
    let (apa, api, gpa, gpi) = (f(isar1, 4), f(isar1, 8), f(isar1, 24), f(isar1, 28));
    let (gpa3, apa3) = (f(isar2, 8), f(isar2, 12));
    let address = apa != 0 || api != 0 || apa3 != 0;
    let generic = gpa != 0 || gpi != 0 || gpa3 != 0;
    // FEAT_FPAC: the address field's value 0b0100 or more.
    let fpac = apa >= 4 || api >= 4 || apa3 >= 4;
    u8::from(address) | u8::from(generic) << 1 | u8::from(fpac) << 2
}

fn support() -> u8 {
    let s = SUPPORT.load(Ordering::Relaxed);
    if s & 0x80 == 0 {
        return s;
    }
    let s = read_support();
    SUPPORT.store(s, Ordering::Relaxed);
    s
}

/// `arm64.nopauth` on the command line (Linux's id-register override of the same name): the
/// kernel treats the CPU as one without pointer authentication, so processes get no keys, no
/// `HWCAP_PACA`/`HWCAP_PACG`, and their `PAC*`/`AUT*` instructions stay no-ops (SCTLR_EL1's EnIA,
/// EnIB, EnDA and EnDB are never set). What the feature costs per `exec` and per switch is
/// measured with and without it (`scripts/bench`). Called once at boot, before the first process.
pub fn configure(bootargs: &str) {
    if bootargs.split_ascii_whitespace().take_while(|w| *w != "--").any(|w| w == "arm64.nopauth") {
        SUPPORT.store(0, Ordering::Relaxed);
    }
}

/// Whether the CPU has address authentication (`HWCAP_PACA`).
pub fn has_address_auth() -> bool {
    support() & 1 != 0
}

/// Whether the CPU has generic authentication (`HWCAP_PACG`).
pub fn has_generic_auth() -> bool {
    support() & 2 != 0
}

/// One thread's keys and its enabled address keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    /// The five keys, low then high word: IA, IB, DA, DB, GA.
    words: [u64; 10],
    /// The enabled address keys (`key::IA`...).
    enabled: u8,
}

impl Keys {
    /// Keys from ten random words, every address key enabled (a thread after `execve`).
    pub fn new(words: [u64; 10]) -> Self {
        Self { words, enabled: key::ADDRESS }
    }

    /// Replaces the keys named in `which` (`key::IA`...) with the random `words`' (its
    /// `PR_PAC_RESET_KEYS`).
    pub fn reset(&mut self, which: u8, words: [u64; 10]) {
        for k in 0..5 {
            if which & (1 << k) != 0 {
                self.words[2 * k] = words[2 * k];
                self.words[2 * k + 1] = words[2 * k + 1];
            }
        }
    }

    /// The enabled address keys.
    pub fn enabled(&self) -> u8 {
        self.enabled
    }

    /// Enables the keys of `keys` that are in `enabled` and disables the other keys of `keys`.
    pub fn set_enabled(&mut self, keys: u8, enabled: u8) {
        self.enabled = (self.enabled & !keys) | (enabled & keys);
    }

    /// Loads the keys into the key registers and the enabled set into SCTLR_EL1, for the return
    /// to EL0 (nothing on a CPU without the feature).
    pub fn install(&self) {
        if !has_address_auth() && !has_generic_auth() {
            return;
        }
        let w = &self.words;
        // SAFETY: the key registers exist (the feature is present); the kernel signs nothing
        // with them, so changing them affects only the EL0 code that runs next.
        unsafe {
            if has_address_auth() {
                asm!(
                    "msr s3_0_c2_c1_0, {0}", "msr s3_0_c2_c1_1, {1}",
                    "msr s3_0_c2_c1_2, {2}", "msr s3_0_c2_c1_3, {3}",
                    "msr s3_0_c2_c2_0, {4}", "msr s3_0_c2_c2_1, {5}",
                    "msr s3_0_c2_c2_2, {6}", "msr s3_0_c2_c2_3, {7}",
                    in(reg) w[0], in(reg) w[1], in(reg) w[2], in(reg) w[3],
                    in(reg) w[4], in(reg) w[5], in(reg) w[6], in(reg) w[7],
                    options(nomem, nostack)
                );
            }
            if has_generic_auth() {
                asm!("msr s3_0_c2_c3_0, {0}", "msr s3_0_c2_c3_1, {1}", in(reg) w[8], in(reg) w[9],
                     options(nomem, nostack));
            }
        }
        if has_address_auth() {
            set_sctlr_keys(self.enabled);
        }
    }
}

/// SCTLR_EL1's EnIA (31), EnIB (30), EnDA (27), EnDB (13) for `enabled`, written only when they
/// change (an SCTLR write is a context-synchronising change the CPU may take time over).
fn set_sctlr_keys(enabled: u8) {
    const BITS: [(u8, u64); 4] =
        [(key::IA, 1 << 31), (key::IB, 1 << 30), (key::DA, 1 << 27), (key::DB, 1 << 13)];
    let mask: u64 = BITS.iter().map(|b| b.1).sum();
    let want: u64 = BITS.iter().filter(|b| enabled & b.0 != 0).map(|b| b.1).sum();
    let sctlr: u64;
    // SAFETY: reading SCTLR_EL1 has no side effect.
    unsafe { asm!("mrs {}, sctlr_el1", out(reg) sctlr, options(nomem, nostack)) };
    if sctlr & mask != want {
        // SAFETY: only the EL0/EL1 key-enable bits change; the kernel executes no PAC
        // instruction, so its own behaviour is the same either way. The ISB makes the change
        // take effect before the return to EL0.
        unsafe {
            asm!("msr sctlr_el1, {}", "isb", in(reg) (sctlr & !mask) | want, options(nomem, nostack));
        }
    }
}
