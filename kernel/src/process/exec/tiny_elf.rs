//! Tiny static ELF programs assembled from instruction words, for the test image and the
//! benchmarks: each says exactly what it does, with no toolchain involved.
use alloc::vec::Vec;

/// Where the tiny programs are linked.
pub const BASE: u64 = 0x40_0000;
/// Bytes of ELF and program header before the first instruction.
pub const HEADERS: u64 = 64 + 56;

/// A static ELF with one R+X segment holding `code` (entry at its first word).
pub fn tiny_elf(code: &[u32]) -> Vec<u8> {
    let size = HEADERS + 4 * code.len() as u64;
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    f.extend_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&(BASE + HEADERS).to_le_bytes()); // e_entry
    f.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    f.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, 0, 0] {
        f.extend_from_slice(&v.to_le_bytes()); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
    }
    f.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    f.extend_from_slice(&5u32.to_le_bytes()); // PF_R | PF_X
    for v in [0, BASE, BASE, size, size, mm::addr::PAGE_SIZE] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    for w in code {
        f.extend_from_slice(&w.to_le_bytes());
    }
    f
}

/// `movz/movk` sequence loading `value` into `xN`.
pub fn mov(rd: u32, value: u64) -> [u32; 4] {
    let part = |i: u32| ((value >> (16 * i)) & 0xffff) as u32;
    [
        0xd280_0000 | (part(0) << 5) | rd,
        0xf2a0_0000 | (part(1) << 5) | rd,
        0xf2c0_0000 | (part(2) << 5) | rd,
        0xf2e0_0000 | (part(3) << 5) | rd,
    ]
}

pub const SVC: u32 = 0xd400_0001;
pub use linux_abi::nr::EXIT_GROUP;

#[cfg_attr(not(feature = "test-image"), expect(dead_code, reason = "the test image's system-call tests"))]
/// A program that makes one system call with `args` and exits with its result (low 8 bits).
pub fn syscall_then_exit(nr: u64, args: &[u64]) -> Vec<u8> {
    let mut code = Vec::new();
    for (i, &a) in args.iter().enumerate() {
        code.extend(mov(i as u32, a));
    }
    code.extend(mov(8, nr));
    code.push(SVC);
    code.extend(mov(8, EXIT_GROUP));
    code.push(SVC);
    tiny_elf(&code)
}

/// A program that runs `body` `count` times (x28 counts down), then exits 0. `body` may use any
/// register but x28.
pub fn loop_program(prologue: &[u32], body: &[u32], count: u64) -> Vec<u8> {
    let mut code = Vec::from(prologue);
    code.extend(mov(28, count));
    let top = code.len();
    code.extend_from_slice(body);
    code.push(0xf100_079c); // subs x28, x28, #1
    let back = (top as i64 - code.len() as i64) as u32 & 0x7ffff;
    code.push(0x5400_0001 | (back << 5)); // b.ne top
    code.extend(mov(0, 0));
    code.extend(mov(8, EXIT_GROUP));
    code.push(SVC);
    tiny_elf(&code)
}
