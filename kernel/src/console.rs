//! The kernel console: where `kprintln!` goes.
//!
//! Before the device tree is read, the console is the board's fallback UART (if the build has one,
//! see `board`), reached through the early map. Once the device tree names `/chosen/stdout-path`,
//! the console moves to that UART, mapped in the final kernel map: a PL011 or a BCM2835 mini UART.
//! A console the kernel has no driver for leaves the kernel silent but running (the boot report,
//! kept in memory by no one, still records the choice in [`kind`]). Output is polled; a lock keeps
//! lines whole. Input is polled too ([`receive`], from `crate::tty` on each tick). The fatal paths (panic, exception report) take the console even if its lock is
//! held, because a report that deadlocks is worse than one that interleaves.

use core::fmt::{self, Write};

use spin::Mutex;

use crate::drivers::mini_uart::MiniUart;
use crate::drivers::pl011::Pl011;

/// What the console is, for the boot report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsoleKind {
    /// Nothing to write to: output is dropped.
    None,
    /// The board's fallback UART through the early map.
    Fallback,
    /// The PL011 named by the device tree.
    Pl011 {
        /// Its physical address.
        pa: u64,
    },
    /// The BCM2835 mini UART named by the device tree.
    MiniUart {
        /// Its physical address.
        pa: u64,
    },
}

/// Which driver a UART needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UartDriver {
    /// Arm PrimeCell PL011.
    Pl011,
    /// BCM2835 auxiliary mini UART.
    MiniUart,
}

impl UartDriver {
    /// The driver for a device-tree `compatible` string, if this kernel has one.
    pub fn for_compatible(compatible: &str) -> Option<Self> {
        match compatible {
            "arm,pl011" | "arm,primecell" => Some(Self::Pl011),
            "brcm,bcm2835-aux-uart" => Some(Self::MiniUart),
            _ => None,
        }
    }
}

enum Uart {
    Pl011(Pl011),
    MiniUart(MiniUart),
}

impl Uart {
    fn put_byte(&self, byte: u8) {
        match self {
            Uart::Pl011(u) => u.put_byte(byte),
            Uart::MiniUart(u) => u.put_byte(byte),
        }
    }

    fn flush(&self) {
        match self {
            Uart::Pl011(u) => u.flush(),
            Uart::MiniUart(u) => u.flush(),
        }
    }

    fn get_byte(&self) -> Option<u8> {
        match self {
            Uart::Pl011(u) => u.get_byte(),
            Uart::MiniUart(u) => u.get_byte(),
        }
    }

    fn clear_receive_interrupt(&self) {
        if let Uart::Pl011(u) = self {
            u.clear_receive_interrupt();
        }
    }
}

struct Console {
    uart: Option<Uart>,
    kind: ConsoleKind,
}

static CONSOLE: Mutex<Console> = Mutex::new(Console { uart: None, kind: ConsoleKind::None });

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some(uart) = &self.uart {
            for byte in s.bytes() {
                if byte == b'\n' {
                    uart.put_byte(b'\r');
                }
                uart.put_byte(byte);
            }
        }
        Ok(())
    }
}

/// Switches the console to the UART at virtual address `va`, driven by `driver`.
///
/// The fallback UART is used as the loader left it (nothing is written until there is something
/// to say): until the device tree confirms it, its address may not even be a UART on this board
/// (see `board`).
///
/// # Safety
/// `va` must map a register block of that kind of UART as device memory for the rest of the
/// kernel's life (or until the console is switched again).
pub unsafe fn use_uart(driver: UartDriver, va: u64, kind: ConsoleKind) {
    let enable = kind != ConsoleKind::Fallback;
    let uart = match driver {
        UartDriver::Pl011 => {
            // SAFETY: forwarded from the caller.
            let u = unsafe { Pl011::new(va) };
            if enable {
                u.enable_transmit();
            }
            Uart::Pl011(u)
        }
        UartDriver::MiniUart => {
            // SAFETY: forwarded from the caller.
            let u = unsafe { MiniUart::new(va) };
            if enable {
                u.enable_transmit();
            }
            Uart::MiniUart(u)
        }
    };
    let mut console = CONSOLE.lock();
    console.uart = Some(uart);
    console.kind = kind;
}

/// Drops the console: output is discarded from here on (a console the kernel has no driver for,
/// or a fallback UART that the device tree shows is not a UART on this board).
pub fn silence() {
    let mut console = CONSOLE.lock();
    console.uart = None;
    console.kind = ConsoleKind::None;
}

/// What the console currently is.
pub fn kind() -> ConsoleKind {
    CONSOLE.lock().kind
}

/// Waits until everything written has left the UART (before powering off).
pub fn flush() {
    if let Some(uart) = &CONSOLE.lock().uart {
        uart.flush();
    }
}

/// Writes a program's bytes as they are (no UTF-8 check), turning `\n` into `\r\n` when `onlcr`
/// (the tty's `OPOST | ONLCR`).
pub fn write_bytes(bytes: &[u8], onlcr: bool) {
    let console = CONSOLE.lock();
    if let Some(uart) = &console.uart {
        for &byte in bytes {
            if byte == b'\n' && onlcr {
                uart.put_byte(b'\r');
            }
            uart.put_byte(byte);
        }
    }
}

/// Moves the bytes the UART has received into `buf`; returns how many. Returns 0 at once if
/// another CPU holds the console (the UART is polled again at the next tick).
pub fn receive(buf: &mut [u8]) -> usize {
    let Some(console) = CONSOLE.try_lock() else { return 0 };
    let Some(uart) = &console.uart else { return 0 };
    let mut n = 0;
    // Bounded by `buf`: a UART that always reports data (a broken one) cannot hold the CPU.
    while n < buf.len() {
        match uart.get_byte() {
            Some(byte) => buf[n] = byte,
            None => break,
        }
        n += 1;
    }
    uart.clear_receive_interrupt();
    n
}

/// Makes the console UART interrupt when it receives (a PL011; the mini UART stays polled).
/// Returns whether it will.
pub fn enable_receive_interrupt() -> bool {
    match &CONSOLE.lock().uart {
        Some(Uart::Pl011(u)) => {
            u.enable_receive_interrupt();
            true
        }
        _ => false,
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments<'_>) {
    let _ = CONSOLE.lock().write_fmt(args);
}

/// Prints on the fatal paths: takes the console even if someone holds its lock.
pub fn print_fatal(args: fmt::Arguments<'_>) {
    if CONSOLE.is_locked() {
        // SAFETY: only on the way to ending the run; interleaving is accepted (see module doc).
        unsafe { CONSOLE.force_unlock() };
    }
    _print(args);
}

/// Prints to the kernel console.
#[macro_export]
macro_rules! kprint {
    ($($arg:tt)*) => ($crate::console::_print(format_args!($($arg)*)));
}

/// Prints a line to the kernel console.
#[macro_export]
macro_rules! kprintln {
    () => ($crate::kprint!("\n"));
    ($($arg:tt)*) => ($crate::console::_print(format_args!("{}\n", format_args!($($arg)*))));
}
