//! Arm PrimeCell PL031 real-time clock (PL031 TRM, DDI 0224): QEMU virt's `arm,pl031` node. Only
//! the data register is read: seconds since 1970 (QEMU starts it at the host's time).

/// Reads the RTC at `va` once.
///
/// # Safety
/// `va` must map a PL031 register block as device memory.
pub unsafe fn read_seconds(va: u64) -> u32 {
    // SAFETY: RTCDR at offset 0, per the caller's contract.
    unsafe { (va as *const u32).read_volatile() }
}
