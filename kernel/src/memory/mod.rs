//! Kernel memory: the virtual layout, the physical frame allocator, the kernel heap and the
//! kernel's own page tables.
//!
//! Bring-up order (each step needs the one before):
//! 1. the bootstrap heap, a static region in .bss, so early code and the frame allocator's own
//!    structures can allocate;
//! 2. the final kernel map, built by the mm crate from a static arena of table pages (nothing
//!    outside the Image is reachable yet), then installed in TTBR1;
//! 3. the frame allocator over all RAM minus the Image, the device tree and reserved ranges,
//!    reachable through the linear map;
//! 4. the main heap, carved from frames.
pub mod asids;
pub mod fallible;
pub mod frames;
pub mod heap;
pub mod kernel_map;
pub mod layout;
pub mod tlb;
pub mod uaccess;
pub mod vmspace;
