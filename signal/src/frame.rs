//! The arm64 signal frame, byte for byte as Linux builds it (`arch/arm64/kernel/signal.c`,
//! `arch/arm64/include/uapi/asm/{sigcontext,ucontext}.h`):
//!
//! ```text
//! struct rt_sigframe {                      // at the handler's sp, 16-aligned, 4688 bytes
//!     siginfo_t info;                       //   0
//!     struct ucontext {                     // 128
//!         u64 uc_flags;                     //   +0
//!         struct ucontext *uc_link;         //   +8
//!         stack_t uc_stack;                 //  +16
//!         sigset_t uc_sigmask;              //  +40, then padding to glibc's 1024-bit sigset
//!         struct sigcontext uc_mcontext {   // +176 (16-aligned): frame offset 304
//!             u64 fault_address, regs[31], sp, pc, pstate;
//!             u8 __reserved[4096];          // frame offset 592, 16-aligned: the records
//!         };
//!     } uc;
//! };
//! struct frame_record { u64 fp, lr; };      // just above, for unwinders (x29 points at it)
//! ```
//!
//! The records in `__reserved` are `{ u32 magic; u32 size; ... }`, each 16-aligned: the
//! FP/SIMD state (`fpsimd_context`: fpsr, fpcr, `vregs[32]`; always present), the ESR of a fault
//! (`esr_context`, for signals raised by one), and a terminating record of zeros. `rt_sigreturn`
//! walks them as Linux's `parse_user_sigframe` does and refuses a frame that is not well formed.
use crate::action::SigAction;
use crate::info::{SIGINFO_SIZE, SigInfo};
use crate::num::{SA_RESTORER, SA_SIGINFO};
use crate::set::SigSet;
use crate::stack::{STACK_T_SIZE, StackT};
use crate::{get_u32, get_u64, put_u32, put_u64};

/// `sizeof(struct rt_sigframe)`.
pub const FRAME_SIZE: usize = 4688;
/// Offset of `uc` in the frame.
pub const UC: usize = SIGINFO_SIZE;
/// Offset of `uc.uc_flags`.
pub const UC_FLAGS: usize = UC;
/// Offset of `uc.uc_link`.
pub const UC_LINK: usize = UC + 8;
/// Offset of `uc.uc_stack`.
pub const UC_STACK: usize = UC + 16;
/// Offset of `uc.uc_sigmask`.
pub const UC_SIGMASK: usize = UC + 40;
/// Offset of `uc.uc_mcontext` (`struct sigcontext`).
pub const MCONTEXT: usize = UC + 176;
/// Offset of `uc_mcontext.fault_address`.
pub const FAULT_ADDRESS: usize = MCONTEXT;
/// Offset of `uc_mcontext.regs[0]`.
pub const REGS: usize = MCONTEXT + 8;
/// Offset of `uc_mcontext.sp`.
pub const SP: usize = MCONTEXT + 256;
/// Offset of `uc_mcontext.pc`.
pub const PC: usize = MCONTEXT + 264;
/// Offset of `uc_mcontext.pstate`.
pub const PSTATE: usize = MCONTEXT + 272;
/// Offset of `uc_mcontext.__reserved`.
pub const RESERVED: usize = MCONTEXT + 288;
/// Size of `__reserved`.
pub const RESERVED_SIZE: usize = 4096;
/// Bytes of `struct frame_record` above the frame.
pub const RECORD_SIZE: usize = 16;
/// Bytes the kernel writes for a signal: the frame and the frame record above it.
pub const TOTAL: usize = FRAME_SIZE + RECORD_SIZE;

/// `fpsimd_context.head.magic`.
pub const FPSIMD_MAGIC: u32 = 0x4650_8001;
/// `sizeof(struct fpsimd_context)`: head, fpsr, fpcr, `vregs[32]`.
pub const FPSIMD_SIZE: usize = 528;
/// `esr_context.head.magic`.
pub const ESR_MAGIC: u32 = 0x4553_5201;
/// `sizeof(struct esr_context)`.
pub const ESR_SIZE: usize = 16;
/// The `rt_sigreturn` stub a handler returns to without SA_RESTORER: `mov x8, #139; svc #0`, as
/// in Linux's vDSO (`arch/arm64/kernel/vdso/sigreturn.S`).
pub const SIGRETURN_CODE: [u32; 2] = [0xd280_1168, 0xd400_0001];

