//! The flattened device tree blob (Devicetree Specification v0.4, chapter 5), read with every
//! offset and length checked.
//!
//! [`Fdt::new`] validates the whole blob once: the header, the memory reservation block (it must
//! end with its `(0, 0)` entry inside the blob), and every token of the structure block (names
//! NUL-terminated inside the block, property values inside it, name offsets inside the strings
//! block, nodes balanced and at most [`MAX_DEPTH`] deep, one root, `FDT_END` after it). A blob
//! that fails gets an [`Error`] naming the byte offset and what is wrong there. The blocks may lie
//! in any order and `FDT_NOP` may stand anywhere a token may (libfdt's `fdt_nop_node` and
//! `fdt_nop_property` overwrite a node or property with NOPs in place: QEMU does that to its own
//! tree).
//!
//! Reading after validation goes through the same checked token reader, so even a bug here can
//! only end an iteration early: no index is unchecked and no arithmetic can overflow (host tests
//! run with overflow checks on). Blocks are read byte-wise, so their alignment does not matter
//! and is not required (libfdt's `fdt_check_header` does not require it either).
use core::fmt;

pub use crate::error::{Error, StructureProblem};
pub use crate::node::{Node, Property, Region, Walk};

/// Header magic (big-endian 0xd00dfeed).
pub const FDT_MAGIC: u32 = 0xd00d_feed;
/// Deepest node nesting accepted (Linux's `of_fdt` unflattening stops at 64; real trees stay
/// under 10). Bounds every walk's stack.
pub const MAX_DEPTH: usize = 32;

const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_NOP: u32 = 4;
const FDT_END: u32 = 9;
/// Header length up to `size_dt_strings` (version 16) and with `size_dt_struct` (version 17).
const HEADER_V16: usize = 36;
const HEADER_V17: usize = 40;

pub(crate) fn be32(bytes: &[u8], offset: usize) -> Option<u32> {
    let word = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_be_bytes(<[u8; 4]>::try_from(word).ok()?))
}

fn be64(bytes: &[u8], offset: usize) -> Option<u64> {
    let word = bytes.get(offset..offset.checked_add(8)?)?;
    Some(u64::from_be_bytes(<[u8; 8]>::try_from(word).ok()?))
}

/// Reads a number of `cells` 32-bit big-endian cells (0 to 2) from the front of `bytes`.
pub fn read_cells(bytes: &[u8], cells: u32) -> Option<u64> {
    match cells {
        0 => Some(0),
        1 => be32(bytes, 0).map(u64::from),
        2 => be64(bytes, 0),
        _ => None,
    }
}

fn align4(offset: usize) -> Option<usize> {
    offset.checked_add(3).map(|o| o & !3)
}

/// The NUL-terminated string starting at `offset` of `bytes`, without its NUL.
fn c_str(bytes: &[u8], offset: usize) -> Option<&[u8]> {
    let rest = bytes.get(offset..)?;
    let len = rest.iter().position(|&b| b == 0)?;
    rest.get(..len)
}

/// One structure-block token, decoded.
#[derive(Clone, Copy)]
pub(crate) enum Token<'a> {
    /// A node's name, as bytes (checked to be UTF-8 by validation; converted where a node is made).
    Begin(&'a [u8]),
    End,
    Prop {
        name_offset: u32,
        value: &'a [u8],
    },
    Nop,
    Finish,
}

/// Decodes the token at `offset` of the structure block: the token and the next token's offset.
pub(crate) fn token(structs: &[u8], offset: usize) -> Result<(Token<'_>, usize), StructureProblem> {
    let tag = be32(structs, offset).ok_or(StructureProblem::Truncated)?;
    let body = offset + 4; // `be32` succeeded, so `offset + 4 <= structs.len()`
    match tag {
        FDT_BEGIN_NODE => {
            let name = c_str(structs, body).ok_or(StructureProblem::UnterminatedName)?;
            let next = align4(body + name.len() + 1).ok_or(StructureProblem::Truncated)?;
            Ok((Token::Begin(name), next))
        }
        FDT_PROP => {
            let len = be32(structs, body).ok_or(StructureProblem::Truncated)?;
            let name_offset = be32(structs, body + 4).ok_or(StructureProblem::Truncated)?;
            let start = body + 8;
            let end = start.checked_add(len as usize).ok_or(StructureProblem::ValuePastEnd(len))?;
            let value = structs.get(start..end).ok_or(StructureProblem::ValuePastEnd(len))?;
            let next = align4(end).ok_or(StructureProblem::ValuePastEnd(len))?;
            Ok((Token::Prop { name_offset, value }, next))
        }
        FDT_END_NODE => Ok((Token::End, body)),
        FDT_NOP => Ok((Token::Nop, body)),
        FDT_END => Ok((Token::Finish, body)),
        other => Err(StructureProblem::UnknownToken(other)),
    }
}

