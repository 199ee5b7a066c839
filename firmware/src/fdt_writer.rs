//! A minimal flattened-device-tree writer (Devicetree Specification 0.4, chapter 5: header,
//! memory reservation block, structure block, strings block), into a caller's buffer.
//!
//! Used by the EFI stub to describe an ACPI machine as a device tree ([`crate::acpi_dt`]), so it
//! avoids everything the stub cannot run: no heap (the strings block is a fixed array), no
//! formatting (unit addresses through [`hex`]). Running out of room is recorded and makes
//! [`FdtWriter::finish`] return `None`; nothing panics.

const FDT_MAGIC: u32 = 0xd00d_feed;
const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_END: u32 = 9;
const HEADER_LEN: usize = 40;
/// The header and one (terminating) memory-reservation entry.
const STRUCT_START: usize = HEADER_LEN + 16;
const STRINGS_CAPACITY: usize = 512;

/// Lower-case hexadecimal of `value` without leading zeros, into `out`; returns the digits.
pub fn hex(value: u64, out: &mut [u8; 16]) -> &[u8] {
    let mut n = 0;
    let mut started = false;
    for i in (0..16).rev() {
        let nibble = ((value >> (4 * i)) & 0xf) as u8;
        if nibble != 0 || started || i == 0 {
            started = true;
            out[n] = if nibble < 10 { b'0' + nibble } else { b'a' + nibble - 10 };
            n += 1;
        }
    }
    &out[..n]
}

/// Writes a device tree into a byte buffer.
pub struct FdtWriter<'b> {
    buf: &'b mut [u8],
    pos: usize,
    strings: [u8; STRINGS_CAPACITY],
    strings_len: usize,
    depth: usize,
    overflow: bool,
}

impl<'b> FdtWriter<'b> {
    /// A writer over `buf` (its first bytes are kept for the header).
    pub fn new(buf: &'b mut [u8]) -> FdtWriter<'b> {
        let overflow = buf.len() < STRUCT_START;
        FdtWriter {
            buf,
            pos: STRUCT_START,
            strings: [0; STRINGS_CAPACITY],
            strings_len: 0,
            depth: 0,
            overflow,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.pos..self.pos + bytes.len()) {
            Some(dst) if !self.overflow => {
                dst.copy_from_slice(bytes);
                self.pos += bytes.len();
            }
            _ => self.overflow = true,
        }
    }

    fn put_u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }

    fn align(&mut self) {
        while !self.pos.is_multiple_of(4) && !self.overflow {
            self.put(&[0]);
        }
    }

    /// Opens a node named `name` followed by `unit` (e.g. `b"cpu@"` and the digits; `b""` for
    /// none); the root's name is empty. (Two slices rather than a slice of them: a constant
    /// `&[&[u8]]` becomes a static table of link-time addresses, which the EFI stub cannot use.)
    pub fn begin_node(&mut self, name: &[u8], unit: &[u8]) {
        self.put_u32(FDT_BEGIN_NODE);
        self.put(name);
        self.put(unit);
        self.put(&[0]);
        self.align();
        self.depth += 1;
    }

    /// Closes the innermost open node.
    pub fn end_node(&mut self) {
        if self.depth == 0 {
            self.overflow = true;
            return;
        }
        self.put_u32(FDT_END_NODE);
        self.depth -= 1;
    }

    /// The offset of `name` in the strings block, adding it if needed.
    fn string(&mut self, name: &[u8]) -> u32 {
        let mut at = 0;
        while at < self.strings_len {
            let end = self.strings[at..self.strings_len]
                .iter()
                .position(|&b| b == 0)
                .map_or(self.strings_len, |p| at + p);
            if &self.strings[at..end] == name {
                return at as u32;
            }
            at = end + 1;
        }
        let start = self.strings_len;
        match self.strings.get_mut(start..start + name.len() + 1) {
            Some(dst) => {
                dst[..name.len()].copy_from_slice(name);
                dst[name.len()] = 0;
                self.strings_len += name.len() + 1;
            }
            None => self.overflow = true,
        }
        start as u32
    }

    /// A property with raw bytes.
    pub fn prop(&mut self, name: &[u8], value: &[u8]) {
        let off = self.string(name);
        self.put_u32(FDT_PROP);
        self.put_u32(value.len() as u32);
        self.put_u32(off);
        self.put(value);
        self.align();
    }

    /// A property of big-endian cells.
    pub fn prop_cells(&mut self, name: &[u8], cells: &[u32]) {
        let off = self.string(name);
        self.put_u32(FDT_PROP);
        self.put_u32(4 * cells.len() as u32);
        self.put_u32(off);
        for &c in cells {
            self.put_u32(c);
        }
    }

    /// A string property: `value` then `suffix` (`b""` for none), NUL-terminated. (A string
    /// list is one value with embedded NULs.)
    pub fn prop_str(&mut self, name: &[u8], value: &[u8], suffix: &[u8]) {
        let off = self.string(name);
        self.put_u32(FDT_PROP);
        self.put_u32((value.len() + suffix.len() + 1) as u32);
        self.put_u32(off);
        self.put(value);
        self.put(suffix);
        self.put(&[0]);
        self.align();
    }

    /// Ends the tree and writes the header; returns the total size, or `None` when the buffer
    /// (or the strings block) was too small or a node was left open.
    pub fn finish(mut self) -> Option<usize> {
        if self.depth != 0 {
            return None;
        }
        self.put_u32(FDT_END);
        let struct_len = self.pos - STRUCT_START;
        let strings_at = self.pos;
        let strings = self.strings;
        let strings_len = self.strings_len;
        self.put(&strings[..strings_len]);
        if self.overflow {
            return None;
        }
        let total = self.pos;
        let fields = [
            FDT_MAGIC,
            total as u32,
            STRUCT_START as u32,
            strings_at as u32,
            HEADER_LEN as u32, // memory reservation block
            17,                // version
            16,                // last compatible version
            0,                 // boot CPU
            strings_len as u32,
            struct_len as u32,
        ];
        for (i, f) in fields.iter().enumerate() {
            self.buf[4 * i..4 * i + 4].copy_from_slice(&f.to_be_bytes());
        }
        self.buf[HEADER_LEN..STRUCT_START].fill(0);
        Some(total)
    }
}
