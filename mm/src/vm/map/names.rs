//! Named anonymous memory: `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`, as Linux
//! 5.17 added it (`madvise_set_anon_name` in mm/madvise.c, `prctl_set_vma` in kernel/sys.c) —
//! JITs and allocators name their regions, and `/proc/PID/maps` shows `[anon:NAME]`.
//!
//! Why a table and not the text in the area: an area is a plain value in the tree's nodes, copied
//! when the tree splits or merges them, so it carries a [`AnonName`], an index into its map's
//! table of names, which holds each name once. Equal names are equal indices, so two areas merge
//! only when their names match, and a split keeps the name on both halves for free. The table
//! counts the bytes of the areas carrying each name where the map counts every other byte
//! (`VmMap::count`, the one place bounds and attributes are accounted), so a name whose last
//! byte is unmapped, renamed or replaced frees its entry, which the next new name reuses. Its
//! entries are allocated through [`crate::vm::fallible`]: a name that finds no room is `ENOMEM`.

use alloc::vec::Vec;

use super::{VmMap, page_up};
use crate::vm::{AnonName, Errno, PAGE, VmaFlags, fallible};

/// The longest name, its terminating NUL included (Linux's `ANON_VMA_NAME_MAX_LEN`).
pub const ANON_NAME_MAX: usize = 80;

/// One name of the table: its text and the bytes of the areas that carry it (0: a free entry).
#[derive(Clone, Copy)]
struct Entry {
    bytes: u64,
    len: u8,
    text: [u8; ANON_NAME_MAX - 1],
}

impl Entry {
    fn text(&self) -> &[u8] {
        &self.text[..usize::from(self.len)]
    }
}

/// The names of one map's areas (module documentation).
#[derive(Default)]
pub(super) struct AnonNames(Vec<Entry>);

impl AnonNames {
    /// The name `n` stands for (`None` for [`AnonName::NONE`] or a free entry).
    pub(super) fn get(&self, n: AnonName) -> Option<&[u8]> {
        let e = self.0.get(n.index()?)?;
        (e.bytes > 0).then(|| e.text())
    }

    /// The index of `text` (already validated): the entry that holds it, or a free one, or a new
    /// one.
    ///
    /// # Errors
    /// `ENOMEM` when the table has no room.
    fn intern(&mut self, text: &[u8]) -> Result<AnonName, Errno> {
        if let Some(i) = self.0.iter().position(|e| e.bytes > 0 && e.text() == text) {
            return Ok(AnonName::at(i));
        }
        let mut entry = Entry { bytes: 0, len: text.len() as u8, text: [0; ANON_NAME_MAX - 1] };
        entry.text[..text.len()].copy_from_slice(text);
        if let Some(i) = self.0.iter().position(|e| e.bytes == 0) {
            self.0[i] = entry;
            return Ok(AnonName::at(i));
        }
        fallible::push(&mut self.0, entry)?;
        Ok(AnonName::at(self.0.len() - 1))
    }

    /// Adds or subtracts `bytes` of areas carrying `n`.
    pub(super) fn count(&mut self, n: AnonName, bytes: u64, add: bool) {
        if let Some(e) = n.index().and_then(|i| self.0.get_mut(i)) {
            if add {
                e.bytes += bytes;
            } else {
                e.bytes -= bytes;
            }
        }
    }

    /// The same names with no bytes (a forked child's map counts its areas into it).
    ///
    /// # Errors
    /// `ENOMEM` when the heap has no room.
    pub(super) fn try_clone_empty(&self) -> Result<AnonNames, Errno> {
        let mut v = Vec::new();
        fallible::reserve(&mut v, self.0.len())?;
        v.extend(self.0.iter().map(|e| Entry { bytes: 0, ..*e }));
        Ok(AnonNames(v))
    }

