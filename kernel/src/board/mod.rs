//! Board code: the few facts about a machine that cannot come from the device tree.
//!
//! Everything else (memory, console, PSCI, interrupt controller, CPUs) is discovered from the
//! device tree by generic code; nothing here is used once the device tree has named a console.
//!
//! The only fact is the *fallback console*: a UART to speak on when the device tree is missing or
//! unusable (x0 is not a device tree, it has no `stdout-path`, ...), so bad input gets a clear
//! message instead of a silent hang. Without a device tree there is nothing to probe safely (an
//! address that is a UART on one board is RAM on another: QEMU `virt`'s PL011 at 0x0900_0000 is
//! ordinary memory on a Raspberry Pi), so the fallback is chosen **at build time** by one cargo
//! feature, i.e. one Image per board family:
//!
//! | feature | fallback console | Image built by |
//! | --- | --- | --- |
//! | `board-qemu-virt` (default) | QEMU `virt`'s PL011 at 0x0900_0000 (`-serial` #1) | `scripts/run`, `scripts/test` |
//! | `board-raspi3` | the Pi 3's mini UART at 0x3f21_5040 (QEMU `raspi3b`'s `-serial` #2) | `scripts/sdcard --board pi3`, `scripts/test` (boards section) |
//! | `board-raspi4` | the Pi 4's mini UART at 0xfe21_5040 (low-peripheral mode) | `scripts/sdcard --board pi4` |
//! | `board-raspi5` | the Pi 5's `uart10` PL011 at 0x10_7d00_1000 | `scripts/sdcard --board pi5` |
//! | none | no fallback: failures before the device tree names a console are silent but still end the run (semihosting exit, PSCI, or the CPU parks) | `cargo build --no-default-features` |
//!
//! A safety net makes a wrong choice harmless once a device tree is read: if the fallback UART's
//! address lies in the RAM the device tree describes, the fallback is dropped at once (the default
//! image booted on a Pi therefore writes nothing into RAM after x0 is validated). Before that
//! (only the link-address check and the x0 check speak that early) the build's choice is trusted.
//!
//! Both fallback kinds take a byte by a plain store to offset 0 (PL011 UARTDR, mini UART
//! AUX_MU_IO), which is what the MMU-off message in `boot::early_map` relies on.

#[cfg(any(
    all(
        feature = "board-qemu-virt",
        any(feature = "board-raspi3", feature = "board-raspi4", feature = "board-raspi5")
    ),
    all(feature = "board-raspi3", any(feature = "board-raspi4", feature = "board-raspi5")),
    all(feature = "board-raspi4", feature = "board-raspi5"),
))]
compile_error!("choose one board-* feature (use --no-default-features for a Raspberry Pi build)");

use devicetree::support::UartFamily;

/// The fallback console's UART family (its driver, with the default register layout) and
/// physical address, if this build has one.
#[cfg(feature = "board-qemu-virt")]
pub const FALLBACK_UART: Option<(UartFamily, u64)> = Some((UartFamily::Pl011, 0x0900_0000));
/// The fallback console's UART family (its driver, with the default register layout) and
/// physical address, if this build has one.
#[cfg(feature = "board-raspi3")]
pub const FALLBACK_UART: Option<(UartFamily, u64)> = Some((UartFamily::MiniUart, 0x3f21_5040));
/// The fallback console's UART family (its driver, with the default register layout) and
/// physical address, if this build has one.
#[cfg(feature = "board-raspi4")]
pub const FALLBACK_UART: Option<(UartFamily, u64)> = Some((UartFamily::MiniUart, 0xfe21_5040));
/// The fallback console's UART family (its driver, with the default register layout) and
/// physical address, if this build has one.
#[cfg(feature = "board-raspi5")]
pub const FALLBACK_UART: Option<(UartFamily, u64)> = Some((UartFamily::Pl011, 0x10_7d00_1000));
/// The fallback console's UART family (its driver, with the default register layout) and
/// physical address, if this build has one.
#[cfg(not(any(
    feature = "board-qemu-virt",
    feature = "board-raspi3",
    feature = "board-raspi4",
    feature = "board-raspi5"
)))]
pub const FALLBACK_UART: Option<(UartFamily, u64)> = None;

/// Physical address of the fallback console (used by the early map, which maps its 2 MiB block).
pub const FALLBACK_UART_PA: Option<u64> = match FALLBACK_UART {
    Some((_, pa)) => Some(pa),
    None => None,
};

/// The board this Image was built for, for the boot report.
pub const NAME: &str = if cfg!(feature = "board-raspi3") {
    "raspi3"
} else if cfg!(feature = "board-raspi4") {
    "raspi4"
} else if cfg!(feature = "board-raspi5") {
    "raspi5"
} else if cfg!(feature = "board-qemu-virt") {
    "qemu-virt"
} else {
    "generic (no fallback console)"
};