/// `#address-cells` and `#size-cells`: how the `reg` of a node's children is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellSizes {
    /// `#address-cells`.
    pub address: u32,
    /// `#size-cells`.
    pub size: u32,
}

impl CellSizes {
    /// What the specification says to assume when a node does not say (2.3.5).
    pub const DEFAULT: Self = Self { address: 2, size: 1 };
}

/// A validated flattened device tree. Cheap to copy (a few slices).
#[derive(Clone, Copy)]
pub struct Fdt<'a> {
    pub(crate) blob: &'a [u8],
    pub(crate) structs: &'a [u8],
    pub(crate) strings: &'a [u8],
    pub(crate) reservations: &'a [u8],
    /// Offset of the root node's `FDT_BEGIN_NODE`.
    pub(crate) root: usize,
}

impl fmt::Debug for Fdt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fdt").field("total_size", &self.blob.len()).finish_non_exhaustive()
    }
}

impl<'a> Fdt<'a> {
    /// Validates `blob` (at least `totalsize` bytes; more are ignored) as a device tree.
    ///
    /// # Errors
    /// What is wrong, and where.
    pub fn new(blob: &'a [u8]) -> Result<Self, Error> {
        let word = |i: usize| be32(blob, 4 * i).ok_or(Error::TooShort(blob.len()));
        let magic = word(0)?;
        if magic != FDT_MAGIC {
            return Err(Error::BadMagic(magic));
        }
        if blob.len() < HEADER_V16 {
            return Err(Error::TooShort(blob.len()));
        }
        let totalsize = word(1)?;
        let (version, last_compatible) = (word(5)?, word(6)?);
        if version < 16 || last_compatible > 17 {
            return Err(Error::Version { version, last_compatible });
        }
        let header = if version >= 17 { HEADER_V17 } else { HEADER_V16 };
        if (totalsize as usize) < header || totalsize as usize > blob.len() {
            return Err(Error::BadTotalSize { totalsize, available: blob.len() });
        }
        let blob = &blob[..totalsize as usize];
        let block = |block: &'static str, offset: u32, size: u32| {
            let outside = Error::BlockOutside { block, offset, size, totalsize };
            let end = (offset as usize).checked_add(size as usize).ok_or(outside)?;
            blob.get(offset as usize..end).ok_or(outside)
        };
        let off_struct = word(2)?;
        // Version 16 has no `size_dt_struct`: the block runs to the end of the blob at most.
        let size_struct = if version >= 17 { word(9)? } else { totalsize.saturating_sub(off_struct) };
        let structs = block("structure", off_struct, size_struct)?;
        let strings = block("strings", word(3)?, word(8)?)?;
        let off_rsv = word(4)?;
        let after_rsv = block("memory reservation", off_rsv, totalsize.saturating_sub(off_rsv))?;
        let mut entries = 0;
        loop {
            let at = entries * 16;
            let (Some(address), Some(size)) = (be64(after_rsv, at), be64(after_rsv, at + 8)) else {
                return Err(Error::ReservationsUnterminated);
            };
            if address == 0 && size == 0 {
                break;
            }
            entries += 1;
        }
        let reservations = &after_rsv[..entries * 16];
        let root = validate_structure(structs, strings)
            .map_err(|(offset, problem)| Error::Structure { offset, problem })?;
        Ok(Self { blob, structs, strings, reservations, root })
    }

    /// The blob's `totalsize`.
    pub fn total_size(&self) -> usize {
        self.blob.len()
    }

    /// The `/memreserve/` entries: `(address, size)`.
    pub fn reservations(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        self.reservations.chunks_exact(16).filter_map(|entry| Some((be64(entry, 0)?, be64(entry, 8)?)))
    }

    /// The root node.
    pub fn root(&self) -> Node<'a> {
        let body = match token(self.structs, self.root) {
            Ok((_, next)) => next,
            Err(_) => self.structs.len(), // unreachable after validation: an empty node
        };
        Node { fdt: *self, name: "", body, cells: CellSizes::DEFAULT }
    }

    pub(crate) fn property_name(&self, offset: u32) -> Option<&'a str> {
        core::str::from_utf8(c_str(self.strings, offset as usize)?).ok()
    }

    /// The node at `path` (`/soc/serial@7e215040`), or at an alias (`serial0`, `serial0/child`).
    ///
    /// A path component without a unit address matches the first node of that name with any
    /// unit address, as libfdt's `fdt_path_offset` does.
    pub fn find_node(&self, path: &str) -> Option<Node<'a>> {
        self.lookup(path, &mut |_| {})
    }

    /// [`find_node`](Self::find_node), with the node's full path (alias resolved, unit addresses
    /// as the tree has them), which [`crate::translate`] needs.
    pub fn find_node_path(&self, path: &str) -> Option<(alloc::string::String, Node<'a>)> {
        let mut full = alloc::string::String::new();
        let node = self.lookup(path, &mut |name| {
            full.push('/');
            full.push_str(name);
        })?;
        if full.is_empty() {
            full.push('/');
        }
        Some((full, node))
    }

    /// Finds `path`, telling `visit` the name of each node on the way down (not the root's).
    fn lookup(&self, path: &str, visit: &mut dyn FnMut(&'a str)) -> Option<Node<'a>> {
        let (mut node, rest) = if let Some(rest) = path.strip_prefix('/') {
            (self.root(), rest)
        } else {
            let (alias, rest) = path.split_once('/').unwrap_or((path, ""));
            let target = self.find_node("/aliases")?.str_property(alias)?;
            // An alias's value is a full path; refusing a relative one also ends any alias loop.
            if !target.starts_with('/') {
                return None;
            }
            (self.lookup(target, visit)?, rest)
        };
        for component in rest.split('/').filter(|c| !c.is_empty()) {
            node = node.child(component)?;
            visit(node.name());
        }
        Some(node)
    }

    /// Every node, depth first in tree order, starting with the root.
    pub fn walk(&self) -> Walk<'a> {
        Walk {
            fdt: *self,
            offset: self.root,
            depth: 0,
            names: [""; MAX_DEPTH],
            cells: [CellSizes::DEFAULT; MAX_DEPTH + 1],
            done: false,
        }
    }

    /// The node whose `phandle` (or the older `linux,phandle`) is `phandle`.
    pub fn find_phandle(&self, phandle: u32) -> Option<Node<'a>> {
        if phandle == 0 || phandle == u32::MAX {
            return None; // not valid phandle values (spec 2.3.3)
        }
        self.walk().find(|node| {
            node.u32_property("phandle").or_else(|| node.u32_property("linux,phandle")) == Some(phandle)
        })
    }

    /// The first node (in tree order) compatible with one of `compatible`.
    pub fn find_compatible(&self, compatible: &[&str]) -> Option<Node<'a>> {
        self.walk().find(|node| node.is_compatible(compatible))
    }
}

