//! AArch64: CPU identification, exceptions, MMU switching, PSCI and the generic timer.
pub mod cache;
pub mod cpu;
pub mod exception;
pub mod mmu;
pub mod psci;
pub mod time;
pub mod user;
