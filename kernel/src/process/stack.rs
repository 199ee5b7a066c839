//! The initial user stack, as the Linux arm64 ABI lays it out (System V gABI §3.4, Linux
//! `create_elf_tables`): from the stack pointer up, `argc`, the `argv` pointers and a NULL, the
//! `envp` pointers and a NULL, the auxiliary vector ending with `AT_NULL`, then the strings, the
//! platform name `AT_PLATFORM` points to and the 16 random bytes `AT_RANDOM` points to. SP is
//! 16-byte aligned.
use alloc::vec::Vec;

/// Auxiliary vector keys (Linux `include/uapi/linux/auxvec.h`).
pub mod at {
    /// End of the vector.
    pub const NULL: u64 = 0;
    /// Program headers in memory.
    pub const PHDR: u64 = 3;
    /// Size of one program header.
    pub const PHENT: u64 = 4;
    /// Number of program headers.
    pub const PHNUM: u64 = 5;
    /// Page size.
    pub const PAGESZ: u64 = 6;
    /// Interpreter base (0: none).
    pub const BASE: u64 = 7;
    /// Flags.
    pub const FLAGS: u64 = 8;
    /// Entry point of the program.
    pub const ENTRY: u64 = 9;
    /// Real user id.
    pub const UID: u64 = 11;
    /// Effective user id.
    pub const EUID: u64 = 12;
    /// Real group id.
    pub const GID: u64 = 13;
    /// Effective group id.
    pub const EGID: u64 = 14;
    /// CPU capabilities (arm64 `HWCAP_*`).
    pub const HWCAP: u64 = 16;
    /// The platform name, a string (`ELF_PLATFORM`: "aarch64").
    pub const PLATFORM: u64 = 15;
    /// Clock ticks per second.
    pub const CLKTCK: u64 = 17;
    /// Secure mode.
    pub const SECURE: u64 = 23;
    /// 16 random bytes.
    pub const RANDOM: u64 = 25;
    /// More CPU capabilities.
    pub const HWCAP2: u64 = 26;
    /// Path of the program.
    pub const EXECFN: u64 = 31;
    /// Stack a signal frame needs (arm64 `ARCH_DLINFO`).
    pub const MINSIGSTKSZ: u64 = 51;
}

/// `AT_PLATFORM`'s string on arm64 (`ELF_PLATFORM`, arch/arm64/include/asm/elf.h).
pub const PLATFORM: &str = "aarch64";

/// `AT_MINSIGSTKSZ` as Linux computes it (`minsigstksz_setup`, arch/arm64/kernel/signal.c): the
/// signal frame the kernel writes (`struct rt_sigframe` holding only the FPSIMD and ESR records, as
/// no SVE or SME is reported in `AT_HWCAP`, and the frame record above it) + 16 bytes of the
/// alignment padding Linux allows for: 4720.
pub const MINSIGSTKSZ: u64 = signal::frame::TOTAL as u64 + 16;

/// Builds the stack image that ends at `top` (exclusive) and returns `(sp, bytes)`: the bytes go
/// at `[sp, top)`. `auxv` is given without the entries that point into the stack (`AT_PLATFORM`,
/// `AT_RANDOM`, `AT_EXECFN`), which are added here.
pub fn build<S: AsRef<[u8]>>(
    top: u64,
    argv: &[S],
    envp: &[S],
    auxv: &[(u64, u64)],
    random: [u8; 16],
) -> (u64, Vec<u8>) {
    // Strings and the random bytes go at the top; lay them out first to know their addresses.
    let mut strings: Vec<u8> = Vec::new();
    let mut offsets = Vec::new();
    for s in argv.iter().chain(envp) {
        offsets.push(strings.len());
        strings.extend_from_slice(s.as_ref());
        strings.push(0);
    }
    let platform_offset = strings.len();
    strings.extend_from_slice(PLATFORM.as_bytes());
    strings.push(0);
    let random_offset = strings.len();
    strings.extend_from_slice(&random);
    let strings_start = (top - strings.len() as u64) & !15;
    let addr = |i: usize| strings_start + offsets[i] as u64;
    let execfn = if argv.is_empty() { 0 } else { addr(0) };

    let mut words: Vec<u64> = Vec::new();
    words.push(argv.len() as u64);
    words.extend((0..argv.len()).map(addr));
    words.push(0);
    words.extend((argv.len()..argv.len() + envp.len()).map(addr));
    words.push(0);
    for &(key, value) in auxv {
        words.extend([key, value]);
    }
    words.extend([at::PLATFORM, strings_start + platform_offset as u64]);
    words.extend([at::RANDOM, strings_start + random_offset as u64, at::EXECFN, execfn, at::NULL, 0]);
    let sp = (strings_start - words.len() as u64 * 8) & !15;

    let mut bytes = alloc::vec![0u8; (top - sp) as usize];
    for (i, w) in words.iter().enumerate() {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    let s = (strings_start - sp) as usize;
    bytes[s..s + strings.len()].copy_from_slice(&strings);
    (sp, bytes)
}