/// Checks every token of the structure block; returns the root's offset.
fn validate_structure(structs: &[u8], strings: &[u8]) -> Result<usize, (usize, StructureProblem)> {
    let mut offset = 0;
    let mut depth = 0usize;
    let mut root = None;
    // Whether the innermost open node has had a child yet (then no more properties may follow).
    let mut had_child = [false; MAX_DEPTH + 1];
    loop {
        let (tok, next) = token(structs, offset).map_err(|p| {
            (
                offset,
                if p == StructureProblem::Truncated && offset >= structs.len() {
                    StructureProblem::NoEnd
                } else {
                    p
                },
            )
        })?;
        let fail = |problem| Err((offset, problem));
        match tok {
            Token::Begin(name) => {
                if core::str::from_utf8(name).is_err() {
                    return fail(StructureProblem::NameNotUtf8);
                }
                if name.contains(&b'/') || (name.is_empty() && depth > 0) {
                    return fail(StructureProblem::BadNodeName);
                }
                if depth == 0 {
                    if root.is_some() || !name.is_empty() {
                        return fail(StructureProblem::NotOneRoot);
                    }
                    root = Some(offset);
                }
                if depth >= MAX_DEPTH {
                    return fail(StructureProblem::TooDeep);
                }
                had_child[depth] = true;
                depth += 1;
                had_child[depth] = false;
            }
            Token::End => {
                if depth == 0 {
                    return fail(StructureProblem::UnbalancedEnd);
                }
                depth -= 1;
            }
            Token::Prop { name_offset, .. } => {
                if depth == 0 || had_child[depth] {
                    return fail(StructureProblem::MisplacedProperty);
                }
                let name = c_str(strings, name_offset as usize)
                    .ok_or(StructureProblem::NameOffsetOutside(name_offset))
                    .map_err(|p| (offset, p))?;
                if core::str::from_utf8(name).is_err() {
                    return fail(StructureProblem::NameNotUtf8);
                }
                if name.contains(&b'/') || (name.is_empty() && depth > 0) {
                    return fail(StructureProblem::BadNodeName);
                }
            }
            Token::Nop => {}
            Token::Finish => {
                return match root {
                    Some(root) if depth == 0 => Ok(root),
                    _ => fail(StructureProblem::EarlyEnd),
                };
            }
        }
        offset = next;
    }
}
