//! The initramfs format: cpio "newc" archives (Linux `Documentation/driver-api/early-userspace/
//! buffer-format.rst`, `init/initramfs.c`), read in place.
//!
//! Each member is a 110-byte ASCII header (magic `070701`, or `070702` with checksums, then 13
//! eight-digit hex fields), the NUL-terminated name, padding to 4 bytes, the data, padding to 4
//! bytes. `TRAILER!!!` ends an archive; Linux accepts several archives back to back with zero
//! padding between them, and so does [`Archive::entries`]. Names are stored without a leading `/`
//! (often as `./name`); [`Archive::lookup`] normalises both sides and follows symbolic links
//! inside the archive, so `rdinit=/bin/sh` finds `bin/sh -> busybox`.
use alloc::string::String;
use alloc::vec::Vec;

const HEADER: usize = 110;
const TRAILER: &str = "TRAILER!!!";
/// File type bits of `mode` (`S_IFMT`), regular file and symbolic link.
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
/// Symbolic links followed in one lookup before giving up (Linux's `MAXSYMLINKS` is 40).
const MAX_LINKS: usize = 40;

/// Why an archive cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpioError {
    /// A member's header, name or data runs past the end, at this offset.
    Truncated(usize),
    /// No `070701`/`070702` magic at this offset.
    BadMagic(usize),
    /// A header field is not hexadecimal, at this offset.
    BadField(usize),
    /// A name that is not UTF-8 or not NUL-terminated, at this offset.
    BadName(usize),
}

impl core::fmt::Display for CpioError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated(at) => write!(f, "truncated member at offset {at}"),
            Self::BadMagic(at) => write!(f, "no cpio newc magic at offset {at}"),
            Self::BadField(at) => write!(f, "a header field is not hexadecimal at offset {at}"),
            Self::BadName(at) => write!(f, "a bad member name at offset {at}"),
        }
    }
}

/// One member of an archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Its name as stored (see [`normalise`]).
    pub name: &'a str,
    /// `st_mode`: type and permission bits.
    pub mode: u32,
    /// The file's bytes (a symbolic link's target).
    pub data: &'a [u8],
    /// The inode number in the archive: members with the same number and device and a link
    /// count above 1 are hard links of one file (`init/initramfs.c`'s `maybe_link`).
    pub ino: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Link count in the archive.
    pub nlink: u32,
    /// Modification time (seconds since 1970).
    pub mtime: u32,
    /// The device the file was on (major, minor): part of a hard link's identity.
    pub dev: (u32, u32),
    /// The device a character or block special file is (major, minor).
    pub rdev: (u32, u32),
}

impl Entry<'_> {
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }

    /// A symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }
}

/// Whether `bytes` starts like a newc archive.
pub fn is_cpio(bytes: &[u8]) -> bool {
    bytes.starts_with(b"070701") || bytes.starts_with(b"070702")
}

/// A path without `./` components, empty components or a leading `/`: how names are compared.
pub fn normalise(path: &str) -> String {
    let mut out = String::new();
    // The answer is never longer than the path: this fails only when the heap is full, and then
    // gives the empty path (messages use this; lookups use the fallible form).
    let _ = normalise_into(path, &mut out);
    out
}

/// The components of `path` that name something (not empty, not `.`).
fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|p| !p.is_empty() && *p != ".")
}

/// [`normalise`] into `out` (cleared first), growing it fallibly: an exhausted heap is an
/// error, not the allocation-failure panic.
fn normalise_into(path: &str, out: &mut String) -> Result<(), LookupError> {
    out.clear();
    out.try_reserve(path.len()).map_err(|_| LookupError::OutOfMemory)?;
    for part in components(path) {
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(part); // within the room reserved above
    }
    Ok(())
}

/// Whether the stored name `name` is the normalised path `want` (no allocation).
fn same_path(want: &str, name: &str) -> bool {
    components(name).eq(want.split('/').filter(|p| !p.is_empty()))
}

/// `dir/target`, normalised, with `..` components applied (never above the root).
fn resolve_dots(dir: &str, target: &str) -> Result<String, LookupError> {
    let oom = |_| LookupError::OutOfMemory;
    let mut parts: Vec<&str> = Vec::new();
    parts.try_reserve(components(dir).count() + components(target).count()).map_err(oom)?;
    for part in components(dir).chain(components(target)) {
        if part == ".." {
            parts.pop();
        } else {
            parts.push(part); // within the room reserved above
        }
    }
    let mut out = String::new();
    out.try_reserve(dir.len() + 1 + target.len()).map_err(oom)?;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(part);
    }
    Ok(out)
}

