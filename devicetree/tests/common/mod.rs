//! Shared by the integration tests: the fixtures, a small device-tree builder (to write trees the
//! tests need and QEMU does not make), a blob re-layouter, and a one-string summary of what
//! discovery found (to compare two trees' results).
#![allow(dead_code, reason = "each test file uses a part")]

use devicetree::Machine;

/// QEMU virt's trees (devicetree/tests/fixtures/make.sh).
pub const VIRT: &[u8] = include_bytes!("../fixtures/virt.dtb");
pub const VIRT_SMP4: &[u8] = include_bytes!("../fixtures/virt-smp4.dtb");
pub const VIRT_GICV3: &[u8] = include_bytes!("../fixtures/virt-gicv3.dtb");
pub const VIRT_EL2: &[u8] = include_bytes!("../fixtures/virt-el2.dtb");
/// What QEMU passes with `-dtb virt.dtb`: the old memory node NOP'd, a new one added.
pub const VIRT_WITH_DTB: &[u8] = include_bytes!("../fixtures/virt-with-dtb.dtb");

pub const FIXTURES: [(&str, &[u8]); 5] = [
    ("virt", VIRT),
    ("virt-smp4", VIRT_SMP4),
    ("virt-gicv3", VIRT_GICV3),
    ("virt-el2", VIRT_EL2),
    ("virt-with-dtb", VIRT_WITH_DTB),
];

pub fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(b[off..off + 4].try_into().unwrap())
}

pub fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

/// Header word `i` (0 magic, 1 totalsize, 2 off_dt_struct, 3 off_dt_strings, 4 off_mem_rsvmap,
/// 5 version, 6 last_comp_version, 7 boot_cpuid_phys, 8 size_dt_strings, 9 size_dt_struct).
pub fn header(b: &[u8], i: usize) -> u32 {
    be32(b, 4 * i)
}

/// Everything discovery found, as one string (equal strings: equal results).
pub fn summary(m: &Machine<'_>) -> String {
    format!(
        "model={:?} memory={:?} reserved={:?} console={:?} psci={:?} intc={:?} bootargs={:?} cpus={:?} initrd={:?} problems={:?}",
        m.model,
        m.memory.ranges(),
        m.reserved,
        m.console,
        m.psci,
        m.interrupt_controller,
        m.bootargs,
        m.cpus,
        m.initrd,
        m.problems
    )
}

/// Writes a tree token by token. Blocks are laid out header, reservations, structure, strings.
#[derive(Default)]
pub struct Builder {
    structs: Vec<u8>,
    strings: Vec<u8>,
    reservations: Vec<(u64, u64)>,
}

impl Builder {
    pub fn new() -> Self {
        Self::default()
    }

    fn word(&mut self, w: u32) -> &mut Self {
        self.structs.extend_from_slice(&w.to_be_bytes());
        self
    }

    fn pad(&mut self) {
        while !self.structs.len().is_multiple_of(4) {
            self.structs.push(0);
        }
    }

    pub fn begin(&mut self, name: &str) -> &mut Self {
        self.word(1);
        self.structs.extend_from_slice(name.as_bytes());
        self.structs.push(0);
        self.pad();
        self
    }

    pub fn end(&mut self) -> &mut Self {
        self.word(2)
    }

    pub fn nop(&mut self) -> &mut Self {
        self.word(4)
    }

    pub fn prop(&mut self, name: &str, value: &[u8]) -> &mut Self {
        let nameoff = match self
            .strings
            .windows(name.len() + 1)
            .position(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0)
        {
            Some(at) => at,
            None => {
                let at = self.strings.len();
                self.strings.extend_from_slice(name.as_bytes());
                self.strings.push(0);
                at
            }
        };
        self.word(3).word(value.len() as u32).word(nameoff as u32);
        self.structs.extend_from_slice(value);
        self.pad();
        self
    }