/// `extra_context.head.magic` (not produced here, so refused).
pub const EXTRA_MAGIC: u32 = 0x4558_5401;

const _: () = assert!(RESERVED == 592 && RESERVED.is_multiple_of(16) && MCONTEXT.is_multiple_of(16));
const _: () = assert!(RESERVED + RESERVED_SIZE == FRAME_SIZE && FRAME_SIZE.is_multiple_of(16));

/// PSTATE bits a program may carry through a frame: NZCV, TCO, DIT, SSBS, BTYPE.
pub const PSTATE_USER_BITS: u64 = 0xf000_0000 | (1 << 25) | (1 << 24) | (1 << 12) | (3 << 10);
/// PSTATE bits that must be zero for an AArch64 EL0t context: M[4:0] and DAIF.
const PSTATE_MUST_BE_ZERO: u64 = 0x1f | 0x3c0;

/// A thread's user state as a frame holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// x0..x30.
    pub x: [u64; 31],
    /// SP_EL0.
    pub sp: u64,
    /// The PC to resume at.
    pub pc: u64,
    /// PSTATE (SPSR_EL1).
    pub pstate: u64,
    /// V0..V31.
    pub v: [u128; 32],
    /// FPSR.
    pub fpsr: u64,
    /// FPCR.
    pub fpcr: u64,
}

impl Context {
    /// Everything zero.
    pub const ZERO: Self = Self { x: [0; 31], sp: 0, pc: 0, pstate: 0, v: [0; 32], fpsr: 0, fpcr: 0 };
}

/// Where a frame goes below `top` (the stack pointer, or the top of the alternate stack).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The frame (the handler's sp).
    pub frame: u64,
    /// The frame record, right above it (the handler's x29).
    pub record: u64,
}

impl Placement {
    /// `get_sigframe`: the record 16-aligned below `top`, the frame below the record. `None`
    /// if that would wrap below address 0.
    pub fn below(top: u64) -> Option<Self> {
        let record = top.checked_sub(RECORD_SIZE as u64)? & !15;
        let frame = record.checked_sub(FRAME_SIZE as u64)?;
        Some(Self { frame, record })
    }
}

/// What a frame records besides the registers.
#[derive(Clone, Copy, Debug)]
pub struct Saved {
    /// The signal's information (written only with SA_SIGINFO, as Linux does).
    pub info: Option<SigInfo>,
    /// `uc_stack`: the alternate stack as it was.
    pub stack: StackT,
    /// `uc_sigmask`: the mask to restore.
    pub mask: SigSet,
    /// The fault (FAR, ESR) for a signal raised by one: `fault_address` and an `esr_context`.
    pub fault: Option<(u64, u64)>,
}

/// Most bytes of a frame [`build`] fills (then only the frame record above it): the header and
/// the records up to the terminator, with an ESR record.
pub const WRITTEN_MAX: usize = RESERVED + FPSIMD_SIZE + ESR_SIZE + 16;

