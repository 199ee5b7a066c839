//! The console as a terminal: the line discipline (the `line-discipline` crate) between the UART and the
//! programs' descriptors 0, 1 and 2, the window size, and waking readers when input arrives.
//!
//! Input is interrupt-driven where the device tree gives the console's interrupt and the
//! controller can route it: a PL011 behind a GIC (QEMU virt: SPI 1, INTID 33), taken by the boot
//! CPU ([`enable_interrupts`]). Everywhere else (the Pi's mini UART, whose AUX interrupt sits
//! behind the GPU's controller) it is polled: every CPU's 10 ms tick drains the UART's receive
//! FIFO ([`poll_input`]), and so does a read before it decides to wait; that costs up to 10 ms of
//! latency per keystroke. Nothing is lost while nobody polls: the UART holds received bytes in its
//! FIFO, and QEMU's serial back end stops taking input while the FIFO is full.
//!
//! Echo goes straight to the UART from the tick, as Linux echoes from its receive path.
use alloc::vec::Vec;

use line_discipline::LineDiscipline;
use linux_abi::Errno;
use linux_abi::fcntl::S_IFCHR;
use linux_abi::layout::{Stat, Winsize, encode_dev};
use linux_abi::poll;
use linux_abi::termios::{TERMIOS_SIZE, Termios, oflag};
use linux_abi::time::Timespec;
use spin::Mutex;

use super::file::{FileError, Io, IoResult, OpenFile};

struct Tty {
    line: LineDiscipline,
    winsize: Winsize,
    /// The foreground process group, once a session leader made the console its terminal.
    foreground: u32,
}

static TTY: Mutex<Option<Tty>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Tty) -> R) -> R {
    let mut tty = TTY.lock();
    // A serial console reports no window size until someone sets one (Linux does the same).
    f(tty.get_or_insert_with(|| Tty {
        line: LineDiscipline::new(),
        winsize: Winsize::default(),
        foreground: 0,
    }))
}

fn onlcr(t: &Termios) -> bool {
    t.oflag & (oflag::OPOST | oflag::ONLCR) == (oflag::OPOST | oflag::ONLCR)
}

/// Polls console input on every tick, and routes the console's receive interrupt to the same
/// polling if it can; returns a line for the boot report.
pub fn enable_interrupts(machine: &crate::devicetree::Machine) -> &'static str {
    crate::irq::on_tick(super::tick);
    let Ok(console) = &machine.console else { return "polled (no console node)" };
    let Some(node) = machine.fdt.find_node(&console.path) else { return "polled" };
    // `interrupt-parent` is inherited: the node's own, else the nearest ancestor's.
    let parent = crate::devicetree::interrupt_parent(&machine.fdt, &console.path);
    // A GIC's three cells: type (0 = SPI), number, flags.
    let gic_parent = parent.is_some_and(|p| crate::drivers::gic::is_gic(&p));
    let cells = node.property("interrupts").map(|p| p.value).filter(|v| v.len() >= 12);
    let (Some(cells), true) = (cells, gic_parent) else {
        return "polled on the tick (no GIC interrupt for the console)";
    };
    let cell =
        |i: usize| u32::from_be_bytes([cells[i * 4], cells[i * 4 + 1], cells[i * 4 + 2], cells[i * 4 + 3]]);
    if cell(0) != 0 {
        return "polled on the tick (the console's interrupt is not an SPI)";
    }
    let intid = 32 + cell(1);
    if !crate::console::enable_receive_interrupt() {
        return "polled on the tick (this UART's driver has no receive interrupt)";
    }
    if !crate::irq::set_handler(intid, poll_input) {
        return "polled on the tick (no room for another interrupt handler)";
    }
    if !crate::drivers::intc::enable_shared(intid) {
        crate::irq::clear_handler(intid);
        return "polled on the tick (the interrupt controller cannot route it)";
    }
    "interrupt-driven (the UART's receive interrupt)"
}