    pub fn cells(&mut self, name: &str, cells: &[u32]) -> &mut Self {
        let bytes: Vec<u8> = cells.iter().flat_map(|c| c.to_be_bytes()).collect();
        self.prop(name, &bytes)
    }

    pub fn string(&mut self, name: &str, value: &str) -> &mut Self {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.prop(name, &bytes)
    }

    pub fn flag(&mut self, name: &str) -> &mut Self {
        self.prop(name, &[])
    }

    pub fn reserve(&mut self, address: u64, size: u64) -> &mut Self {
        self.reservations.push((address, size));
        self
    }

    /// The blob (FDT_END appended), version 17.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut structs = self.structs.clone();
        structs.extend_from_slice(&9u32.to_be_bytes());
        let mut rsv = Vec::new();
        for &(a, s) in self.reservations.iter().chain([(0, 0)].iter()) {
            rsv.extend_from_slice(&a.to_be_bytes());
            rsv.extend_from_slice(&s.to_be_bytes());
        }
        layout(&rsv, &structs, &self.strings, [Block::Reservations, Block::Structure, Block::Strings])
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    Reservations,
    Structure,
    Strings,
}

/// A version-17 blob with the three blocks in `order` (each 8-byte aligned).
pub fn layout(rsv: &[u8], structs: &[u8], strings: &[u8], order: [Block; 3]) -> Vec<u8> {
    let mut blob = vec![0u8; 40];
    let mut offsets = [0u32; 3];
    for block in order {
        while !blob.len().is_multiple_of(8) {
            blob.push(0);
        }
        let (slot, bytes) = match block {
            Block::Reservations => (0, rsv),
            Block::Structure => (1, structs),
            Block::Strings => (2, strings),
        };
        offsets[slot] = blob.len() as u32;
        blob.extend_from_slice(bytes);
    }
    let total = blob.len() as u32;
    let words = [
        0xd00d_feed,
        total,
        offsets[1],
        offsets[2],
        offsets[0],
        17,
        16,
        0,
        strings.len() as u32,
        structs.len() as u32,
    ];
    for (i, w) in words.into_iter().enumerate() {
        put32(&mut blob, 4 * i, w);
    }
    blob
}

/// The three blocks of a (well-formed) blob: reservations (with terminator), structure, strings.
pub fn blocks(blob: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let rsv_start = header(blob, 4) as usize;
    let mut rsv_end = rsv_start;
    while blob[rsv_end..rsv_end + 16] != [0; 16] {
        rsv_end += 16;
    }
    let s = header(blob, 2) as usize;
    let t = header(blob, 3) as usize;
    (
        blob[rsv_start..rsv_end + 16].to_vec(),
        blob[s..s + header(blob, 9) as usize].to_vec(),
        blob[t..t + header(blob, 8) as usize].to_vec(),
    )
}

/// Offsets (in the structure block) of every token of a well-formed structure block, with the token.
pub fn tokens(structs: &[u8]) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 4 <= structs.len() {
        let t = be32(structs, off);
        out.push((off, t));
        off = match t {
            1 => {
                let nul = structs[off + 4..].iter().position(|&b| b == 0).unwrap();
                (off + 4 + nul + 1 + 3) & !3
            }
            3 => (off + 12 + be32(structs, off + 4) as usize + 3) & !3,
            9 => break,
            _ => off + 4,
        };
    }
    out
}

/// Whether a blob was read, and what it gave.
#[derive(Debug)]
pub enum Outcome {
    Rejected(devicetree::Error),
    Read(String),
}

