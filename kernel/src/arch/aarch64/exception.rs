//! Exceptions: the 16-entry vector table, the saved register frame, the fixups, and the names
//! the reports decode the syndrome with (the reports themselves are `trap`'s).
//!
//! Stacks: the kernel runs on SP_EL0 (EL1t) and every exception is taken on SP_EL1, a separate
//! exception stack. A kernel stack overflow into its guard page therefore faults onto a good
//! stack and is reported, instead of faulting again on every push (the reason Linux checks for
//! overflow in its vector entry; this kernel gets it from the architecture). An exception taken
//! while already on the exception stack uses the "current EL with SPx" entries.
//!
//! Policy: an exception the kernel did not ask for ends the run with a report (exception class by
//! name, ISS details for aborts, FAR, ELR with its symbol, the register file) and a failing exit
//! (`trap::kernel`).
//! Exceptions it asked for are *fixups*: [`probe_read`] and [`probe_write`] touch an address that
//! may fault and return the fault instead, as the user copies (`user.rs`) do.
use core::arch::global_asm;
use core::sync::atomic::AtomicBool;

/// Bytes of the saved frame (16-aligned).
const FRAME_SIZE: usize = 304;

/// Registers saved on exception entry, in the order the vector code stores them.
#[repr(C)]
#[derive(Debug)]
pub struct TrapFrame {
    /// x0..x30.
    pub x: [u64; 31],
    /// SP_EL0 when the exception was taken (the kernel's own stack, or user SP).
    pub sp_el0: u64,
    /// SP_EL1 before the frame was pushed.
    pub sp_el1: u64,
    /// ELR_EL1: where the exception was taken (and where `eret` returns).
    pub elr: u64,
    /// SPSR_EL1.
    pub spsr: u64,
    /// ESR_EL1.
    pub esr: u64,
    /// FAR_EL1.
    pub far: u64,
    /// For an exception from EL0: whether the program's FP/SIMD registers were stored in the
    /// [`FpState`] below this frame (then the exit path reloads them from there). 0 on entry.
    fp_saved: u64,
}

const _: () = assert!(core::mem::size_of::<TrapFrame>() == FRAME_SIZE);

/// Bytes of the room for the FP/SIMD state below the frame of an exception from EL0.
pub const FP_STATE_SIZE: usize = 528;

/// The FP/SIMD registers of a user program.
///
/// The kernel is built for a soft-float target, so it never touches these registers itself:
/// while it handles an exception from EL0 they still hold the program's values. The entry
/// code therefore saves nothing (as Linux, whose kernel is built with `-mgeneral-regs-only`
/// and saves FP/SIMD state only when it must). The exception from EL0 leaves room for an
/// `FpState` below its [`TrapFrame`]; [`FpState::below`] stores the registers there on the
/// first use (a context switch, a signal frame, `clone`, `execve`), and the exit path reloads
/// them only then. A system call or fault that needs none of this moves no FP/SIMD state.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FpState {
    /// q0..q31.
    pub q: [u128; 32],
    /// FPSR.
    pub fpsr: u64,
    /// FPCR.
    pub fpcr: u64,
}

const _: () = assert!(core::mem::size_of::<FpState>() == FP_STATE_SIZE);

unsafe extern "C" {
    fn fp_store(state: *mut FpState);
}

impl FpState {
    /// All registers zero, FPCR default (round to nearest, no traps).
    pub const ZERO: Self = Self { q: [0; 32], fpsr: 0, fpcr: 0 };

    /// The program's FP/SIMD state for the exception from EL0 that built `frame`, in the room
    /// below the frame: stored there from the live registers on the first call, so that what
    /// the caller reads is the program's and what it writes goes back on return to EL0.
    ///
    /// # Safety
    /// `frame` is the frame the vectors built for an exception from EL0 (kinds 8..15), of the
    /// exception being handled now on this CPU (the registers are live only for that one).
    pub unsafe fn below(frame: &mut TrapFrame) -> &mut FpState {
        // SAFETY: `exception_lower` leaves FP_STATE_SIZE bytes immediately below the
        // TrapFrame, on the exception stack, for the duration of the handler.
        let state = unsafe { (frame as *mut TrapFrame).cast::<u8>().sub(FP_STATE_SIZE).cast::<FpState>() };
        if frame.fp_saved == 0 {
            // SAFETY: `state` is that room (16-aligned: the frame is, and FP_STATE_SIZE is a
            // multiple of 16); fp_store writes exactly FP_STATE_SIZE bytes and nothing else. The registers still hold the program's values: no kernel code uses
            // them (soft-float target) and this is the exception being handled.
            unsafe { fp_store(state) };
            frame.fp_saved = 1;
        }
        // SAFETY: initialised above or by an earlier call; nothing else refers to the room.
        unsafe { &mut *state }
    }
}

