//! The corpus: more than 10^5 mutations of the fixtures (real programs from GNU ld and
//! rust-lld), each parsed under `catch_unwind`. None may panic; every refusal must be one
//! sentence ([`check_sentence`]); every acceptance must satisfy what the kernel's loader relies
//! on ([`check_accepted`]: file bytes inside the file, segments inside the user range, no
//! shared page, W^X).
//!
//! Systematic mutations first: every truncation of the headers (and of the whole file for the
//! tiny programs), every bit flip and five byte values at every header byte, every field of the
//! ELF header and of each program header set to each of [`EXTREMES`]. Then random stacks of 1 to
//! 4 mutations up to [`TOTAL`] inputs, from a fixed seed. `ELF_CORPUS_SCALE=N` multiplies the
//! random part (`ELF_CORPUS_SCALE=100 cargo test --release -p elf corpus -- --nocapture`, about
//! 10^7 inputs); `ELF_CORPUS_SEED` changes the seed.

extern crate std;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::header::{FileHeader, PHDR_SIZE, pt};
use crate::tests::{LIMITS, check_sentence, fixtures};
use crate::{Executable, Limits};

/// Inputs in the default run (systematic and random together).
const TOTAL: usize = 120_000;

/// Field values to try: the boundaries of every check (sizes, page and address-space edges).
const EXTREMES: [u64; 34] = [
    0,
    1,
    2,
    3,
    55,
    56,
    57,
    63,
    64,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xfff,
    0x1000,
    0x1001,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    0x6474_e551, // PT_GNU_STACK
    0x6474_e553, // PT_GNU_PROPERTY
    0xc000_0000,
    1 << 47,
    (1 << 48) - 0x1000,
    (1 << 48) - 1,
    1 << 48,
    i64::MAX as u64,
    1 << 63,
    u64::MAX - 0xfff,
    u64::MAX - 1,
    u64::MAX,
];

/// `(offset, width)` of every field of `Elf64_Ehdr` after the magic.
const HEADER_FIELDS: [(usize, usize); 17] = [
    (4, 1),
    (5, 1),
    (6, 1),
    (7, 1),
    (16, 2),
    (18, 2),
    (20, 4),
    (24, 8),
    (32, 8),
    (40, 8),
    (48, 4),
    (52, 2),
    (54, 2),
    (56, 2),
    (58, 2),
    (60, 2),
    (62, 2),
];

/// `(offset, width)` of every field of `Elf64_Phdr`.
const PHDR_FIELDS: [(usize, usize); 8] =
    [(0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8), (48, 8)];

/// One mutation.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Flip one bit.
    Flip { at: usize, bit: u8 },
    /// Write a little-endian value of `width` bytes.
    Set { at: usize, width: usize, value: u64 },
    /// Copy program header `from` over `to`.
    CopyPhdr { from: usize, to: usize },
    /// Keep only the first `len` bytes.
    Truncate(usize),
}

/// A fixture and where its headers are.
struct Base {
    name: &'static str,
    bytes: Vec<u8>,
    phoff: usize,
    phnum: usize,
    /// One past the last byte the loader reads when nothing is mutated (the headers, the notes).
    header_end: usize,
}

impl Base {
    fn new(name: &'static str, bytes: Vec<u8>) -> Self {
        let header = FileHeader::read(&bytes).unwrap();
        let (phoff, phnum) = (header.phoff as usize, usize::from(header.phnum));
        let mut header_end = phoff + phnum * PHDR_SIZE;
        for i in 0..phnum {
            let ph = crate::header::ProgramHeader::read(&bytes[phoff + i * PHDR_SIZE..]).unwrap();
            if ph.kind == pt::GNU_PROPERTY {
                header_end = header_end.max((ph.offset + ph.filesz) as usize);
            }
        }
        Self { name, bytes, phoff, phnum, header_end }
    }

    fn phdr_field(&self, index: usize, field: usize) -> (usize, usize) {
        let (off, width) = PHDR_FIELDS[field];
        (self.phoff + index * PHDR_SIZE + off, width)
    }
}

/// What happened to the corpus.
#[derive(Default)]
struct Tally {
    inputs: usize,
    accepted: usize,
    refusals: BTreeMap<String, usize>,
    failures: Vec<String>,
}