/// Runs everything the kernel asks of a tree (and a walk over every node and property) on
/// `blob`: a panic anywhere in the reader is what the mutation tests look for.
pub fn exercise(blob: &[u8]) -> Outcome {
    let fdt = match devicetree::Fdt::new(blob) {
        Ok(fdt) => fdt,
        Err(e) => {
            let _ = e.to_string();
            return Outcome::Rejected(e);
        }
    };
    let m = Machine::from_fdt(fdt);
    let mut walk = fdt.walk();
    let mut nodes = 0;
    while let Some(node) = walk.next() {
        nodes += 1;
        for p in node.properties() {
            let _ = (p.as_str(), p.as_u32(), p.as_u64(), p.strings().count());
        }
        let _ =
            (node.reg().map(|r| r.count()), node.child_cells(), node.is_available(), node.first_compatible());
        if nodes <= 3 {
            let path = walk.path();
            // (A mutated tree may have two siblings of one name: then the first is found.)
            assert!(
                fdt.find_node(&path).is_some_and(|n| n.name() == node.name()),
                "{path} finds a node of its name"
            );
            let _ = devicetree::machine::interrupt_parent(&fdt, &path);
            for i in 0..2 {
                let _ = devicetree::reg_translated(&fdt, &path, node, i);
            }
        }
    }
    for compat in [&["arm,cortex-a15-gic", "arm,gic-400"][..], &["arm,gic-v3"], &["brcm,bcm2836-l1-intc"]] {
        if let Some((path, node)) = devicetree::find_compatible_path(&fdt, compat) {
            let _ = devicetree::reg_translated(&fdt, &path, node, 1);
        }
    }
    let _ = devicetree::describe_interrupt_controller(&fdt);
    let _ = fdt.reservations().count();
    for path in ["/chosen", "/cpus/cpu", "serial0", "/soc/serial", "/aliases"] {
        let _ = fdt.find_node(path);
    }
    Outcome::Read(summary(&m))
}

/// xorshift64*: a small deterministic generator, so a failing case is named by its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that break size and offset fields.
pub fn extremes(original: u32, total: u32) -> Vec<u32> {
    let mut v = vec![
        0,
        1,
        2,
        3,
        4,
        7,
        8,
        9,
        0x27,
        0x28,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fff0,
        0xffff_fffc,
        0xffff_ffff,
    ];
    v.extend([total.wrapping_sub(1), total, total.wrapping_add(1), total.wrapping_add(4)]);
    v.extend([
        original.wrapping_sub(4),
        original.wrapping_sub(1),
        original.wrapping_add(1),
        original.wrapping_add(4),
    ]);
    v.extend([original.wrapping_mul(2), original >> 1, original.swap_bytes()]);
    v
}

/// Runs `check` on mutations of `blob`; every panic is caught and counted. Returns the number of
/// mutations run, how many the reader accepted, and descriptions of the first panics.
pub struct MutationReport {
    pub runs: usize,
    pub accepted: usize,
    pub panics: usize,
    pub first_panics: Vec<String>,
    pub nop_mismatches: Vec<String>,
}

