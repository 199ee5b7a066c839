//! Links the kernel with the workspace's `linker.ld` and records the version string.
use std::process::Command;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let script = format!("{dir}/../linker.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg=-T{script}");
        println!("cargo:rustc-link-arg=--no-pie");
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
}
