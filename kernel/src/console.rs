//! The kernel console: where `kprintln!` goes.
//!
//! Before the device tree is read, the console is the board's fallback UART (if the build has one,
//! see `board`), reached through the early map. Once the device tree names `/chosen/stdout-path`,
//! the console moves to that UART, mapped in the final kernel map. Output is polled; a lock keeps
//! lines whole. The fatal paths (panic, exception report) take the console even if its lock is
//! held, because a report that deadlocks is worse than one that interleaves.

use core::fmt::{self, Write};

use spin::Mutex;

use crate::drivers::pl011::Pl011;

/// What the console is, for the boot report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsoleKind {
    /// Nothing to write to: output is dropped.
    None,
    /// The board's fallback PL011 through the early map.
    Fallback,
    /// The PL011 named by the device tree.
    Pl011 {
        /// Its physical address.
        pa: u64,
    },
}

struct Console {
    uart: Option<Pl011>,
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

/// Switches the console to a PL011 at virtual address `va`.
///
/// # Safety
/// `va` must map a PL011 register block as device memory for the rest of the kernel's life.
pub unsafe fn use_pl011(va: u64, kind: ConsoleKind) {
    // SAFETY: forwarded from the caller.
    let uart = unsafe { Pl011::new(va) };
    uart.enable_transmit();
    let mut console = CONSOLE.lock();
    console.uart = Some(uart);
    console.kind = kind;
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
