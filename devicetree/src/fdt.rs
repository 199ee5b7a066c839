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

/// Why a blob is not a usable flattened device tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than the header needs.
    TooShort(usize),
    /// The first word is not [`FDT_MAGIC`].
    BadMagic(u32),
    /// `totalsize` is smaller than the header or larger than the bytes given.
    BadTotalSize {
        /// The header's `totalsize`.
        totalsize: u32,
        /// Bytes available.
        available: usize,
    },
    /// A version this reader does not understand (it reads versions 16 and 17).
    Version {
        /// `version`.
        version: u32,
        /// `last_comp_version`.
        last_compatible: u32,
    },
    /// A block's offset and size reach past `totalsize`.
    BlockOutside {
        /// Which block.
        block: &'static str,
        /// Its offset.
        offset: u32,
        /// Its size.
        size: u32,
        /// The header's `totalsize`.
        totalsize: u32,
    },
    /// The memory reservation block has no `(0, 0)` terminator inside the blob.
    ReservationsUnterminated,
    /// Something wrong at a byte offset of the structure block.
    Structure {
        /// Offset from the start of the structure block.
        offset: usize,
        /// What.
        problem: StructureProblem,
    },
}

/// What is wrong at one place of the structure block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructureProblem {
    /// The block ends inside a token.
    Truncated,
    /// A token value the specification does not define.
    UnknownToken(u32),
    /// A node name without its NUL inside the block.
    UnterminatedName,
    /// A node or property name that is not UTF-8.
    NameNotUtf8,
    /// A property value of this length reaches past the block's end.
    ValuePastEnd(u32),
    /// A property name offset outside the strings block (or its name has no NUL there).
    NameOffsetOutside(u32),
    /// A property outside any node, or after a child node (properties come first, spec 5.4.2).
    MisplacedProperty,
    /// `FDT_END_NODE` with no node open.
    UnbalancedEnd,
    /// Nodes nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// The first node is not the root (its name is not empty) or a second top-level node.
    NotOneRoot,
    /// `FDT_END` while nodes are open, or no root at all.
    EarlyEnd,
    /// The block ends without `FDT_END`.
    NoEnd,
}

impl fmt::Display for StructureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => write!(f, "the block ends inside a token"),
            Self::UnknownToken(t) => write!(f, "unknown token {t:#x}"),
            Self::UnterminatedName => write!(f, "a node name has no terminating NUL in the block"),
            Self::NameNotUtf8 => write!(f, "a node or property name is not UTF-8"),
            Self::ValuePastEnd(len) => write!(f, "a property value of {len} bytes runs past the block"),
            Self::NameOffsetOutside(off) => {
                write!(f, "a property name offset {off:#x} is outside the strings block")
            }
            Self::MisplacedProperty => write!(f, "a property outside a node or after a child node"),
            Self::UnbalancedEnd => write!(f, "FDT_END_NODE with no node open"),
            Self::TooDeep => write!(f, "nodes nested deeper than {MAX_DEPTH}"),
            Self::NotOneRoot => write!(f, "the tree does not have exactly one root node named \"\""),
            Self::EarlyEnd => write!(f, "FDT_END before the root node is closed"),
            Self::NoEnd => write!(f, "the block ends without FDT_END"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort(len) => write!(f, "{len} bytes are too few for a device tree header"),
            Self::BadMagic(magic) => {
                write!(f, "its first word is {magic:#010x}, not the FDT magic {FDT_MAGIC:#010x}")
            }
            Self::BadTotalSize { totalsize, available } => write!(
                f,
                "its totalsize {totalsize} is below the header's size or above the {available} bytes there"
            ),
            Self::Version { version, last_compatible } => write!(
                f,
                "version {version} (compatible back to {last_compatible}): only versions 16 and 17 are read"
            ),
            Self::BlockOutside { block, offset, size, totalsize } => write!(
                f,
                "the {block} block at offset {offset:#x}, {size} bytes, reaches past totalsize {totalsize}"
            ),
            Self::ReservationsUnterminated => {
                write!(f, "the memory reservation block has no (0, 0) entry before the end")
            }
            Self::Structure { offset, problem } => {
                write!(f, "structure block offset {offset:#x}: {problem}")
            }
        }
    }
}

