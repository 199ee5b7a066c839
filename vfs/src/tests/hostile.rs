//! Bad input: hostile paths given to the walk and hostile initramfs archives given to the
//! unpacker. Each must end in a clear error (Linux's errno, or the archive's defect and where it
//! is) and nothing else: no panic, no member outside the root, no half-made node left behind.
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use initramfs::cpio::CpioError;
use linux_abi::Errno;
use linux_abi::fcntl::PATH_MAX;

use super::{NOW, World, archive, read_all};
use crate::node::{FileType, same};
use crate::unpack::{Report, unpack};

// ---- paths ------------------------------------------------------------------------------------

#[test]
fn path_lengths_stop_at_path_max_and_name_max() {
    let w = World::new();
    w.mkdir("/d");
    // 4095 bytes (PATH_MAX with its NUL) resolve; 4096 are ENAMETOOLONG before any lookup.
    let mut ok = String::from("/d");
    while ok.len() + 2 < PATH_MAX {
        ok.push_str("/.");
    }
    while ok.len() < PATH_MAX - 1 {
        ok.push('/');
    }
    assert_eq!(ok.len(), PATH_MAX - 1);
    assert!(w.resolve(&ok, true).is_ok());
    ok.push('/');
    assert_eq!(w.resolve(&ok, true).err(), Some(Errno::ENAMETOOLONG));
    // A 255-byte component is a name; 256 bytes are too long, existing or not.
    let name = "n".repeat(255);
    assert_eq!(w.resolve(&format!("/{name}"), true).err(), Some(Errno::ENOENT));
    assert_eq!(w.resolve(&format!("/{name}n"), true).err(), Some(Errno::ENAMETOOLONG));
    assert_eq!(
        w.resolve(&format!("/missing/{name}n"), true).err(),
        Some(Errno::ENAMETOOLONG),
        "checked first"
    );
}

#[test]
fn links_that_grow_the_path_without_end_are_enametoolong_or_eloop() {
    let w = World::new();
    // Each link doubles what is left to walk: the spliced text outgrows twice PATH_MAX.
    let long = "x/".repeat(1000);
    w.mkdir("/x");
    w.symlink("/x/x", &format!("{long}."));
    assert_eq!(w.resolve("/x/x/x/x", true).err(), Some(Errno::ENAMETOOLONG));
    // A link to its own directory, walked through 41 times.
    w.symlink("/x/self", ".");
    let deep = format!("/x{}", "/self".repeat(41));
    assert_eq!(w.resolve(&deep, true).err(), Some(Errno::ELOOP));
    let fine = format!("/x{}", "/self".repeat(40));
    assert!(w.resolve(&fine, true).is_ok(), "40 links");
    // Two links naming each other, at the end and in the middle.
    w.symlink("/a", "/b");
    w.symlink("/b", "a");
    assert_eq!(w.resolve("/a", true).err(), Some(Errno::ELOOP));
    assert_eq!(w.resolve("/b/x", true).err(), Some(Errno::ELOOP));
    assert_eq!(w.resolve("/a", false).unwrap().metadata().kind, FileType::Symlink, "lstat sees the link");
    // An empty target names nothing (Linux: ENOENT).
    w.symlink("/empty", "");
    assert_eq!(w.resolve("/empty", true).err(), Some(Errno::ENOENT));
    assert_eq!(w.resolve("/empty/x", true).err(), Some(Errno::ENOENT));
}

#[test]
fn dotdot_and_links_never_climb_above_the_root() {
    let w = World::new();
    let d = w.mkdir("/d");
    w.symlink("/d/up", "../../../../..");
    w.symlink("/d/abs", "/../../d/../..");
    assert!(same(&w.resolve("/d/up", true).unwrap(), &w.root));
    assert!(same(&w.resolve("/d/abs", true).unwrap(), &w.root));
    assert!(same(&w.resolve("/d/up/d", true).unwrap(), &d));
    // Bytes that are no UTF-8, and NUL-free oddities, are names like any other.
    let odd = w.root.create(b"\xff\xfe", crate::node::NewNode::File, 0o644, super::ROOT).unwrap();
    assert!(same(&w.walker().resolve(&w.root, b"/\xff\xfe", true).unwrap(), &odd));
    assert_eq!(w.resolve("/\u{1}", true).err(), Some(Errno::ENOENT));
}

// ---- archives ---------------------------------------------------------------------------------

fn unpacked(bytes: &[u8]) -> (World, Report) {
    let w = World::new();
    let report = unpack(bytes, &w.root, &w.mounts, NOW);
    (w, report)
}

/// A member header with every field given (the fields the tests break).
fn header(ino: u32, mode: u32, nlink: u32, size: u32, namesize: u32) -> String {
    format!(
        "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{size:08x}{:08x}{:08x}{:08x}{:08x}{namesize:08x}{:08x}",
        0, 0, 0, 0, 0, 0, 0, 0
    )
}

