//! The text of a path, as Linux reads it: `/`-separated components, empty ones ignored
//! (`a//b` is `a/b`), at most `PATH_MAX` bytes with the terminator and `NAME_MAX` bytes a
//! component (`ENAMETOOLONG`), and whether it ends in a slash (then the last component must be a
//! directory).
use linux_abi::Errno;
use linux_abi::fcntl::{NAME_MAX, PATH_MAX};

/// A path's components in order, without empty ones (`.` and `..` included: the walk gives them
/// their meaning).
pub fn components(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

/// Whether `path` is absolute.
pub fn is_absolute(path: &[u8]) -> bool {
    path.first() == Some(&b'/')
}

/// Whether `path` ends in a slash after a component (`a/`, `a/.` is not).
pub fn trailing_slash(path: &[u8]) -> bool {
    path.len() > 1 && path.last() == Some(&b'/')
}

/// Linux's checks on a path given to a system call: not empty (`ENOENT`), shorter than
/// `PATH_MAX` (`ENAMETOOLONG`; the reader of user memory already stops there), no component
/// longer than `NAME_MAX` (`ENAMETOOLONG`).
///
/// # Errors
/// As above.
pub fn check(path: &[u8]) -> Result<(), Errno> {
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    if path.len() >= PATH_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if components(path).any(|c| c.len() > NAME_MAX) {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// Whether `name` can be created in a directory: not `.` or `..` (Linux: `EEXIST` for those on
/// `mkdir` and `EISDIR`/`EEXIST` elsewhere; the caller picks), no slash, not empty.
pub fn is_plain_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/')
}
