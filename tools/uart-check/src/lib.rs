//! The kernel's console UART drivers and its Apple AIC driver, compiled for the host so that they
//! can be tested against register models (`tests/models.rs`, `tests/aic.rs`, with the AIC's FIQ
//! sources in `apple_fiq`): each of these files
//! under kernel/src/drivers/ depends only on `core` and `tock-registers`, so the very code the
//! kernel runs is what is tested here.
#![no_std]

#[path = "../../../kernel/src/drivers/uart/mod.rs"]
pub mod uart;

#[path = "../../../kernel/src/drivers/aic.rs"]
pub mod aic;

#[path = "../../../kernel/src/drivers/apple_fiq.rs"]
pub mod apple_fiq;
