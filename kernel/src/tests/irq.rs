//! Interrupts: the per-CPU timer ticks on every CPU, and IPIs reach every CPU.
use core::sync::atomic::Ordering;

use crate::cpu::{CPUS, MAX_CPUS};
use crate::irq::{IPI_PING, PINGS, TICKS, send_ipi, wait_with_interrupts};
use crate::{ensure, kernel_test};

fn online_cpus() -> impl Iterator<Item = usize> {
    (0..MAX_CPUS).filter(|&c| CPUS[c].online_at.load(Ordering::Acquire) != 0)
}

kernel_test!(
    fn the_timer_ticks_on_every_cpu() {
        ensure!(crate::drivers::intc::current().is_some(), "no GIC");
        let before: alloc::vec::Vec<u64> = (0..MAX_CPUS).map(|c| TICKS[c].load(Ordering::Relaxed)).collect();
        let ticked = wait_with_interrupts(2_000_000, || {
            online_cpus().all(|c| TICKS[c].load(Ordering::Relaxed) >= before[c] + 2)
        });
        for c in online_cpus() {
            ensure!(ticked, "cpu{c}: {} ticks in 2 s", TICKS[c].load(Ordering::Relaxed) - before[c]);
        }
        Ok(())
    }
);

kernel_test!(
    fn an_ipi_reaches_every_cpu() {
        for c in online_cpus() {
            let before = PINGS[c].load(Ordering::Relaxed);
            send_ipi(c, IPI_PING);
            let got = wait_with_interrupts(2_000_000, || PINGS[c].load(Ordering::Relaxed) > before);
            ensure!(got, "cpu{c} did not take the ping within 2 s");
        }
        Ok(())
    }
);
