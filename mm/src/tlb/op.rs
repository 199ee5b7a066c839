//! The TLB-maintenance instructions the planner emits, as plain data: the planner produces
//! them, the issuer executes them, the model decodes them. Only the EL1&0 stage-1 forms exist
//! here.

/// One `TLBI` instruction of the EL1&0 regime (current VMID). The `…is` forms are broadcast to
/// the inner-shareable domain; the others act on the executing CPU only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlbiOp {
    /// `TLBI VAE1IS`: one VA, one ASID (and global entries), all levels.
    Vae1is,
    /// `TLBI VALE1IS`: one VA, one ASID, last level only.
    Vale1is,
    /// `TLBI VAAE1IS`: one VA, all ASIDs, all levels.
    Vaae1is,
    /// `TLBI VAALE1IS`: one VA, all ASIDs, last level only.
    Vaale1is,
    /// `TLBI ASIDE1IS`: every non-global entry of one ASID.
    Aside1is,
    /// `TLBI VMALLE1IS`: every EL1&0 entry of the current VMID.
    Vmalle1is,
    /// `TLBI RVAE1IS`: a VA range, one ASID, all levels (FEAT_TLBIRANGE).
    Rvae1is,
    /// `TLBI RVALE1IS`: a VA range, one ASID, last level only (FEAT_TLBIRANGE).
    Rvale1is,
    /// `TLBI RVAAE1IS`: a VA range, all ASIDs, all levels (FEAT_TLBIRANGE).
    Rvaae1is,
    /// `TLBI RVAALE1IS`: a VA range, all ASIDs, last level only (FEAT_TLBIRANGE).
    Rvaale1is,
    /// `TLBI VAE1`: local form of [`TlbiOp::Vae1is`].
    Vae1,
    /// `TLBI VALE1`: local form of [`TlbiOp::Vale1is`].
    Vale1,
    /// `TLBI VAAE1`: local form of [`TlbiOp::Vaae1is`].
    Vaae1,
    /// `TLBI VAALE1`: local form of [`TlbiOp::Vaale1is`].
    Vaale1,
    /// `TLBI ASIDE1`: local form of [`TlbiOp::Aside1is`].
    Aside1,
    /// `TLBI VMALLE1`: local form of [`TlbiOp::Vmalle1is`].
    Vmalle1,
    /// `TLBI RVAE1`: local form of [`TlbiOp::Rvae1is`].
    Rvae1,
    /// `TLBI RVALE1`: local form of [`TlbiOp::Rvale1is`].
    Rvale1,
    /// `TLBI RVAAE1`: local form of [`TlbiOp::Rvaae1is`].
    Rvaae1,
    /// `TLBI RVAALE1`: local form of [`TlbiOp::Rvaale1is`].
    Rvaale1,
}

/// The four families of instruction, for statistics and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// One page (or the one block containing the VA): `VAE1IS` and friends.
    Page,
    /// A VA range: `RVAE1IS` and friends.
    Range,
    /// A whole ASID: `ASIDE1IS`.
    Asid,
    /// The whole EL1&0 TLB: `VMALLE1IS`.
    All,
}

impl TlbiOp {
    /// Every instruction, broadcast forms first.
    pub const ALL: [TlbiOp; 20] = [
        TlbiOp::Vae1is,
        TlbiOp::Vale1is,
        TlbiOp::Vaae1is,
        TlbiOp::Vaale1is,
        TlbiOp::Aside1is,
        TlbiOp::Vmalle1is,
        TlbiOp::Rvae1is,
        TlbiOp::Rvale1is,
        TlbiOp::Rvaae1is,
        TlbiOp::Rvaale1is,
        TlbiOp::Vae1,
        TlbiOp::Vale1,
        TlbiOp::Vaae1,
        TlbiOp::Vaale1,
        TlbiOp::Aside1,
        TlbiOp::Vmalle1,
        TlbiOp::Rvae1,
        TlbiOp::Rvale1,
        TlbiOp::Rvaae1,
        TlbiOp::Rvaale1,
    ];

    /// The single-VA form for the given scope, level filter and shareability.
    pub const fn page(all_asids: bool, leaf_only: bool, broadcast: bool) -> Self {
        match (all_asids, leaf_only, broadcast) {
            (false, false, true) => TlbiOp::Vae1is,
            (false, true, true) => TlbiOp::Vale1is,
            (true, false, true) => TlbiOp::Vaae1is,
            (true, true, true) => TlbiOp::Vaale1is,
            (false, false, false) => TlbiOp::Vae1,
            (false, true, false) => TlbiOp::Vale1,
            (true, false, false) => TlbiOp::Vaae1,
            (true, true, false) => TlbiOp::Vaale1,
        }
    }

    /// The range form for the given scope, level filter and shareability.
    pub const fn range(all_asids: bool, leaf_only: bool, broadcast: bool) -> Self {
        match (all_asids, leaf_only, broadcast) {
            (false, false, true) => TlbiOp::Rvae1is,
            (false, true, true) => TlbiOp::Rvale1is,
            (true, false, true) => TlbiOp::Rvaae1is,
            (true, true, true) => TlbiOp::Rvaale1is,
            (false, false, false) => TlbiOp::Rvae1,
            (false, true, false) => TlbiOp::Rvale1,
            (true, false, false) => TlbiOp::Rvaae1,
            (true, true, false) => TlbiOp::Rvaale1,
        }
    }

