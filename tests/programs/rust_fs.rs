//! rust-fs-test: the Rust standard library's files and processes (aarch64-unknown-linux-musl,
//! statically linked with rust-lld) on the kernel: std::fs in /tmp (create_dir_all, write, read,
//! read_dir, rename, metadata, permissions, remove_file, remove_dir_all, a File's seek and
//! set_len), std::env::current_exe, and std::process::Command of /busybox (output(), exit
//! status, stdin piped). Prints "ok - NAME" / "FAIL - NAME: why" per case and
//! "N passed, N failed" last; exits 1 when a case failed. The output is Linux 6.1's
//! (tests/linux-parity/rust-fs.out). Built by scripts/lib.sh (build_linux_programs) like
//! rust-std-test.
use std::fs;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};

const DIR: &str = "/tmp/rust-fs";

fn create_write_read() -> Result<(), String> {
    fs::create_dir_all(format!("{DIR}/sub/deeper")).map_err(|e| format!("create_dir_all: {e}"))?;
    fs::write(format!("{DIR}/a.txt"), b"alpha").map_err(|e| e.to_string())?;
    let text = fs::read_to_string(format!("{DIR}/a.txt")).map_err(|e| e.to_string())?;
    if text != "alpha" {
        return Err(format!("read back {text:?}"));
    }
    let mut f = fs::OpenOptions::new().read(true).write(true).open(format!("{DIR}/a.txt")).map_err(|e| e.to_string())?;
    f.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    f.write_all(b"-beta").map_err(|e| e.to_string())?;
    f.seek(SeekFrom::Start(2)).map_err(|e| e.to_string())?;
    let mut rest = String::new();
    f.read_to_string(&mut rest).map_err(|e| e.to_string())?;
    if rest != "pha-beta" {
        return Err(format!("after seek: {rest:?}"));
    }
    f.set_len(3).map_err(|e| e.to_string())?;
    if fs::read(format!("{DIR}/a.txt")).map_err(|e| e.to_string())? != b"alp" {
        return Err("set_len".into());
    }
    match fs::File::create_new(format!("{DIR}/a.txt")) {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        other => Err(format!("create_new over a file: {other:?}")),
    }
}

fn read_dir_and_metadata() -> Result<(), String> {
    for name in ["c", "b", "a"] {
        fs::write(format!("{DIR}/list/{name}"), name.repeat(3)).or_else(|_| {
            fs::create_dir_all(format!("{DIR}/list"))?;
            fs::write(format!("{DIR}/list/{name}"), name.repeat(3))
        })
        .map_err(|e| e.to_string())?;
    }
    fs::create_dir(format!("{DIR}/list/dir")).map_err(|e| e.to_string())?;
    let mut names: Vec<(String, bool)> = fs::read_dir(format!("{DIR}/list"))
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| (e.file_name().to_string_lossy().into_owned(), e.file_type().map(|t| t.is_dir()).unwrap_or(false))))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    names.sort();
    let want = [("a".to_string(), false), ("b".into(), false), ("c".into(), false), ("dir".into(), true)];
    if names != want {
        return Err(format!("read_dir: {names:?}"));
    }
    let m = fs::metadata(format!("{DIR}/list/b")).map_err(|e| e.to_string())?;
    if !m.is_file() || m.len() != 3 || m.nlink() != 1 || m.uid() != 0 {
        return Err(format!("metadata: len {} nlink {} uid {}", m.len(), m.nlink(), m.uid()));
    }
    let modified = m.modified().map_err(|e| e.to_string())?;
    if modified.elapsed().map(|d| d.as_secs() > 3600).unwrap_or(false) {
        return Err("modified more than an hour ago".into());
    }
    fs::set_permissions(format!("{DIR}/list/b"), fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    let mode = fs::metadata(format!("{DIR}/list/b")).map_err(|e| e.to_string())?.permissions().mode();
    if mode != 0o100600 {
        return Err(format!("mode {mode:o}"));
    }
    std::os::unix::fs::symlink("b", format!("{DIR}/list/link")).map_err(|e| e.to_string())?;
    let l = fs::symlink_metadata(format!("{DIR}/list/link")).map_err(|e| e.to_string())?;
    if !l.file_type().is_symlink() || fs::read_link(format!("{DIR}/list/link")).map_err(|e| e.to_string())?.to_str() != Some("b") {
        return Err("symlink".into());
    }
    let canon = fs::canonicalize(format!("{DIR}/list/../list/link")).map_err(|e| e.to_string())?;
    if canon.to_str() != Some("/tmp/rust-fs/list/b") {
        return Err(format!("canonicalize: {canon:?}"));
    }
    match fs::metadata(format!("{DIR}/missing")) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => Err(format!("a missing file: {other:?}")),
    }
}

