//! Console UARTs beyond the PL011 and the mini UART, one module per register layout: the
//! 8250/16550 family ([`ns16550`]), Amlogic ([`meson`]), i.MX ([`imx`]) and LPUART ([`lpuart`]),
//! Cadence ([`cadence`]), Marvell Armada 3700 ([`mvebu`]), Qualcomm GENI ([`qcom_geni`]) and
//! UARTDM ([`qcom_uartdm`]), the Samsung/Apple layout ([`samsung`]) and Renesas SCIF ([`scif`]). Which one a device-tree node needs is decided by
//! `devicetree::support::uart_config`, which walks the node's whole `compatible` list.
//!
//! Each driver does what Linux's earlycon for it does (named in each module): it transmits
//! through a UART the loader (firmware, U-Boot, m1n1) has already clocked, pinned and set to a
//! baud rate, and programs none of that itself. Where the earlycon enables the transmitter
//! (Cadence, Meson), so does the driver. Receive is polled (`get_byte`) where the layout makes it
//! a matter of one status bit; the two Qualcomm engines are transmit-only.
//!
//! Every wait is bounded ([`Patience`]): a UART that never shows room (unclocked, or not there)
//! is given up after [`SPIN_LIMIT`] polls and its output dropped, rather than hanging the kernel
//! in the console.
//!
//! The modules depend only on `core` and `tock-registers`, because the host crate
//! `tools/uart-check` compiles these same files (a `#[path]` module) and runs each driver
//! against a register model in host memory: a byte written must land in the transmit register,
//! a full FIFO must hold it back, a status bit must gate a read.
pub mod cadence;
pub mod imx;
pub mod lpuart;
pub mod meson;
pub mod mvebu;
pub mod ns16550;
pub mod qcom_geni;
pub mod qcom_uartdm;
pub mod samsung;
pub mod scif;

use core::sync::atomic::{AtomicBool, Ordering};

/// Polls of a status register before a UART that never becomes ready is given up (about a
/// millisecond or more: far longer than one byte takes at 115200 baud, 87 us).
pub const SPIN_LIMIT: u32 = 1_000_000;

/// What every console UART offers the console.
pub trait Serial {
    /// Sends one byte, waiting (boundedly) for room.
    fn put_byte(&self, byte: u8);
    /// A received byte, if one is waiting (`None` on transmit-only drivers).
    fn get_byte(&self) -> Option<u8>;
    /// Waits (boundedly) until every queued byte has left.
    fn flush(&self);
}

/// A bounded wait that remembers failure: once a UART has not become ready within
/// [`SPIN_LIMIT`] polls it is taken as dead and not waited for again.
pub struct Patience {
    dead: AtomicBool,
}

impl Patience {
    /// A UART not yet given up on.
    pub const fn new() -> Self {
        Self { dead: AtomicBool::new(false) }
    }

    /// Polls `ready` until it holds (true) or the limit passes (false, and the UART is dead
    /// from then on). Returns false at once for a dead UART.
    pub fn wait(&self, mut ready: impl FnMut() -> bool) -> bool {
        if self.is_dead() {
            return false;
        }
        for _ in 0..SPIN_LIMIT {
            if ready() {
                return true;
            }
            core::hint::spin_loop();
        }
        self.dead.store(true, Ordering::Relaxed);
        false
    }

    /// Whether a wait has timed out before.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }
}

impl Default for Patience {
    fn default() -> Self {
        Self::new()
    }
}
