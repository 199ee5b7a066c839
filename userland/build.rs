//! Build script for the user program: it links with `link.ld`, a static Linux ELF executable at
//! 0x400000 with one read-only, one read+execute and one read+write segment (no W+X), entry
//! `_start`.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=link.ld");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld");
    println!("cargo:rustc-link-arg-bins=-static");
    println!("cargo:rustc-link-arg-bins=--no-dynamic-linker");
    println!("cargo:rustc-link-arg-bins=-zmax-page-size=65536");
    println!("cargo:rustc-link-arg-bins=--build-id=none");
}
