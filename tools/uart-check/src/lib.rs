//! The kernel's console UART drivers, compiled for the host so that they can be tested against
//! register models (`tests/models.rs`): each driver file in kernel/src/drivers/uart/ depends only
//! on `core` and `tock-registers`, so the very code the kernel runs is what is tested here.
#![no_std]

#[path = "../../../kernel/src/drivers/uart/mod.rs"]
pub mod uart;
