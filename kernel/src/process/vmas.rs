//! The process's virtual memory areas, as far as the loader and the fault handler need them.
//! (The placement policy proper lives in `mm::vm`; this is the kernel's view of what is mapped.)
use alloc::collections::BTreeMap;
use core::fmt;

/// Protection of an area.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Prot {
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub exec: bool,
}

impl Prot {
    /// Read-write.
    pub const RW: Self = Self { read: true, write: true, exec: false };
}

impl fmt::Display for Prot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = |on: bool, ch: char| if on { ch } else { '-' };
        write!(f, "{}{}{}", c(self.read, 'r'), c(self.write, 'w'), c(self.exec, 'x'))
    }
}

/// What an area holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmaKind {
    /// A segment of the executable.
    Image,
    /// The stack.
    Stack,
    /// Anonymous memory (mmap, brk).
    Anonymous,
}

/// One area `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    /// First byte.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// Protection.
    pub prot: Prot,
    /// Contents.
    pub kind: VmaKind,
}

/// Non-overlapping areas, by start address.
#[derive(Default)]
pub struct Vmas {
    by_start: BTreeMap<u64, Vma>,
}

impl Vmas {
    /// No areas.
    pub const fn new() -> Self {
        Self { by_start: BTreeMap::new() }
    }

    /// The area containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Vma> {
        self.by_start.range(..=addr).next_back().map(|(_, v)| v).filter(|v| addr < v.end)
    }

    /// Adds an area that overlaps none.
    ///
    /// # Errors
    /// A message if it overlaps an existing area or is empty.
    pub fn insert(&mut self, vma: Vma) -> Result<(), &'static str> {
        if vma.start >= vma.end {
            return Err("empty area");
        }
        let before = self.by_start.range(..vma.end).next_back().map(|(_, v)| v.end > vma.start);
        if before == Some(true) {
            return Err("overlaps an existing area");
        }
        self.by_start.insert(vma.start, vma);
        Ok(())
    }
}
