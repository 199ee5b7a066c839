//! The kernel's random numbers: one ChaCha20 generator (`crng`, Linux's `crng` with fast key
//! erasure) behind a lock, seeded once at boot from every source the machine has, serving
//! `getrandom` and `/dev/[u]random`, `AT_RANDOM`, pointer-authentication keys and the
//! address-space layout draws (`process::aslr`).
//!
//! Seed sources, in the order they are mixed, and what each is credited (bits of entropy the
//! kernel vouches for; 256 make the generator seeded, Linux's rule):
//! - the device tree's `/chosen/kaslr-seed` (64 bits from the boot loader; QEMU's `virt`
//!   writes one unless `-M virt,dtb-randomness=off`): 64;
//! - `/chosen/rng-seed` (any length; QEMU writes 32 bytes): 8 per byte;
//! - FEAT_RNG's `RNDRRS` (a freshly reseeded hardware draw), four 64-bit reads: 64 each (Linux
//!   trusts the CPU's generator by default, `random.trust_cpu=on`);
//! - the generic counter, read 64 times around the other reads: credited nothing. Alone it is
//!   weak: its boot-time value is nearly the same on every boot of the same machine (QEMU's
//!   virtual counter starts at 0), so an attacker who knows the machine can guess it in a few
//!   thousand tries. When no other source is present the boot report says so in so many words,
//!   and the generator is used anyway (nothing here ever blocks: `getrandom` must answer).
//!
//! Why nothing blocks: the generator is seeded before the first process exists, so Linux 6.1's
//! `getrandom` semantics (block until seeded unless `GRND_NONBLOCK`/`GRND_INSECURE`) reduce to
//! "never blocks".
use core::arch::asm;

use crng::Crng;
use devicetree::Fdt;
use spin::Mutex;

static CRNG: Mutex<Crng> = Mutex::new(Crng::new());

/// The seed sources found at boot (for the boot report).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sources {
    /// `/chosen/kaslr-seed` was present and non-zero.
    pub kaslr_seed: bool,
    /// Bytes of `/chosen/rng-seed`.
    pub rng_seed_bytes: usize,
    /// FEAT_RNG present and its four `RNDRRS` reads succeeded.
    pub rndrrs: bool,
    /// Bits credited in all.
    pub credited: u32,
}

impl core::fmt::Display for Sources {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ChaCha20, seeded from")?;
        if self.kaslr_seed {
            write!(f, " /chosen/kaslr-seed,")?;
        }
        if self.rng_seed_bytes > 0 {
            write!(f, " /chosen/rng-seed ({} bytes),", self.rng_seed_bytes)?;
        }
        if self.rndrrs {
            write!(f, " RNDRRS,")?;
        }
        write!(f, " the counter ({} bits credited)", self.credited)?;
        if self.credited < crng::SEEDED_BITS {
            write!(f, "; WEAK: fewer than {} bits, the layout and keys are guessable", crng::SEEDED_BITS)?;
        }
        Ok(())
    }
}

fn has_rng() -> bool {
    use aarch64_cpu::registers::{ID_AA64ISAR0_EL1, Readable};
    (ID_AA64ISAR0_EL1.get() >> 60) & 0xf >= 1
}

/// One `RNDRRS` read (FEAT_RNG's reseeded draw); `None` when the hardware had none to give.
fn rndrrs() -> Option<u64> {
    let value: u64;
    let ok: u64;
    // SAFETY: RNDRRS (s3_3_c2_c4_1) is only read when FEAT_RNG is present (`has_rng`); it
    // writes the register and NZCV, nothing else.
    unsafe {
        asm!("mrs {v}, s3_3_c2_c4_1", "cset {ok}, ne", v = out(reg) value, ok = out(reg) ok,
             options(nomem, nostack));
    }
    (ok == 1).then_some(value)
}

/// Seeds the generator from every source present (see the module documentation). Call once, on
/// the boot CPU, before the first process; returns what was found, for the boot report.
pub fn seed_at_boot(fdt: &Fdt<'_>) -> Sources {
    let mut g = CRNG.lock();
    let mut found = Sources::default();
    let counter = |g: &mut Crng| g.mix(&crate::arch::time::counter().to_le_bytes());
    counter(&mut g);
    if let Some(chosen) = fdt.find_node("/chosen") {
        if let Some(seed) = chosen.property("kaslr-seed").and_then(|p| p.as_u64())
            && seed != 0
        {
            g.mix(&seed.to_le_bytes());
            g.credit(64);
            found.kaslr_seed = true;
        }
        if let Some(seed) = chosen.property("rng-seed").map(|p| p.value)
            && !seed.is_empty()
        {
            g.mix(seed);
            g.credit(u32::try_from(seed.len()).unwrap_or(u32::MAX).saturating_mul(8));
            found.rng_seed_bytes = seed.len();
        }
    }
    if has_rng() {
        let mut words = 0;
        for _ in 0..4 {
            if let Some(v) = rndrrs() {
                g.mix(&v.to_le_bytes());
                words += 1;
            }
            counter(&mut g);
        }
        g.credit(64 * words);
        found.rndrrs = words == 4;
    }
    // The counter's low bits jitter with the reads above: cheap to add, credited nothing.
    for _ in 0..64 {
        counter(&mut g);
    }
    found.credited = g.credited();
    found
}

/// Fills `buf` with random bytes.
pub fn fill(buf: &mut [u8]) {
    CRNG.lock().fill(buf);
}

/// One random `u64`.
pub fn next_u64() -> u64 {
    CRNG.lock().next_u64()
}