/// Applies `ops` to a scratch copy of `base`, parses it (under `limits`), checks the outcome,
/// and puts the bytes back.
fn run(base: &Base, scratch: &mut [u8], ops: &[Op], limits: &Limits, tally: &mut Tally) {
    let mut len = scratch.len();
    let mut saved: Vec<(usize, Vec<u8>)> = Vec::new();
    fn write(scratch: &mut [u8], saved: &mut Vec<(usize, Vec<u8>)>, at: usize, value: &[u8]) {
        if let Some(target) = scratch.get_mut(at..at + value.len()) {
            saved.push((at, target.to_vec()));
            target.copy_from_slice(value);
        }
    }
    for &op in ops {
        match op {
            Op::Flip { at, bit } => {
                if let Some(&b) = scratch.get(at) {
                    write(scratch, &mut saved, at, &[b ^ (1 << bit)]);
                }
            }
            Op::Set { at, width, value } => write(scratch, &mut saved, at, &value.to_le_bytes()[..width]),
            Op::CopyPhdr { from, to } => {
                let from = base.phoff + from * PHDR_SIZE;
                let to = base.phoff + to * PHDR_SIZE;
                if let Some(src) = scratch.get(from..from + PHDR_SIZE).map(<[u8]>::to_vec) {
                    write(scratch, &mut saved, to, &src);
                }
            }
            Op::Truncate(n) => len = len.min(n),
        }
    }
    let input = &scratch[..len];
    tally.inputs += 1;
    // The kernel's way: a page of the file first, more only when the parse asks for it; the
    // outcome must be the whole file's.
    let by_heads = catch_unwind(AssertUnwindSafe(|| {
        let mut head = len.min(4096);
        loop {
            match crate::parse(crate::FileBytes::head(&input[..head], len as u64), limits) {
                Err(crate::Refusal::BeyondHead { end }) if end as usize > head && end as usize <= len => {
                    head = end as usize
                }
                Err(crate::Refusal::BeyondHead { end }) => {
                    break Err(format!("asked for {end} bytes with {head} of {len} read"));
                }
                other => break Ok(other),
            }
        }
    }));
    let whole = catch_unwind(AssertUnwindSafe(|| crate::parse(input, limits)));
    match (&by_heads, &whole) {
        (Ok(Ok(a)), Ok(b)) if a == b => {}
        (Err(_), _) => tally.failures.push(format!("{}: {ops:?} panicked reading by heads", base.name)),
        _ => tally.failures.push(format!("{}: {ops:?} by heads {by_heads:?}, whole {whole:?}", base.name)),
    }
    match whole {
        Err(_) => tally.failures.push(format!("{}: {ops:?} panicked", base.name)),
        Ok(Ok(exe)) => match check_accepted(&exe, input, limits) {
            Ok(()) => tally.accepted += 1,
            Err(why) => tally.failures.push(format!("{}: {ops:?} accepted but {why}: {exe:?}", base.name)),
        },
        Ok(Err(refusal)) => {
            let text = refusal.to_string();
            if let Err(why) = check_sentence(&text) {
                tally.failures.push(format!("{}: {ops:?}: {why}", base.name));
            }
            let kind: String = format!("{refusal:?}").chars().take_while(|c| c.is_alphanumeric()).collect();
            *tally.refusals.entry(kind).or_default() += 1;
        }
    }
    for (at, old) in saved.into_iter().rev() {
        scratch[at..at + old.len()].copy_from_slice(&old);
    }
}

/// What the kernel's loader relies on in an accepted file.
fn check_accepted(exe: &Executable, file: &[u8], limits: &Limits) -> Result<(), String> {
    let page = limits.page_size;
    if exe.segments.is_empty() {
        return Err("no segment".into());
    }
    if exe.entry >= limits.task_size {
        return Err("the entry point is not a user address".into());
    }
    let mut pages: Vec<(u64, u64)> = Vec::new();
    for s in &exe.segments {
        let end = s.vaddr.checked_add(s.memsz).ok_or("a segment wraps")?;
        if s.memsz == 0 || s.filesz > s.memsz {
            return Err(format!("segment {s:?} has bad sizes"));
        }
        if s.vaddr - s.vaddr % page < limits.min_addr || end > limits.task_size {
            return Err(format!("segment {s:?} is outside the user range"));
        }
        if s.filesz != 0 {
            let file_end = s.offset.checked_add(s.filesz).ok_or("file bytes wrap")?;
            if file_end > file.len() as u64 || s.offset % page != s.vaddr % page {
                return Err(format!("segment {s:?} has file bytes the loader cannot copy"));
            }
        }
        if !(s.prot.read || s.prot.write || s.prot.exec) || (limits.w_xor_x && s.prot.write && s.prot.exec) {
            return Err(format!("segment {s:?} has permissions the loader refuses"));
        }
        pages.push((s.vaddr - s.vaddr % page, end.next_multiple_of(page)));
    }
    pages.sort_unstable();
    if pages.windows(2).any(|w| w[1].0 < w[0].1) {
        return Err("two segments share a page".into());
    }
    if limits.w_xor_x && exe.exec_stack {
        return Err("an executable stack under W^X".into());
    }
    Ok(())
}

/// The systematic mutations of `base`.
fn systematic(base: &Base) -> Vec<Vec<Op>> {
    let mut all = Vec::new();
    let tiny = base.bytes.len() <= 4096;
    let truncate_to = if tiny { base.bytes.len() } else { base.header_end + 64 };
    for n in 0..truncate_to {
        all.push(alloc::vec![Op::Truncate(n)]);
    }
    for at in 0..base.header_end {
        for bit in 0..8 {
            all.push(alloc::vec![Op::Flip { at, bit }]);
        }
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            all.push(alloc::vec![Op::Set { at, width: 1, value }]);
        }
    }
    let len = base.bytes.len() as u64;
    let values: Vec<u64> = EXTREMES.iter().copied().chain([len - 1, len, len + 1]).collect();
    for &(at, width) in &HEADER_FIELDS {
        for &value in &values {
            all.push(alloc::vec![Op::Set { at, width, value }]);
        }
    }
    for index in 0..base.phnum {
        for field in 0..PHDR_FIELDS.len() {
            let (at, width) = base.phdr_field(index, field);
            for &value in &values {
                all.push(alloc::vec![Op::Set { at, width, value }]);
            }
        }
        for to in 0..base.phnum {
            all.push(alloc::vec![Op::CopyPhdr { from: index, to }]);
        }
    }
    all
}