global_asm!(
    r#"
    .macro VENTRY kind, common
    .balign 0x80
    sub     sp, sp, #{frame}
    stp     x0, x1, [sp, #0]
    mov     x0, #\kind
    b       \common
    .endm

    .macro SAVE_GPRS
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    mrs     x2, sp_el0
    stp     x30, x2, [sp, #240]
    add     x3, sp, #{frame}
    mrs     x4, elr_el1
    stp     x3, x4, [sp, #256]
    mrs     x5, spsr_el1
    mrs     x6, esr_el1
    stp     x5, x6, [sp, #272]
    mrs     x7, far_el1
    str     x7, [sp, #288]
    .endm

    // ELR, SPSR and SP_EL0 are written back only when the frame's values differ from what the
    // registers hold. A handler may have changed the frame (a signal frame, sigreturn, a
    // restarted call), and an exception nested in the handler (a fault in a user copy, an
    // interrupt) has replaced ELR and SPSR; then all three are written. A system call that
    // returns where it was taken changes none of them, and skipping three writes of values
    // already there is architecturally a no-op. The reads are cheap everywhere; the writes are
    // not under QEMU's TCG, which ends the translation block after every system-register write
    // and recomputes its cached CPU state before the next: the three cost about an eighth of a
    // getpid's host time there (docs/benchmark-notes.md section 9e).
    .macro RESTORE_GPRS_AND_ERET
    ldp     x4, x5, [sp, #264]       // ELR, SPSR from the frame
    ldr     x2, [sp, #248]           // SP_EL0 from the frame
    mrs     x6, elr_el1
    mrs     x7, spsr_el1
    mrs     x3, sp_el0               // (the vectors run on SP_EL1, so this reads the saved one)
    cmp     x4, x6
    ccmp    x5, x7, #0, eq
    ccmp    x2, x3, #0, eq
    b.eq    9f
    msr     elr_el1, x4
    msr     spsr_el1, x5
    msr     sp_el0, x2
9:
    ldp     x0, x1, [sp, #0]
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x19, [sp, #144]
    ldp     x20, x21, [sp, #160]
    ldp     x22, x23, [sp, #176]
    ldp     x24, x25, [sp, #192]
    ldp     x26, x27, [sp, #208]
    ldp     x28, x29, [sp, #224]
    ldr     x30, [sp, #240]
    add     sp, sp, #{frame}
    eret
    .endm

    .section .text, "ax"
    .balign 0x800
    .global exception_vectors
exception_vectors:
    VENTRY 0, exception_common    // current EL, SP_EL0: synchronous
    VENTRY 1, exception_common    //   IRQ
    VENTRY 2, exception_common    //   FIQ
    VENTRY 3, exception_common    //   SError
    VENTRY 4, exception_common    // current EL, SP_ELx: synchronous
    VENTRY 5, exception_common
    VENTRY 6, exception_common
    VENTRY 7, exception_common
    VENTRY 8, exception_lower     // lower EL, AArch64: synchronous
    VENTRY 9, exception_lower
    VENTRY 10, exception_lower
    VENTRY 11, exception_lower
    VENTRY 12, exception_lower    // lower EL, AArch32
    VENTRY 13, exception_lower
    VENTRY 14, exception_lower
    VENTRY 15, exception_lower

exception_common:
    SAVE_GPRS
    mov     x1, x0
    mov     x0, sp
    bl      handle_exception
    RESTORE_GPRS_AND_ERET

    // From EL0: room for an FpState below the frame, filled only if a handler asks for the
    // program's FP/SIMD registers (FpState::below), and then reloaded from there on return.
exception_lower:
    SAVE_GPRS
    str     xzr, [sp, #{saved}]      // TrapFrame::fp_saved: the FP/SIMD registers are still live
    sub     sp, sp, #{fp}
    mov     x1, x0
    add     x0, sp, #{fp}
    bl      handle_exception
    ldr     x2, [sp, #{fp} + {saved}]
    cbz     x2, 1f                   // untouched: the program's registers are still in place
    mov     x0, sp
    bl      fp_load
1:
    add     sp, sp, #{fp}
    RESTORE_GPRS_AND_ERET

    // fp_store(&mut FpState) / fp_load(&FpState): the FP/SIMD registers to and from memory
    // (clobber x1-x3).
    // Only these and enter_user touch them: the kernel is built for a soft-float target.
    // The kernel's target has no FP/SIMD: these two routines, alone, are assembled with it.
    .arch_extension fp
    .global fp_store
fp_store:
    stp     q0, q1, [x0, #0]
    stp     q2, q3, [x0, #32]
    stp     q4, q5, [x0, #64]
    stp     q6, q7, [x0, #96]
    stp     q8, q9, [x0, #128]
    stp     q10, q11, [x0, #160]
    stp     q12, q13, [x0, #192]
    stp     q14, q15, [x0, #224]
    stp     q16, q17, [x0, #256]
    stp     q18, q19, [x0, #288]
    stp     q20, q21, [x0, #320]
    stp     q22, q23, [x0, #352]
    stp     q24, q25, [x0, #384]
    stp     q26, q27, [x0, #416]
    stp     q28, q29, [x0, #448]
    stp     q30, q31, [x0, #480]
    mrs     x1, fpsr
    mrs     x2, fpcr
    add     x3, x0, #512
    stp     x1, x2, [x3]
    ret

    .global fp_load
fp_load:
    add     x3, x0, #512
    ldp     x1, x2, [x3]
    msr     fpsr, x1
    msr     fpcr, x2
    ldp     q0, q1, [x0, #0]
    ldp     q2, q3, [x0, #32]
    ldp     q4, q5, [x0, #64]
    ldp     q6, q7, [x0, #96]
    ldp     q8, q9, [x0, #128]
    ldp     q10, q11, [x0, #160]
    ldp     q12, q13, [x0, #192]
    ldp     q14, q15, [x0, #224]
    ldp     q16, q17, [x0, #256]
    ldp     q18, q19, [x0, #288]
    ldp     q20, q21, [x0, #320]
    ldp     q22, q23, [x0, #352]
    ldp     q24, q25, [x0, #384]
    ldp     q26, q27, [x0, #416]
    ldp     q28, q29, [x0, #448]
    ldp     q30, q31, [x0, #480]
    ret
    .arch_extension nofp

    // Probes: one load or store that may fault. On a fault the handler sets x1 = ESR and
    // resumes at the matching `_done` label; otherwise x1 = 0.
    .global probe_read_u64
probe_read_u64:
    mov     x1, xzr
probe_read_insn:
    ldr     x0, [x0]
probe_read_done:
    ret

    .global probe_write_u64
probe_write_u64:
    mov     x2, x1
    mov     x1, xzr
probe_write_insn:
    str     x2, [x0]
probe_write_done:
    mov     x0, x1
    ret
"#,
    frame = const FRAME_SIZE,
    fp = const FP_STATE_SIZE,
    saved = const core::mem::offset_of!(TrapFrame, fp_saved),
);

#[cfg_attr(
    not(feature = "test-image"),
    allow(
        dead_code,
        reason = "the test image probes the kernel map with them (user memory has its own copy routines)"
    )
)]
unsafe extern "C" {
    fn probe_read_u64(addr: u64) -> ProbeResult;
    fn probe_write_u64(addr: u64, value: u64) -> u64;
    static probe_read_insn: u8;
    static probe_read_done: u8;
    static probe_write_insn: u8;
    static probe_write_done: u8;
}

#[repr(C)]
#[cfg_attr(
    not(feature = "test-image"),
    allow(
        dead_code,
        reason = "the test image probes the kernel map with them (user memory has its own copy routines)"
    )
)]
struct ProbeResult {
    value: u64,
    esr: u64,
}

/// Reads the u64 at `addr`, returning the ESR of the fault if the access faults.
#[cfg_attr(
    not(feature = "test-image"),
    expect(
        dead_code,
        reason = "the test image probes the kernel map with them (user memory has its own copy routines)"
    )
)]
pub fn probe_read(addr: u64) -> Result<u64, u64> {
    // SAFETY: the probe performs a single aligned load through the MMU; a fault is caught by the
    // handler's fixup and turned into Err. Reading device memory could have side effects, so
    // callers probe only normal memory or unmapped addresses.
    let result = unsafe { probe_read_u64(addr) };
    if result.esr == 0 { Ok(result.value) } else { Err(result.esr) }
}

/// Writes `value` to `addr`, returning the ESR of the fault if the access faults.
///
/// # Safety
/// If the write succeeds it changes memory: `addr` must be memory the caller may write.
#[cfg_attr(
    not(feature = "test-image"),
    expect(
        dead_code,
        reason = "the test image probes the kernel map with them (user memory has its own copy routines)"
    )
)]
pub unsafe fn probe_write(addr: u64, value: u64) -> Result<(), u64> {
    // SAFETY: forwarded; a fault is turned into Err by the fixup.
    let esr = unsafe { probe_write_u64(addr, value) };
    if esr == 0 { Ok(()) } else { Err(esr) }
}

/// Set by the exit path just before it tries semihosting: if the semihosting call traps (QEMU
/// without `-semihosting`, or a real board), the handler powers off through PSCI instead.
pub static SEMIHOSTING_ATTEMPT: AtomicBool = AtomicBool::new(false);

/// The vectors' Rust entry, for every exception: the fixups of the accesses that are allowed to
/// fault (the probes, the user copies) are arch's own and end here; everything else goes to the
/// generic trap layer, `crate::trap::handle`.
///
/// That call is the one place `arch` calls up into the generic kernel: the exception vectors must
/// hand what they caught to the code that decides what it means (Linux's `entry.S` calls its
/// C handlers the same way).
#[unsafe(no_mangle)]
extern "C" fn handle_exception(frame: &mut TrapFrame, kind: u64) {
    let ec = (frame.esr >> 26) & 0x3f;
    if (kind == 0 || kind == 4) && ec == 0x25 {
        // Fixups for the probes: data aborts at the probe instructions.
        let fixup = if frame.elr == (&raw const probe_read_insn) as u64 {
            Some((&raw const probe_read_done) as u64)
        } else if frame.elr == (&raw const probe_write_insn) as u64 {
            Some((&raw const probe_write_done) as u64)
        } else {
            None
        };
        if let Some(resume) = fixup {
            frame.x[1] = frame.esr | (1 << 63); // never 0, even for an ESR of 0
            frame.elr = resume;
            return;
        }
        // A user copy that faulted: the copy returns what it did not copy (EFAULT).
        if let Some(resume) = super::user::user_copy_fixup(frame.elr) {
            frame.elr = resume;
            return;
        }
    }
    crate::trap::handle(frame, kind);
}

/// Name of an exception class (ESR_EL1.EC), Arm ARM D19.2.
pub fn exception_class_name(ec: u64) -> &'static str {
    match ec {
        0x00 => "Unknown reason (undefined instruction)",
        0x01 => "Trapped WFI/WFE",
        0x07 => "Access to SIMD/FP trapped",
        0x0e => "Illegal execution state",
        0x15 => "SVC from AArch64",
        0x16 => "HVC from AArch64",
        0x17 => "SMC from AArch64",
        0x18 => "Trapped MSR/MRS/system instruction",
        0x19 => "Access to SVE trapped",
        0x1c => "Pointer authentication failure",
        0x20 => "Instruction Abort from a lower EL",
        0x21 => "Instruction Abort from the same EL",
        0x22 => "PC alignment fault",
        0x24 => "Data Abort from a lower EL",
        0x25 => "Data Abort from the same EL",
        0x26 => "SP alignment fault",
        0x2c => "Trapped floating-point exception",
        0x2f => "SError",
        0x30 | 0x31 => "Breakpoint",
        0x32 | 0x33 => "Software step",
        0x34 | 0x35 => "Watchpoint",
        0x3c => "BRK instruction",
        _ => "reserved or unhandled class",
    }
}

/// Meaning of a data or instruction fault status code (DFSC/IFSC).
pub fn fault_status_name(fsc: u64) -> &'static str {
    match fsc {
        0x00..=0x03 => "address size fault",
        0x04..=0x07 => "translation fault",
        0x09..=0x0b => "access flag fault",
        0x0d..=0x0f => "permission fault",
        0x10 => "synchronous external abort",
        0x11 => "synchronous tag check fault",
        0x14..=0x17 => "synchronous external abort on a table walk",
        0x21 => "alignment fault",
        0x30 => "TLB conflict abort",
        _ => "other fault",
    }
}
