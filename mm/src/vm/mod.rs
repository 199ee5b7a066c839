//! User address spaces: the map of virtual memory areas, its free gaps, and the placement policy
//! (Linux semantics, the code window, near placement).
//!
//! Why it is split this way: the kernel owns the address space, so every placement question is
//! answered here, as pure logic the host can test, and the kernel only applies the page-table
//! effects each call returns (pages to unmap, protections to change, pages to drop).
//! - [`tree`]: the allocator, a B+tree of mappings whose branches keep the largest free gap of
//!   each child, so lowest, highest, aligned and nearest fits are each one O(log n) search;
//! - [`map`]: [`VmMap`], the Linux system-call semantics (`mmap`, `munmap`, `mprotect`,
//!   `madvise`, `brk`) with Linux's errno values, W^X, the code window and near
//!   placement ([`abi::SYS_MMAP_NEAR`]);
//! - `bench` (with the `testing` feature): a host micro-benchmark of near placement against a
//!   probing loop;
//! - [`abi`]: the user-visible ABI of the extensions (a re-export of the `ext-abi` crate, their
//!   one definition, which user programs depend on directly);
//! - [`aslr`]: where a randomised layout's bases go for given draws, and their entropy;
//! - [`limits`]: resource limits (`prlimit64`) and the thread limit, with Linux's rules;
//! - [`fallible`]: the one way this module allocates, so running out of heap is `ENOMEM`.
pub use ext_abi as abi;
pub mod aslr;
#[cfg(any(test, feature = "testing"))]
pub mod bench;
mod errno;
pub mod fallible;
#[cfg(any(test, feature = "testing"))]
pub mod growth_bench;
pub mod limits;
pub mod map;
pub mod tree;

pub use errno::Errno;
pub use map::{Layout, VmMap};

/// Page size of user mappings (the 4 KiB granule).
pub const PAGE: u64 = crate::addr::PAGE_SIZE;

/// Linux `PROT_*` values (defined in `linux_abi::mman`).
pub mod prot {
    pub use linux_abi::mman::{
        PROT_BTI, PROT_EXEC, PROT_GROWSDOWN, PROT_GROWSUP, PROT_MTE, PROT_READ, PROT_SEM, PROT_WRITE,
    };
}

/// Linux `MAP_*` values (defined in `linux_abi::mman`), and the two this crate adds.
pub mod flags {
    pub use linux_abi::mman::{
        MAP_ANONYMOUS, MAP_DENYWRITE, MAP_EXECUTABLE, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_GROWSDOWN,
        MAP_HUGETLB, MAP_LOCKED, MAP_NONBLOCK, MAP_NORESERVE, MAP_POPULATE, MAP_PRIVATE, MAP_SHARED,
        MAP_SHARED_VALIDATE, MAP_STACK, MAP_SYNC, MAP_TYPE,
    };
    /// This kernel's extension: meant for code (see [`super::abi::MAP_CODE`]).
    pub const MAP_CODE: u64 = super::abi::MAP_CODE;
    /// Not a Linux flag: the user-memory layer's mark for a mapping of a shared memory object
    /// (passed with `MAP_ANONYMOUS` to the area map, which then sets [`VmaFlags::OBJECT`]); it
    /// is stripped from every flags word a program passes.
    ///
    /// [`VmaFlags::OBJECT`]: super::VmaFlags::OBJECT
    pub const MAP_OBJECT: u64 = 1 << 63;
    /// Not a Linux flag: the user-memory layer's mark for a mapping that may never become
    /// writable ([`VmaFlags::NOMAYWRITE`]); stripped from every flags word a program passes.
    ///
    /// [`VmaFlags::NOMAYWRITE`]: super::VmaFlags::NOMAYWRITE
    pub const MAP_NOMAYWRITE: u64 = 1 << 62;
}

/// Linux `MADV_*` values (defined in `linux_abi::mman`).
pub mod advice {
    pub use linux_abi::mman::{
        MADV_COLD, MADV_COLLAPSE, MADV_DODUMP, MADV_DOFORK, MADV_DONTDUMP, MADV_DONTFORK, MADV_DONTNEED,
        MADV_DONTNEED_LOCKED, MADV_FREE, MADV_HUGEPAGE, MADV_HWPOISON, MADV_KEEPONFORK, MADV_MERGEABLE,
        MADV_NOHUGEPAGE, MADV_NORMAL, MADV_PAGEOUT, MADV_POPULATE_READ, MADV_POPULATE_WRITE, MADV_RANDOM,
        MADV_REMOVE, MADV_SEQUENTIAL, MADV_SOFT_OFFLINE, MADV_UNMERGEABLE, MADV_WILLNEED, MADV_WIPEONFORK,
    };
}

