//! A copy of a flattened device tree with `/chosen/bootargs` set: how the EFI stub gives the
//! kernel the command line UEFI passed it (the image's `LoadOptions`), as Linux's EFI stub does
//! in drivers/firmware/efi/libstub/fdt.c (`update_fdt`: a non-empty command line replaces
//! `bootargs`, `/chosen` is made when missing; an empty one leaves the tree's own).
//!
//! The source is the firmware's tree, which the stub must not write (it is the firmware's
//! configuration table, and may sit in memory the UEFI map says is the firmware's), so the tree
//! is rewritten into a buffer of the caller's (Devicetree Specification 0.4, chapter 5): the
//! header, the memory reservations as they were, the structure block with every `bootargs`
//! property directly in `/chosen` dropped and the new one written first in `/chosen` (properties
//! come before subnodes), `FDT_NOP`s left out, and the strings block, with `bootargs` added when
//! no string of it is there. Runs in the EFI stub, so it keeps the stub's rules: no heap, no
//! formatting, no panics (every read is checked against the tree's own bounds), no constant
//! slice of slices.

const FDT_MAGIC: u32 = 0xd00d_feed;
const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_NOP: u32 = 4;
const FDT_END: u32 = 9;
const HEADER_LEN: usize = 40;
const BOOTARGS: &[u8] = b"bootargs";

/// Why the tree was not rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditError {
    /// No FDT magic, a version before 17, or a block outside the tree.
    NotATree,
    /// A structure block that does not parse (an unknown token, a name or property running off
    /// its block, nodes not closed, nothing after the root).
    Malformed,
    /// The output buffer is too small.
    NoRoom,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

fn aligned4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|v| v & !3)
}

/// The output, written front to back.
struct Out<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Out<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), EditError> {
        let end = self.pos.checked_add(bytes.len()).ok_or(EditError::NoRoom)?;
        self.buf.get_mut(self.pos..end).ok_or(EditError::NoRoom)?.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }

    fn put_u32(&mut self, v: u32) -> Result<(), EditError> {
        self.put(&v.to_be_bytes())
    }

    fn pad4(&mut self) -> Result<(), EditError> {
        while !self.pos.is_multiple_of(4) {
            self.put(&[0])?;
        }
        Ok(())
    }

    fn bootargs(&mut self, name_offset: u32, value: &[u8]) -> Result<(), EditError> {
        let len = u32::try_from(value.len() + 1).map_err(|_| EditError::NoRoom)?;
        self.put_u32(FDT_PROP)?;
        self.put_u32(len)?;
        self.put_u32(name_offset)?;
        self.put(value)?;
        self.put(&[0])?;
        self.pad4()
    }
}

/// The offset of a `bootargs` string in `strings` (one starting at a string boundary).
fn find_bootargs(strings: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at < strings.len() {
        let rest = strings.get(at..)?;
        let len = rest.iter().position(|&b| b == 0)?;
        if rest.get(..len) == Some(BOOTARGS) {
            return Some(at);
        }
        at = at.checked_add(len + 1)?;
    }
    None
}

