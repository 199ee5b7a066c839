//! Each console UART driver against a register model: a zeroed, page-aligned block of host
//! memory standing for the device's registers, whose status bits the test sets. A byte sent must
//! land in the transmit register (at the width and spacing the layout says, nothing else
//! written), a status bit saying "full" must hold it back (and the driver then gives up rather
//! than hang), and a byte is only read when the status says one is waiting.
use std::alloc::{Layout, alloc_zeroed, dealloc};

use uart_check::uart::cadence::Cadence;
use uart_check::uart::imx::Imx;
use uart_check::uart::lpuart::Lpuart;
use uart_check::uart::meson::Meson;
use uart_check::uart::mvebu::Mvebu;
use uart_check::uart::ns16550::Ns16550;
use uart_check::uart::qcom_geni::QcomGeni;
use uart_check::uart::qcom_uartdm::QcomUartDm;
use uart_check::uart::samsung::{self, Samsung};
use uart_check::uart::scif::Scif;
use uart_check::uart::{Patience, SPIN_LIMIT, Serial};

/// A register block in host memory, read and written only through raw pointers (as the drivers
/// do), so that no reference to it is alive while a driver uses it.
struct Model {
    ptr: *mut u8,
}

const MODEL_SIZE: usize = 0x1000;

impl Model {
    fn new() -> Self {
        let layout = Layout::from_size_align(MODEL_SIZE, 0x1000).unwrap();
        // SAFETY: a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Self { ptr }
    }

    fn base(&self) -> u64 {
        self.ptr as u64
    }

    fn r8(&self, off: usize) -> u8 {
        assert!(off < MODEL_SIZE);
        // SAFETY: inside the block.
        unsafe { self.ptr.add(off).read_volatile() }
    }

    fn w8(&self, off: usize, v: u8) {
        assert!(off < MODEL_SIZE);
        // SAFETY: inside the block.
        unsafe { self.ptr.add(off).write_volatile(v) }
    }

    fn r16(&self, off: usize) -> u16 {
        assert!(off + 2 <= MODEL_SIZE && off.is_multiple_of(2));
        // SAFETY: inside the block, aligned.
        unsafe { (self.ptr.add(off) as *const u16).read_volatile() }
    }

    fn w16(&self, off: usize, v: u16) {
        assert!(off + 2 <= MODEL_SIZE && off.is_multiple_of(2));
        // SAFETY: inside the block, aligned.
        unsafe { (self.ptr.add(off) as *mut u16).write_volatile(v) }
    }

    fn r32(&self, off: usize) -> u32 {
        assert!(off + 4 <= MODEL_SIZE && off.is_multiple_of(4));
        // SAFETY: inside the block, aligned.
        unsafe { (self.ptr.add(off) as *const u32).read_volatile() }
    }

    fn w32(&self, off: usize, v: u32) {
        assert!(off + 4 <= MODEL_SIZE && off.is_multiple_of(4));
        // SAFETY: inside the block, aligned.
        unsafe { (self.ptr.add(off) as *mut u32).write_volatile(v) }
    }

    fn set_bit(&self, off: usize, bit: u32, on: bool) {
        let v = self.r32(off);
        self.w32(off, if on { v | (1 << bit) } else { v & !(1 << bit) });
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, Layout::from_size_align(MODEL_SIZE, 0x1000).unwrap()) }
    }
}

/// A status bit that gates transmit or receive: ready when the bit's value is `ready_when_set`.
#[derive(Clone, Copy)]
struct Gate {
    off: usize,
    bit: u32,
    ready_when_set: bool,
}

impl Gate {
    fn set(self, m: &Model, ready: bool) {
        m.set_bit(self.off, self.bit, ready == self.ready_when_set);
    }
}