/// Why [`Archive::lookup`] found nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// The archive is malformed.
    Cpio(CpioError),
    /// No member has that name (after following links).
    NotFound(String),
    /// More than 40 links in a row.
    TooManyLinks,
    /// The heap could not hold the path being resolved (the only allocation of a lookup, made
    /// fallibly).
    OutOfMemory,
}

/// An archive held in memory.
#[derive(Clone, Copy, Debug)]
pub struct Archive<'a>(pub &'a [u8]);

impl<'a> Archive<'a> {
    /// The members in order; an error ends the iteration.
    pub fn entries(&self) -> Entries<'a> {
        Entries { bytes: self.0, at: 0, failed: false }
    }

    /// The regular files' names, normalised (for messages).
    pub fn file_names(&self) -> Vec<String> {
        self.entries().filter_map(Result::ok).filter(Entry::is_file).map(|e| normalise(e.name)).collect()
    }

    /// The member named `path` (absolute or not), following symbolic links (relative targets are
    /// resolved from the link's directory). A later member of the same name replaces an earlier
    /// one, as unpacking the archive would.
    ///
    /// It allocates only the path being resolved, fallibly ([`LookupError::OutOfMemory`]).
    ///
    /// # Errors
    /// A malformed archive, no such member, a loop of links, or no heap for the path.
    pub fn lookup(&self, path: &str) -> Result<Entry<'a>, LookupError> {
        let mut want = String::new();
        normalise_into(path, &mut want)?;
        for _ in 0..=MAX_LINKS {
            let mut found = None;
            for entry in self.entries() {
                let entry = entry.map_err(LookupError::Cpio)?;
                if same_path(&want, entry.name) {
                    found = Some(entry);
                }
            }
            let Some(entry) = found else { return Err(LookupError::NotFound(want)) };
            if !entry.is_symlink() {
                return Ok(entry);
            }
            let Ok(target) = core::str::from_utf8(entry.data) else {
                return Err(LookupError::NotFound(want));
            };
            want = if target.starts_with('/') {
                let mut next = String::new();
                normalise_into(target, &mut next)?;
                next
            } else {
                let dir = want.rsplit_once('/').map_or("", |(d, _)| d);
                resolve_dots(dir, target)?
            };
        }
        Err(LookupError::TooManyLinks)
    }
}

/// Iterator over an archive's members (see [`Archive::entries`]).
pub struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
    failed: bool,
}

fn hex_field(bytes: &[u8], at: usize, index: usize) -> Result<u32, CpioError> {
    let start = at + 6 + index * 8;
    let text = core::str::from_utf8(&bytes[start..start + 8]).map_err(|_| CpioError::BadField(at))?;
    u32::from_str_radix(text, 16).map_err(|_| CpioError::BadField(at))
}

