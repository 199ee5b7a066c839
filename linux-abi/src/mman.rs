//! Memory-management constants: `mmap`'s protections and flags, `mremap`, `madvise`, `msync`,
//! `mlock`/`mlockall` and `memfd_create` (asm-generic `mman-common.h` and `mman.h`,
//! `linux/mman.h`, `linux/memfd.h`; arm64 adds `PROT_BTI` and `PROT_MTE`). The values are
//! Linux's; what this kernel does with each is `mm::vm`'s to say.

/// Pages may not be accessed.
pub const PROT_NONE: u64 = 0x0;
/// Pages may be read.
pub const PROT_READ: u64 = 0x1;
/// Pages may be written.
pub const PROT_WRITE: u64 = 0x2;
/// Pages may be executed.
pub const PROT_EXEC: u64 = 0x4;
/// Pages may be used for atomic operations (no effect on arm64).
pub const PROT_SEM: u64 = 0x8;
/// arm64: branch target identification for executable pages (the descriptors' GP bit).
pub const PROT_BTI: u64 = 0x10;
/// arm64: memory tagging (the Normal Tagged memory type).
pub const PROT_MTE: u64 = 0x20;
/// `mprotect` only: extend the change down to the start of a grows-down mapping.
pub const PROT_GROWSDOWN: u64 = 0x0100_0000;
/// `mprotect` only: extend the change up to the end of a grows-up mapping.
pub const PROT_GROWSUP: u64 = 0x0200_0000;

/// Share changes.
pub const MAP_SHARED: u64 = 0x01;
/// Changes are private (copy on write).
pub const MAP_PRIVATE: u64 = 0x02;
/// `MAP_SHARED` that also validates the other flags.
pub const MAP_SHARED_VALIDATE: u64 = 0x03;
/// Mask of the mapping type.
pub const MAP_TYPE: u64 = 0x0f;
/// Place exactly at `addr`, replacing what is there.
pub const MAP_FIXED: u64 = 0x10;
/// Not backed by a file; zero-filled.
pub const MAP_ANONYMOUS: u64 = 0x20;
/// Stack-like segment that grows down on faults below it.
pub const MAP_GROWSDOWN: u64 = 0x100;
/// Ignored by Linux (once: deny writes to the file).
pub const MAP_DENYWRITE: u64 = 0x800;
/// Ignored by Linux (once: mark as executable image).
pub const MAP_EXECUTABLE: u64 = 0x1000;
/// Lock the pages (as `mlock`).
pub const MAP_LOCKED: u64 = 0x2000;
/// Do not reserve swap space (commit accounting).
pub const MAP_NORESERVE: u64 = 0x4000;
/// Prefault the pages.
pub const MAP_POPULATE: u64 = 0x8000;
/// With `MAP_POPULATE`: do not block on I/O.
pub const MAP_NONBLOCK: u64 = 0x1_0000;
/// A thread stack.
pub const MAP_STACK: u64 = 0x2_0000;
/// Huge pages from hugetlbfs.
pub const MAP_HUGETLB: u64 = 0x4_0000;
/// DAX synchronous page faults (`MAP_SHARED_VALIDATE` file mappings only).
pub const MAP_SYNC: u64 = 0x8_0000;
/// Place exactly at `addr`, failing with `EEXIST` if anything is there.
pub const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
/// Not initialised (only for embedded kernels that allow it).
pub const MAP_UNINITIALIZED: u64 = 0x400_0000;
/// Shift of the `MAP_HUGETLB` page-size field (bits 26..31: log2 of the size).
pub const MAP_HUGE_SHIFT: u64 = 26;
/// Mask of the `MAP_HUGETLB` page-size field, after the shift.
pub const MAP_HUGE_MASK: u64 = 0x3f;

/// `mremap`: the mapping may move.
pub const MREMAP_MAYMOVE: u64 = 1;
/// `mremap`: move to `new_address` (with `MREMAP_MAYMOVE`).
pub const MREMAP_FIXED: u64 = 2;
/// `mremap`: move the pages and leave the old range mapped, empty.
pub const MREMAP_DONTUNMAP: u64 = 4;

