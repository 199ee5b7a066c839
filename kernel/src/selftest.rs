//! Deliberate failures, chosen on the kernel command line (`/chosen/bootargs`), so the test
//! suite can prove that the fatal paths report and end the run instead of hanging:
//! - `selftest=fault`: a load from an unmapped kernel address (a data abort report);
//! - `selftest=stack-overflow`: unbounded recursion into the boot stack's guard page;
//! - `selftest=undefined`: an undefined instruction;
//! - `selftest=panic`: a Rust panic;
//! - `selftest=report-only`: stop after the boot report with status 0 (scripts/bench times boots).
use crate::Booted;

/// Runs the self-test the command line asks for, if any (each one ends the run).
pub fn run_requested(booted: &Booted) {
    let machine = &booted.machine;
    if machine.has_bootarg("selftest=fault") {
        crate::cprintln!("selftest: loading from an unmapped kernel address");
        // SAFETY: deliberately faulting; the exception handler ends the run.
        let value = unsafe { core::ptr::read_volatile(0xffff_7000_dead_0000 as *const u64) };
        crate::cprintln!("selftest: the load returned {value:#x}: the fault did not happen");
    }
    if machine.has_bootarg("selftest=stack-overflow") {
        crate::cprintln!("selftest: recursing until the boot stack overflows");
        let depth = recurse(core::hint::black_box(1));
        crate::cprintln!("selftest: recursion returned {depth}: no overflow");
    }
    if machine.has_bootarg("selftest=undefined") {
        crate::cprintln!("selftest: executing an undefined instruction");
        // SAFETY: deliberately undefined; the exception handler ends the run.
        unsafe { core::arch::asm!("udf #0x5a") };
    }
    if machine.has_bootarg("selftest=report-only") {
        crate::console::end_run(0);
    }
    if machine.has_bootarg("selftest=panic") {
        panic!("selftest: a deliberate panic");
    }
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let mut buffer = [n; 64];
    core::hint::black_box(&mut buffer);
    if n == 0 { buffer[3] } else { recurse(core::hint::black_box(n + 1)) + buffer[7] }
}