/// Builds the frame and its frame record for a thread in state `ctx` into `out` (`TOTAL` bytes
/// for `Placement::frame`). Returns how many leading bytes of the frame it filled: as Linux, the
/// kernel writes those and the frame record (`out[FRAME_SIZE..]`), and leaves the rest of
/// `__reserved` as the stack had it.
pub fn build(ctx: &Context, saved: &Saved, out: &mut [u8; TOTAL]) -> usize {
    out.fill(0);
    if let Some(info) = &saved.info {
        out[..SIGINFO_SIZE].copy_from_slice(&info.0);
    }
    // uc_flags = 0, uc_link = NULL (already zero).
    out[UC_STACK..UC_STACK + STACK_T_SIZE].copy_from_slice(&saved.stack.to_bytes());
    put_u64(out, UC_SIGMASK, saved.mask.0);
    put_u64(out, FAULT_ADDRESS, saved.fault.map_or(0, |(far, _)| far));
    for (i, x) in ctx.x.iter().enumerate() {
        put_u64(out, REGS + 8 * i, *x);
    }
    put_u64(out, SP, ctx.sp);
    put_u64(out, PC, ctx.pc);
    put_u64(out, PSTATE, ctx.pstate);
    let mut at = RESERVED;
    put_u32(out, at, FPSIMD_MAGIC);
    put_u32(out, at + 4, FPSIMD_SIZE as u32);
    put_u32(out, at + 8, ctx.fpsr as u32);
    put_u32(out, at + 12, ctx.fpcr as u32);
    for (i, v) in ctx.v.iter().enumerate() {
        out[at + 16 + 16 * i..at + 32 + 16 * i].copy_from_slice(&v.to_le_bytes());
    }
    at += FPSIMD_SIZE;
    if let Some((_, esr)) = saved.fault {
        put_u32(out, at, ESR_MAGIC);
        put_u32(out, at + 4, ESR_SIZE as u32);
        put_u64(out, at + 8, esr);
        at += ESR_SIZE;
    }
    // The terminator: magic 0, size 0 (already zero at `at`), padded to 16 as Linux allocates it.
    // The frame record {fp, lr} of the interrupted code, so unwinders walk through the handler.
    put_u64(out, FRAME_SIZE, ctx.x[29]);
    put_u64(out, FRAME_SIZE + 8, ctx.x[30]);
    at + 16
}

/// The registers a handler starts with (`setup_return`): x0 = the signal, x1 = &info and
/// x2 = &uc with SA_SIGINFO, sp = the frame, x29 = the frame record, x30 = where the handler
/// returns: the action's restorer with SA_RESTORER (musl always sets it), else `trampoline`, the
/// kernel's `rt_sigreturn` stub (Linux's vDSO `__kernel_rt_sigreturn`, which glibc relies on),
/// pc = the handler. TCO is cleared in PSTATE and BTYPE set as Linux's `setup_return` does: with
/// `bti` (the CPU has FEAT_BTI) to "call" (0b10), so that a handler in a guarded page must begin
/// with a landing pad, else to 0; FP/SIMD registers are left as they were.
pub fn enter_handler(
    ctx: &mut Context,
    at: Placement,
    sig: u32,
    action: &SigAction,
    trampoline: u64,
    bti: bool,
) {
    ctx.x[0] = u64::from(sig);
    if action.flags & SA_SIGINFO != 0 {
        ctx.x[1] = at.frame;
        ctx.x[2] = at.frame + UC as u64;
    }
    ctx.sp = at.frame;
    ctx.x[29] = at.record;
    ctx.x[30] = if action.flags & SA_RESTORER != 0 { action.restorer } else { trampoline };
    ctx.pc = action.handler;
    ctx.pstate &= !((3 << 10) | (1 << 25));
    if bti {
        ctx.pstate |= 0b10 << 10;
    }
}

/// Why `rt_sigreturn` refused a frame (the program then gets SIGSEGV).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadFrame {
    /// sp is not 16-aligned.
    Misaligned,
    /// The saved PSTATE is not an AArch64 EL0t state with DAIF clear.
    Pstate,
    /// A record at this offset in `__reserved` is malformed, unknown, repeated or overruns.
    Record(usize),
    /// No FP/SIMD record.
    NoFpsimd,
    /// The records go past the `valid` bytes given: read the whole frame and parse again.
    Truncated,
}

/// What a good frame restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The registers and FP/SIMD state.
    pub ctx: Context,
    /// `uc_sigmask` (SIGKILL and SIGSTOP removed).
    pub mask: SigSet,
    /// `uc_stack`.
    pub stack: StackT,
}

/// The bytes of a frame that `rt_sigreturn` reads before it can find the frame bad: up to the
/// end of `pstate` in the machine context.
pub const REGISTERS_END: usize = PSTATE + 8;