/// With the gate open a byte reaches `tx` (32-bit register); with it shut nothing is written,
/// the driver gives up, and stays given up when the gate opens later.
fn transmit_is_gated(
    make: impl Fn(&Model) -> Box<dyn Serial>,
    tx: usize,
    gate: Gate,
    prepare: impl Fn(&Model),
) {
    let m = Model::new();
    prepare(&m);
    let uart = make(&m);
    gate.set(&m, true);
    uart.put_byte(b'A');
    assert_eq!(m.r32(tx), u32::from(b'A'), "the byte reaches the transmit register");
    uart.put_byte(b'\n');
    assert_eq!(m.r32(tx), u32::from(b'\n'));

    let m = Model::new();
    prepare(&m);
    let uart = make(&m);
    gate.set(&m, false);
    uart.put_byte(b'B');
    assert_eq!(m.r32(tx), 0, "a full transmitter holds the byte back");
    gate.set(&m, true);
    uart.put_byte(b'C');
    assert_eq!(m.r32(tx), 0, "a UART that timed out once is not waited for again");
    uart.flush(); // returns: bounded
}

/// With the gate shut nothing is read; with it open the byte in `rx` is returned.
fn receive_is_gated(
    make: impl Fn(&Model) -> Box<dyn Serial>,
    rx: usize,
    gate: Gate,
    prepare: impl Fn(&Model),
) {
    let m = Model::new();
    prepare(&m);
    let uart = make(&m);
    m.w32(rx, 0x7a);
    gate.set(&m, false);
    assert_eq!(uart.get_byte(), None);
    gate.set(&m, true);
    assert_eq!(uart.get_byte(), Some(0x7a));
}

#[test]
fn patience_gives_up_after_the_limit_and_remembers() {
    let p = Patience::new();
    let mut polls = 0u32;
    assert!(!p.wait(|| {
        polls += 1;
        false
    }));
    assert_eq!(polls, SPIN_LIMIT);
    assert!(p.is_dead());
    assert!(!p.wait(|| true), "dead stays dead");
    let p = Patience::new();
    let mut polls = 0;
    assert!(p.wait(|| {
        polls += 1;
        polls == 3
    }));
    assert!(!p.is_dead());
}

#[test]
fn ns16550_32_bit_registers_4_bytes_apart() {
    // DesignWare APB (Rockchip, Allwinner): reg-shift 2, reg-io-width 4; LSR at 5 << 2.
    // SAFETY: the model block is mapped host memory covering registers 0..7.
    let make = |m: &Model| -> Box<dyn Serial> { Box::new(unsafe { Ns16550::new(m.base(), 2, 4) }) };
    let thre = Gate { off: 0x14, bit: 5, ready_when_set: true };
    transmit_is_gated(make, 0x00, thre, |_| {});
    receive_is_gated(make, 0x00, Gate { off: 0x14, bit: 0, ready_when_set: true }, |_| {});
    // flush waits for TEMT (bit 6): set, it returns with the UART alive.
    let m = Model::new();
    let uart = make(&m);
    m.w32(0x14, (1 << 5) | (1 << 6));
    uart.flush();
    uart.put_byte(b'x');
    assert_eq!(m.r32(0), u32::from(b'x'));
}

#[test]
fn ns16550_byte_registers_write_one_byte_only() {
    // Plain ns16550a / fsl,ns16550: byte registers 1 apart; LSR at 5. Neighbours hold a pattern
    // that a wider write would destroy.
    let m = Model::new();
    for off in [1, 2, 3, 4, 6, 7] {
        m.w8(off, 0xa5);
    }
    m.w8(5, 1 << 5);
    // SAFETY: the model block covers registers 0..7.
    let uart = unsafe { Ns16550::new(m.base(), 0, 1) };
    uart.put_byte(b'Q');
    assert_eq!(m.r8(0), b'Q');
    for off in [1, 2, 3, 4, 6, 7] {
        assert_eq!(m.r8(off), 0xa5, "register {off} untouched");
    }
    // THRE clear at offset 5 (not at 5 << 2): held back.
    let m = Model::new();
    m.w8(0x14, 1 << 5); // where a shift-2 LSR would be: must not count
    // SAFETY: as above.
    let uart = unsafe { Ns16550::new(m.base(), 0, 1) };
    uart.put_byte(b'R');
    assert_eq!(m.r8(0), 0);
}

