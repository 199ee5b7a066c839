//! AArch64: CPU identification, exceptions, MMU switching, the PMU, PSCI and the generic timer.
pub mod cache;
pub mod cpu;
pub mod exception;
pub mod mmu;
pub mod mte;
pub mod pauth;
pub mod pmu;
pub mod psci;
pub mod time;
pub mod translation;
pub mod user;
