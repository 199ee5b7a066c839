//! Running code at EL0, and touching user memory from EL1.
//!
//! **Entering and leaving.** The kernel runs on SP_EL0 (EL1t), so the stack a user program gets
//! in SP_EL0 would clobber the kernel's: [`enter_user`] saves the kernel's callee-saved registers
//! and stack pointer in a [`KernelContext`], loads the user's registers and `eret`s. Every
//! exception from EL0 is taken on SP_EL1 (the exception stack) and handled there; the handler
//! returns to the program with `eret`, or ends it with [`leave_user`], which discards the
//! exception frames, restores the saved kernel context and makes `enter_user` return the exit
//! status (a setjmp/longjmp pair). Each CPU has one such context: its scheduler loop (`sched`).
//!
//! **User memory.** With PAN on, an ordinary EL1 load from an EL0 page faults. User memory is
//! reached only through [`copy_from_user`] and [`copy_to_user`], which use the unprivileged
//! `LDTRB`/`STTRB` (checked with EL0's permissions, so a read-only user page cannot be written
//! through the kernel either) and a fixup: a fault that demand paging cannot resolve makes the
//! copy return `Err` (EFAULT) instead of taking the kernel down. Pointers are checked to lie in
//! the user half before any access.
use core::arch::global_asm;

use super::exception::FpState;

/// Callee-saved registers and SP of the kernel code that entered user space.
#[repr(C)]
#[derive(Default)]
pub struct KernelContext {
    regs: [u64; 12], // x19..x30
    sp: u64,
    /// SP_EL1 when the user code was entered: the top of this CPU's exception stack, where
    /// `leave_user` puts it back (each CPU has its own).
    exception_sp: u64,
}

impl KernelContext {
    /// An empty context (filled by `enter_user`).
    pub const ZERO: Self = Self { regs: [0; 12], sp: 0, exception_sp: 0 };
}

/// A user program's registers as `enter_user` loads them.
#[repr(C)]
#[derive(Clone, Debug, Default)]
pub struct UserRegs {
    /// x0..x30.
    pub x: [u64; 31],
    /// SP_EL0.
    pub sp: u64,
    /// PC (loaded into ELR_EL1).
    pub pc: u64,
    /// PSTATE (loaded into SPSR_EL1): EL0t with interrupts masked until the kernel has IRQs.
    pub pstate: u64,
}

/// SPSR for EL0t (AArch64) with interrupts enabled (the timer preempts user code).
pub const PSTATE_EL0: u64 = 0;

