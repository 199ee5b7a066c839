//! The initial user stack, as the Linux arm64 ABI lays it out (System V gABI §3.4, Linux
//! `create_elf_tables`): from the stack pointer up, `argc`, the `argv` pointers and a NULL, the
//! `envp` pointers and a NULL, the auxiliary vector ending with `AT_NULL`, then the strings, the
//! platform name `AT_PLATFORM` points to and the 16 random bytes `AT_RANDOM` points to. SP is
//! 16-byte aligned.
use alloc::vec::Vec;

use mm::vm::Errno;

use crate::memory::fallible;

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
    /// The vDSO's ELF header (`crate::vdso`).
    pub const SYSINFO_EHDR: u64 = 33;
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

/// An initial stack, built.
pub struct Built {
    /// The stack pointer: the bytes go at `[sp, top)`.
    pub sp: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// `[arg_start, arg_end)`: the argument strings, each with its NUL.
    pub args: (u64, u64),
    /// `[env_start, env_end)`: the environment strings.
    pub env: (u64, u64),
    /// The whole auxiliary vector, `AT_NULL` last.
    pub auxv: Vec<(u64, u64)>,
}

/// Builds the stack image that ends at `top` (exclusive). `auxv` is given without the entries
/// that point into the stack (`AT_PLATFORM`, `AT_RANDOM`, `AT_EXECFN`), which are added here.
///
/// # Errors
/// `ENOMEM` when the heap cannot hold the image (`execve` gets that back).
pub fn build<S: AsRef<[u8]>>(
    top: u64,
    argv: &[S],
    envp: &[S],
    auxv: &[(u64, u64)],
    random: [u8; 16],
) -> Result<Built, Errno> {
    // Strings and the random bytes go at the top; lay them out first to know their addresses.
    let strings_len = argv.iter().chain(envp).map(|s| s.as_ref().len() + 1).sum::<usize>()
        + PLATFORM.len()
        + 1
        + random.len();
    let strings_start = (top - strings_len as u64) & !15;
    let pointers = argv.len() + envp.len();
    // argc, the pointers and their two NULLs, the auxv given and the four pairs added here.
    let words = 1 + pointers + 2 + 2 * auxv.len() + 8;
    let sp = (strings_start - words as u64 * 8) & !15;
    let mut bytes = fallible::zeroed::<u8>((top - sp) as usize)?;
    let (table, strings) = bytes.split_at_mut((strings_start - sp) as usize);
    let mut at = 0;
    let mut string_addrs = argv.iter().chain(envp).map(|s| {
        let addr = strings_start + at as u64;
        let s = s.as_ref();
        strings[at..at + s.len()].copy_from_slice(s);
        at += s.len() + 1; // the NUL is already there
        addr
    });
    let mut words_out = table.chunks_exact_mut(8);
    let mut put = |w: u64| {
        if let Some(slot) = words_out.next() {
            slot.copy_from_slice(&w.to_le_bytes());
        }
    };
    put(argv.len() as u64);
    let mut execfn = 0;
    for i in 0..argv.len() {
        let addr = string_addrs.next().unwrap_or(0);
        if i == 0 {
            execfn = addr;
        }
        put(addr);
    }
    put(0);
    for addr in string_addrs.by_ref() {
        put(addr);
    }
    put(0);
    for &(key, value) in auxv {
        put(key);
        put(value);
    }
    drop(string_addrs);
    let arg_len: usize = argv.iter().map(|s| s.as_ref().len() + 1).sum();
    let args = (strings_start, strings_start + arg_len as u64);
    let env = (args.1, strings_start + at as u64);
    let platform = strings_start + at as u64;
    strings[at..at + PLATFORM.len()].copy_from_slice(PLATFORM.as_bytes());
    at += PLATFORM.len() + 1;
    let random_at = strings_start + at as u64;
    strings[at..at + random.len()].copy_from_slice(&random);
    let added = [(at::PLATFORM, platform), (at::RANDOM, random_at), (at::EXECFN, execfn), (at::NULL, 0)];
    for (key, value) in added {
        put(key);
        put(value);
    }
    let mut all = Vec::new();
    fallible::reserve(&mut all, auxv.len() + added.len())?;
    all.extend_from_slice(auxv);
    all.extend_from_slice(&added);
    Ok(Built { sp, bytes, args, env, auxv: all })
}
