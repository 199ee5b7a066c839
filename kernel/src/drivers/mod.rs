//! Device drivers. Each driver is given its registers' virtual address by the code that found the
//! device in the device tree and mapped it; drivers know nothing of boards.
pub mod gic;
pub mod pl011;