/// Access rights of a mapping (the `PROT_READ | PROT_WRITE | PROT_EXEC` bits, plus BTI).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Prot(u8);

impl Prot {
    /// No access (`PROT_NONE`).
    pub const NONE: Prot = Prot(0);
    /// Readable.
    pub const READ: Prot = Prot(1);
    /// Writable.
    pub const WRITE: Prot = Prot(2);
    /// Executable.
    pub const EXEC: Prot = Prot(4);
    /// arm64 BTI guarded (meaningful with `EXEC`).
    pub const BTI: Prot = Prot(0x10);
    /// arm64 MTE (`PROT_MTE`): mapped with the tagged Normal memory type, so that loads and
    /// stores are checked against the Allocation Tags (Linux's `VM_MTE`). The kernel passes it
    /// only on a CPU with FEAT_MTE2 (elsewhere it is ignored, as Linux ignores it).
    pub const MTE: Prot = Prot(0x20);
    /// Read and write.
    pub const RW: Prot = Prot(3);
    /// Read and execute.
    pub const RX: Prot = Prot(5);

    /// From the syscall's `prot` argument, keeping the bits this crate stores (R, W, X, BTI,
    /// MTE).
    pub const fn from_bits_truncate(bits: u64) -> Prot {
        Prot((bits & 0x37) as u8)
    }
    /// The `PROT_*` bits.
    pub const fn bits(self) -> u64 {
        self.0 as u64
    }
    /// Whether every right of `other` is present.
    pub const fn contains(self, other: Prot) -> bool {
        self.0 & other.0 == other.0
    }
    /// Readable.
    pub const fn read(self) -> bool {
        self.contains(Prot::READ)
    }
    /// Writable.
    pub const fn write(self) -> bool {
        self.contains(Prot::WRITE)
    }
    /// Executable.
    pub const fn exec(self) -> bool {
        self.contains(Prot::EXEC)
    }
    /// Union.
    pub const fn union(self, other: Prot) -> Prot {
        Prot(self.0 | other.0)
    }
    /// `self` as `mprotect` sets it on an area that had `old`: `PROT_MTE` once set stays (Linux
    /// keeps `VM_MTE` in `mprotect_fixup`: it is not among the flags `mprotect` clears, so a
    /// tagged area stays tagged and its tags checked).
    pub const fn kept_from(self, old: Prot) -> Prot {
        Prot(self.0 | (old.0 & Prot::MTE.0))
    }
}

impl core::fmt::Debug for Prot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let c = |b: bool, ch: char| if b { ch } else { '-' };
        write!(f, "{}{}{}", c(self.read(), 'r'), c(self.write(), 'w'), c(self.exec(), 'x'))?;
        if self.contains(Prot::BTI) {
            write!(f, "+bti")?;
        }
        if self.contains(Prot::MTE) { write!(f, "+mte") } else { Ok(()) }
    }
}

/// What kind of mapping a VMA is; mappings merge only when these are equal.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VmaFlags(u16);

