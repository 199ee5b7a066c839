//! Qualcomm's UARTDM (`qcom,msm-uartdm-v1.4`, `qcom,msm-uartdm`): the console of Snapdragon
//! 410/8916, 8994/8996 and other pre-GENI boards (DragonBoard 410c, many phones).
//!
//! Transmit-only, relying on the loader's set-up, as Linux's earlycon does
//! (drivers/tty/serial/msm_serial.c, `msm_serial_early_write_dm` through `__msm_console_write`):
//! the clocks, pins and baud rate are the boot loader's. A transfer announces its length in
//! NCF_TX after the transmitter has drained (`msm_reset_dm_count`, `msm_wait_for_xmitr`: wait for
//! SR.TX_EMPTY or ISR.TX_READY, then the RESET_TX_READY command), then writes the bytes to the
//! TX FIFO word by word once SR.TX_READY is set. This driver sends one byte per transfer.
//! Receiving goes through the stale-timeout and RXFS machinery: not done, so a UARTDM console is
//! output-only here.
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// UART_SR (status).
    SR [
        TX_READY OFFSET(2) NUMBITS(1) [],
        TX_EMPTY OFFSET(3) NUMBITS(1) []
    ],
    /// UART_ISR (interrupt status).
    ISR [
        TX_READY OFFSET(7) NUMBITS(1) []
    ],
    /// UART_CR (command).
    CR [
        COMMAND OFFSET(4) NUMBITS(8) [
            /// UART_CR_CMD_RESET_TX_READY (3 << 8).
            ResetTxReady = 0x30
        ]
    ]
];

register_structs! {
    /// The UARTDM registers that the driver uses.
    pub Registers {
        (0x00 => _reserved0),
        (0x08 => sr: ReadOnly<u32, SR::Register>),
        (0x0c => _reserved1),
        (0x10 => cr: WriteOnly<u32, CR::Register>),
        (0x14 => isr: ReadOnly<u32, ISR::Register>),
        (0x18 => _reserved2),
        (0x40 => ncf_tx: ReadWrite<u32>),
        (0x44 => _reserved3),
        (0x70 => tf: WriteOnly<u32>),
        (0x74 => @END),
    }
}

/// A UARTDM whose registers are mapped at a known virtual address.
pub struct QcomUartDm {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for QcomUartDm {}

impl QcomUartDm {
    /// # Safety
    /// `base` must be the virtual address of a UARTDM register block set up by the loader,
    /// mapped as device memory for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped UARTDM register block.
        unsafe { &*self.base }
    }

    fn drained(&self) -> bool {
        self.regs().sr.is_set(SR::TX_EMPTY) || self.regs().isr.is_set(ISR::TX_READY)
    }
}

impl Serial for QcomUartDm {
    fn put_byte(&self, byte: u8) {
        let regs = self.regs();
        if !self.patience.wait(|| self.drained()) {
            return;
        }
        regs.cr.write(CR::COMMAND::ResetTxReady);
        regs.ncf_tx.set(1);
        // Read back, as msm_reset_dm_count does, so the count has reached the UART before the data.
        let _ = regs.ncf_tx.get();
        if self.patience.wait(|| regs.sr.is_set(SR::TX_READY)) {
            regs.tf.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        None
    }

    fn flush(&self) {
        self.patience.wait(|| self.regs().sr.is_set(SR::TX_EMPTY));
    }
}
