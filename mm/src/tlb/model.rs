//! A model of what one TLB instruction invalidates, following the Arm rules (Arm ARM C5.5 and
//! the `TLBIRange()` pseudocode), for host tests: [`decode`] turns an instruction into an
//! [`Invalidation`], and [`Invalidation::hits`] says whether it removes a given cached entry.
//! The model is deliberately strict: an entry is removed only when the architecture requires
//! it (a last-level op keeps walk-cache entries, `ASIDE1IS` keeps global entries, a wrong TG or
//! TTL removes nothing), so that a plan that relies on over-invalidation fails the tests.
//!
//! The model TLB itself is the caller's collection of [`ModelEntry`], e.g.
//! `entries.retain(|e| !inv.hits(e))`.
//!
//! The rules depend on the translation format ([`Format`]): the granule the `TG` and `TTL` fields
//! must name, the page a single-VA op removes, the unit of a range op's BaseADDR. [`decode_in`]
//! takes it; [`decode`] is the build's format.

use super::op::{OpKind, TlbInstr, TlbiOp};
use super::operand::{RangeOperand, page_operand_ttl, page_operand_va};
use crate::addr::VirtAddr;
use crate::granule::{Format, Granule};

/// A cached translation in the model TLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelEntry {
    /// First VA translated by the entry (aligned to its size).
    pub va: VirtAddr,
    /// Level of the descriptor the entry caches (0..=3).
    pub level: u8,
    /// `true` for a leaf (page or block) entry, `false` for a cached table descriptor
    /// (walk-cache entry).
    pub leaf: bool,
    /// ASID tag: `None` for a global entry (nG = 0).
    pub asid: Option<u16>,
}

impl ModelEntry {
    /// Bytes of VA the entry translates with the build's format: 4 KiB at level 3, 2 MiB at 2,
    /// 1 GiB at 1, 512 GiB at 0.
    pub const fn size(&self) -> u64 {
        self.size_in(Format::BUILD.granule)
    }

    /// Bytes of VA the entry translates with `granule`.
    pub const fn size_in(&self, granule: Granule) -> u64 {
        1 << granule.level_shift(self.level as i32)
    }
}

/// Which ASIDs an invalidation applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsidMatch {
    /// Every entry (all-ASID forms, `VMALLE1*`).
    Any,
    /// Entries tagged with this ASID, and global entries (`VAE1IS`, `RVAE1IS`, …).
    AsidOrGlobal(u16),
    /// Only non-global entries tagged with this ASID (`ASIDE1IS`).
    NonGlobal(u16),
}

/// Which VAs an invalidation applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VaMatch {
    /// Every VA.
    All,
    /// `[start, start + len)`, with `len` in bytes (up to 2^64, so `u128`).
    Range {
        /// First VA.
        start: VirtAddr,
        /// Length in bytes.
        len: u128,
    },
}

/// What one instruction invalidates, decoded from its operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Invalidation {
    /// The instruction.
    pub op: TlbiOp,
    /// VAs it applies to.
    pub va: VaMatch,
    /// ASIDs it applies to.
    pub asid: AsidMatch,
    /// Only last-level (leaf) entries.
    pub leaf_only: bool,
    /// Level hint from the TTL field, `None` for "any level".
    pub level_hint: Option<u8>,
    /// `false` when the operand makes the instruction invalidate nothing: TG not the granule in
    /// use (range ops), or a TTL that names another granule or a reserved level (single-VA ops).
    pub effective: bool,
    /// The granule of the regime, for the sizes of the entries it is matched against.
    pub granule: Granule,
}

/// Decodes one instruction with the build's format (see [`decode_in`]).
pub fn decode(instr: TlbInstr) -> Invalidation {
    decode_in(Format::BUILD, instr)
}