impl VmaFlags {
    /// Shared anonymous memory (`MAP_SHARED | MAP_ANONYMOUS`): the kernel must keep the frames
    /// shared across fork.
    pub const SHARED: VmaFlags = VmaFlags(1);
    /// Created with [`abi::MAP_CODE`] (a JIT's code area, executable or not yet).
    pub const CODE: VmaFlags = VmaFlags(2);
    /// The `brk` heap.
    pub const HEAP: VmaFlags = VmaFlags(4);
    /// A stack (the kernel's initial stack, or `MAP_GROWSDOWN`/`MAP_STACK`).
    pub const STACK: VmaFlags = VmaFlags(8);
    /// A segment of the executable image, mapped by the kernel's loader.
    pub const IMAGE: VmaFlags = VmaFlags(16);
    /// Excluded from fork (`MADV_DONTFORK`).
    pub const DONTFORK: VmaFlags = VmaFlags(32);
    /// Zero in the child after fork (`MADV_WIPEONFORK`).
    pub const WIPEONFORK: VmaFlags = VmaFlags(64);
    /// `MADV_HUGEPAGE`: faults may map whole 2 MiB blocks whenever the aligned block lies inside
    /// the mapping, whatever the free-memory state.
    pub const HUGEPAGE: VmaFlags = VmaFlags(128);
    /// `MADV_NOHUGEPAGE`: faults map single pages only (no 64 KiB runs, no 2 MiB blocks).
    pub const NOHUGEPAGE: VmaFlags = VmaFlags(256);
    /// Locked in memory (`mlock`, `mlockall(MCL_CURRENT)`, `MCL_FUTURE` mappings): populated
    /// when locked, and `MADV_DONTNEED`/`MADV_FREE` refuse it (`EINVAL`), as Linux's `VM_LOCKED`.
    pub const LOCKED: VmaFlags = VmaFlags(512);
    /// With [`LOCKED`](Self::LOCKED): locked on fault (`MLOCK_ONFAULT`, `MCL_ONFAULT`), so the
    /// lock populates nothing, as Linux's `VM_LOCKONFAULT`.
    pub const LOCKONFAULT: VmaFlags = VmaFlags(1024);
    /// Maps a shared memory object (a memfd), not anonymous memory: its pages come from the
    /// object (`mm::user::object`), so it never merges with an anonymous neighbour.
    pub const OBJECT: VmaFlags = VmaFlags(2048);
    /// Grows down on a fault below it (`MAP_GROWSDOWN`, the main thread's stack; Linux's
    /// `VM_GROWSDOWN`): see [`map`]'s stack rules ([`VmMap::grow_down`]).
    pub const GROWSDOWN: VmaFlags = VmaFlags(4096);
    /// May never become writable: `mprotect` adding `PROT_WRITE` is `EACCES` (Linux's
    /// `VM_MAYWRITE` clear: a shared mapping of an object attached or opened read-only, such
    /// as a System V segment attached with `SHM_RDONLY`).
    pub const NOMAYWRITE: VmaFlags = VmaFlags(8192);
    /// Sealed by `mseal` (Linux 6.10's `VM_SEALED`): the mapping may no longer be unmapped,
    /// moved, resized, replaced by `MAP_FIXED` or have its rights changed, and destructive advice
    /// is refused on it where it is private, anonymous and read-only ([`map`]'s `seal.rs`).
    /// Kept across fork; an exec starts a new address space.
    pub const SEALED: VmaFlags = VmaFlags(16384);

    /// No flag.
    pub const fn empty() -> VmaFlags {
        VmaFlags(0)
    }
    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: VmaFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Union.
    pub const fn union(self, other: VmaFlags) -> VmaFlags {
        VmaFlags(self.0 | other.0)
    }
    /// `self` without `other`.
    pub const fn difference(self, other: VmaFlags) -> VmaFlags {
        VmaFlags(self.0 & !other.0)
    }
    /// Whether the area maps a memory object privately: its pages may be the object's own
    /// frames (the page cache), which a write must never reach.
    pub const fn private_object(self) -> bool {
        self.contains(VmaFlags::OBJECT) && !self.contains(VmaFlags::SHARED)
    }
}

impl core::fmt::Debug for VmaFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names = [
            "shared",
            "code",
            "heap",
            "stack",
            "image",
            "dontfork",
            "wipeonfork",
            "hugepage",
            "nohugepage",
            "locked",
            "lockonfault",
            "object",
            "growsdown",
            "nomaywrite",
            "sealed",
        ];
        let mut first = true;
        write!(f, "[")?;
        for (i, n) in names.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                write!(f, "{}{n}", if first { "" } else { "|" })?;
                first = false;
            }
        }
        write!(f, "]")
    }
}

/// The access-pattern advice stored in a mapping (`MADV_NORMAL`, `MADV_RANDOM`,
/// `MADV_SEQUENTIAL`), which the kernel may use for fault-around.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Advice {
    /// Default read-ahead.
    #[default]
    Normal,
    /// No read-ahead.
    Random,
    /// Aggressive read-ahead.
    Sequential,
}

/// The name of an anonymous area (`prctl(PR_SET_VMA_ANON_NAME)`): an index into its map's table
/// of names, which keeps each name once, so areas with equal names have equal indices
/// ([`VmMap::anon_name`] gives the text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AnonName(u32);

impl AnonName {
    /// No name.
    pub const NONE: AnonName = AnonName(0);

    /// The name in entry `i` of the table.
    const fn at(i: usize) -> AnonName {
        AnonName(i as u32 + 1)
    }

    /// The table entry, if named.
    const fn index(self) -> Option<usize> {
        match self.0 {
            0 => None,
            n => Some(n as usize - 1),
        }
    }
}