/// Drains the UART into the line discipline, echoes, and wakes readers if a read can now return.
pub fn poll_input() {
    let mut bytes = [0u8; 64];
    let n = crate::console::receive(&mut bytes);
    if n == 0 {
        return;
    }
    // No allocation on this path (it runs in the tick's interrupt handler): an input byte echoes
    // as at most 6 bytes (two backspace-space-backspace for an erased ^X).
    let mut echo = [0u8; 64 * 6];
    let mut echoed = 0;
    let (readable, onlcr) = with(|tty| {
        for &b in &bytes[..n] {
            tty.line.input(b, &mut |e: &[u8]| {
                let room = echo.len() - echoed;
                let take = e.len().min(room);
                echo[echoed..echoed + take].copy_from_slice(&e[..take]);
                echoed += take;
            });
        }
        (tty.line.readable(), onlcr(&tty.line.termios))
    });
    if echoed > 0 {
        crate::console::write_bytes(&echo[..echoed], onlcr);
    }
    if readable {
        crate::sched::notify(input_key());
    }
}

/// The kernel-event key of console input (`sched::notify`): a reader that found nothing blocks
/// on it. The address of a static, offset so that it is no user futex's key.
pub fn input_key() -> usize {
    static INPUT: u8 = 0;
    core::ptr::from_ref(&INPUT) as usize | 1
}

/// Whether a read would return now.
pub fn readable() -> bool {
    with(|tty| tty.line.readable())
}

/// What one read returns into `out`, or `None` if the reader must wait.
pub fn read(out: &mut [u8]) -> Option<usize> {
    poll_input();
    with(|tty| tty.line.read(out))
}

/// Bytes a read could take now (`FIONREAD`).
pub fn available() -> usize {
    poll_input();
    with(|tty| tty.line.available())
}

/// Writes a program's output.
pub fn write(bytes: &[u8]) {
    let onlcr = with(|tty| onlcr(&tty.line.termios));
    crate::console::write_bytes(bytes, onlcr);
}

/// `TCGETS`.
pub fn termios() -> Termios {
    with(|tty| tty.line.termios)
}

/// `TCSETS*`; `flush` drops unread input first (`TCSETSF`).
pub fn set_termios(t: Termios, flush: bool) {
    with(|tty| {
        if flush {
            tty.line.flush_input();
        }
        tty.line.set_termios(t);
    });
}

/// `TCFLSH` of the input queue.
pub fn flush_input() {
    with(|tty| tty.line.flush_input());
}

/// `TIOCGWINSZ`.
pub fn winsize() -> Winsize {
    with(|tty| tty.winsize)
}

/// `TIOCSWINSZ`.
pub fn set_winsize(w: Winsize) {
    with(|tty| tty.winsize = w);
}

/// `TIOCGPGRP` (for a process whose controlling terminal this is).
pub fn foreground() -> u32 {
    with(|tty| tty.foreground)
}

/// `TIOCSPGRP`, `TIOCSCTTY`.
pub fn set_foreground(pgrp: u32) {
    with(|tty| tty.foreground = pgrp);
}

/// The console as what a device file reads and writes (`/dev/console`, `/dev/tty`, descriptors
/// 0, 1 and 2 of the first program): a character device like Linux's `/dev/console` (major 5,
/// minor 1), so `isatty` holds and C libraries line-buffer standard output. The device file
/// (`fs::dev`) calls these; the job-control requests, which need the calling process, are the
/// system-call layer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Console {
    /// `st_rdev`'s minor: 1 for `/dev/console`, 0 for `/dev/tty`.
    minor: u32,
}

/// Bytes moved per read (a canonical line is at most 4096).
const READ_CHUNK: usize = 4096;

impl Console {
    /// `/dev/console`.
    pub const CONSOLE: Console = Console { minor: 1 };
    /// `/dev/tty` (the controlling terminal, which is the console here).
    pub const TTY: Console = Console { minor: 0 };