/// Runs about `random` random mutations of `blob`, plus the deterministic ones (every header
/// field and every structure-block word and property length/name offset set to extremes,
/// truncation at every 4th byte, a NOP inserted at every token boundary).
pub fn mutate_all(name: &str, blob: &[u8], random: usize, seed: u64) -> MutationReport {
    let mut report = MutationReport {
        runs: 0,
        accepted: 0,
        panics: 0,
        first_panics: Vec::new(),
        nop_mismatches: Vec::new(),
    };
    let original = match exercise(blob) {
        Outcome::Read(s) => s,
        Outcome::Rejected(e) => panic!("{name}: the unmutated tree is rejected: {e}"),
    };
    let run = |report: &mut MutationReport, what: &dyn Fn() -> String, mutated: &[u8], expect_same: bool| {
        report.runs += 1;
        match std::panic::catch_unwind(|| exercise(mutated)) {
            Ok(Outcome::Read(s)) => {
                report.accepted += 1;
                if expect_same && s != original && report.nop_mismatches.len() < 5 {
                    report.nop_mismatches.push(format!("{name}: {}", what()));
                }
            }
            Ok(Outcome::Rejected(_)) => {
                if expect_same && report.nop_mismatches.len() < 5 {
                    report.nop_mismatches.push(format!("{name}: {} (rejected)", what()));
                }
            }
            Err(payload) => {
                report.panics += 1;
                if report.first_panics.len() < 5 {
                    let message = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    report.first_panics.push(format!("{name}: {}: {message}", what()));
                }
            }
        }
    };
    let total = header(blob, 1);
    let s_off = header(blob, 2) as usize;
    let s_len = header(blob, 9) as usize;
    let toks = tokens(&blob[s_off..s_off + s_len]);
    // Header fields at extremes.
    for field in 0..10 {
        for v in extremes(header(blob, field), total) {
            let mut b = blob.to_vec();
            put32(&mut b, 4 * field, v);
            run(&mut report, &|| format!("header word {field} = {v:#x}"), &b, false);
        }
    }
    // Structure tokens replaced by every token value and a few others; property length and
    // name offset at extremes.
    for &(off, tok) in &toks {
        let at = s_off + off;
        for v in [0, 1, 2, 3, 4, 5, 8, 9, 10, 0xffff_ffff] {
            if v != tok {
                let mut b = blob.to_vec();
                put32(&mut b, at, v);
                run(&mut report, &|| format!("token at struct+{off:#x} = {v}"), &b, false);
            }
        }
        if tok == 3 {
            for field in [4, 8] {
                for v in extremes(be32(blob, at + field), total) {
                    let mut b = blob.to_vec();
                    put32(&mut b, at + field, v);
                    run(
                        &mut report,
                        &|| format!("property at struct+{off:#x} word {} = {v:#x}", field / 4),
                        &b,
                        false,
                    );
                }
            }
        }
    }
    // Truncations, with totalsize as it was and patched to the new length.
    for len in (0..blob.len()).step_by(4) {
        run(&mut report, &|| format!("truncated to {len}"), &blob[..len], false);
        if len >= 8 {
            let mut b = blob[..len].to_vec();
            put32(&mut b, 4, len as u32);
            run(&mut report, &|| format!("truncated to {len}, totalsize patched"), &b, false);
        }
    }
    // A NOP inserted at every token boundary: still valid, and must read the same.
    let (rsv, structs, strings) = blocks(blob);
    for &(off, _) in &toks {
        let mut s = structs.clone();
        s.splice(off..off, 4u32.to_be_bytes());
        let b = layout(&rsv, &s, &strings, [Block::Reservations, Block::Structure, Block::Strings]);
        run(&mut report, &|| format!("NOP inserted at struct+{off:#x}"), &b, true);
    }
    // Random: byte and bit flips (1 to 8 of them), NOP words written over random words, random
    // words set to extremes.
    let mut rng = Rng(seed | 1);
    for i in 0..random {
        let (kind, b) = random_mutation(&mut rng, blob);
        run(&mut report, &|| format!("random mutation {i} (seed {seed:#x}, kind {kind})"), &b, false);
    }
    report
}

/// One random mutation of `blob` (its kind and the bytes): 1 to 8 byte or bit flips, NOP words
/// written over structure words, or words set to extremes.
pub fn random_mutation(rng: &mut Rng, blob: &[u8]) -> (usize, Vec<u8>) {
    let total = header(blob, 1);
    let s_off = header(blob, 2) as usize;
    let s_len = header(blob, 9) as usize;
    let mut b = blob.to_vec();
    let kind = rng.below(4);
    let count = 1 + rng.below(8);
    for _ in 0..count {
        let at = rng.below(b.len());
        match kind {
            0 => b[at] = rng.next() as u8,
            1 => b[at] ^= 1 << rng.below(8),
            2 => {
                let at = (s_off + (rng.below(s_len) & !3)).min(b.len() - 4);
                put32(&mut b, at, 4);
            }
            _ => {
                let at = (at & !3).min(b.len() - 4);
                let v = extremes(be32(&b, at), total);
                let pick = v[rng.below(v.len())];
                put32(&mut b, at, pick);
            }
        }
    }
    (kind, b)
}