fn be32(bytes: &[u8], offset: usize) -> Option<u32> {
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
enum Token<'a> {
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
fn token(structs: &[u8], offset: usize) -> Result<(Token<'_>, usize), StructureProblem> {
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
    blob: &'a [u8],
    structs: &'a [u8],
    strings: &'a [u8],
    reservations: &'a [u8],
    /// Offset of the root node's `FDT_BEGIN_NODE`.
    root: usize,
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

    fn property_name(&self, offset: u32) -> Option<&'a str> {
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

/// A property: its name and raw value.
#[derive(Clone, Copy, Debug)]
pub struct Property<'a> {
    /// Name.
    pub name: &'a str,
    /// Value bytes.
    pub value: &'a [u8],
}

impl<'a> Property<'a> {
    /// The value as a string: up to its first NUL, if UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        let end = self.value.iter().position(|&b| b == 0).unwrap_or(self.value.len());
        core::str::from_utf8(self.value.get(..end)?).ok()
    }

    /// The value as one `<u32>` cell.
    pub fn as_u32(&self) -> Option<u32> {
        if self.value.len() != 4 { None } else { be32(self.value, 0) }
    }

    /// The value as one or two cells (`<u32>` or `<u64>`).
    pub fn as_u64(&self) -> Option<u64> {
        match self.value.len() {
            4 => read_cells(self.value, 1),
            8 => read_cells(self.value, 2),
            _ => None,
        }
    }

    /// The value as a list of strings (`compatible`): its NUL-terminated UTF-8 pieces.
    pub fn strings(&self) -> impl Iterator<Item = &'a str> + 'a {
        let value = self.value.strip_suffix(&[0]).unwrap_or(self.value);
        value.split(|&b| b == 0).filter_map(|s| core::str::from_utf8(s).ok())
    }
}

/// One `reg` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Address in the parent bus's address space.
    pub address: u64,
    /// Size (`None` when the parent's `#size-cells` is 0).
    pub size: Option<u64>,
}

/// A node of a validated tree.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    fdt: Fdt<'a>,
    name: &'a str,
    /// Offset of the first token after the node's name.
    body: usize,
    /// The parent's cell sizes: how this node's `reg` is read.
    cells: CellSizes,
}

impl fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node").field("name", &self.name).finish_non_exhaustive()
    }
}

impl<'a> Node<'a> {
    /// The name with its unit address (`serial@9000000`; the root's is "").
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Its properties, in order.
    pub fn properties(&self) -> impl Iterator<Item = Property<'a>> + 'a {
        let fdt = self.fdt;
        let mut offset = self.body;
        core::iter::from_fn(move || {
            loop {
                let (tok, next) = token(fdt.structs, offset).ok()?;
                offset = next;
                match tok {
                    Token::Nop => {}
                    Token::Prop { name_offset, value } => {
                        let name = fdt.property_name(name_offset)?;
                        return Some(Property { name, value });
                    }
                    _ => return None,
                }
            }
        })
    }

    /// The property `name`.
    pub fn property(&self, name: &str) -> Option<Property<'a>> {
        // Names compared as bytes in the strings block: no UTF-8 check for the ones passed over.
        let fdt = self.fdt;
        let mut offset = self.body;
        loop {
            let (tok, next) = token(fdt.structs, offset).ok()?;
            offset = next;
            match tok {
                Token::Nop => {}
                Token::Prop { name_offset, value } => {
                    let start = name_offset as usize;
                    let end = start.checked_add(name.len())?;
                    if fdt.strings.get(start..end) == Some(name.as_bytes())
                        && fdt.strings.get(end) == Some(&0)
                    {
                        return Some(Property { name: fdt.property_name(name_offset)?, value });
                    }
                }
                _ => return None,
            }
        }
    }

    /// The property `name` as a string.
    pub fn str_property(&self, name: &str) -> Option<&'a str> {
        self.property(name)?.as_str()
    }

    /// The property `name` as one cell.
    pub fn u32_property(&self, name: &str) -> Option<u32> {
        self.property(name)?.as_u32()
    }

    /// The cell sizes this node sets for its children.
    pub fn child_cells(&self) -> CellSizes {
        let read = |name, default| self.property(name).and_then(|p| p.as_u32()).unwrap_or(default);
        CellSizes {
            address: read("#address-cells", CellSizes::DEFAULT.address),
            size: read("#size-cells", CellSizes::DEFAULT.size),
        }
    }

    /// Whether `other` is this node (of the same tree).
    pub fn same_node(&self, other: &Node<'_>) -> bool {
        self.body == other.body && core::ptr::eq(self.fdt.structs, other.fdt.structs)
    }

    /// The parent's cell sizes (how this node's `reg` is read).
    pub fn cells(&self) -> CellSizes {
        self.cells
    }

    /// Its children, in order.
    pub fn children(&self) -> impl Iterator<Item = Node<'a>> + 'a {
        let fdt = self.fdt;
        let cells = self.child_cells();
        let mut offset = self.body;
        core::iter::from_fn(move || {
            loop {
                let (tok, next) = token(fdt.structs, offset).ok()?;
                match tok {
                    Token::Nop | Token::Prop { .. } => offset = next,
                    Token::Begin(name) => {
                        offset = skip_subtree(fdt.structs, offset)?;
                        let name = core::str::from_utf8(name).ok()?;
                        return Some(Node { fdt, name, body: next, cells });
                    }
                    Token::End | Token::Finish => return None,
                }
            }
        })
    }

    /// The first child whose name is `name`, or whose name without unit address is `name`.
    pub fn child(&self, name: &str) -> Option<Node<'a>> {
        self.children().find(|c| c.name == name).or_else(|| {
            if name.contains('@') {
                return None;
            }
            self.children().find(|c| c.name.split_once('@').is_some_and(|(base, _)| base == name))
        })
    }

    /// `compatible` holds one of `compatible`.
    pub fn is_compatible(&self, compatible: &[&str]) -> bool {
        self.property("compatible").is_some_and(|p| p.strings().any(|s| compatible.contains(&s)))
    }

    /// The first `compatible` string.
    pub fn first_compatible(&self) -> Option<&'a str> {
        self.property("compatible")?.strings().next()
    }

    /// `status` is absent, "okay" or "ok" (spec 2.3.4; Linux's `of_fdt_device_is_available`).
    pub fn is_available(&self) -> bool {
        self.str_property("status").is_none_or(|s| s == "okay" || s == "ok")
    }

    /// Its `reg` entries, read with the parent's cell sizes. `None` without `reg`, when an
    /// address or size needs more than two cells (64 bits), or when the value is not a whole
    /// number of entries.
    pub fn reg(&self) -> Option<impl Iterator<Item = Region> + 'a> {
        let value = self.property("reg")?.value;
        let CellSizes { address, size } = self.cells;
        if address > 2 || size > 2 || address == 0 {
            return None;
        }
        let entry = (address + size) as usize * 4;
        if value.len() % entry != 0 {
            return None;
        }
        Some(value.chunks_exact(entry).filter_map(move |e| {
            let addr = read_cells(e, address)?;
            let sz = if size == 0 { None } else { Some(read_cells(e.get(address as usize * 4..)?, size)?) };
            Some(Region { address: addr, size: sz })
        }))
    }
}

