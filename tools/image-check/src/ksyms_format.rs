//! The `.ksyms` symbol-table blob: its layout and the one decoder that reads it.
//!
//! This file is shared verbatim by the host tool (`kimage symbols` and its tests) and by the
//! kernel (`kernel/src/symbols.rs` includes it with `#[path]`), so the decoder the tests exercise
//! is byte for byte the decoder the kernel runs. It uses only `core`, allocates nothing, has no
//! `unsafe`, and never panics: every read is bounds-checked and a corrupt or absent blob (the
//! all-zero area of an unpatched kernel included) decodes to `None`.
//!
//! Layout, little-endian, every offset counted from the start of the blob:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"KSYM"` |
//! | 4 | 4 | `count`: number of entries (u32) |
//! | 8 | 4 | `strtab`: offset of the string table (u32), at least `16 + 16 * count` |
//! | 12 | 4 | reserved, 0 |
//! | 16 | 16 × `count` | entries, sorted by address (non-decreasing) |
//! | `strtab` | … | NUL-terminated UTF-8 names, up to the end of the area |
//!
//! Each entry is `{ address: u64, size: u32, name_offset: u32 }`; `name_offset` is relative to
//! `strtab`. A symbol covers `[address, address + size)`; an entry of size 0 covers nothing.

/// The four bytes every valid blob starts with.
pub const MAGIC: [u8; 4] = *b"KSYM";
/// Length of the blob header (magic, count, string-table offset, reserved).
pub const HEADER_LEN: usize = 16;
/// Length of one entry: `u64` address, `u32` size, `u32` name offset.
pub const ENTRY_LEN: usize = 16;

/// Reads a little-endian `u32` at `at`, or `None` when it does not fit in `bytes`.
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let field = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(<[u8; 4]>::try_from(field).ok()?))
}

/// Reads a little-endian `u64` at `at`, or `None` when it does not fit in `bytes`.
fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let field = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(<[u8; 8]>::try_from(field).ok()?))
}

/// One decoded symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// First address of the symbol.
    pub address: u64,
    /// Number of bytes the symbol covers.
    pub size: u32,
    /// Demangled name (possibly truncated by the tool when space ran short).
    pub name: &'a str,
}

/// A validated view of a blob: the header has been checked, the entry array lies inside the
/// blob, the string table starts after it, and the addresses are sorted.
#[derive(Clone, Copy, Debug)]
pub struct Table<'a> {
    blob: &'a [u8],
    count: usize,
    strtab: usize,
}

impl<'a> Table<'a> {
    /// Validates the header of `blob` and the order of its entries; `None` when the magic, the
    /// reserved word, the bounds or the sort order are wrong. Names are validated lazily, when an
    /// entry is read.
    pub fn parse(blob: &'a [u8]) -> Option<Self> {
        if blob.get(..MAGIC.len())? != MAGIC.as_slice() {
            return None;
        }
        let count = usize::try_from(read_u32(blob, 4)?).ok()?;
        let strtab = usize::try_from(read_u32(blob, 8)?).ok()?;
        if read_u32(blob, 12)? != 0 {
            return None;
        }
        let entries_end = count.checked_mul(ENTRY_LEN)?.checked_add(HEADER_LEN)?;
        if entries_end > strtab || strtab > blob.len() {
            return None;
        }
        let table = Table { blob, count, strtab };
        let mut previous = 0;
        for index in 0..count {
            let address = table.address(index)?;
            if address < previous {
                return None;
            }
            previous = address;
        }
        Some(table)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Byte offset of entry `index`, or `None` past the end.
    fn entry_offset(&self, index: usize) -> Option<usize> {
        if index >= self.count {
            return None;
        }
        index.checked_mul(ENTRY_LEN)?.checked_add(HEADER_LEN)
    }

    /// Address of entry `index`.
    fn address(&self, index: usize) -> Option<u64> {
        read_u64(self.blob, self.entry_offset(index)?)
    }

    /// The NUL-terminated UTF-8 name at `offset` into the string table.
    fn name(&self, offset: u32) -> Option<&'a str> {
        let start = self.strtab.checked_add(usize::try_from(offset).ok()?)?;
        let rest = self.blob.get(start..)?;
        let len = rest.iter().position(|&byte| byte == 0)?;
        core::str::from_utf8(rest.get(..len)?).ok()
    }

    /// Entry `index`, or `None` when it is out of range or its name is corrupt.
    pub fn entry(&self, index: usize) -> Option<Symbol<'a>> {
        let at = self.entry_offset(index)?;
        Some(Symbol {
            address: read_u64(self.blob, at)?,
            size: read_u32(self.blob, at.checked_add(8)?)?,
            name: self.name(read_u32(self.blob, at.checked_add(12)?)?)?,
        })
    }

    /// The symbol containing `addr` and the offset of `addr` into it: a binary search for the
    /// last entry whose address is at most `addr`, which matches when `addr` lies below its end.
    pub fn lookup(&self, addr: u64) -> Option<(&'a str, u64)> {
        // Invariant: entries [0, low) start at or below `addr`, entries [high, count) above it.
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.address(mid)? <= addr {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let symbol = self.entry(low.checked_sub(1)?)?;
        let offset = addr.checked_sub(symbol.address)?;
        (offset < u64::from(symbol.size)).then_some((symbol.name, offset))
    }
}

/// Decodes `blob` and looks `addr` up in it; `None` for a corrupt blob or an address that no
/// symbol covers.
pub fn lookup(blob: &[u8], addr: u64) -> Option<(&str, u64)> {
    Table::parse(blob)?.lookup(addr)
}
