//! User address spaces: the map of virtual memory areas, its free gaps, and the placement policy
//! (Linux semantics, the code window, near placement).
pub mod abi;
