//! Board code: the few facts about a machine that cannot come from the device tree.
//!
//! Everything else (memory, console, PSCI, interrupt controller) is discovered from the device
//! tree by generic code; nothing here is used once the device tree has named a console.
//!
//! The only fact today is the *fallback console*: a UART to speak on when the device tree is
//! missing or unusable (x0 is not a device tree, it has no `stdout-path`, ...), so bad input gets
//! a clear message instead of a silent hang. It is chosen at build time by a cargo feature,
//! because without a device tree there is nothing to probe safely:
//! - `board-qemu-virt` (default): QEMU `virt`'s PL011 at 0x0900_0000 (QEMU's `-serial` #1).
//! - no feature: no fallback console; failures before the device tree is parsed are silent but
//!   still end the run (semihosting exit, or the CPU parks).

/// Physical address of the fallback console's PL011, if this build has one.
#[cfg(feature = "board-qemu-virt")]
pub const FALLBACK_UART_PA: Option<u64> = Some(0x0900_0000);
/// Physical address of the fallback console's PL011, if this build has one.
#[cfg(not(feature = "board-qemu-virt"))]
pub const FALLBACK_UART_PA: Option<u64> = None;