/// Decodes one instruction for a regime whose tables use `format` (see the module
/// documentation for the rules applied).
pub fn decode_in(format: Format, instr: TlbInstr) -> Invalidation {
    let granule = format.granule;
    let tg = granule.tlbi_tg();
    let op = instr.op;
    let x = instr.operand;
    let asid_field = (x >> 48) as u16;
    let asid = if op.is_all_asids() {
        AsidMatch::Any
    } else if op.kind() == OpKind::Asid {
        AsidMatch::NonGlobal(asid_field)
    } else {
        AsidMatch::AsidOrGlobal(asid_field)
    };
    let leaf_only = op.is_leaf_only();
    match op.kind() {
        OpKind::All | OpKind::Asid => Invalidation {
            op,
            va: VaMatch::All,
            asid,
            leaf_only: false,
            level_hint: None,
            effective: true,
            granule,
        },
        OpKind::Page => {
            // TTL [47:44]: 0b00xx no hint; TTL[3:2] = the granule in use, TTL[1:0] = the level,
            // where 0b00 is reserved except for level 0 of the 4 KiB granule with DS; a TTL that
            // names another granule or a reserved level: "no entries are required to be
            // invalidated" (C5.5.60).
            let ttl = page_operand_ttl(x);
            let (effective, level_hint) = match ttl >> 2 {
                0 => (true, None),
                g if g == tg && format.ttl((ttl & 3) as i32) == Some(ttl) => (true, Some((ttl & 3) as u8)),
                _ => (false, None),
            };
            // The op removes the entry that translates the VA: the page containing it.
            let start = page_operand_va(x).align_down(granule.size());
            Invalidation {
                op,
                va: VaMatch::Range { start, len: u128::from(granule.size()) },
                asid,
                leaf_only,
                level_hint,
                effective,
                granule,
            }
        }
        OpKind::Range => {
            let r = RangeOperand::decode(x);
            Invalidation {
                op,
                va: VaMatch::Range { start: r.start_in(format), len: r.bytes_in(format) },
                asid,
                leaf_only,
                level_hint: if r.ttl == 0 { None } else { Some(r.ttl) },
                // TLBIRange(): TG 0b00 is invalid, any other value that is not the granule in
                // use makes the op invalidate nothing that the tests can rely on.
                effective: u64::from(r.tg) == tg,
                granule,
            }
        }
    }
}

impl Invalidation {
    /// Whether the instruction is required to remove `entry`.
    pub fn hits(&self, entry: &ModelEntry) -> bool {
        if !self.effective {
            return false;
        }
        if self.leaf_only && !entry.leaf {
            return false;
        }
        if let Some(level) = self.level_hint {
            // Leaf entries only at the hinted level; table entries only above it.
            let ok = if entry.leaf { entry.level == level } else { entry.level < level };
            if !ok {
                return false;
            }
        }
        let asid_ok = match self.asid {
            AsidMatch::Any => true,
            AsidMatch::AsidOrGlobal(a) => entry.asid.is_none() || entry.asid == Some(a),
            AsidMatch::NonGlobal(a) => entry.asid == Some(a),
        };
        if !asid_ok {
            return false;
        }
        match self.va {
            VaMatch::All => true,
            VaMatch::Range { start, len } => {
                // An entry is hit if it translates any VA of the range (a block that only
                // partly overlaps is hit too).
                let (s, e) = self.va_bounds_inner(start, len);
                let es = u128::from(entry.va.as_u64());
                let ee = es + u128::from(entry.size_in(self.granule));
                es < e && s < ee
            }
        }
    }

    /// The VA interval `[start, end)` the instruction covers, in 128-bit arithmetic (so a range
    /// reaching the top of the address space ends at 2^64), or `None` for the whole-ASID and
    /// whole-TLB forms.
    pub fn va_bounds(&self) -> Option<(u128, u128)> {
        match self.va {
            VaMatch::All => None,
            VaMatch::Range { start, len } => Some(self.va_bounds_inner(start, len)),
        }
    }

    fn va_bounds_inner(&self, start: VirtAddr, len: u128) -> (u128, u128) {
        let s = u128::from(start.as_u64());
        (s, s + len)
    }

    /// Whether QEMU 7.2 would ignore this instruction: it computes a range op's length in 32
    /// bits, so ops of 4 GiB or more invalidate nothing there (see [`crate::tlb`], the range bound).
    pub fn ignored_by_qemu_7_2(&self) -> bool {
        match (self.op.kind(), self.va) {
            (OpKind::Range, VaMatch::Range { len, .. }) => len >= 1 << 32,
            _ => false,
        }
    }
}
