//! The Renesas SCIF and HSCIF (`renesas,scif`, `renesas,rcar-gen3-scif` and the other R-Car
//! generations, `renesas,hscif`): the console of R-Car and RZ/G2 boards (Salvator-X, ULCB,
//! HiHope, Beacon).
//!
//! As Linux's drivers/tty/serial/sh-sci.c early console does: `early_console_setup` sets RE and
//! TE in SCSCR, keeping the loader's other bits (clock select, interrupts), and
//! `sci_poll_put_char` waits for SCFSR.TDFE (room in the transmit FIFO), writes SCFTDR and
//! clears TDFE and TEND. Status flags are cleared by writing 0 to them and 1 to every other bit
//! (a 1 leaves a flag as it is), so a clear writes `!(flags)`. Receive is `sci_poll_get_char`:
//! errors (ER, BRK, FER, PER) are cleared first (a pending error stops reception), then a byte
//! is waiting when DR or RDF is set; it is read from SCFRDR and both flags cleared. The baud
//! rate and clock are the loader's (U-Boot's, on these boards).
//!
//! Register map (sh-sci.c `SCIx_SH4_SCIF_REGTYPE`, also the first registers of the BRG and
//! HSCIF layouts): SCSMR 0x00 (16-bit), SCBRR 0x04 (8), SCSCR 0x08 (16), SCFTDR 0x0c (8),
//! SCFSR 0x10 (16), SCFRDR 0x14 (8), SCFCR 0x18 (16), SCFDR 0x1c (16), SCSPTR 0x20 (16),
//! SCLSR 0x24 (16). Each is accessed at its own width, as the hardware requires.
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u16,
    /// Serial control register.
    SCSCR [
        RE OFFSET(4) NUMBITS(1) [],
        TE OFFSET(5) NUMBITS(1) []
    ],
    /// FIFO status register (flags cleared by writing 0).
    SCFSR [
        DR OFFSET(0) NUMBITS(1) [],
        RDF OFFSET(1) NUMBITS(1) [],
        PER OFFSET(2) NUMBITS(1) [],
        FER OFFSET(3) NUMBITS(1) [],
        BRK OFFSET(4) NUMBITS(1) [],
        TDFE OFFSET(5) NUMBITS(1) [],
        TEND OFFSET(6) NUMBITS(1) [],
        ER OFFSET(7) NUMBITS(1) []
    ]
];

register_structs! {
    /// The SCIF registers the driver uses.
    pub Registers {
        (0x00 => _reserved0),
        (0x08 => scscr: ReadWrite<u16, SCSCR::Register>),
        (0x0a => _reserved1),
        (0x0c => scftdr: WriteOnly<u8>),
        (0x0d => _reserved2),
        (0x10 => scfsr: ReadWrite<u16, SCFSR::Register>),
        (0x12 => _reserved3),
        (0x14 => scfrdr: ReadOnly<u8>),
        (0x15 => _reserved4),
        (0x28 => @END),
    }
}

const TX_FLAGS: u16 = (1 << 5) | (1 << 6); // TDFE | TEND
const RX_FLAGS: u16 = (1 << 0) | (1 << 1); // DR | RDF
const ERROR_FLAGS: u16 = (1 << 2) | (1 << 3) | (1 << 4) | (1 << 7); // PER | FER | BRK | ER

/// A SCIF or HSCIF whose registers are mapped at a known virtual address.
pub struct Scif {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Scif {}

impl Scif {
    /// # Safety
    /// `base` must be the virtual address of a SCIF register block, mapped as device memory for
    /// as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped SCIF register block.
        unsafe { &*self.base }
    }

    /// Turns the transmitter and receiver on, keeping the loader's other SCSCR bits; written
    /// only when one is off.
    pub fn enable(&self) {
        let scscr = self.regs().scscr.extract();
        if !scscr.is_set(SCSCR::TE) || !scscr.is_set(SCSCR::RE) {
            self.regs().scscr.set(scscr.get() | SCSCR::TE::SET.value | SCSCR::RE::SET.value);
        }
    }
}

impl Serial for Scif {
    fn put_byte(&self, byte: u8) {
        let regs = self.regs();
        if self.patience.wait(|| regs.scfsr.is_set(SCFSR::TDFE)) {
            regs.scftdr.set(byte);
            regs.scfsr.set(!TX_FLAGS);
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() {
            return None;
        }
        let regs = self.regs();
        let mut status = regs.scfsr.get();
        if status & ERROR_FLAGS != 0 {
            regs.scfsr.set(!ERROR_FLAGS);
            status = regs.scfsr.get();
        }
        if status & RX_FLAGS == 0 {
            return None;
        }
        let byte = regs.scfrdr.get();
        regs.scfsr.set(!RX_FLAGS);
        Some(byte)
    }

    fn flush(&self) {
        // The FIFO empty and the last bit sent, as `serial_console_write` waits.
        self.patience.wait(|| self.regs().scfsr.get() & TX_FLAGS == TX_FLAGS);
    }
}
