//! The Cadence UART (`xlnx,zynqmp-uart`, `cdns,uart-r1p12`, `xlnx,xuartps`): the console of
//! Xilinx Zynq UltraScale+ boards (ZCU102/104/106, Ultra96, Kria), and of QEMU's `xlnx-zcu102`,
//! which models it (hw/char/cadence_uart.c) and is where this driver is tested end to end.
//!
//! As Linux's drivers/tty/serial/xilinx_uartps.c earlycon does: `cdns_early_console_setup`
//! turns the transmitter on through CR (there with TX and RX resets; here the enables only, so
//! a byte the loader has in flight is not cut), and `cdns_uart_console_putchar` waits while
//! SR.TXFULL is set, then writes the FIFO. The receiver is enabled too, for the console's input:
//! a byte is waiting when SR.RXEMPTY is clear. The mode and baud registers are the loader's
//! (QEMU needs none).
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// Control register.
    CR [
        RXRST OFFSET(0) NUMBITS(1) [],
        TXRST OFFSET(1) NUMBITS(1) [],
        RX_EN OFFSET(2) NUMBITS(1) [],
        RX_DIS OFFSET(3) NUMBITS(1) [],
        TX_EN OFFSET(4) NUMBITS(1) [],
        TX_DIS OFFSET(5) NUMBITS(1) []
    ],
    /// Channel status register.
    SR [
        RXEMPTY OFFSET(1) NUMBITS(1) [],
        TXEMPTY OFFSET(3) NUMBITS(1) [],
        TXFULL OFFSET(4) NUMBITS(1) [],
        /// The transmitter state machine is active.
        TACTIVE OFFSET(11) NUMBITS(1) []
    ]
];

register_structs! {
    /// The Cadence UART's registers that the driver uses.
    pub Registers {
        (0x00 => cr: ReadWrite<u32, CR::Register>),
        (0x04 => _reserved0),
        (0x2c => sr: ReadOnly<u32, SR::Register>),
        (0x30 => fifo: ReadWrite<u32>),
        (0x34 => @END),
    }
}

/// A Cadence UART whose registers are mapped at a known virtual address.
pub struct Cadence {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Cadence {}

impl Cadence {
    /// # Safety
    /// `base` must be the virtual address of a Cadence UART register block, mapped as device
    /// memory for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped Cadence UART register block.
        unsafe { &*self.base }
    }

    /// Enables the transmitter and receiver (clearing their disable bits), leaving the rest of
    /// CR alone; written only when something is off.
    pub fn enable(&self) {
        let cr = self.regs().cr.extract();
        if cr.is_set(CR::TX_DIS) || cr.is_set(CR::RX_DIS) || !cr.is_set(CR::TX_EN) || !cr.is_set(CR::RX_EN) {
            // The reset bits read back as set while a reset is under way: never write them back.
            let keep = cr.get()
                & !(CR::TX_DIS::SET.value
                    | CR::RX_DIS::SET.value
                    | CR::TXRST::SET.value
                    | CR::RXRST::SET.value);
            self.regs().cr.set(keep | CR::TX_EN::SET.value | CR::RX_EN::SET.value);
        }
    }
}

impl Serial for Cadence {
    fn put_byte(&self, byte: u8) {
        if self.patience.wait(|| !self.regs().sr.is_set(SR::TXFULL)) {
            self.regs().fifo.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() || self.regs().sr.is_set(SR::RXEMPTY) {
            return None;
        }
        Some(self.regs().fifo.get() as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| {
            let sr = self.regs().sr.extract();
            sr.is_set(SR::TXEMPTY) && !sr.is_set(SR::TACTIVE)
        });
    }
}