/// One virtual memory area: `[start, end)` with uniform attributes. Always anonymous memory.
/// (`Default`, the empty area at 0, only fills unused places of a [`fallible::List`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Vma {
    /// First byte (page-aligned).
    pub start: u64,
    /// One past the last byte (page-aligned, above `start`).
    pub end: u64,
    /// Access rights.
    pub prot: Prot,
    /// Kind.
    pub flags: VmaFlags,
    /// Access-pattern advice.
    pub advice: Advice,
    /// Its name, if a program gave it one.
    pub name: AnonName,
}

impl Vma {
    /// The empty area at 0 (`Default`, for places that hold no area), in a constant.
    pub const EMPTY: Vma = Vma {
        start: 0,
        end: 0,
        prot: Prot::NONE,
        flags: VmaFlags::empty(),
        advice: Advice::Normal,
        name: AnonName::NONE,
    };

    /// Length in bytes.
    pub const fn len(&self) -> u64 {
        self.end - self.start
    }
    /// Always false (a VMA is never empty); for clippy's `len_without_is_empty`.
    pub const fn is_empty(&self) -> bool {
        self.end == self.start
    }
    /// Whether `other` has the same attributes.
    pub fn same_attrs(&self, other: &Vma) -> bool {
        self.prot == other.prot
            && self.flags == other.flags
            && self.advice == other.advice
            && self.name == other.name
    }

    /// Whether two adjacent areas, this one and `other`, are one: the same attributes, and not
    /// mappings of a memory object. Two object ranges side by side may map different objects, or
    /// one at offsets that do not follow on, which the area map does not know (Linux merges file
    /// areas only when they map one file contiguously; a System V segment attached twice side by
    /// side is two areas there, and two lines of `/proc/PID/maps`).
    pub fn merges_with(&self, other: &Vma) -> bool {
        self.same_attrs(other) && !self.flags.contains(VmaFlags::OBJECT)
    }
    /// This area clipped to `[start, end)` (which must overlap it).
    pub fn clip(&self, start: u64, end: u64) -> Vma {
        Vma { start: self.start.max(start), end: self.end.min(end), ..*self }
    }

    /// The two-letter names `/proc/PID/smaps` prints on its `VmFlags:` line for this area, in
    /// Linux's order (`show_smap_vma_flags`), as far as the area records them: access (`rd`
    /// `wr` `ex`), shared (`sh`, `ms`), what `mprotect` may grant (`mr` `mw` `me`: every right,
    /// but writing to a [`VmaFlags::NOMAYWRITE`] area), grows down (`gd`), locked (`lo`, `lf`), the read-ahead advice (`sr`, `rr`),
    /// `MADV_DONTFORK` (`dc`), accounted private writable memory (`ac`), `MADV_WIPEONFORK`
    /// (`wf`), BTI (`bt`) and the huge-page advice (`hg`, `nh`).
    pub fn vm_flag_names(&self) -> impl Iterator<Item = &'static str> {
        let f = self.flags;
        let shared = f.contains(VmaFlags::SHARED);
        let private_writable = self.prot.write() && !shared;
        [
            (self.prot.read(), "rd"),
            (self.prot.write(), "wr"),
            (self.prot.exec(), "ex"),
            (shared, "sh"),
            (true, "mr"),
            (!f.contains(VmaFlags::NOMAYWRITE), "mw"),
            (true, "me"),
            (shared, "ms"),
            (f.contains(VmaFlags::GROWSDOWN), "gd"),
            (f.contains(VmaFlags::LOCKED), "lo"),
            (self.advice == Advice::Sequential, "sr"),
            (self.advice == Advice::Random, "rr"),
            (f.contains(VmaFlags::DONTFORK), "dc"),
            (f.contains(VmaFlags::LOCKONFAULT), "lf"),
            (private_writable, "ac"),
            (f.contains(VmaFlags::WIPEONFORK), "wf"),
            (self.prot.contains(Prot::BTI), "bt"),
            (f.contains(VmaFlags::HUGEPAGE), "hg"),
            (f.contains(VmaFlags::NOHUGEPAGE), "nh"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
    }
}

#[cfg(test)]
mod alloc_tests;
#[cfg(test)]
mod aslr_tests;
#[cfg(test)]
mod library_tests;
#[cfg(test)]
mod limit_tests;
#[cfg(test)]
mod name_tests;
#[cfg(test)]
mod seal_tests;
#[cfg(test)]
mod stack_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trace_replay;
