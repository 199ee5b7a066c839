//! Architecture code. Only AArch64 exists; the layer is kept so that generic code above it reads
//! as generic (the layering of rust-raspberrypi-OS-tutorials).
pub mod aarch64;
pub use aarch64::*;