    /// A read: what the line discipline has, or `WouldBlock` on the input event.
    ///
    /// # Errors
    /// `EFAULT`, `ENOMEM`, `WouldBlock`.
    pub fn read(self, io: Io<'_>) -> IoResult {
        let total = io.len().min(READ_CHUNK as u64) as usize;
        if total == 0 {
            return Ok(0);
        }
        let mut data = crate::memory::fallible::zeroed::<u8>(total)?;
        let Some(n) = read(&mut data) else { return Err(FileError::WouldBlock(input_key())) };
        // On a fault the bytes are gone from the line discipline, as with Linux's n_tty.
        io.scatter(&data[..n])
    }

    /// A write: the bytes go to the UART as they are (output processing aside).
    ///
    /// # Errors
    /// `EFAULT` when nothing could be read from the buffers.
    pub fn write(self, io: Io<'_>, _progress: &mut u64, _sigpipe: &dyn Fn()) -> IoResult {
        let mut chunk = [0u8; 256];
        io.gather(&mut chunk, 0, &mut |bytes| {
            write(bytes);
            Ok(bytes.len())
        })
    }

    /// Ready to read when a read would return; always ready to write.
    pub fn poll(self) -> (u16, usize) {
        poll_input();
        let input = if readable() { poll::POLLIN | poll::POLLRDNORM } else { 0 };
        (input | poll::POLLOUT | poll::POLLWRNORM, input_key())
    }

    /// A character device on devtmpfs, mode 0600 (console) or 0666 (tty), owned by root.
    ///
    /// # Errors
    /// None.
    pub fn stat(self) -> Result<Stat, Errno> {
        let boot = Timespec::from_ns(crate::wallclock::realtime_offset_ns());
        let (ino, mode) = if self.minor == 1 { (5, 0o600) } else { (4, 0o666) };
        Ok(Stat {
            dev: 6,
            ino,
            mode: S_IFCHR | mode,
            nlink: 1,
            rdev: encode_dev(5, self.minor),
            blksize: 1024,
            times: [boot; 3],
            ..Stat::default()
        })
    }

    /// The terminal requests that need no process: termios, window size, queue sizes.
    ///
    /// # Errors
    /// `EFAULT`, `EINVAL`, `ENOTTY`.
    pub fn ioctl(self, _open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        use crate::memory::uaccess::{copy_in, copy_out};
        use linux_abi::termios::ioctl::*;
        let out = |bytes: &[u8]| copy_out(arg, bytes).map(|()| 0).map_err(|_| Errno::EFAULT);
        match request as u32 as u64 {
            TCGETS => out(&termios().to_bytes()),
            TCSETS | TCSETSW | TCSETSF => {
                let mut b = [0u8; TERMIOS_SIZE];
                copy_in(&mut b, arg).map_err(|_| Errno::EFAULT)?;
                // Output is written synchronously, so TCSETSW's drain has nothing to wait for.
                set_termios(Termios::from_bytes(b), request as u32 as u64 == TCSETSF);
                Ok(0)
            }
            TIOCGWINSZ => out(&winsize().to_bytes()),
            TIOCSWINSZ => {
                let mut b = [0u8; 8];
                copy_in(&mut b, arg).map_err(|_| Errno::EFAULT)?;
                set_winsize(Winsize::from_bytes(b));
                Ok(0)
            }
            FIONREAD => out(&(available() as u32).to_le_bytes()),
            TIOCOUTQ => out(&0u32.to_le_bytes()),
            TCFLSH => {
                if arg > 2 {
                    return Err(Errno::EINVAL);
                }
                if arg != 1 {
                    flush_input();
                }
                Ok(0)
            }
            TCXONC => Ok(0),
            _ => Err(Errno::ENOTTY),
        }
    }

    /// Its path.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn describe(self) -> Result<Vec<u8>, Errno> {
        let name: &[u8] = if self.minor == 1 { b"/dev/console" } else { b"/dev/tty" };
        crate::fs::copy_bytes(name)
    }
}