/// What a bad frame leaves behind. Linux's `restore_sigframe` (arch/arm64/kernel/signal.c)
/// sets the signal mask and copies x0–x30, sp, pc and pstate from the frame *before* it checks
/// pstate (`valid_user_regs`, which keeps only NZCV of an invalid pstate) and the records; on a
/// bad frame `sys_rt_sigreturn` then raises SIGSEGV at the new sp. So the thread takes that
/// SIGSEGV with the frame's registers, on the frame's stack; the FP/SIMD state stays as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clobbered {
    /// `uc_sigmask` (SIGKILL and SIGSTOP removed).
    pub mask: SigSet,
    /// x0..x30 from the frame.
    pub x: [u64; 31],
    /// sp from the frame: where the SIGSEGV is reported and delivered.
    pub sp: u64,
    /// pc from the frame.
    pub pc: u64,
    /// pstate from the frame, made valid as Linux's `valid_native_regs` makes it.
    pub pstate: u64,
}

/// The registers a bad frame whose first [`REGISTERS_END`] bytes were readable leaves behind
/// (see [`Clobbered`]).
pub fn clobbered(f: &[u8; FRAME_SIZE]) -> Clobbered {
    let mut x = [0u64; 31];
    for (i, r) in x.iter_mut().enumerate() {
        *r = get_u64(f, REGS + 8 * i);
    }
    let pstate = get_u64(f, PSTATE);
    let pstate =
        if pstate & PSTATE_MUST_BE_ZERO != 0 { pstate & 0xf000_0000 } else { pstate & PSTATE_USER_BITS };
    Clobbered {
        mask: SigSet(get_u64(f, UC_SIGMASK)).blockable(),
        x,
        sp: get_u64(f, SP),
        pc: get_u64(f, PC),
        pstate,
    }
}

/// Whether a frame may start at `sp` (Linux: 16-aligned, else a bad frame).
pub fn frame_address_ok(sp: u64) -> bool {
    sp.is_multiple_of(16)
}