/// Writes into `out` a copy of the tree `src` whose `/chosen/bootargs` is `bootargs` (ASCII, no
/// NUL; `/chosen` made if missing); returns the new tree's size.
///
/// # Errors
/// [`EditError`]: the source is not a tree this reads, or `out` is too small. `out` is then
/// not a tree.
pub fn with_bootargs(src: &[u8], bootargs: &[u8], out: &mut [u8]) -> Result<usize, EditError> {
    let field = |i: usize| be32(src, 4 * i).ok_or(EditError::NotATree).map(|v| v as usize);
    if field(0)? != FDT_MAGIC as usize || field(5)? < 17 {
        return Err(EditError::NotATree);
    }
    let total = field(1)?;
    let (struct_at, strings_at, rsv_at) = (field(2)?, field(3)?, field(4)?);
    let (strings_len, struct_len) = (field(8)?, field(9)?);
    let tree = src.get(..total).ok_or(EditError::NotATree)?;
    let block = |at: usize, len: usize| {
        let end = at.checked_add(len).ok_or(EditError::NotATree)?;
        tree.get(at..end).ok_or(EditError::NotATree)
    };
    let structure = block(struct_at, struct_len)?;
    let strings = block(strings_at, strings_len)?;
    if !struct_at.is_multiple_of(4) || !rsv_at.is_multiple_of(8) || rsv_at < HEADER_LEN {
        return Err(EditError::NotATree);
    }
    // Memory reservations: 16-byte entries up to and including the (0, 0) one.
    let mut rsv_len = 0;
    loop {
        let entry = block(rsv_at + rsv_len, 16)?;
        rsv_len += 16;
        if entry.iter().all(|&b| b == 0) {
            break;
        }
    }
    let existing = find_bootargs(strings);
    let name_offset = u32::try_from(existing.unwrap_or(strings_len)).map_err(|_| EditError::NotATree)?;
    let mut o = Out { buf: out, pos: 0 };
    o.put(&[0; HEADER_LEN])?;
    o.put(block(rsv_at, rsv_len)?)?;
    let new_struct_at = o.pos;

    // The structure block. `depth` counts open nodes (the root is depth 1); `in_chosen` is the
    // depth of `/chosen` while inside it.
    let (mut at, mut depth, mut in_chosen, mut chosen_seen) = (0usize, 0usize, 0usize, false);
    loop {
        let token = be32(structure, at).ok_or(EditError::Malformed)?;
        let body = at + 4;
        match token {
            FDT_BEGIN_NODE => {
                let name_len = structure
                    .get(body..)
                    .and_then(|r| r.iter().position(|&b| b == 0))
                    .ok_or(EditError::Malformed)?;
                let next = aligned4(body + name_len + 1).ok_or(EditError::Malformed)?;
                let node = structure.get(at..next).ok_or(EditError::Malformed)?;
                o.put(node)?;
                depth += 1;
                if depth == 2
                    && structure.get(body..body + name_len) == Some(b"chosen".as_slice())
                    && !chosen_seen
                {
                    chosen_seen = true;
                    in_chosen = depth;
                    o.bootargs(name_offset, bootargs)?;
                }
                at = next;
            }
            FDT_END_NODE => {
                if depth == 0 {
                    return Err(EditError::Malformed);
                }
                if depth == 1 && !chosen_seen {
                    // The root ends without a /chosen: add one, last among its children.
                    chosen_seen = true;
                    o.put_u32(FDT_BEGIN_NODE)?;
                    o.put(b"chosen\0\0")?;
                    o.bootargs(name_offset, bootargs)?;
                    o.put_u32(FDT_END_NODE)?;
                }
                if depth == in_chosen {
                    in_chosen = 0;
                }
                depth -= 1;
                o.put_u32(FDT_END_NODE)?;
                at = body;
            }
            FDT_PROP => {
                let len = be32(structure, body).ok_or(EditError::Malformed)? as usize;
                let name = be32(structure, body + 4).ok_or(EditError::Malformed)? as usize;
                let next = aligned4(body.checked_add(8 + len).ok_or(EditError::Malformed)?)
                    .ok_or(EditError::Malformed)?;
                let prop = structure.get(at..next).ok_or(EditError::Malformed)?;
                if depth == 0 {
                    return Err(EditError::Malformed);
                }
                let is_bootargs = strings
                    .get(name..)
                    .and_then(|r| r.get(..r.iter().position(|&b| b == 0)?))
                    .is_some_and(|n| n == BOOTARGS);
                if !(in_chosen != 0 && depth == in_chosen && is_bootargs) {
                    o.put(prop)?;
                }
                at = next;
            }
            FDT_NOP => at = body,
            FDT_END if depth == 0 && chosen_seen => {
                o.put_u32(FDT_END)?;
                break;
            }
            _ => return Err(EditError::Malformed),
        }
    }
    let new_struct_len = o.pos - new_struct_at;
    let new_strings_at = o.pos;
    o.put(strings)?;
    if existing.is_none() {
        o.put(BOOTARGS)?;
        o.put(&[0])?;
    }
    let new_strings_len = o.pos - new_strings_at;
    let new_total = o.pos;
    let boot_cpu = field(7)? as u32;
    let fields = [
        FDT_MAGIC,
        new_total as u32,
        new_struct_at as u32,
        new_strings_at as u32,
        HEADER_LEN as u32,
        17,
        16,
        boot_cpu,
        new_strings_len as u32,
        new_struct_len as u32,
    ];
    for (i, f) in fields.iter().enumerate() {
        o.buf[4 * i..4 * i + 4].copy_from_slice(&f.to_be_bytes());
    }
    Ok(new_total)
}

#[cfg(test)]
mod tests;
