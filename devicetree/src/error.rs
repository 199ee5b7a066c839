//! Why a blob is not a device tree: the reader's errors, each naming the place and the problem
//! in words (the kernel prints them as they are).
use core::fmt;

use crate::fdt::{FDT_MAGIC, MAX_DEPTH};

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
    /// A node other than the root with an empty name, or a name with a `/` (spec 2.2.1: names
    /// are 1 to 31 characters, `/` not among them; paths would be ambiguous).
    BadNodeName,
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
            Self::BadNodeName => write!(f, "a node name is empty or holds a '/'"),
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