#[test]
fn ns16550_16_bit_registers_2_bytes_apart() {
    let m = Model::new();
    m.w8(5 << 1, 1 << 5);
    m.w8(2, 0xa5);
    // SAFETY: the model block covers registers 0..7.
    let uart = unsafe { Ns16550::new(m.base(), 1, 2) };
    uart.put_byte(b'W');
    assert_eq!((m.r8(0), m.r8(1), m.r8(2)), (b'W', 0, 0xa5));
    m.w8(5 << 1, (1 << 5) | 1);
    m.w8(0, b'r');
    assert_eq!(uart.get_byte(), Some(b'r'));
}

#[test]
fn meson_waits_while_tx_full_and_enables_its_engines() {
    // SAFETY: the model block covers the Meson registers.
    let make = |m: &Model| -> Box<dyn Serial> { Box::new(unsafe { Meson::new(m.base()) }) };
    transmit_is_gated(make, 0x00, Gate { off: 0x0c, bit: 21, ready_when_set: false }, |_| {});
    receive_is_gated(make, 0x04, Gate { off: 0x0c, bit: 20, ready_when_set: false }, |_| {});
    let m = Model::new();
    m.w32(0x08, 0x3); // loader's bits elsewhere in CONTROL stay
    // SAFETY: as above.
    unsafe { Meson::new(m.base()) }.enable();
    assert_eq!(m.r32(0x08), 0x3 | (1 << 12) | (1 << 13));
}

#[test]
fn imx_waits_on_uts_txfull_and_reads_on_usr2_rdr() {
    // SAFETY: the model block covers the i.MX UART registers (to UTS at 0xb4).
    let make = |m: &Model| -> Box<dyn Serial> { Box::new(unsafe { Imx::new(m.base()) }) };
    transmit_is_gated(make, 0x40, Gate { off: 0xb4, bit: 4, ready_when_set: false }, |_| {});
    receive_is_gated(make, 0x00, Gate { off: 0x98, bit: 0, ready_when_set: true }, |_| {});
}

#[test]
fn lpuart_waits_for_tdre_and_reads_on_rdrf() {
    // The caller applies the i.MX 0x10 offset: the model is the block from BAUD on.
    // SAFETY: the model block covers the LPUART registers.
    let make = |m: &Model| -> Box<dyn Serial> { Box::new(unsafe { Lpuart::new(m.base()) }) };
    transmit_is_gated(make, 0x0c, Gate { off: 0x04, bit: 23, ready_when_set: true }, |_| {});
    receive_is_gated(make, 0x0c, Gate { off: 0x04, bit: 21, ready_when_set: true }, |_| {});
}

#[test]
fn cadence_waits_while_txfull_and_enable_clears_the_disables() {
    // SAFETY: the model block covers the Cadence UART registers.
    let make = |m: &Model| -> Box<dyn Serial> { Box::new(unsafe { Cadence::new(m.base()) }) };
    transmit_is_gated(make, 0x30, Gate { off: 0x2c, bit: 4, ready_when_set: false }, |_| {});
    receive_is_gated(make, 0x30, Gate { off: 0x2c, bit: 1, ready_when_set: false }, |_| {});
    // QEMU's reset value of CR: STOPBRK | TX_DIS | RX_DIS. After enable: STOPBRK | TX_EN | RX_EN.
    let m = Model::new();
    m.w32(0x00, 0x128);
    // SAFETY: as above.
    unsafe { Cadence::new(m.base()) }.enable();
    assert_eq!(m.r32(0x00), 0x114);
    // A reset in progress is not written back.
    m.w32(0x00, 0x123);
    // SAFETY: as above.
    unsafe { Cadence::new(m.base()) }.enable();
    assert_eq!(m.r32(0x00), 0x114);
}