fn rename_and_remove() -> Result<(), String> {
    fs::create_dir_all(format!("{DIR}/mv")).map_err(|e| e.to_string())?;
    fs::write(format!("{DIR}/mv/from"), b"moved").map_err(|e| e.to_string())?;
    fs::rename(format!("{DIR}/mv/from"), format!("{DIR}/mv/to")).map_err(|e| e.to_string())?;
    if fs::metadata(format!("{DIR}/mv/from")).is_ok() || fs::read(format!("{DIR}/mv/to")).map_err(|e| e.to_string())? != b"moved" {
        return Err("rename".into());
    }
    fs::copy(format!("{DIR}/mv/to"), format!("{DIR}/mv/copy")).map_err(|e| format!("copy: {e}"))?;
    if fs::read(format!("{DIR}/mv/copy")).map_err(|e| e.to_string())? != b"moved" {
        return Err("copy".into());
    }
    fs::remove_file(format!("{DIR}/mv/to")).map_err(|e| e.to_string())?;
    match fs::remove_dir(format!("{DIR}/mv")) {
        Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => {}
        other => return Err(format!("remove_dir of a non-empty directory: {other:?}")),
    }
    fs::remove_dir_all(DIR).map_err(|e| format!("remove_dir_all: {e}"))?;
    match fs::metadata(DIR) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => Err(format!("after remove_dir_all: {other:?}")),
    }
}

fn current_exe() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    if exe.to_str() != Some("/rust-fs-test") {
        return Err(format!("current_exe {exe:?}"));
    }
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    std::env::set_current_dir("/tmp").map_err(|e| e.to_string())?;
    let now = std::env::current_dir().map_err(|e| e.to_string())?;
    std::env::set_current_dir(&cwd).map_err(|e| e.to_string())?;
    if now.to_str() != Some("/tmp") { Err(format!("current_dir {now:?}")) } else { Ok(()) }
}

fn command_output() -> Result<(), String> {
    let out = Command::new("/busybox").args(["echo", "hello", "from rust"]).output().map_err(|e| e.to_string())?;
    if !out.status.success() || out.stdout != b"hello from rust\n" || !out.stderr.is_empty() {
        return Err(format!("echo: {out:?}"));
    }
    let status = Command::new("/busybox").args(["sh", "-c", "exit 7"]).status().map_err(|e| e.to_string())?;
    if status.code() != Some(7) {
        return Err(format!("exit status {status:?}"));
    }
    let mut child = Command::new("/busybox")
        .args(["tr", "a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child.stdin.take().unwrap().write_all(b"shout\n").map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.stdout != b"SHOUT\n" {
        return Err(format!("tr: {:?}", out.stdout));
    }
    let out = Command::new("/busybox").args(["sh", "-c", "echo $X-$Y"]).env_clear().env("X", "one").env("Y", "two").output().map_err(|e| e.to_string())?;
    if out.stdout != b"one-two\n" {
        return Err(format!("env: {:?}", out.stdout));
    }
    match Command::new("/no/such/program").output() {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => Err(format!("a missing program: {other:?}")),
    }
}

fn main() {
    let cases: [(&str, fn() -> Result<(), String>); 5] = [
        ("create_write_read", create_write_read),
        ("read_dir_and_metadata", read_dir_and_metadata),
        ("rename_and_remove", rename_and_remove),
        ("current_exe", current_exe),
        ("command_output", command_output),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, case) in cases {
        match case() {
            Ok(()) => {
                passed += 1;
                println!("ok - {name}");
            }
            Err(why) => {
                failed += 1;
                println!("FAIL - {name}: {why}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    std::process::exit(i32::from(failed != 0));
}