#[test]
fn a_truncated_archive_keeps_the_members_before_the_damage() {
    let whole =
        archive(&[("a", 0o100_644, b"aaaa"), ("dir", 0o040_755, b""), ("dir/b", 0o100_644, b"bbbbbbbb")]);
    // Cut at every byte: never a panic; the members that were whole are there.
    for cut in 0..whole.len() {
        let (w, report) = unpacked(&whole[..cut]);
        if cut == 0 {
            assert_eq!(report, Report::default());
            continue;
        }
        if report.malformed.is_some() {
            assert!(matches!(report.malformed, Some(CpioError::Truncated(_))), "cut {cut}: {report:?}");
        }
        assert_eq!(report.skipped, 0, "cut {cut}");
        if let Ok(a) = w.resolve("/a", true) {
            assert_eq!(read_all(&a), b"aaaa", "a member is made whole or not at all");
        }
    }
    // Cut inside the first header: nothing made, the defect at offset 0.
    let (w, report) = unpacked(&whole[..60]);
    assert_eq!(report.malformed, Some(CpioError::Truncated(0)));
    assert_eq!(report.made, 0);
    assert_eq!(w.resolve("/a", true).err(), Some(Errno::ENOENT));
}

#[test]
fn a_huge_size_is_a_truncated_member_not_an_allocation() {
    let mut bytes = header(1, 0o100_644, 1, u32::MAX, 2).into_bytes();
    bytes.extend_from_slice(b"f\0");
    bytes.extend_from_slice(b"tiny");
    let (w, report) = unpacked(&bytes);
    assert_eq!(report.malformed, Some(CpioError::Truncated(0)));
    assert_eq!(w.resolve("/f", true).err(), Some(Errno::ENOENT));
    // A name size past the end, too.
    let mut bytes = header(1, 0o100_644, 1, 0, u32::MAX).into_bytes();
    bytes.extend_from_slice(b"f\0\0\0");
    assert_eq!(unpacked(&bytes).1.malformed, Some(CpioError::Truncated(0)));
}

#[test]
fn a_name_without_its_terminator_or_not_hex_or_no_magic_is_refused() {
    // namesize 1 covers "f" but not its NUL.
    let mut bytes = header(1, 0o100_644, 1, 0, 1).into_bytes();
    bytes.extend_from_slice(b"f\0\0\0");
    assert_eq!(unpacked(&bytes).1.malformed, Some(CpioError::BadName(0)));
    // namesize 0.
    let mut bytes = header(1, 0o100_644, 1, 0, 0).into_bytes();
    bytes.extend_from_slice(b"\0\0");
    assert_eq!(unpacked(&bytes).1.malformed, Some(CpioError::BadName(0)));
    // A field that is not hexadecimal, after a good member: that member stays.
    let mut bytes = archive(&[("good", 0o100_644, b"g")]);
    let trailer = bytes.len() - 124; // the TRAILER!!! member build() appends
    bytes.truncate(trailer);
    let at = bytes.len();
    let mut bad = header(1, 0o100_644, 1, 0, 2);
    bad.replace_range(14..22, "zzzzzzzz");
    bytes.extend_from_slice(bad.as_bytes());
    bytes.extend_from_slice(b"x\0\0\0");
    let (w, report) = unpacked(&bytes);
    assert_eq!(report.malformed, Some(CpioError::BadField(at)));
    assert_eq!(report.made, 1);
    assert!(w.resolve("/good", true).is_ok());
    // No magic at all.
    assert_eq!(unpacked(b"070707 an old binary cpio header, not newc............................................................................").1.malformed, Some(CpioError::BadMagic(0)));
}

#[test]
fn members_that_escape_or_loop_are_contained_or_skipped_with_their_errno() {
    let (w, report) = unpacked(&archive(&[
        ("../../../up", 0o100_644, b"u"),
        ("/../../abs", 0o100_644, b"a"),
        ("missing/../x", 0o100_644, b"m"),
        ("d", 0o040_755, b""),
        ("d/out", 0o120_777, b"../../../.."),
        ("d/out/through", 0o100_644, b"t"),
        ("a", 0o120_777, b"b"),
        ("b", 0o120_777, b"a"),
        ("a/x", 0o100_644, b"x"),
    ]));
    assert_eq!(read_all(&w.resolve("/up", true).unwrap()), b"u", "`..` stops at the root");
    assert_eq!(read_all(&w.resolve("/abs", true).unwrap()), b"a");
    assert_eq!(read_all(&w.resolve("/through", true).unwrap()), b"t", "a link out lands in the root");
    assert_eq!(report.skipped, 2, "`..` after a missing directory, and a/x through the loop");
    assert_eq!(report.first_error, Some(Errno::ENOENT));
    assert_eq!(w.resolve("/x", true).err(), Some(Errno::ENOENT));
    assert_eq!(w.resolve("/a", true).err(), Some(Errno::ELOOP));
}