    /// Checks the table against the bytes the areas carry (`(name, bytes)` per name in use):
    /// each entry's count is exact, and no two entries in use hold the same text.
    pub(super) fn check(&self, carried: &[(AnonName, u64)]) {
        for (i, e) in self.0.iter().enumerate() {
            let want: u64 = carried.iter().filter(|(n, _)| n.index() == Some(i)).map(|(_, b)| b).sum();
            assert_eq!(e.bytes, want, "bytes of name {:?}", core::str::from_utf8(e.text()));
            assert!(
                e.bytes == 0 || !self.0[..i].iter().any(|f| f.bytes > 0 && f.text() == e.text()),
                "a name held twice"
            );
        }
    }
}

/// Linux's `is_valid_name_char`: printable ASCII but `\`, `` ` ``, `$`, `[` and `]`.
fn valid_char(c: u8) -> bool {
    (0x20..0x7f).contains(&c) && !b"\\`$[]".contains(&c)
}

impl VmMap {
    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`: names every anonymous area of
    /// `[addr, addr + len)` (`name` without its NUL; `None`, a NULL pointer, takes the name
    /// away), splitting the areas at the ends, as Linux 5.17's `madvise_set_anon_name`. The
    /// caller copies the name from user memory: at most [`ANON_NAME_MAX`] bytes with its NUL
    /// (Linux's `strndup_user`: a longer one is `EINVAL`, an unreadable one `EFAULT`).
    ///
    /// # Errors
    /// Before any change: `EINVAL` for a name of more than 79 bytes or with a byte that is not
    /// printable ASCII or is one of `` \ ` $ [ ] ``, an unaligned `addr`, or a range that wraps;
    /// `ENOMEM` when the name finds no room in the table. `len` rounding to 0 succeeds with no
    /// effect. Then, as `madvise`, area by area: `EBADF` at an area that is not anonymous memory
    /// (shared memory, a memory object's or the program's image: Linux's file-backed areas),
    /// which stops the walk there; `EAGAIN` when a split would pass `vm.max_map_count`; `ENOMEM`
    /// for a hole, after naming every mapped part of the range.
    pub fn set_anon_name(&mut self, addr: u64, len: u64, name: Option<&[u8]>) -> Result<(), Errno> {
        if let Some(text) = name
            && (text.len() >= ANON_NAME_MAX || !text.iter().all(|&c| valid_char(c)))
        {
            return Err(Errno::EINVAL);
        }
        if addr & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let plen = page_up(len).unwrap_or(0);
        if len != 0 && plen == 0 {
            return Err(Errno::EINVAL);
        }
        let end = addr.checked_add(plen).ok_or(Errno::EINVAL)?;
        if end == addr {
            return Ok(());
        }
        let id = match name {
            Some(text) => self.names.intern(text)?,
            None => AnonName::NONE,
        };
        let (mut pieces, hole) = self.select(addr, end, false)?;
        let mut error = hole.then_some(Errno::ENOMEM);
        let file = |f: VmaFlags| {
            [VmaFlags::SHARED, VmaFlags::OBJECT, VmaFlags::IMAGE].iter().any(|&k| f.contains(k))
        };
        if let Some(i) = pieces.iter().position(|p| file(p.flags)) {
            error = Some(Errno::EBADF);
            pieces.truncate(i);
        }
        // A split at vm.max_map_count stops the walk (madvise_update_vma's ENOMEM, said EAGAIN).
        let mut count = self.tree.len();
        for i in 0..pieces.len() {
            let p = pieces[i];
            let named = crate::vm::Vma { name: id, ..p };
            let splits = if named == p { 0 } else { self.splits_needed(&p, &named) };
            if splits > 0 && count + splits > self.layout.max_map_count {
                error = Some(Errno::EAGAIN);
                pieces.truncate(i);
                break;
            }
            count += splits;
        }
        if pieces.iter().any(|p| p.name != id) {
            self.reserve()?;
            self.rewrite(&pieces, |p| crate::vm::Vma { name: id, ..*p });
        }
        error.map_or(Ok(()), Err)
    }

    /// The name of an anonymous area, as `prctl(PR_SET_VMA_ANON_NAME)` set it (what
    /// `/proc/PID/maps` shows as `[anon:NAME]`).
    pub fn anon_name(&self, vma: &crate::vm::Vma) -> Option<&[u8]> {
        self.names.get(vma.name)
    }
}
