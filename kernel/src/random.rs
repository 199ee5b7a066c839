//! Random bytes for `AT_RANDOM` and `getrandom`: the CPU's RNDR where FEAT_RNG exists, otherwise a
//! xorshift generator seeded from the counter. Good enough to vary stack canaries and hash seeds
//! between runs; NOT a cryptographic source on CPUs without RNDR (said in the README).
use core::arch::asm;

use spin::Mutex;

static STATE: Mutex<u64> = Mutex::new(0);

fn has_rndr() -> bool {
    use aarch64_cpu::registers::{ID_AA64ISAR0_EL1, Readable};
    (ID_AA64ISAR0_EL1.get() >> 60) & 0xf >= 1
}

fn rndr() -> Option<u64> {
    let value: u64;
    let ok: u64;
    // SAFETY: RNDR (s3_3_c2_c4_0) is only read when FEAT_RNG is present; it sets NZCV.
    unsafe {
        asm!("mrs {v}, s3_3_c2_c4_0", "cset {ok}, ne", v = out(reg) value, ok = out(reg) ok,
             options(nomem, nostack));
    }
    (ok == 1).then_some(value)
}

fn next() -> u64 {
    if has_rndr()
        && let Some(v) = rndr()
    {
        return v;
    }
    let mut state = STATE.lock();
    if *state == 0 {
        *state = crate::arch::time::counter() | 1;
    }
    // xorshift64*
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Fills `buf` with random bytes.
pub fn fill(buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let bytes = next().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}