/// Validates and decodes a frame read back from the program's stack (`restore_sigframe`), of
/// which the first `valid` bytes were read (at least [`RESERVED`]; a frame built here needs
/// [`WRITTEN_MAX`] at most, so the kernel reads that much first).
///
/// # Errors
/// [`BadFrame`] for anything Linux would refuse; [`BadFrame::Truncated`] if the records go past
/// `valid` (never when `valid` is `FRAME_SIZE`).
pub fn parse(f: &[u8; FRAME_SIZE], valid: usize) -> Result<Restored, BadFrame> {
    if valid < RESERVED {
        return Err(BadFrame::Truncated);
    }
    let mut ctx = Context::ZERO;
    for (i, x) in ctx.x.iter_mut().enumerate() {
        *x = get_u64(f, REGS + 8 * i);
    }
    ctx.sp = get_u64(f, SP);
    ctx.pc = get_u64(f, PC);
    let pstate = get_u64(f, PSTATE);
    if pstate & PSTATE_MUST_BE_ZERO != 0 {
        return Err(BadFrame::Pstate);
    }
    ctx.pstate = pstate & PSTATE_USER_BITS;
    let mut fpsimd = None;
    let mut offset = 0;
    loop {
        if RESERVED_SIZE - offset < 8 || !offset.is_multiple_of(16) {
            return Err(BadFrame::Record(offset));
        }
        let head = RESERVED + offset;
        if head + 8 > valid {
            return Err(BadFrame::Truncated);
        }
        let magic = get_u32(f, head);
        let size = get_u32(f, head + 4) as usize;
        if RESERVED_SIZE - offset < size {
            return Err(BadFrame::Record(offset));
        }
        if head + size > valid {
            return Err(BadFrame::Truncated);
        }
        match magic {
            0 if size == 0 => break,
            FPSIMD_MAGIC if fpsimd.is_none() && size == FPSIMD_SIZE => fpsimd = Some(head),
            ESR_MAGIC => {} // informational: ignored on return
            _ => return Err(BadFrame::Record(offset)),
        }
        if size < 8 {
            return Err(BadFrame::Record(offset));
        }
        offset += size;
    }
    let fp = fpsimd.ok_or(BadFrame::NoFpsimd)?;
    ctx.fpsr = u64::from(get_u32(f, fp + 8));
    ctx.fpcr = u64::from(get_u32(f, fp + 12));
    for (i, v) in ctx.v.iter_mut().enumerate() {
        let mut b = [0u8; 16];
        b.copy_from_slice(&f[fp + 16 + 16 * i..fp + 32 + 16 * i]);
        *v = u128::from_le_bytes(b);
    }
    let mut st = [0u8; STACK_T_SIZE];
    st.copy_from_slice(&f[UC_STACK..UC_STACK + STACK_T_SIZE]);
    Ok(Restored { ctx, mask: SigSet(get_u64(f, UC_SIGMASK)).blockable(), stack: StackT::from_bytes(&st) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::num::*;
    use alloc::boxed::Box;

    fn sample() -> Context {
        let mut c = Context::ZERO;
        for i in 0..31 {
            c.x[i] = 0x1000 + i as u64;
        }
        c.sp = 0x7fff_f000;
        c.pc = 0x40_1234;
        c.pstate = 0x6000_0000;
        for i in 0..32 {
            c.v[i] = (0xabcd_0000_u128 + i as u128) << 64 | i as u128;
        }
        c.fpsr = 0x10;
        c.fpcr = 0x0300_0000;
        c
    }

    fn built(ctx: &Context, saved: &Saved) -> Box<[u8; TOTAL]> {
        let mut out = Box::new([0u8; TOTAL]);
        let used = build(ctx, saved, &mut out);
        assert_eq!(used, if saved.fault.is_some() { WRITTEN_MAX } else { WRITTEN_MAX - ESR_SIZE });
        out
    }

    fn frame_of(total: &[u8; TOTAL]) -> Box<[u8; FRAME_SIZE]> {
        let mut f = Box::new([0u8; FRAME_SIZE]);
        f.copy_from_slice(&total[..FRAME_SIZE]);
        f
    }

    fn saved(fault: Option<(u64, u64)>) -> Saved {
        Saved {
            info: Some(SigInfo::fault(SIGSEGV, SEGV_ACCERR, 0x5000)),
            stack: StackT { sp: 0x9000_0000, flags: 0, size: 0x4000 },
            mask: SigSet::of(SIGUSR1),
            fault,
        }
    }

    #[test]
    fn trampoline_is_mov_x8_139_svc_0() {
        // MOVZ X8, #imm16: 0xd2800000 | imm16 << 5 | Rd; SVC #0: 0xd4000001.
        assert_eq!(SIGRETURN_CODE[0], 0xd280_0000 | (139 << 5) | 8);
        assert_eq!(SIGRETURN_CODE[1], 0xd400_0001);
    }

    #[test]
    fn offsets_are_linuxs() {
        // The numbers glibc's and the kernel's headers give (offsetof on aarch64).
        assert_eq!((UC, UC_STACK, UC_SIGMASK, MCONTEXT), (128, 144, 168, 304));
        assert_eq!((REGS, SP, PC, PSTATE, RESERVED), (312, 560, 568, 576, 592));
        assert_eq!(FRAME_SIZE, 128 + 176 + 288 + 4096);
    }

    #[test]
    fn frame_bytes_and_records() {
        let c = sample();
        let t = built(&c, &saved(Some((0x5008, 0x9200_004f))));
        assert_eq!(get_u32(&t[..], 0), SIGSEGV);
        assert_eq!(get_u64(&t[..], 16), 0x5000);
        assert_eq!(get_u64(&t[..], UC_FLAGS), 0);
        assert_eq!(get_u64(&t[..], UC_LINK), 0);
        assert_eq!(get_u64(&t[..], UC_STACK), 0x9000_0000);
        assert_eq!(get_u64(&t[..], UC_STACK + 16), 0x4000);
        assert_eq!(get_u64(&t[..], UC_SIGMASK), 1 << 9);
        assert_eq!(get_u64(&t[..], FAULT_ADDRESS), 0x5008);
        assert_eq!(get_u64(&t[..], REGS + 8 * 5), 0x1005);
        assert_eq!(get_u64(&t[..], SP), 0x7fff_f000);
        assert_eq!(get_u64(&t[..], PC), 0x40_1234);
        assert_eq!(get_u64(&t[..], PSTATE), 0x6000_0000);
        // fpsimd_context first in __reserved: magic, size, fpsr, fpcr, then vregs at +16.
        assert_eq!(get_u32(&t[..], 592), 0x4650_8001);
        assert_eq!(get_u32(&t[..], 596), 528);
        assert_eq!(get_u32(&t[..], 600), 0x10);
        assert_eq!(get_u32(&t[..], 604), 0x0300_0000);
        assert_eq!(get_u64(&t[..], 608 + 16 * 3), 3);
        assert_eq!(get_u64(&t[..], 608 + 16 * 3 + 8), 0xabcd_0003);
        // esr_context next, then the terminator.
        assert_eq!(get_u32(&t[..], 592 + 528), 0x4553_5201);
        assert_eq!(get_u32(&t[..], 592 + 528 + 4), 16);
        assert_eq!(get_u64(&t[..], 592 + 528 + 8), 0x9200_004f);
        assert_eq!(get_u64(&t[..], 592 + 528 + 16), 0);
        // Frame record above the frame: the interrupted fp and lr.
        assert_eq!(get_u64(&t[..], FRAME_SIZE), 0x1000 + 29);
        assert_eq!(get_u64(&t[..], FRAME_SIZE + 8), 0x1000 + 30);
        // No fault: no esr_context, no fault address; without SA_SIGINFO no info.
        let t = built(&c, &Saved { info: None, fault: None, ..saved(None) });
        assert_eq!(get_u64(&t[..], 592 + 528), 0);
        assert_eq!(get_u64(&t[..], FAULT_ADDRESS), 0);
        assert_eq!(get_u32(&t[..], 0), 0);
    }

    #[test]
    fn build_then_parse_round_trips() {
        let c = sample();
        for fault in [None, Some((1, 2))] {
            let r = parse(&frame_of(&built(&c, &saved(fault))), FRAME_SIZE).unwrap();
            assert_eq!(r.ctx, c);
            assert_eq!(r.mask, SigSet::of(SIGUSR1));
            assert_eq!(r.stack, StackT { sp: 0x9000_0000, flags: 0, size: 0x4000 });
        }
    }

    #[test]
    fn placement_and_handler_entry() {
        let p = Placement::below(0x7fff_f008).unwrap();
        assert_eq!(p.record, 0x7fff_eff0);
        assert_eq!(p.frame, 0x7fff_eff0 - 4688);
        assert!(frame_address_ok(p.frame));
        assert_eq!(Placement::below(100), None);
        let mut c = sample();
        c.pstate |= 3 << 10;
        let a = SigAction {
            handler: 0x40_2000,
            flags: SA_SIGINFO | SA_RESTORER,
            restorer: 0x40_3000,
            mask: SigSet::EMPTY,
        };
        enter_handler(&mut c, p, SIGSEGV, &a, 0x9999, false);
        assert_eq!((c.x[0], c.x[1], c.x[2]), (11, p.frame, p.frame + 128));
        assert_eq!((c.sp, c.x[29], c.x[30], c.pc), (p.frame, p.record, 0x40_3000, 0x40_2000));
        assert_eq!(c.pstate & (3 << 10), 0);
        assert_eq!(c.v, sample().v);
        let mut c = sample();
        c.pstate |= 3 << 10;
        enter_handler(&mut c, p, SIGUSR1, &SigAction { flags: 0, ..a }, 0x9999, true);
        assert_eq!((c.x[0], c.x[1], c.x[2], c.x[30]), (10, 0x1001, 0x1002, 0x9999));
        assert_eq!(c.pstate & (3 << 10), 0b10 << 10, "with BTI the handler is entered as a call");
    }

    #[test]
    fn bad_frames_are_refused() {
        let good = frame_of(&built(&sample(), &saved(Some((1, 2)))));
        let mut f = good.clone();
        put_u64(&mut f[..], PSTATE, 0x3c5); // EL1h, DAIF masked
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Pstate));
        let mut f = good.clone();
        put_u64(&mut f[..], PSTATE, 0x10); // AArch32
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Pstate));
        let mut f = good.clone();
        put_u64(&mut f[..], PSTATE, 0x6040_0000); // PAN set by the program: dropped
        assert_eq!(parse(&f, FRAME_SIZE).unwrap().ctx.pstate, 0x6000_0000);
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED, 0x1234_5678); // unknown record
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(0)));
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED + 4, 512); // FP/SIMD record of the wrong size
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(0)));
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED + 4, 8000); // overruns __reserved
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(0)));
        // Only an ESR record, then the end: no FP/SIMD state.
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED, ESR_MAGIC);
        put_u32(&mut f[..], RESERVED + 4, 16);
        put_u64(&mut f[..], RESERVED + 16, 0);
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::NoFpsimd));
        // A second FP/SIMD record.
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED + 528, FPSIMD_MAGIC);
        put_u32(&mut f[..], RESERVED + 528 + 4, 528);
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(528)));
        // A record whose size is not a multiple of 16 misaligns the next one.
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED + 528 + 4, 24);
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(552)));
        // A zero-size non-terminator record would loop forever: refused.
        let mut f = good.clone();
        put_u32(&mut f[..], RESERVED + 528 + 4, 0);
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(528)));
        // No terminator at all: 0xff everywhere after the FP/SIMD record.
        let mut f = good.clone();
        f[RESERVED + 528..].fill(0xff);
        assert!(matches!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(_))));
        // EXTRA_MAGIC (not produced here) is refused.
        let mut f = good;
        put_u32(&mut f[..], RESERVED + 528, EXTRA_MAGIC);
        assert_eq!(parse(&f, FRAME_SIZE), Err(BadFrame::Record(528)));
    }

    #[test]
    fn the_written_prefix_is_enough_and_more_is_asked_for() {
        let c = sample();
        for fault in [None, Some((1, 2))] {
            let mut f = frame_of(&built(&c, &saved(fault)));
            // What the stack held past the written bytes does not matter...
            f[WRITTEN_MAX..].fill(0xee);
            assert_eq!(parse(&f, WRITTEN_MAX).unwrap().ctx, c);
        }
        // ... unless the records go on past them: then the whole frame is needed.
        let mut f = frame_of(&built(&c, &saved(Some((1, 2)))));
        put_u32(&mut f[..], RESERVED + 528 + 16, ESR_MAGIC);
        put_u32(&mut f[..], RESERVED + 528 + 16 + 4, 16);
        assert_eq!(parse(&f, WRITTEN_MAX), Err(BadFrame::Truncated));
        assert!(parse(&f, FRAME_SIZE).is_ok()); // the zeros after it end the list
        assert_eq!(parse(&f, RESERVED - 1), Err(BadFrame::Truncated));
        assert_eq!(parse(&f, RESERVED + 4), Err(BadFrame::Truncated));
    }

    #[test]
    fn a_bad_frame_leaves_its_registers_as_linux_does() {
        let mut f = frame_of(&built(&sample(), &saved(None)));
        put_u64(&mut f[..], PSTATE, u64::MAX);
        assert!(parse(&f, FRAME_SIZE).is_err());
        let c = clobbered(&f);
        assert_eq!((c.x[0], c.x[30], c.sp, c.pc), (0x1000, 0x1000 + 30, 0x7fff_f000, 0x40_1234));
        assert_eq!(c.pstate, 0xf000_0000, "an invalid pstate keeps only NZCV");
        let all = [0xffu8; FRAME_SIZE];
        let c = clobbered(&all);
        assert_eq!((c.sp, c.pc, c.pstate), (u64::MAX, u64::MAX, 0xf000_0000));
        assert!(!c.mask.contains(SIGKILL) && c.mask.contains(SIGSEGV));
        let mut ok = frame_of(&built(&sample(), &saved(None)));
        put_u64(&mut ok[..], PSTATE, 0x6000_0000);
        assert_eq!(clobbered(&ok).pstate, 0x6000_0000, "a valid pstate is kept");
    }

    #[test]
    fn restored_mask_never_blocks_kill_or_stop() {
        let mut f = frame_of(&built(&sample(), &saved(None)));
        put_u64(&mut f[..], UC_SIGMASK, u64::MAX);
        let m = parse(&f, FRAME_SIZE).unwrap().mask;
        assert!(!m.contains(SIGKILL) && !m.contains(SIGSTOP) && m.contains(SIGTERM));
    }
}