    /// Which family the instruction belongs to.
    pub const fn kind(self) -> OpKind {
        use TlbiOp::*;
        match self {
            Vae1is | Vale1is | Vaae1is | Vaale1is | Vae1 | Vale1 | Vaae1 | Vaale1 => OpKind::Page,
            Rvae1is | Rvale1is | Rvaae1is | Rvaale1is | Rvae1 | Rvale1 | Rvaae1 | Rvaale1 => OpKind::Range,
            Aside1is | Aside1 => OpKind::Asid,
            Vmalle1is | Vmalle1 => OpKind::All,
        }
    }

    /// Whether the instruction is broadcast to the inner-shareable domain.
    pub const fn is_broadcast(self) -> bool {
        use TlbiOp::*;
        matches!(
            self,
            Vae1is
                | Vale1is
                | Vaae1is
                | Vaale1is
                | Aside1is
                | Vmalle1is
                | Rvae1is
                | Rvale1is
                | Rvaae1is
                | Rvaale1is
        )
    }

    /// Whether the instruction only removes last-level (leaf) entries, keeping cached table
    /// entries.
    pub const fn is_leaf_only(self) -> bool {
        use TlbiOp::*;
        matches!(self, Vale1is | Vaale1is | Rvale1is | Rvaale1is | Vale1 | Vaale1 | Rvale1 | Rvaale1)
    }

    /// Whether the instruction ignores the ASID (all-ASID forms and `VMALLE1*`); its operand's
    /// ASID field is then RES0.
    pub const fn is_all_asids(self) -> bool {
        use TlbiOp::*;
        matches!(
            self,
            Vaae1is
                | Vaale1is
                | Rvaae1is
                | Rvaale1is
                | Vaae1
                | Vaale1
                | Rvaae1
                | Rvaale1
                | Vmalle1is
                | Vmalle1
        )
    }

    /// Whether the instruction takes a register operand (all but `VMALLE1*`).
    pub const fn has_operand(self) -> bool {
        !matches!(self, TlbiOp::Vmalle1is | TlbiOp::Vmalle1)
    }

    /// The assembler mnemonic (lower case), e.g. `"rvae1is"`.
    pub const fn mnemonic(self) -> &'static str {
        use TlbiOp::*;
        match self {
            Vae1is => "vae1is",
            Vale1is => "vale1is",
            Vaae1is => "vaae1is",
            Vaale1is => "vaale1is",
            Aside1is => "aside1is",
            Vmalle1is => "vmalle1is",
            Rvae1is => "rvae1is",
            Rvale1is => "rvale1is",
            Rvaae1is => "rvaae1is",
            Rvaale1is => "rvaale1is",
            Vae1 => "vae1",
            Vale1 => "vale1",
            Vaae1 => "vaae1",
            Vaale1 => "vaale1",
            Aside1 => "aside1",
            Vmalle1 => "vmalle1",
            Rvae1 => "rvae1",
            Rvale1 => "rvale1",
            Rvaae1 => "rvaae1",
            Rvaale1 => "rvaale1",
        }
    }

    /// The `SYS #0, C8, Cm, #op2, Xt` coordinates `(CRm, op2)` of the instruction (op0 = 1,
    /// op1 = 0, CRn = 8 for every form here).
    pub const fn sys_crm_op2(self) -> (u32, u32) {
        use TlbiOp::*;
        // CRm: 3 = IS single/whole, 7 = local single/whole, 2 = IS range, 6 = local range.
        // op2: 0 VMALL, 1 VAE, 2 ASIDE, 3 VAAE, 5 VALE, 7 VAALE (range: 1, 3, 5, 7 alike).
        match self {
            Vmalle1is => (3, 0),
            Vae1is => (3, 1),
            Aside1is => (3, 2),
            Vaae1is => (3, 3),
            Vale1is => (3, 5),
            Vaale1is => (3, 7),
            Vmalle1 => (7, 0),
            Vae1 => (7, 1),
            Aside1 => (7, 2),
            Vaae1 => (7, 3),
            Vale1 => (7, 5),
            Vaale1 => (7, 7),
            Rvae1is => (2, 1),
            Rvaae1is => (2, 3),
            Rvale1is => (2, 5),
            Rvaale1is => (2, 7),
            Rvae1 => (6, 1),
            Rvaae1 => (6, 3),
            Rvale1 => (6, 5),
            Rvaale1 => (6, 7),
        }
    }

    /// The A64 machine encoding of the instruction with register `Xt` = `rt` (31 = XZR, used by
    /// `VMALLE1*`), e.g. `0xd508_8220 | rt` for `TLBI RVAE1IS`.
    pub const fn encoding(self, rt: u32) -> u32 {
        let (crm, op2) = self.sys_crm_op2();
        0xd508_0000 | (8 << 12) | (crm << 8) | (op2 << 5) | (rt & 31)
    }
}

/// One planned instruction: an op and its `Xt` operand (0 for `VMALLE1*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlbInstr {
    /// The instruction.
    pub op: TlbiOp,
    /// Its 64-bit register operand (see [`crate::tlb::operand`]).
    pub operand: u64,
}
