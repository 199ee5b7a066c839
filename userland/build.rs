//! Build script for the user program:
//! - links with `link.ld`: a static Linux ELF executable at 0x400000 with one read-only, one
//!   read+execute and one read+write segment (no W+X), entry `_start`;
//! - checks that `src/abi.rs` (a copy, so the program never depends on the kernel-side crate
//!   building) still matches `mm/src/vm/abi.rs`, the source of truth: every constant defined in
//!   the copy must exist there with the same value, and the two `#[repr(C)]` structures must have
//!   the same fields in the same order. A difference fails the build.
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=link.ld");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/abi.rs");
    println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld");
    println!("cargo:rustc-link-arg-bins=-static");
    println!("cargo:rustc-link-arg-bins=--no-dynamic-linker");
    println!("cargo:rustc-link-arg-bins=-zmax-page-size=65536");
    println!("cargo:rustc-link-arg-bins=--build-id=none");

    let truth = Path::new(&dir).join("../mm/src/vm/abi.rs");
    println!("cargo:rerun-if-changed={}", truth.display());
    let copy = fs::read_to_string(Path::new(&dir).join("src/abi.rs")).expect("read src/abi.rs");
    let Ok(truth) = fs::read_to_string(&truth) else {
        println!("cargo:warning=mm/src/vm/abi.rs not found: cannot check userland/src/abi.rs against it");
        return;
    };
    let (mine, theirs) = (consts(&copy), consts(&truth));
    for (name, value) in &mine {
        match theirs.get(name) {
            Some(v) if v == value => {}
            Some(v) => panic!("userland/src/abi.rs: {name} = {value:#x}, but mm/src/vm/abi.rs says {v:#x}"),
            None => panic!("userland/src/abi.rs: {name} is not defined in mm/src/vm/abi.rs"),
        }
    }
    for s in ["CodeWindowInfo", "MmStats"] {
        let (a, b) = (fields(&copy, s), fields(&truth, s));
        assert_eq!(a, b, "userland/src/abi.rs: struct {s} differs from mm/src/vm/abi.rs");
    }
}

/// `pub const NAME: u64 = VALUE;` lines (decimal or 0x hex, `_` separators).
fn consts(src: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("pub const ") else { continue };
        let Some((name, rest)) = rest.split_once(':') else { continue };
        let Some((_, value)) = rest.split_once('=') else { continue };
        let v = value.trim().trim_end_matches(';').replace('_', "");
        let parsed = match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => v.parse(),
        };
        if let Ok(n) = parsed {
            out.insert(name.trim().to_string(), n);
        }
    }
    out
}

/// The `pub name: type` fields of `pub struct <name> { … }`, in order.
fn fields(src: &str, name: &str) -> Vec<String> {
    let head = format!("pub struct {name} {{");
    let Some(start) = src.find(&head) else { return vec![format!("<struct {name} missing>")] };
    let body = &src[start + head.len()..];
    let body = &body[..body.find('}').unwrap_or(body.len())];
    body.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub "))
        .map(|l| l.trim_end_matches(',').split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}