#[test]
fn a_name_given_twice_is_replaced_as_linux_replaces_it() {
    let (w, report) = unpacked(&archive(&[
        ("f", 0o100_644, b"first"),
        ("f", 0o100_600, b"second"),
        ("d", 0o040_700, b""),
        ("d/inner", 0o100_644, b""),
        ("d", 0o040_755, b""),
        ("d", 0o100_644, b"a file over a full directory"),
        ("l", 0o120_777, b"f"),
        ("l", 0o040_755, b""),
    ]));
    let f = w.resolve("/f", true).unwrap();
    assert_eq!((read_all(&f), f.metadata().perm), (b"second".to_vec(), 0o600));
    let d = w.resolve("/d", true).unwrap();
    assert_eq!(
        (d.metadata().kind, d.metadata().perm),
        (FileType::Directory, 0o755),
        "a directory again: kept, its mode set"
    );
    assert!(w.resolve("/d/inner", true).is_ok());
    assert_eq!(
        w.resolve("/l", false).unwrap().metadata().kind,
        FileType::Directory,
        "a directory over a link"
    );
    assert_eq!(report.skipped, 1);
    assert_eq!(report.first_error, Some(Errno::ENOTEMPTY));
    assert_eq!(w.root.metadata().nlink, 4, "/, d and l: no link counted twice");
}

#[test]
fn names_and_targets_past_linux_limits_are_enametoolong() {
    let long_name = "n".repeat(256);
    let deep = "d/".repeat(2100);
    let target = "t".repeat(PATH_MAX);
    let (w, report) = unpacked(&archive(&[
        (long_name.as_str(), 0o100_644, b""),
        (deep.as_str(), 0o040_755, b""),
        ("l", 0o120_777, target.as_bytes()),
        ("ok", 0o100_644, b"ok"),
    ]));
    assert_eq!(report.skipped, 3);
    assert_eq!(report.first_error, Some(Errno::ENAMETOOLONG));
    assert_eq!(w.resolve("/l", false).err(), Some(Errno::ENOENT), "no link with an overlong target");
    assert!(w.resolve("/ok", true).is_ok());
}

#[test]
fn hard_links_with_hostile_numbers_stay_consistent() {
    // Members sharing (ino, dev) with nlink 2: the second links to the first; a directory never
    // takes part, and a link to a kind other than the first's is still a link of the first.
    let member = |ino: u32, mode: u32, name: &str, data: &[u8]| {
        let mut b = header(ino, mode, 2, data.len() as u32, name.len() as u32 + 1).into_bytes();
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        while !b.len().is_multiple_of(4) {
            b.push(0);
        }
        b.extend_from_slice(data);
        while !b.len().is_multiple_of(4) {
            b.push(0);
        }
        b
    };
    let mut bytes: Vec<u8> = Vec::new();
    bytes.extend(member(7, 0o100_644, "one", b"data"));
    bytes.extend(member(7, 0o100_644, "two", b""));
    bytes.extend(member(8, 0o040_755, "dir", b""));
    bytes.extend(member(8, 0o040_755, "dir2", b""));
    bytes.extend(member(7, 0o120_777, "three", b"x"));
    let (w, report) = unpacked(&bytes);
    assert!(report.malformed.is_none());
    let one = w.resolve("/one", true).unwrap();
    assert!(same(&one, &w.resolve("/two", true).unwrap()));
    assert!(same(&one, &w.resolve("/three", false).unwrap()));
    assert_eq!(one.metadata().nlink, 3);
    assert_eq!(read_all(&one), b"data");
    let (dir, dir2) = (w.resolve("/dir", true).unwrap(), w.resolve("/dir2", true).unwrap());
    assert!(!same(&dir, &dir2), "directories are never hard links");
    assert_eq!(report.skipped, 0);
}

#[test]
fn an_archive_of_random_members_never_panics_and_stays_under_the_root() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let parts = ["a", "b", "..", ".", "", "/", "l", "d"];
    let modes = [0o100_644, 0o040_755, 0o120_777, 0o010_644, 0o020_644, 0o140_644, 0o170_644];
    for _ in 0..300 {
        let mut names: Vec<String> = Vec::new();
        let mut members: Vec<(usize, u32, Vec<u8>)> = Vec::new();
        for _ in 0..12 {
            let mut name = String::new();
            for _ in 0..(next() % 4 + 1) {
                name.push_str(parts[(next() % parts.len() as u64) as usize]);
                name.push('/');
            }
            name.pop();
            names.push(name);
            let mode = modes[(next() % modes.len() as u64) as usize];
            let data = if mode == 0o120_777 {
                parts[(next() % 8) as usize].repeat(2).into_bytes()
            } else {
                b"x".to_vec()
            };
            members.push((names.len() - 1, mode, data));
        }
        let list: Vec<(&str, u32, &[u8])> =
            members.iter().map(|(i, m, d)| (names[*i].as_str(), *m, d.as_slice())).collect();
        let (w, report) = unpacked(&archive(&list));
        assert!(report.malformed.is_none());
        assert_eq!(report.made + report.skipped, 12);
        // Whatever was made, `..` of the root is the root.
        assert!(same(&w.resolve("/..", true).unwrap(), &w.root));
    }
}