impl<'a> Entries<'a> {
    fn member(&mut self) -> Option<Result<Entry<'a>, CpioError>> {
        loop {
            // Zero padding between concatenated archives (and after the last one).
            while self.at < self.bytes.len() && self.bytes[self.at] == 0 {
                self.at += 1;
            }
            if self.at >= self.bytes.len() {
                return None;
            }
            let at = self.at;
            let b = self.bytes;
            if b.len() - at < HEADER {
                return Some(Err(CpioError::Truncated(at)));
            }
            if !is_cpio(&b[at..]) {
                return Some(Err(CpioError::BadMagic(at)));
            }
            let mut fields = [0u32; 12];
            for (i, slot) in fields.iter_mut().enumerate() {
                match hex_field(b, at, i) {
                    Ok(v) => *slot = v,
                    Err(e) => return Some(Err(e)),
                }
            }
            let [ino, mode, uid, gid, nlink, mtime, size, devmajor, devminor, rdevmajor, rdevminor, namesize] =
                fields;
            let (size, namesize) = (size as usize, namesize as usize);
            let name_start = at + HEADER;
            let Some(name_end) = name_start.checked_add(namesize).filter(|&e| e <= b.len()) else {
                return Some(Err(CpioError::Truncated(at)));
            };
            if namesize == 0 || b[name_end - 1] != 0 {
                return Some(Err(CpioError::BadName(at)));
            }
            let Ok(name) = core::str::from_utf8(&b[name_start..name_end - 1]) else {
                return Some(Err(CpioError::BadName(at)));
            };
            let data_start = name_end.next_multiple_of(4);
            let Some(data_end) = data_start.checked_add(size).filter(|&e| e <= b.len()) else {
                return Some(Err(CpioError::Truncated(at)));
            };
            self.at = data_end.next_multiple_of(4);
            if name == TRAILER {
                continue; // another archive may follow
            }
            return Some(Ok(Entry {
                name,
                mode,
                data: &b[data_start..data_end],
                ino,
                uid,
                gid,
                nlink,
                mtime,
                dev: (devmajor, devminor),
                rdev: (rdevmajor, rdevminor),
            }));
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, CpioError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.member();
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// Builds a newc archive (the test side of the format, and what a tool packing an initramfs does).
pub fn build(members: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |name: &str, mode: u32, data: &[u8], ino: u32| {
        let header = alloc::format!(
            "070701{ino:08x}{mode:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while out.len() % 4 != 0 {
            out.push(0);
        }
        out.extend_from_slice(data);
        while out.len() % 4 != 0 {
            out.push(0);
        }
    };
    for (i, (name, mode, data)) in members.iter().enumerate() {
        put(name, *mode, data, i as u32 + 1);
    }
    put(TRAILER, 0, &[], 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const FILE: u32 = S_IFREG | 0o755;
    const LINK: u32 = S_IFLNK | 0o777;

    #[test]
    fn members_come_back_with_names_modes_and_data() {
        let a = build(&[("init", FILE, b"\x7fELF..."), ("dir/x", FILE, b""), ("odd", FILE, b"abcde")]);
        assert!(is_cpio(&a));
        assert_eq!(a.len() % 4, 0);
        let e: Vec<_> = Archive(&a).entries().collect::<Result<_, _>>().unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!((e[0].name, e[0].mode, e[0].data), ("init", FILE, &b"\x7fELF..."[..]));
        assert_eq!(e[1].data, b"");
        assert_eq!(e[2].data, b"abcde");
        assert!(e[2].is_file() && !e[2].is_symlink());
    }

    #[test]
    fn names_are_compared_without_leading_slash_or_dot_components() {
        let a = build(&[("./bin//busybox", FILE, b"bb")]);
        assert_eq!(Archive(&a).lookup("/bin/busybox").unwrap().data, b"bb");
        assert_eq!(Archive(&a).lookup("bin/./busybox").unwrap().data, b"bb");
        assert_eq!(Archive(&a).lookup("/bin/sh"), Err(LookupError::NotFound("bin/sh".into())));
        assert_eq!(Archive(&a).file_names(), vec!["bin/busybox"]);
    }

    #[test]
    fn symbolic_links_are_followed_relative_and_absolute() {
        let a = build(&[
            ("bin/busybox", FILE, b"bb"),
            ("bin/sh", LINK, b"busybox"),
            ("sbin/init", LINK, b"../bin/sh"),
            ("init", LINK, b"/sbin/init"),
        ]);
        for path in ["/bin/sh", "/sbin/init", "/init"] {
            assert_eq!(Archive(&a).lookup(path).unwrap().data, b"bb", "{path}");
        }
    }

    #[test]
    fn a_loop_of_links_is_an_error_not_a_hang() {
        let a = build(&[("a", LINK, b"b"), ("b", LINK, b"a")]);
        assert_eq!(Archive(&a).lookup("a"), Err(LookupError::TooManyLinks));
    }

    #[test]
    fn concatenated_archives_with_zero_padding_are_one_and_later_members_win() {
        let mut a = build(&[("x", FILE, b"first")]);
        a.extend_from_slice(&[0; 512]);
        a.extend(build(&[("x", FILE, b"second"), ("y", FILE, b"y")]));
        assert_eq!(Archive(&a).entries().count(), 3);
        assert_eq!(Archive(&a).lookup("x").unwrap().data, b"second");
    }

    #[test]
    fn every_truncation_of_an_archive_is_an_error_or_a_prefix_never_a_panic() {
        let a = build(&[("init", FILE, b"0123456789"), ("two", FILE, b"ab")]);
        for len in 0..a.len() {
            for e in Archive(&a[..len]).entries().flatten() {
                assert!(e.name == "init" || e.name == "two");
            }
        }
        assert_eq!(Archive(&a[..50]).entries().next(), Some(Err(CpioError::Truncated(0))));
    }

    #[test]
    fn bad_magic_bad_hex_and_bad_names_are_named() {
        let mut a = build(&[("init", FILE, b"x")]);
        assert!(Archive(b"not an archive at all, not even close; it keeps going for a while so the header length is reached..........").entries().next().unwrap().is_err());
        a[6 + 8] = b'z'; // the mode field
        assert_eq!(Archive(&a).entries().next(), Some(Err(CpioError::BadField(0))));
        let mut b = build(&[("init", FILE, b"x")]);
        b[HEADER + 4] = b'!'; // the name's NUL
        assert_eq!(Archive(&b).entries().next(), Some(Err(CpioError::BadName(0))));
        let mut c = build(&[("init", FILE, b"x")]);
        c[6 + 6 * 8..6 + 7 * 8].copy_from_slice(b"7fffffff"); // a huge file size
        assert_eq!(Archive(&c).entries().next(), Some(Err(CpioError::Truncated(0))));
    }
}