global_asm!(
    r#"
    .section .text, "ax"
    .global enter_user
    // x0 = &UserRegs, x1 = &mut KernelContext, x2 = &FpState. Returns (in x0) the code given to
    // leave_user.
enter_user:
    stp     x19, x20, [x1, #0]
    stp     x21, x22, [x1, #16]
    stp     x23, x24, [x1, #32]
    stp     x25, x26, [x1, #48]
    stp     x27, x28, [x1, #64]
    stp     x29, x30, [x1, #80]
    mov     x5, sp                   // SPSel = 0: the kernel stack (x2 holds &FpState: keep it)
    str     x5, [x1, #96]
    msr     spsel, #1                // SP is the exception stack now; SP_EL0 may be written
    mov     x3, sp
    str     x3, [x1, #104]           // this CPU's exception stack top, for leave_user
    mov     x19, x0                  // (x19-x28 are saved above: free until leave_user)
    mov     x0, x2
    bl      fp_load                  // the program's FP/SIMD state (clobbers x1-x3)
    mov     x0, x19
    ldr     x2, [x0, #248]           // user SP
    msr     sp_el0, x2
    ldr     x2, [x0, #256]           // PC
    msr     elr_el1, x2
    ldr     x2, [x0, #264]           // PSTATE
    msr     spsr_el1, x2
    ldp     x2, x3, [x0, #16]
    ldp     x4, x5, [x0, #32]
    ldp     x6, x7, [x0, #48]
    ldp     x8, x9, [x0, #64]
    ldp     x10, x11, [x0, #80]
    ldp     x12, x13, [x0, #96]
    ldp     x14, x15, [x0, #112]
    ldp     x16, x17, [x0, #128]
    ldp     x18, x19, [x0, #144]
    ldp     x20, x21, [x0, #160]
    ldp     x22, x23, [x0, #176]
    ldp     x24, x25, [x0, #192]
    ldp     x26, x27, [x0, #208]
    ldp     x28, x29, [x0, #224]
    ldr     x30, [x0, #240]
    ldp     x0, x1, [x0, #0]
    eret

    .global leave_user
    // x0 = status, x1 = &KernelContext. Called on the exception stack; never returns to its caller.
leave_user:
    ldr     x2, [x1, #104]
    mov     sp, x2                   // drop every exception frame: back to this CPU's stack top
    ldp     x19, x20, [x1, #0]
    ldp     x21, x22, [x1, #16]
    ldp     x23, x24, [x1, #32]
    ldp     x25, x26, [x1, #48]
    ldp     x27, x28, [x1, #64]
    ldp     x29, x30, [x1, #80]
    ldr     x2, [x1, #96]
    msr     spsel, #0
    mov     sp, x2
    ret

    // copy_user(dst, src, len, to_user) -> bytes NOT copied (0 on success).
    .global copy_from_user_asm
copy_from_user_asm:
    cbz     x2, 2f
1:
copy_from_user_insn:
    ldtrb   w3, [x1]
    strb    w3, [x0], #1
    add     x1, x1, #1
    subs    x2, x2, #1
    b.ne    1b
2:
copy_from_user_done:
    mov     x0, x2
    ret

    .global copy_to_user_asm
copy_to_user_asm:
    cbz     x2, 2f
1:
    ldrb    w3, [x1], #1
copy_to_user_insn:
    sttrb   w3, [x0]
    add     x0, x0, #1
    subs    x2, x2, #1
    b.ne    1b
2:
copy_to_user_done:
    mov     x0, x2
    ret
"#
);

unsafe extern "C" {
    fn enter_user(regs: *const UserRegs, ctx: *mut KernelContext, fp: *const FpState) -> u64;
    fn leave_user(status: u64, ctx: *const KernelContext) -> !;
    fn copy_from_user_asm(dst: *mut u8, src: u64, len: usize) -> usize;
    fn copy_to_user_asm(dst: u64, src: *const u8, len: usize) -> usize;
    static copy_from_user_insn: u8;
    static copy_from_user_done: u8;
    static copy_to_user_insn: u8;
    static copy_to_user_done: u8;
}

/// The exclusive end of the user half (48-bit TTBR0).
pub const USER_END: u64 = 1 << 48;

/// Whether `[addr, addr + len)` lies wholly in the user half (checked before any access).
pub fn user_range_ok(addr: u64, len: usize) -> bool {
    addr.checked_add(len as u64).is_some_and(|end| end <= USER_END)
}

/// Where a fault at `elr` inside a user copy resumes, if `elr` is one of the copy instructions.
pub fn user_copy_fixup(elr: u64) -> Option<u64> {
    if elr == (&raw const copy_from_user_insn) as u64 {
        Some((&raw const copy_from_user_done) as u64)
    } else if elr == (&raw const copy_to_user_insn) as u64 {
        Some((&raw const copy_to_user_done) as u64)
    } else {
        None
    }
}

/// User memory could not be read or written at `at` (the system call answers EFAULT unless
/// demand paging can make the page present, see `memory::uaccess::copy_in`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The first address not copied.
    pub at: u64,
}

/// Copies `dst.len()` bytes from user address `src`.
///
/// # Errors
/// [`Fault`] if the range leaves the user half or touches memory the program may not read.
pub fn copy_from_user(dst: &mut [u8], src: u64) -> Result<(), Fault> {
    // The copy itself keeps the tag (TCR_EL1.TBI0), so a tagged pointer's accesses are checked
    // against the memory's tags as the program's own would be.
    if !user_range_ok(super::mte::user_pointer_for_check(src), dst.len()) {
        return Err(Fault { at: src });
    }
    // SAFETY: `dst` is a valid kernel buffer; the source is read with EL0's permissions through
    // LDTRB, and a fault ends the copy through the exception fixup.
    let left = unsafe { copy_from_user_asm(dst.as_mut_ptr(), src, dst.len()) };
    if left == 0 { Ok(()) } else { Err(Fault { at: src + (dst.len() - left) as u64 }) }
}

/// Copies `src` to user address `dst`.
///
/// # Errors
/// [`Fault`] if the range leaves the user half or touches memory the program may not write.
pub fn copy_to_user(dst: u64, src: &[u8]) -> Result<(), Fault> {
    if !user_range_ok(super::mte::user_pointer_for_check(dst), src.len()) {
        return Err(Fault { at: dst });
    }
    // SAFETY: `src` is a valid kernel buffer; the destination is written with EL0's permissions
    // through STTRB, and a fault ends the copy through the exception fixup.
    let left = unsafe { copy_to_user_asm(dst, src.as_ptr(), src.len()) };
    if left == 0 { Ok(()) } else { Err(Fault { at: dst + (src.len() - left) as u64 }) }
}

/// Runs user code from `regs` and `fp` until it leaves with [`exit_user`]; returns the code given
/// there.
///
/// # Safety
/// TTBR0 holds the program's address space, and the exception handler routes every exception
/// from EL0 to code that either returns to the program or calls [`exit_user`] with this `ctx`.
pub unsafe fn run_user(regs: &UserRegs, fp: &FpState, ctx: *mut KernelContext) -> u64 {
    // SAFETY: forwarded; `enter_user` saves the kernel context in `ctx` and `leave_user`
    // restores it, so control comes back here with the callee-saved registers intact.
    unsafe { enter_user(regs, ctx, fp) }
}

/// Ends the running program with `status`, resuming the kernel in [`run_user`].
///
/// # Safety
/// Called on the exception stack while handling an exception from the program that `ctx`
/// belongs to (so nothing on the exception stack is needed any more).
pub unsafe fn exit_user(status: u64, ctx: *const KernelContext) -> ! {
    // SAFETY: forwarded from the caller.
    unsafe { leave_user(status, ctx) }
}
