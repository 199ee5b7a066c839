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
use line_discipline::LineDiscipline;
use linux_abi::layout::Winsize;
use linux_abi::termios::{Termios, oflag};
use spin::Mutex;

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
    crate::irq::on_tick(poll_input);
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
