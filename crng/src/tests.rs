//! RFC 8439's test vectors for the cipher, then the generator's own promises.
use super::*;

fn hex(s: &str) -> [u8; 64] {
    let digits: alloc_free::Digits = s.split_ascii_whitespace().collect();
    digits.0
}

/// Hex text to 64 bytes without a heap (the crate is `no_std`).
mod alloc_free {
    pub struct Digits(pub [u8; 64]);
    impl<'a> FromIterator<&'a str> for Digits {
        fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
            let mut out = [0u8; 64];
            let mut n = 0;
            for byte in iter {
                out[n] = u8::from_str_radix(byte, 16).unwrap();
                n += 1;
            }
            assert_eq!(n, 64, "a block is 64 bytes");
            Digits(out)
        }
    }
}

#[test]
fn quarter_round_rfc8439_2_1_1() {
    let mut s = [0u32; 16];
    s[..4].copy_from_slice(&[0x1111_1111, 0x0102_0304, 0x9b8d_6f43, 0x0123_4567]);
    quarter_round(&mut s, 0, 1, 2, 3);
    assert_eq!(s[..4], [0xea2a_92f4, 0xcb1c_f8ce, 0x4581_472e, 0x5881_c4bb]);
}

#[test]
fn block_function_rfc8439_2_3_2() {
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = i as u8;
    }
    let nonce = [0, 0, 0, 0x09, 0, 0, 0, 0x4a, 0, 0, 0, 0];
    let want = hex(
        "10 f1 e7 e4 d1 3b 59 15 50 0f dd 1f a3 20 71 c4 c7 d1 f4 c7 33 c0 68 03 04 22 aa 9a c3 d4 6c 4e \
         d2 82 64 46 07 9f aa 09 14 c2 d7 05 d9 8b 02 a2 b5 12 9c d1 de 16 4e b9 cb d0 83 e8 a2 50 3c 4e",
    );
    assert_eq!(chacha20_block(&key, 1, &nonce), want);
}

#[test]
fn key_stream_rfc8439_a_1_vector_1() {
    let want = hex(
        "76 b8 e0 ad a0 f1 3d 90 40 5d 6a e5 53 86 bd 28 bd d2 19 b8 a0 8d ed 1a a8 36 ef cc 8b 77 0d c7 \
         da 41 59 7c 51 57 48 8d 77 24 e0 3f b8 d8 4a 37 6a 43 b8 f4 15 18 a1 1c c3 87 b6 69 b2 ee 65 86",
    );
    assert_eq!(chacha20_block(&[0; 32], 0, &[0; 12]), want);
}

#[test]
fn every_request_erases_the_key_it_used() {
    let mut g = Crng::new();
    g.mix(b"seed");
    let before = g.key;
    let mut a = [0u8; 100];
    g.fill(&mut a);
    assert_ne!(g.key, before, "the key that served a request is replaced");
    let mut b = [0u8; 100];
    g.fill(&mut b);
    assert_ne!(a, b, "two requests never repeat");
    // No output is the key that replaced the one before it.
    assert!(!a.windows(32).any(|w| w == g.key));
}

#[test]
fn the_same_seed_gives_the_same_stream_and_one_bit_changes_it() {
    let (mut g, mut h, mut k) = (Crng::new(), Crng::new(), Crng::new());
    g.mix(&[7; 40]);
    h.mix(&[7; 40]);
    let mut other = [7u8; 40];
    other[39] ^= 1;
    k.mix(&other);
    let (x, y, z) = (g.next_u64(), h.next_u64(), k.next_u64());
    assert_eq!(x, y);
    assert_ne!(x, z);
}

#[test]
fn seeded_after_256_credited_bits() {
    let mut g = Crng::new();
    assert!(!g.is_seeded());
    g.credit(255);
    assert!(!g.is_seeded());
    g.credit(1);
    assert!(g.is_seeded());
    g.credit(u32::MAX);
    assert_eq!(g.credited(), u32::MAX);
}

#[test]
fn output_bits_are_balanced() {
    // 64 KiB of output: each bit position is set close to half the time (a broken block
    // function or a stuck key shows here long before anything subtler).
    let mut g = Crng::new();
    g.mix(b"balance");
    let mut ones = [0u32; 64];
    for _ in 0..8192 {
        let v = g.next_u64();
        for (i, o) in ones.iter_mut().enumerate() {
            *o += ((v >> i) & 1) as u32;
        }
    }
    assert!(ones.iter().all(|&n| (3700..4500).contains(&n)), "{ones:?}");
}
