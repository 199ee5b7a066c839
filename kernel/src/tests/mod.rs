//! The test image's in-kernel tests (built with the `test-image` feature).
mod boot;
mod irq;
mod kernel_map;
mod memory;
mod promotion;
mod shootdown;
mod smp;
mod tlb;
mod user;
