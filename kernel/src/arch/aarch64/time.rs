//! The generic timer's counter: the only clock the kernel needs so far.
//!
//! The frequency is read from CNTFRQ_EL0, never assumed (62.5 MHz under QEMU, 19.2 MHz on a Pi 3,
//! 54 MHz on a Pi 4 or 5, 24 MHz on Apple silicon).
use aarch64_cpu::registers::{CNTFRQ_EL0, CNTVCT_EL0, Readable};

/// The virtual counter now.
pub fn counter() -> u64 {
    CNTVCT_EL0.get()
}

/// Counter frequency in Hz.
pub fn frequency() -> u64 {
    CNTFRQ_EL0.get()
}

/// Converts a counter difference to microseconds (0 if the frequency is unknown).
pub fn ticks_to_us(ticks: u64) -> u64 {
    let freq = frequency();
    if freq == 0 { 0 } else { (u128::from(ticks) * 1_000_000 / u128::from(freq)) as u64 }
}