#[test]
fn qcom_geni_sends_one_byte_per_start_tx_command() {
    let m = Model::new();
    m.w32(0x610, 1); // M_IRQ_STATUS: M_CMD_DONE
    // SAFETY: the model block covers the GENI registers used (to the TX FIFO at 0x700).
    let uart = unsafe { QcomGeni::new(m.base()) };
    uart.put_byte(b'g');
    assert_eq!(m.r32(0x270), 1, "SE_UART_TX_TRANS_LEN: one byte");
    assert_eq!(m.r32(0x600), 1 << 27, "SE_GENI_M_CMD0: UART_START_TX");
    assert_eq!(m.r32(0x700), u32::from(b'g'), "SE_GENI_TX_FIFOn");
    assert_eq!(m.r32(0x618), 1 | (1 << 30), "SE_GENI_M_IRQ_CLEAR: done and watermark");
    assert_eq!(uart.get_byte(), None, "transmit-only");
    // A command still active (the loader's, or a stuck engine): nothing is started.
    let m = Model::new();
    m.w32(0x40, 1); // SE_GENI_STATUS: M_GENI_CMD_ACTIVE
    // SAFETY: as above.
    let uart = unsafe { QcomGeni::new(m.base()) };
    uart.put_byte(b'h');
    assert_eq!((m.r32(0x270), m.r32(0x600), m.r32(0x700)), (0, 0, 0));
}

#[test]
fn qcom_uartdm_announces_each_byte_then_writes_the_fifo() {
    let m = Model::new();
    m.w32(0x08, (1 << 3) | (1 << 2)); // SR: TX_EMPTY, TX_READY
    // SAFETY: the model block covers the UARTDM registers used (to TF at 0x70).
    let uart = unsafe { QcomUartDm::new(m.base()) };
    uart.put_byte(b'd');
    assert_eq!(m.r32(0x10), 3 << 8, "CR: RESET_TX_READY");
    assert_eq!(m.r32(0x40), 1, "NCF_TX: one byte");
    assert_eq!(m.r32(0x70), u32::from(b'd'), "TF");
    assert_eq!(uart.get_byte(), None, "transmit-only");
    // Drained (ISR.TX_READY), but the FIFO never ready: the count is set, no data written.
    let m = Model::new();
    m.w32(0x14, 1 << 7);
    // SAFETY: as above.
    let uart = unsafe { QcomUartDm::new(m.base()) };
    uart.put_byte(b'e');
    assert_eq!((m.r32(0x40), m.r32(0x70)), (1, 0));
    // Never drained: nothing at all.
    let m = Model::new();
    // SAFETY: as above.
    let uart = unsafe { QcomUartDm::new(m.base()) };
    uart.put_byte(b'f');
    assert_eq!((m.r32(0x10), m.r32(0x40), m.r32(0x70)), (0, 0, 0));
}

#[test]
fn samsung_layouts_differ_in_their_fifo_status_bits() {
    let fifo_mode = |m: &Model| m.w32(0x08, 1);
    let exynos = |m: &Model| -> Box<dyn Serial> {
        // SAFETY: the model block covers the Samsung UART registers.
        Box::new(unsafe { Samsung::new(m.base(), samsung::Layout::Exynos) })
    };
    let apple = |m: &Model| -> Box<dyn Serial> {
        // SAFETY: as above.
        Box::new(unsafe { Samsung::new(m.base(), samsung::Layout::AppleS5l) })
    };
    transmit_is_gated(exynos, 0x20, Gate { off: 0x18, bit: 24, ready_when_set: false }, fifo_mode);
    transmit_is_gated(apple, 0x20, Gate { off: 0x18, bit: 9, ready_when_set: false }, fifo_mode);
    // Without FIFO mode, UTRSTAT.TXFE decides, for both.
    transmit_is_gated(exynos, 0x20, Gate { off: 0x10, bit: 1, ready_when_set: true }, |_| {});
    transmit_is_gated(apple, 0x20, Gate { off: 0x10, bit: 1, ready_when_set: true }, |_| {});
    // Apple's TX-full bit is 9: Exynos's bit 24 does not hold an Apple UART back, and the
    // reverse.
    let m = Model::new();
    fifo_mode(&m);
    m.w32(0x18, 1 << 24);
    apple(&m).put_byte(b'a');
    assert_eq!(m.r32(0x20), u32::from(b'a'));
    let m = Model::new();
    fifo_mode(&m);
    m.w32(0x18, 1 << 9);
    exynos(&m).put_byte(b'e');
    assert_eq!(m.r32(0x20), u32::from(b'e'));
    // Receive: the RX count (bits 3:0 on Apple, 7:0 on Exynos) or RX full says a byte waits.
    receive_is_gated(exynos, 0x24, Gate { off: 0x18, bit: 5, ready_when_set: true }, fifo_mode);
    receive_is_gated(apple, 0x24, Gate { off: 0x18, bit: 8, ready_when_set: true }, fifo_mode);
    receive_is_gated(apple, 0x24, Gate { off: 0x10, bit: 0, ready_when_set: true }, |_| {});
    let m = Model::new();
    fifo_mode(&m);
    m.w32(0x24, 0x41);
    m.w32(0x18, 1 << 5); // in Apple's TX count field, not its RX count
    assert_eq!(apple(&m).get_byte(), None);
    assert_eq!(exynos(&m).get_byte(), Some(0x41));
}

