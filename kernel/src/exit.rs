//! Ending a run: the status goes to QEMU through semihosting when QEMU offers it, and the machine
//! powers off through PSCI otherwise (a real board), or the CPU parks if there is no PSCI.
//!
//! There is no safe way to ask whether semihosting is enabled: the `HLT #0xF000` that carries the
//! call is undefined without it. So the exit path simply tries, after telling the exception
//! handler that an undefined-instruction trap at this point means "no semihosting here"; the
//! handler then falls back to PSCI `SYSTEM_OFF`. The same image therefore ends cleanly under
//! QEMU's `-semihosting` (with its status), under QEMU without it, and on a board.
//!
//! Below the console: nothing here prints or flushes. `console::end_run` flushes the console and
//! then ends the run here.
use core::sync::atomic::Ordering;

use qemu_exit::QEMUExit;

use crate::arch::exception::SEMIHOSTING_ATTEMPT;
use crate::arch::psci;

/// Status for a run that failed.
pub const FAILURE: u32 = 1;

/// Ends the run with `code` (0 = success). The caller flushes what it printed first
/// (`console::end_run` does both).
pub fn exit(code: u32) -> ! {
    SEMIHOSTING_ATTEMPT.store(true, Ordering::SeqCst);
    qemu_exit::AArch64::new().exit(code)
}

/// Called by the trap layer when the semihosting call trapped.
pub fn semihosting_unavailable() -> ! {
    psci::system_off();
    park()
}

/// Stops this CPU for good.
pub fn park() -> ! {
    loop {
        aarch64_cpu::asm::wfe();
    }
}