/// xorshift64*: a fixed, fast sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random stack of 1 to 4 mutations of `base`, mostly in its headers.
fn random(base: &Base, rng: &mut Rng) -> Vec<Op> {
    let count = 1 + rng.below(4);
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let value = match rng.below(4) {
            0 => rng.next(),
            1 => rng.next() & 0xffff,
            _ => EXTREMES[rng.below(EXTREMES.len())].wrapping_add(rng.below(3) as u64).wrapping_sub(1),
        };
        let op = match rng.below(10) {
            0..=2 => {
                let span = if rng.below(4) == 0 { base.bytes.len().min(4096) } else { base.header_end };
                Op::Flip { at: rng.below(span), bit: rng.below(8) as u8 }
            }
            3..=4 => {
                let (at, width) = HEADER_FIELDS[rng.below(HEADER_FIELDS.len())];
                Op::Set { at, width, value }
            }
            5..=7 => {
                let (at, width) = base.phdr_field(rng.below(base.phnum), rng.below(PHDR_FIELDS.len()));
                Op::Set { at, width, value }
            }
            8 => Op::CopyPhdr { from: rng.below(base.phnum), to: rng.below(base.phnum) },
            _ => Op::Truncate(if rng.below(2) == 0 {
                rng.below(base.header_end + 1)
            } else {
                rng.below(base.bytes.len() + 1)
            }),
        };
        ops.push(op);
    }
    ops
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn a_corpus_of_mutated_programs_never_panics_and_every_refusal_is_a_sentence() {
    let bases: Vec<Base> = fixtures::all().into_iter().map(|(name, bytes)| Base::new(name, bytes)).collect();
    let relaxed = Limits { w_xor_x: false, ..LIMITS };
    let mut tally = Tally::default();
    let mut systematic_inputs = 0;
    for base in &bases {
        let mut scratch = base.bytes.clone();
        for (i, ops) in systematic(base).iter().enumerate() {
            // Every fourth input also without W^X: the checks behind it must hold there too.
            let limits = if i % 4 == 3 { &relaxed } else { &LIMITS };
            run(base, &mut scratch, ops, limits, &mut tally);
        }
        systematic_inputs = tally.inputs;
    }
    let scale = env_number("ELF_CORPUS_SCALE", 1).max(1) as usize;
    let mut rng = Rng(env_number("ELF_CORPUS_SEED", 0x5eed_e1f0_0c0d_e5ed) | 1);
    let random_inputs = TOTAL.saturating_sub(systematic_inputs) * scale;
    let mut scratches: Vec<Vec<u8>> = bases.iter().map(|b| b.bytes.clone()).collect();
    for i in 0..random_inputs {
        let which = i % bases.len();
        let ops = random(&bases[which], &mut rng);
        let limits = if i % 4 == 3 { &relaxed } else { &LIMITS };
        run(&bases[which], &mut scratches[which], &ops, limits, &mut tally);
    }

    std::println!(
        "ELF corpus: {} inputs ({systematic_inputs} systematic, {random_inputs} random) from {} programs: {} accepted, {} refused, {} failures",
        tally.inputs,
        bases.len(),
        tally.accepted,
        tally.inputs - tally.accepted - tally.failures.len(),
        tally.failures.len()
    );
    for (kind, n) in &tally.refusals {
        std::println!("  {n:7} {kind}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} failures, the first: {:#?}",
        tally.failures.len(),
        &tally.failures[..tally.failures.len().min(5)]
    );
    assert!(tally.inputs >= 100_000, "only {} inputs", tally.inputs);
    assert!(tally.accepted >= 1000, "the mutations should leave many files loadable: {}", tally.accepted);
    // The corpus reaches every rule that a mutation of one field can break.
    for kind in [
        "TooShort",
        "NotElf",
        "NotElf64",
        "NotLittleEndian",
        "NotExecutable",
        "WrongMachine",
        "BadPhentsize",
        "NoProgramHeaders",
        "TooManyProgramHeaders",
        "HeadersOutsideFile",
        "BadInterpreter",
        "PropertyNote",
        "NotCongruent",
        "FileBytesOutsideFile",
        "FileLargerThanMemory",
        "OutsideUserRange",
        "NothingToLoad",
        "WritableAndExecutable",
        "ExecutableStack",
        "NoPermissions",
        "SharedPage",
        "EntryOutside",
    ] {
        assert!(tally.refusals.contains_key(kind), "no mutation was refused as {kind}");
    }
}
