//! Links the kernel with the workspace's `linker.ld` and records the version string.
//!
//! The link script aligns sections, guard pages and stacks to the build's page size, which the
//! granule features choose (`granule-16k`, `granule-64k`; 4 KiB otherwise): it is passed as the
//! symbol `KERNEL_PAGE_SIZE`, so one script serves the three granules.
use std::process::Command;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let script = format!("{dir}/../linker.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg=-T{script}");
        // A position-independent executable, so boot::kaslr can move it (with
        // `-C relocation-model=pie` in .cargo/config.toml): no dynamic linker; relocations may
        // patch .text (head.rs's literal pools), which is only ever written through the early
        // map; and every relocation also applied in the file, so the Image runs at its link
        // address without relocating itself (nokaslr, or no seed).
        println!("cargo:rustc-link-arg=-pie");
        println!("cargo:rustc-link-arg=--no-dynamic-linker");
        println!("cargo:rustc-link-arg=-znotext");
        println!("cargo:rustc-link-arg=--apply-dynamic-relocs");
        let page_size = if std::env::var_os("CARGO_FEATURE_GRANULE_64K").is_some() {
            65536
        } else if std::env::var_os("CARGO_FEATURE_GRANULE_16K").is_some() {
            16384
        } else {
            4096
        };
        println!("cargo:rustc-link-arg=--defsym=KERNEL_PAGE_SIZE={page_size}");
    }
    let describe = Command::new("git")
        .args(["describe", "--always", "--dirty", "--tags"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=KERNEL_GIT_DESCRIBE={describe}");
    println!("cargo:rerun-if-changed=../.git/HEAD");

    // The built-in user program: scripts/lib.sh builds userland first and names its ELF here.
    println!("cargo::rustc-check-cfg=cfg(has_userland)");
    println!("cargo:rerun-if-env-changed=USERLAND_ELF");
    if let Ok(path) = std::env::var("USERLAND_ELF") {
        if std::path::Path::new(&path).is_file() {
            println!("cargo:rerun-if-changed={path}");
            println!("cargo:rustc-env=USERLAND_ELF={path}");
            println!("cargo:rustc-cfg=has_userland");
        } else {
            println!("cargo:warning=USERLAND_ELF={path} is not a file; no built-in user program");
        }
    }
}
