//! Nodes and properties of a validated tree, and the depth-first walk that knows each node's
//! path. Every read goes through the checked token reader of [`crate::fdt`].
use core::fmt;

use crate::fdt::{CellSizes, Fdt, MAX_DEPTH, Token, be32, read_cells, token};

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
    pub(crate) fdt: Fdt<'a>,
    pub(crate) name: &'a str,
    /// Offset of the first token after the node's name.
    pub(crate) body: usize,
    /// The parent's cell sizes: how this node's `reg` is read.
    pub(crate) cells: CellSizes,
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
    pub(crate) fdt: Fdt<'a>,
    pub(crate) offset: usize,
    /// Nodes open above the next one.
    pub(crate) depth: usize,
    /// Names of the open nodes; `names[0]` is the root's "".
    pub(crate) names: [&'a str; MAX_DEPTH],
    /// `cells[d]`: the cell sizes for nodes at depth `d` (set by their parent).
    pub(crate) cells: [CellSizes; MAX_DEPTH + 1],
    pub(crate) done: bool,
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
