//! Device-tree discovery for the kernel, host-testable.
//!
//! - [`fdt`]: the flattened device tree blob, validated once and then read with every offset
//!   checked (`FDT_NOP` anywhere, blocks in any order, no panic on any input);
//! - [`machine`]: what the kernel needs from it (RAM, reservations, console, CPUs and their enable
//!   methods, PSCI, interrupt controller, initrd, command line), with messages naming anything
//!   missing;
//! - [`support`]: which of the kernel's drivers a tree needs (console UART, interrupt
//!   controller) and whether its CPUs can be started: shared by the kernel and the host survey.
//!
//! Why a reader of our own rather than a crate: the `fdt` crate the kernel used (0.1.5) stops
//! reading a node's children at the first `FDT_NOP` it meets where a node may start, so a tree in
//! which libfdt has NOP'd one node (QEMU's own, for instance) loses every later child of the
//! root, and it indexes unchecked offsets, so a corrupt blob panics inside it. Its successor
//! exists only as a 0.2 alpha. The kernel needs a handful of queries, which fit in a few hundred
//! lines that can be checked line by line and tested against every board tree Debian ships and
//! against mutations of them (`tests/`, docs/TESTING.md).
#![no_std]

extern crate alloc;

mod error;
pub mod fdt;
pub mod machine;
mod node;
pub mod support;

pub use fdt::{Error, FDT_MAGIC, Fdt, Node, Property, Region};
pub use machine::{
    ConsoleNode, CpuNode, EnableMethod, Machine, PsciMethod, Reserved, cpu_nodes,
    describe_interrupt_controller, find_compatible_path, reg_translated, translate,
};