/// No special treatment.
pub const MADV_NORMAL: u64 = 0;
/// Expect random access.
pub const MADV_RANDOM: u64 = 1;
/// Expect sequential access.
pub const MADV_SEQUENTIAL: u64 = 2;
/// Will need these pages.
pub const MADV_WILLNEED: u64 = 3;
/// Drop the pages now; the next access reads zero (anonymous) or the file.
pub const MADV_DONTNEED: u64 = 4;
/// The pages may be dropped lazily.
pub const MADV_FREE: u64 = 8;
/// Free a range of a shared mapping and its backing store.
pub const MADV_REMOVE: u64 = 9;
/// Do not inherit across fork.
pub const MADV_DONTFORK: u64 = 10;
/// Undo `MADV_DONTFORK`.
pub const MADV_DOFORK: u64 = 11;
/// KSM: may be merged with identical pages.
pub const MADV_MERGEABLE: u64 = 12;
/// KSM: undo `MADV_MERGEABLE`.
pub const MADV_UNMERGEABLE: u64 = 13;
/// Prefer huge pages.
pub const MADV_HUGEPAGE: u64 = 14;
/// Avoid huge pages.
pub const MADV_NOHUGEPAGE: u64 = 15;
/// Exclude from core dumps.
pub const MADV_DONTDUMP: u64 = 16;
/// Undo `MADV_DONTDUMP`.
pub const MADV_DODUMP: u64 = 17;
/// Zero in the child after fork.
pub const MADV_WIPEONFORK: u64 = 18;
/// Undo `MADV_WIPEONFORK`.
pub const MADV_KEEPONFORK: u64 = 19;
/// Deactivate the pages (a reclaim hint).
pub const MADV_COLD: u64 = 20;
/// Reclaim the pages (a hint).
pub const MADV_PAGEOUT: u64 = 21;
/// Prefault readable.
pub const MADV_POPULATE_READ: u64 = 22;
/// Prefault writable.
pub const MADV_POPULATE_WRITE: u64 = 23;
/// `MADV_DONTNEED` that also applies to locked pages.
pub const MADV_DONTNEED_LOCKED: u64 = 24;
/// Collapse into huge pages synchronously.
pub const MADV_COLLAPSE: u64 = 25;
/// Install guard markers: an access faults with SIGSEGV (Linux 6.13).
pub const MADV_GUARD_INSTALL: u64 = 102;
/// Remove guard markers (Linux 6.13).
pub const MADV_GUARD_REMOVE: u64 = 103;
/// Memory-failure injection.
pub const MADV_HWPOISON: u64 = 100;
/// Memory-failure injection (soft offline).
pub const MADV_SOFT_OFFLINE: u64 = 101;

/// `msync`: schedule the write-back.
pub const MS_ASYNC: u64 = 1;
/// `msync`: invalidate other mappings of the same file.
pub const MS_INVALIDATE: u64 = 2;
/// `msync`: write back and wait.
pub const MS_SYNC: u64 = 4;

/// `mlock2`: lock the pages as they are faulted in.
pub const MLOCK_ONFAULT: u64 = 1;
/// `mlockall`: lock what is mapped now.
pub const MCL_CURRENT: u64 = 1;
/// `mlockall`: lock what is mapped from now on.
pub const MCL_FUTURE: u64 = 2;
/// `mlockall`: lock on fault.
pub const MCL_ONFAULT: u64 = 4;

/// `memfd_create`: close-on-exec.
pub const MFD_CLOEXEC: u64 = 0x1;
/// `memfd_create`: seals may be added.
pub const MFD_ALLOW_SEALING: u64 = 0x2;
/// `memfd_create`: huge pages from hugetlbfs.
pub const MFD_HUGETLB: u64 = 0x4;
/// `memfd_create`: not executable, sealed so (Linux 6.3).
pub const MFD_NOEXEC_SEAL: u64 = 0x8;
/// `memfd_create`: executable (Linux 6.3).
pub const MFD_EXEC: u64 = 0x10;
