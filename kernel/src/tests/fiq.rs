//! FIQs: the vector table's FIQ entries, and F kept masked in the kernel where the interrupt
//! controller has no use for FIQs (every controller QEMU models: Apple's AIC, the one that
//! delivers the timer and IPIs as FIQs, has no QEMU machine). On a GICv3 without security the
//! test has the GIC signal a real FIQ (a group-0 SGI): it must stay pending while the kernel
//! waits with IRQs open, and be taken through the FIQ vector, handled and returned from the
//! moment F is unmasked.
use core::sync::atomic::Ordering;

use aarch64_cpu::registers::{Readable, VBAR_EL1};

use crate::drivers::gic::group0_test;
use crate::drivers::intc;
use crate::irq::{FIQ_TEST, wait_with_interrupts};
use crate::{ensure, ensure_eq, kernel_test};

/// PSTATE.F in DAIF.
const DAIF_F: u64 = 1 << 6;

fn daif() -> u64 {
    let v: u64;
    // SAFETY: reads PSTATE's interrupt masks.
    unsafe { core::arch::asm!("mrs {}, daif", out(reg) v, options(nomem, nostack)) };
    v
}

kernel_test!(
    fn fiqs_stay_masked_in_the_kernel_and_the_fiq_vectors_take_and_return() {
        // Each FIQ entry (current EL on SP_EL0 and SP_ELx, lower EL AArch64 and AArch32) passes
        // its kind, `mov x0, #kind`, the entry's third instruction, to the common code.
        let vbar = VBAR_EL1.get();
        for kind in [2u32, 6, 10, 14] {
            // SAFETY: the vector table is kernel text, mapped readable.
            let mov = unsafe { ((vbar + u64::from(kind) * 0x80 + 8) as *const u32).read_volatile() };
            ensure_eq!(mov, 0xd280_0000 | (kind << 5));
        }
        ensure!(daif() & DAIF_F != 0, "F is clear in the kernel: DAIF {:#x}", daif());
        ensure!(!intc::uses_fiqs(), "{} claims to deliver FIQs", intc::current().map_or("?", |c| c.name()));
        ensure!(!crate::irq::handle_fiq(), "a FIQ was consumed on a controller without FIQs");
        const SGI: u32 = 15;
        if !group0_test::configure(SGI, true) {
            return Ok(()); // GICv2, BCM2836, or a GICv3 with security: the checks above only
        }
        FIQ_TEST.store(true, Ordering::Release);
        let before = group0_test::TAKEN.load(Ordering::Relaxed);
        group0_test::raise(SGI);
        // IRQs open, F masked: the FIQ stays pending (each WFI ends at once, none is taken).
        wait_with_interrupts(20_000, || false);
        let taken_while_masked = group0_test::TAKEN.load(Ordering::Relaxed) - before;
        let pending = group0_test::pending();
        // F open for a moment: the FIQ is taken through the vector, handled, and returned from.
        // SAFETY: unmasks FIQs only; the handler (`irq::handle_fiq`) takes the test's SGI.
        unsafe { core::arch::asm!("msr daifclr, #1", "isb", "nop", "msr daifset, #1", options(nostack)) };
        let taken = group0_test::TAKEN.load(Ordering::Relaxed) - before;
        FIQ_TEST.store(false, Ordering::Release);
        group0_test::configure(SGI, false);
        ensure_eq!(taken_while_masked, 0);
        ensure_eq!(pending, SGI);
        ensure_eq!(taken, 1);
        ensure!(daif() & DAIF_F != 0, "F left clear");
        Ok(())
    }
);