#[test]
fn mvebu_waits_while_tx_fifo_full_and_reads_on_rx_ready() {
    // SAFETY: the model block covers the Armada 3700 UART registers.
    let make = |m: &Model| -> Box<dyn Serial> { Box::new(unsafe { Mvebu::new(m.base()) }) };
    transmit_is_gated(make, 0x04, Gate { off: 0x0c, bit: 11, ready_when_set: false }, |_| {});
    receive_is_gated(make, 0x00, Gate { off: 0x0c, bit: 4, ready_when_set: true }, |_| {});
}

#[test]
fn renesas_scif_enables_keeps_the_loaders_bits_and_uses_16_and_8_bit_registers() {
    let m = Model::new();
    m.w16(0x08, 0x0002); // SCSCR: the loader's clock select (CKE1..0 = 2), TE and RE off
    // SAFETY: the model block covers the SCIF registers (to SCLSR at 0x24).
    let uart = unsafe { Scif::new(m.base()) };
    uart.enable();
    assert_eq!(m.r16(0x08), 0x0032, "SCSCR: TE | RE added, clock select kept");
    // Transmit: SCFSR.TDFE says the FIFO has room; the byte goes to SCFTDR, an 8-bit register
    // (its neighbours untouched), then TDFE and TEND are cleared by writing 0 to them only.
    m.w8(0x0d, 0x5a);
    m.w16(0x10, 1 << 5);
    uart.put_byte(b'R');
    assert_eq!((m.r8(0x0c), m.r8(0x0d)), (b'R', 0x5a), "SCFTDR written as a byte");
    assert_eq!(m.r16(0x10), 0xff9f, "SCFSR: TDFE and TEND cleared, every other flag left (1)");
    // No room: held back, then given up on for good.
    let m = Model::new();
    // SAFETY: as above.
    let uart = unsafe { Scif::new(m.base()) };
    uart.put_byte(b'S');
    assert_eq!((m.r8(0x0c), m.r16(0x10)), (0, 0), "nothing written without TDFE");
    m.w16(0x10, 1 << 5);
    uart.put_byte(b'T');
    assert_eq!(m.r8(0x0c), 0, "a SCIF that timed out once is not waited for again");
    uart.flush(); // returns: bounded
}

#[test]
fn renesas_scif_receives_after_clearing_errors() {
    let m = Model::new();
    // SAFETY: the model block covers the SCIF registers.
    let uart = unsafe { Scif::new(m.base()) };
    m.w8(0x14, 0x41);
    assert_eq!(uart.get_byte(), None, "neither DR nor RDF: nothing read");
    m.w16(0x10, 1 << 0); // DR: data ready (fewer bytes than the trigger, none for a while)
    assert_eq!(uart.get_byte(), Some(0x41));
    assert_eq!(m.r16(0x10), 0xfffc, "DR and RDF cleared");
    m.w16(0x10, 1 << 1); // RDF: the FIFO reached its trigger
    assert_eq!(uart.get_byte(), Some(0x41));
    // A framing error pending: cleared (ER, BRK, FER, PER written 0) before looking for data.
    // The model keeps what was written, so the status then reads 0xff63: DR set, read.
    m.w16(0x10, 1 << 3);
    assert_eq!(uart.get_byte(), Some(0x41));
    assert_eq!(m.r16(0x10), 0xfffc, "then DR and RDF cleared");
}