/// Offset just past the node whose `FDT_BEGIN_NODE` is at `offset`.
fn skip_subtree(structs: &[u8], mut offset: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        let (tok, next) = token(structs, offset).ok()?;
        offset = next;
        match tok {
            Token::Begin(_) => depth += 1,
            Token::End => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(offset);
                }
            }
            Token::Finish => return None,
            Token::Nop | Token::Prop { .. } => {}
        }
    }
}

/// A depth-first walk over every node that knows each node's path.
pub struct Walk<'a> {
    fdt: Fdt<'a>,
    offset: usize,
    /// Nodes open above the next one.
    depth: usize,
    /// Names of the open nodes; `names[0]` is the root's "".
    names: [&'a str; MAX_DEPTH],
    /// `cells[d]`: the cell sizes for nodes at depth `d` (set by their parent).
    cells: [CellSizes; MAX_DEPTH + 1],
    done: bool,
}

impl<'a> Walk<'a> {
    /// The path of the node the last `next` returned (`/` for the root).
    pub fn path(&self) -> alloc::string::String {
        let mut path = alloc::string::String::new();
        for name in self.names.iter().take(self.depth).skip(1) {
            path.push('/');
            path.push_str(name);
        }
        if path.is_empty() {
            path.push('/');
        }
        path
    }

    /// How deep the node the last `next` returned is (the root is 0).
    pub fn depth(&self) -> usize {
        self.depth.saturating_sub(1)
    }
}

impl<'a> Iterator for Walk<'a> {
    type Item = Node<'a>;

    fn next(&mut self) -> Option<Node<'a>> {
        while !self.done {
            let Ok((tok, next)) = token(self.fdt.structs, self.offset) else { break };
            self.offset = next;
            match tok {
                Token::Begin(name) => {
                    let Ok(name) = core::str::from_utf8(name) else { break };
                    let (Some(slot), Some(&cells)) =
                        (self.names.get_mut(self.depth), self.cells.get(self.depth))
                    else {
                        break;
                    };
                    *slot = name;
                    let node = Node { fdt: self.fdt, name, body: next, cells };
                    self.depth += 1;
                    if let Some(child) = self.cells.get_mut(self.depth) {
                        *child = node.child_cells();
                    }
                    return Some(node);
                }
                Token::End => match self.depth.checked_sub(1) {
                    Some(d) => self.depth = d,
                    None => break,
                },
                Token::Finish => break,
                Token::Nop | Token::Prop { .. } => {}
            }
        }
        self.done = true;
        None
    }
}
