//! Traps: what the kernel does with an exception, once the exception vectors (`arch`) have saved
//! the registers and applied their own fixups.
//!
//! `kind` is the vector's index: bits 0..1 the type (0 synchronous, 1 IRQ, 2 FIQ, 3 SError), bits
//! 2..3 the source (0 EL1 on SP_EL0, 1 EL1 on SP_EL1, 2 EL0 AArch64, 3 EL0 AArch32).
//! - interrupts go to `irq` (and, from EL0, may preempt the task: [`user`]);
//! - everything from EL0 goes to [`user`]: a system call to its handler, a page fault to demand
//!   paging, and what neither resolves to the signal Linux sends for it;
//! - from EL1, the one synchronous exception the kernel expects is the semihosting call on a
//!   machine without semihosting (the exit path then powers off through PSCI); anything else is
//!   a bug, reported by [`kernel`], and ends the run.
pub mod kernel;
pub mod user;

use core::sync::atomic::Ordering;

use crate::arch::aarch64::exception::{SEMIHOSTING_ATTEMPT, TrapFrame};

/// Handles exception `kind` (the module documentation) that built `frame`.
pub fn handle(frame: &mut TrapFrame, kind: u64) {
    let ec = (frame.esr >> 26) & 0x3f;
    if (kind == 0 || kind == 4) && ec == 0 && SEMIHOSTING_ATTEMPT.load(Ordering::Relaxed) {
        crate::console::flush();
        crate::exit::semihosting_unavailable();
    }
    if kind & 3 == 1 {
        crate::irq::handle();
        if kind < 8 {
            return;
        }
    }
    // A FIQ is an interrupt where the controller delivers them (Apple's AIC: the timer and fast
    // IPIs); it is then passed on as the IRQ of the same source (kind - 1), so the scheduler's
    // preemption sees no difference. Elsewhere FIQs have no use and end as unexpected below
    // (from EL0 the process is ended with a message, as for any other exception it cannot cause).
    let kind = if kind & 3 == 2 && crate::irq::handle_fiq() {
        if kind < 8 {
            return;
        }
        kind - 1
    } else {
        kind
    };
    if kind >= 8 {
        user::handle(frame, kind);
        return;
    }
    kernel::fatal(frame, kind)
}
