//! The kernel's virtual file system, as logic the host can test (Linux `fs/namei.c`,
//! `fs/libfs.c`, `fs/ramfs/`, `init/initramfs.c`):
//! - [`node`]: what a file is to the VFS: the [`Inode`](node::Inode) trait every file system
//!   implements, [`Metadata`](node::Metadata), the kinds of node, directory entries, and the
//!   [`Contents`](node::Contents) behind a regular file;
//! - [`ramfs`]: the RAM file system the root and `/tmp` are (directories, regular files, symbolic
//!   links, FIFOs and device nodes, hard links), whose file contents come from the kernel (the
//!   page cache) through [`Contents`](node::Contents);
//! - [`mount`]: the mount table;
//! - [`namei`]: path lookup with Linux's rules: `.` and `..` (never above the root, across
//!   mounts), symbolic links (`ELOOP` after 40), `ENOTDIR`, `ENAMETOOLONG`, trailing slashes,
//!   `O_NOFOLLOW`-style last components;
//! - [`unpack`]: an initramfs (cpio newc) unpacked into a directory, every member checked, as
//!   Linux's `init/initramfs.c` does it;
//! - [`path`]: the text of a path (components, `PATH_MAX`, `NAME_MAX`).
//!
//! Errors are Linux's errno values, in Linux's order. Nothing here panics on any input, and
//! every allocation is fallible (`ENOMEM`).
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod mount;
pub mod namei;
pub mod node;
pub mod path;
pub mod ramfs;
pub mod unpack;

#[cfg(test)]
mod tests;
