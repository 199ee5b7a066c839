//! Arm PrimeCell PL011 UART, polled (the console): transmit, and receive for the tty.
//!
//! The baud rate is left as the firmware or loader programmed it: the kernel does not know the
//! UART's reference clock for certain on every board, and reprogramming it wrongly would turn a
//! working console into noise. Only the enable bits are ensured.

use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::register_bitfields;
use tock_registers::register_structs;
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};

register_bitfields! [u32,
    FR [
        /// Transmit FIFO full.
        TXFF OFFSET(5) NUMBITS(1) [],
        /// Receive FIFO empty.
        RXFE OFFSET(4) NUMBITS(1) [],
        /// UART busy transmitting.
        BUSY OFFSET(3) NUMBITS(1) []
    ],
    CR [
        UARTEN OFFSET(0) NUMBITS(1) [],
        TXE OFFSET(8) NUMBITS(1) [],
        RXE OFFSET(9) NUMBITS(1) []
    ]
];

register_structs! {
    /// The PL011 register block (PrimeCell UART TRM, table 3-1).
    pub Registers {
        (0x000 => dr: ReadWrite<u32>),
        (0x004 => _reserved0),
        (0x018 => fr: ReadOnly<u32, FR::Register>),
        (0x01c => _reserved1),
        (0x030 => cr: ReadWrite<u32, CR::Register>),
        (0x034 => _reserved2),
        (0x038 => imsc: ReadWrite<u32>),
        (0x03c => _reserved3),
        (0x044 => icr: WriteOnly<u32>),
        (0x048 => @END),
    }
}

/// A PL011 whose registers are mapped at a known virtual address.
pub struct Pl011 {
    base: *const Registers,
}

// SAFETY: the register block is device memory shared by construction; callers serialise use
// through the console lock.
unsafe impl Send for Pl011 {}

impl Pl011 {
    /// # Safety
    /// `base` must be the virtual address of a PL011 register block, mapped as device memory for
    /// as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped PL011 register block.
        unsafe { &*self.base }
    }

    /// Makes sure the transmitter and receiver are enabled, without touching the baud rate.
    pub fn enable_transmit(&self) {
        let cr = self.regs().cr.get();
        let want = cr | (1 << 0) | (1 << 8) | (1 << 9);
        if cr != want {
            self.regs().cr.set(want);
        }
        self.regs().icr.set(0x7ff);
    }

    /// Sends one byte, waiting while the transmit FIFO is full.
    pub fn put_byte(&self, byte: u8) {
        while self.regs().fr.is_set(FR::TXFF) {
            core::hint::spin_loop();
        }
        self.regs().dr.set(u32::from(byte));
    }

    /// Raises the UART's interrupt when bytes arrive: the receive (RXIM) and receive-timeout
    /// (RTIM) interrupts, unmasked in IMSC.
    pub fn enable_receive_interrupt(&self) {
        self.regs().imsc.set(self.regs().imsc.get() | (1 << 4) | (1 << 6));
    }

    /// Clears the receive and receive-timeout interrupts (after the FIFO was drained).
    pub fn clear_receive_interrupt(&self) {
        self.regs().icr.set((1 << 4) | (1 << 6));
    }

    /// A received byte, if one is waiting (errors in the upper bits of DR are dropped).
    pub fn get_byte(&self) -> Option<u8> {
        if self.regs().fr.is_set(FR::RXFE) { None } else { Some(self.regs().dr.get() as u8) }
    }

    /// Waits until every queued byte has left the UART.
    pub fn flush(&self) {
        while self.regs().fr.is_set(FR::BUSY) {
            core::hint::spin_loop();
        }
    }
}

impl super::uart::Serial for Pl011 {
    fn put_byte(&self, byte: u8) {
        Pl011::put_byte(self, byte);
    }

    fn get_byte(&self) -> Option<u8> {
        Pl011::get_byte(self)
    }

    fn flush(&self) {
        Pl011::flush(self);
    }
}
