//! The kernel's cryptographically secure random-number generator, as Linux's `crng`
//! (drivers/char/random.c): a 256-bit key, ChaCha20 blocks (RFC 8439) drawn from it, and *fast
//! key erasure*: every request first replaces the key with the first 32 bytes of a fresh block,
//! so a key read out of memory later cannot reconstruct anything handed out before.
//!
//! Why a crate of its own: the cipher is the one piece that must be bit-exact, so it is tested on
//! the host against the RFC's vectors (`cargo test -p crng`); the kernel's `random` module only
//! gathers seed material (device tree, RNDR, the counter) and serialises access.
//!
//! Seeding: [`Crng::mix`] absorbs any number of bytes by XOR-ing them into the key 32 bytes at a
//! time, each chunk followed by a rekey (the key becomes the first half of the ChaCha20 block it
//! keys). ChaCha20's block function with its feed-forward is not invertible in the key, so mixing
//! known or attacker-chosen bytes never lowers what an unknown source contributed, and the order
//! of sources does not matter for that. Linux hashes its input pool with BLAKE2s instead; this
//! is the smaller construction with the same property for seeding from a handful of sources.
//! [`Crng::credit`] counts the bits of entropy the caller vouches for: [`Crng::is_seeded`] once
//! they reach [`SEEDED_BITS`] (Linux's `POOL_READY_BITS`, 256).
#![no_std]

/// Bits of credited entropy after which the generator counts as seeded (Linux: 256).
pub const SEEDED_BITS: u32 = 256;

/// ChaCha20's constant words, "expand 32-byte k".
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// The ChaCha quarter round (RFC 8439 §2.1) on four words of `s`.
fn quarter_round(s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(16);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(12);
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(8);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(7);
}

/// One ChaCha20 block (RFC 8439 §2.3): 64 bytes of key stream for `key`, block `counter` and
/// `nonce`, serialised little-endian.
pub fn chacha20_block(key: &[u8; 32], counter: u32, nonce: &[u8; 12]) -> [u8; 64] {
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let mut init = [0u32; 16];
    init[..4].copy_from_slice(&SIGMA);
    for (i, k) in key.chunks_exact(4).enumerate() {
        init[4 + i] = word(k);
    }
    init[12] = counter;
    for (i, n) in nonce.chunks_exact(4).enumerate() {
        init[13 + i] = word(n);
    }
    let mut s = init;
    for _ in 0..10 {
        quarter_round(&mut s, 0, 4, 8, 12);
        quarter_round(&mut s, 1, 5, 9, 13);
        quarter_round(&mut s, 2, 6, 10, 14);
        quarter_round(&mut s, 3, 7, 11, 15);
        quarter_round(&mut s, 0, 5, 10, 15);
        quarter_round(&mut s, 1, 6, 11, 12);
        quarter_round(&mut s, 2, 7, 8, 13);
        quarter_round(&mut s, 3, 4, 9, 14);
    }
    let mut out = [0u8; 64];
    for (i, chunk) in out.chunks_exact_mut(4).enumerate() {
        chunk.copy_from_slice(&s[i].wrapping_add(init[i]).to_le_bytes());
    }
    out
}

/// The generator: a key, the entropy credited to it, and a generation count (the nonce, so two
/// requests never reuse a key-stream block even if a rekey were skipped).
pub struct Crng {
    key: [u8; 32],
    credited: u32,
    generation: u64,
}

impl Crng {
    /// An unseeded generator (all-zero key, nothing credited).
    pub const fn new() -> Crng {
        Crng { key: [0; 32], credited: 0, generation: 0 }
    }

    /// Replaces the key with the first half of the block it keys; returns the second half.
    fn rekey(&mut self) -> [u8; 32] {
        self.generation = self.generation.wrapping_add(1);
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&self.generation.to_le_bytes());
        let block = chacha20_block(&self.key, 0, &nonce);
        let mut rest = [0u8; 32];
        self.key.copy_from_slice(&block[..32]);
        rest.copy_from_slice(&block[32..]);
        rest
    }

    /// Absorbs `input` into the key (see the module documentation). Credits nothing.
    pub fn mix(&mut self, input: &[u8]) {
        for chunk in input.chunks(32) {
            for (k, b) in self.key.iter_mut().zip(chunk) {
                *k ^= b;
            }
            self.rekey();
        }
    }

    /// Counts `bits` of entropy the caller vouches for in what it mixed (saturating).
    pub fn credit(&mut self, bits: u32) {
        self.credited = self.credited.saturating_add(bits);
    }

    /// Bits credited so far.
    pub fn credited(&self) -> u32 {
        self.credited
    }

    /// Whether at least [`SEEDED_BITS`] have been credited.
    pub fn is_seeded(&self) -> bool {
        self.credited >= SEEDED_BITS
    }

    /// Fills `out` with key stream: the key is erased first (fast key erasure), then blocks
    /// 1, 2, ... of the new key fill `out`; the key stream's block 0 is never handed out.
    pub fn fill(&mut self, out: &mut [u8]) {
        let _ = self.rekey();
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&self.generation.to_le_bytes());
        nonce[8..].copy_from_slice(&[0xff; 4]);
        for (i, chunk) in out.chunks_mut(64).enumerate() {
            let block = chacha20_block(&self.key, i as u32 + 1, &nonce);
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        // The key that produced `out` is gone once this returns.
        let _ = self.rekey();
    }

    /// One random `u64`.
    pub fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill(&mut b);
        u64::from_le_bytes(b)
    }
}

impl Default for Crng {
    fn default() -> Crng {
        Crng::new()
    }
}

#[cfg(test)]
mod tests;
