# Shared by scripts/run, scripts/test and scripts/bench. Source it; do not run it.
#
# Everything a fresh Debian 12 machine lacks is installed here, and said out loud:
# - the Rust toolchain pinned by rust-toolchain.toml, its two arm64 targets and llvm-tools
#   (rustup installs them on first use of the pinned channel): the kernel is built for
#   aarch64-unknown-none-softfloat (it never touches the FP/SIMD registers, which stay the
#   program's while the kernel runs, as Linux's -mgeneral-regs-only), the EL0 demo for
#   aarch64-unknown-none;
# - QEMU (qemu-system-arm, Debian's package) when running as root; otherwise a clear message.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The 4 KiB images (scripts that source this file use it; granule_images gives the others').
# shellcheck disable=SC2034
IMAGES="$ROOT/target/images"
TARGET=aarch64-unknown-none-softfloat
USER_TARGET=aarch64-unknown-none

say() { printf '%s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

ensure_rust() {
    command -v rustup >/dev/null || die "rustup not found: install it from https://rustup.rs (the pinned toolchain and target are then fetched automatically)"
    cd "$ROOT"
    local channel
    channel="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)"
    if ! rustup run "$channel" rustc --version >/dev/null 2>&1; then
        say "setup: installing Rust $channel (pinned in rust-toolchain.toml)"
        rustup toolchain install "$channel" --profile minimal >&2
    fi
    local target
    for target in "$TARGET" "$USER_TARGET"; do
        if ! rustup target list --toolchain "$channel" --installed | grep -qx "$target"; then
            say "setup: adding the Rust target $target"
            rustup target add --toolchain "$channel" "$target" >&2
        fi
    done
    local comp
    for comp in rustfmt clippy llvm-tools; do
        if ! rustup component list --toolchain "$channel" --installed | grep -q "^$comp"; then
            say "setup: adding the Rust component $comp"
            rustup component add --toolchain "$channel" "$comp" >&2
        fi
    done
    SYSROOT="$(rustup run "$channel" rustc --print sysroot)"
    OBJCOPY="$(find "$SYSROOT/lib/rustlib" -name llvm-objcopy -type f | head -n1)"
    [ -x "$OBJCOPY" ] || die "llvm-objcopy not found in $SYSROOT (rustup component add llvm-tools)"
}

apt_install() {
    # apt_install PACKAGE...: installs Debian packages, refreshing the package lists only if needed.
    if [ "$(id -u)" != 0 ]; then
        die "missing $*: run 'sudo apt-get install -y $*' (or run this script as root and it will)"
    fi
    say "setup: installing $* from Debian's packages"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/tmp/apt-install.log 2>&1; then
        say "setup: apt-get install failed; refreshing the package lists and trying again"
        apt-get update -q >/tmp/apt-update.log 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/tmp/apt-install.log 2>&1 \
            || { tail -n 20 /tmp/apt-install.log >&2; die "could not install $*"; }
    fi
}

ensure_qemu() {
    command -v qemu-system-aarch64 >/dev/null || apt_install qemu-system-arm
}

# ensure_qemu_backports: sets QEMU_BACKPORTS to a qemu-system-aarch64 from Debian's
# bookworm-backports (QEMU 10) and QEMU_BACKPORTS_DATA to its firmware directory (for -L),
# unpacked under target/qemu-backports/ and never installed: the suite's QEMU stays the system's
# 7.2, whose MTE tag storage lets granules i and i+2 of a page share one tag, which breaks
# glibc's tagged malloc on any kernel; only the cases that need working tags run on this one.
# apt runs with a sources list, state and cache of its own (under the same directory), so the
# system's apt configuration and lists are not touched; no root is needed. $QEMU_BACKPORTS is a
# wrapper script that runs the unpacked binary with -L for its firmware, QEMU_MODULE_DIR at its
# own modules and -audio none: probing for a sound backend would load the system's 7.2 audio
# modules, which it refuses ("Only modules from the same build can be loaded") and then aborts.
ensure_qemu_backports() {
    local dir="$ROOT/target/qemu-backports"
    QEMU_BACKPORTS="$dir/qemu-system-aarch64"
    QEMU_BACKPORTS_DATA="$dir/root/usr/share/qemu"
    [ -x "$QEMU_BACKPORTS" ] && return 0
    say "setup: downloading qemu-system-arm from Debian's bookworm-backports into $dir (not installed; the suite keeps the system QEMU)"
    local apt="$dir/apt"
    rm -rf "$dir"; mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/parts" "$dir/debs" "$dir/root"
    cat >"$apt/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main
EOF
    local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/parts"
        -o "Dir::State=$apt" -o "Dir::State::lists=$apt/lists" -o "Dir::State::status=/var/lib/dpkg/status"
        -o "Dir::Cache=$apt" -o "Dir::Cache::archives=$apt/archives" -o "APT::Architectures::=$(dpkg --print-architecture)"
        -o "Debug::NoLocking=1")
    apt-get -q "${opts[@]}" update >"$dir/apt-update.log" 2>&1 \
        || { tail -n 5 "$dir/apt-update.log" >&2; die "apt-get update (bookworm-backports) failed"; }
    local pkg
    for pkg in qemu-system-arm qemu-system-common qemu-system-data; do
        (cd "$dir/debs" && apt-get -q "${opts[@]}" download "$pkg/bookworm-backports" >>"$dir/apt-download.log" 2>&1) \
            || { tail -n 5 "$dir/apt-download.log" >&2; die "could not download $pkg from bookworm-backports"; }
    done
    local deb
    for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
    local bin="$dir/root/usr/bin/qemu-system-aarch64" missing
    # Every library it links is bookworm's (checked with ldd for 10.0.2+ds-2+deb13u1~bpo12+1);
    # a later backport that needs one bookworm lacks stops here, by name.
    missing=$(ldd "$bin" | awk '/not found/ {print $1}' | tr '\n' ' ')
    [ -z "$missing" ] || die "QEMU from bookworm-backports needs libraries this system lacks: $missing"
    # The wrapper finds the unpacked tree beside itself, so target/ may be copied elsewhere.
    local moddir
    moddir=$(cd "$dir/root" && ls -d usr/lib/*/qemu | head -n1)
    cat >"$QEMU_BACKPORTS.tmp" <<EOF
#!/bin/sh
here="\$(cd "\$(dirname "\$0")" && pwd)/root"
QEMU_MODULE_DIR="\$here/$moddir" exec "\$here/usr/bin/qemu-system-aarch64" -L "\$here/usr/share/qemu" -audio none "\$@"
EOF
    chmod +x "$QEMU_BACKPORTS.tmp"
    "$QEMU_BACKPORTS.tmp" --version >/dev/null || die "QEMU from bookworm-backports does not run (see ldd $bin)"
    mv "$QEMU_BACKPORTS.tmp" "$QEMU_BACKPORTS"
    rm -rf "$apt"
    say "setup: $("$QEMU_BACKPORTS" --version | head -n1) at $QEMU_BACKPORTS"
}

# ensure_cross_gcc: Debian's cross compiler and glibc for arm64 (the C test programs are built
# with it as unmodified static Linux programs).
ensure_cross_gcc() {
    command -v aarch64-linux-gnu-gcc >/dev/null && [ -d /usr/aarch64-linux-gnu/lib ] \
        || apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross
}

# build_c_program SOURCE OUTPUT: a static arm64 Linux executable from a C test program.
build_c_program() {
    aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -o "$2" "$1" -lpthread
}

# build_linux_programs DIR: the static Linux programs of the suite in DIR, and DIR/initramfs.cpio
# holding them all: abi-test, signals, fork-test, maps-test, memfd-test, lazyfree-test,
# failslab-test, files-test, events-test, restart-test, growsdown-test, shm-test, sockets-test and
# hardening-test (glibc,
# Debian's cross compiler), rust-std-test and rust-fs-test (Rust std for
# aarch64-unknown-linux-musl, linked by rust-lld), go-test (Go's standard library, Debian's
# golang-go, CGO_ENABLED=0, offline), Debian's busybox-static, bash-static and zsh-static (as
# /busybox, /bash and /zsh), and parity-init (the init of the Linux reference runs,
# tests/programs/parity-init.c).
build_linux_programs() {
    local dir="$1"
    ensure_cross_gcc
    command -v go >/dev/null || apt_install golang-go
    source "$ROOT/scripts/boards.sh"
    ensure_arm64_arch
    apt_fetch busybox-static:arm64 "$BOARDS/busybox-static"
    apt_fetch bash-static:arm64 "$BOARDS/bash-static"
    apt_fetch zsh-static:arm64 "$BOARDS/zsh-static"
    apt_fetch musl:arm64 "$BOARDS/musl"
    apt_fetch musl-dev:arm64 "$BOARDS/musl-dev"
    rm -rf "$dir"; mkdir -p "$dir"
    aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$dir/abi-test" "$ROOT/tests/programs/abi-test.c"
    build_c_program "$ROOT/tests/programs/signals.c" "$dir/signals"
    build_c_program "$ROOT/tests/programs/parity-init.c" "$dir/parity-init"
    build_c_program "$ROOT/tests/programs/fork.c" "$dir/fork-test"
    build_c_program "$ROOT/tests/programs/maps.c" "$dir/maps-test"
    # aslr.c twice: the measuring parent (static) and the child it execs (a static PIE).
    aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -o "$dir/aslr-test" "$ROOT/tests/programs/aslr.c" -lm
    aarch64-linux-gnu-gcc -static-pie -O2 -Wall -Wextra -Werror -o "$dir/aslr-child" "$ROOT/tests/programs/aslr.c" -lm
    build_c_program "$ROOT/tests/programs/memfd.c" "$dir/memfd-test"
    build_c_program "$ROOT/tests/programs/lazyfree.c" "$dir/lazyfree-test"
    build_c_program "$ROOT/tests/programs/failslab.c" "$dir/failslab-test"
    local prog
    for prog in files events restart growsdown shm sockets; do
        build_c_program "$ROOT/tests/programs/$prog.c" "$dir/$prog-test"
    done
    # Built with return-address signing (PACIASP/AUTIASP) in every function of its own.
    aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -mbranch-protection=standard \
        -o "$dir/hardening-test" "$ROOT/tests/programs/hardening.c"
    # Freestanding, so that every object is BTI-marked and the program carries the BTI property.
    aarch64-linux-gnu-gcc -static -nostdlib -ffreestanding -O2 -Wall -Wextra -Werror -mbranch-protection=standard \
        -o "$dir/bti-test" "$ROOT/tests/programs/bti.c"
    # With the memory-tagging instructions (IRG, STG, LDG) for its PROT_MTE cases.
    aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -march=armv8.5-a+memtag \
        -o "$dir/mte-test" "$ROOT/tests/programs/mte.c"
    cp "$BOARDS/busybox-static/bin/busybox" "$dir/busybox"
    cp "$BOARDS/bash-static/bin/bash-static" "$dir/bash"
    cp "$BOARDS/zsh-static/bin/zsh-static" "$dir/zsh"
    rustup target list --installed | grep -qx aarch64-unknown-linux-musl || rustup target add aarch64-unknown-linux-musl
    local rs
    for rs in rust_std:rust-std-test rust_fs:rust-fs-test; do
        rustc --edition 2024 --target aarch64-unknown-linux-musl -C opt-level=2 -C linker=rust-lld \
            -C linker-flavor=ld.lld -o "$dir/${rs#*:}" "$ROOT/tests/programs/${rs%%:*}.rs"
    done
    # Only the standard library: GOPROXY=off makes a module download an error, not a fetch.
    (cd "$ROOT/tests/programs/go" && CGO_ENABLED=0 GOOS=linux GOARCH=arm64 GOPROXY=off GOFLAGS=-mod=mod \
        go build -trimpath -o "$dir/go-test" .)
    # Dynamically linked: the kernel loads its interpreter, which maps glibc's libraries from /lib
    # (the cross toolchain's copies of Debian's libc6:arm64 files).
    aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -o "$dir/dynamic-test" "$ROOT/tests/programs/dynamic.c"
    local lib=/usr/aarch64-linux-gnu/lib
    # Dynamically linked against Debian's musl:arm64, whose libc.so is also its loader.
    local musl="$BOARDS/musl/lib/aarch64-linux-musl/libc.so" crt="$BOARDS/musl-dev/usr/lib/aarch64-linux-musl"
    aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -nostdinc -isystem "$BOARDS/musl-dev/usr/include/aarch64-linux-musl" \
        -isystem "$(aarch64-linux-gnu-gcc -print-file-name=include)" -fPIE -pie -nostdlib -o "$dir/dynamic-musl-test" \
        "$crt/Scrt1.o" "$crt/crti.o" "$ROOT/tests/programs/dynamic-musl.c" -L "${musl%/*}" -lc \
        "$(aarch64-linux-gnu-gcc -print-libgcc-file-name)" "$crt/crtn.o" -Wl,-dynamic-linker,/lib/ld-musl-aarch64.so.1
    make_initramfs "$dir/initramfs.cpio" "$dir/dynamic-test" "lib/ld-linux-aarch64.so.1=$lib/ld-linux-aarch64.so.1" \
        "lib/libc.so.6=$lib/libc.so.6" "lib/libm.so.6=$lib/libm.so.6" "$dir/dynamic-musl-test" \
        "lib/ld-musl-aarch64.so.1=$musl" "$dir/abi-test" "$dir/signals" "$dir/parity-init" "$dir/fork-test" "$dir/maps-test" "$dir/memfd-test" "$dir/busybox" \
        "$dir/rust-std-test" "$dir/failslab-test" "$dir/lazyfree-test" "$dir/files-test" "$dir/events-test" "$dir/restart-test" \
        "$dir/growsdown-test" "$dir/shm-test" "$dir/sockets-test" "$dir/rust-fs-test" "$dir/go-test" "$dir/bash" "$dir/zsh" "$dir/hardening-test" "$dir/bti-test" "$dir/aslr-test" "$dir/aslr-child" "$dir/mte-test"
}

# granule_images GRANULE: the directory build_images puts that granule's images in:
# target/images for 4k (the default everywhere), target/images-16k and target/images-64k.
granule_images() {
    case "$1" in
        4k) echo "$ROOT/target/images" ;;
        16k|64k) echo "$ROOT/target/images-$1" ;;
        *) die "unknown granule '$1' (4k, 16k or 64k)" ;;
    esac
}

# granule_page_size GRANULE: the page size in bytes (4096, 16384, 65536).
granule_page_size() {
    case "$1" in 4k) echo 4096 ;; 16k) echo 16384 ;; 64k) echo 65536 ;; *) die "unknown granule '$1' (4k, 16k or 64k)" ;; esac
}

# build_images [GRANULE [lpa2]]: the kernel (run image) and the test image for the translation
# granule GRANULE (4k, 16k or 64k; default 4k: the kernel features granule-16k/granule-64k), as
# ELF with symbols and raw Image, in $(granule_images GRANULE):
#   kernel.elf, Image          the kernel scripts/run boots
#   kernel-test.elf, Image-test the test image scripts/test boots
#   userland.elf               the user program (the same for every granule)
# With lpa2 (4k or 16k only): the same images built with FEAT_LPA2 (the kernel feature lpa2:
# 52-bit addresses, TCR_EL1.DS), named kernel-lpa2.elf, Image-lpa2, kernel-test-lpa2.elf and
# Image-test-lpa2, in the same directory.
build_images() {
    local granule="${1:-4k}" variant="${2:-}"
    build_userland "$granule"
    local features suffix
    features="$(kernel_features "$granule" "$variant")"; suffix="${variant:+-$variant}"
    say "build: kernel ($granule pages${variant:+, $variant})"
    build_kernel "$features" "$(granule_images "$granule")/kernel$suffix.elf"
    build_test_kernel "$granule" "$variant"
}

# build_test_image GRANULE [lpa2]: the test image alone (kernel-test[-lpa2].elf and
# Image-test[-lpa2] in $(granule_images GRANULE)), for the test cases that need no run image.
# The user program is built first, as for build_images: a userland.elf left in the directory by
# an earlier build may be stale.
build_test_image() {
    build_userland "$1"
    build_test_kernel "$@"
}

# build_test_kernel GRANULE [lpa2]: build_test_image's kernel, with the user program already in
# $(granule_images GRANULE)/userland.elf.
build_test_kernel() {
    local granule="$1" variant="${2:-}" dir features suffix
    dir="$(granule_images "$granule")"
    export USERLAND_ELF="$dir/userland.elf"
    features="$(kernel_features "$granule" "$variant")"; suffix="${variant:+-$variant}"
    say "build: test image ($granule pages${variant:+, $variant})"
    build_kernel "test-image${features:+,$features}" "$dir/kernel-test$suffix.elf"
}

# kernel_features GRANULE [lpa2]: the kernel's cargo features for them, comma-separated (empty
# for plain 4k). FEAT_LPA2 has 52 bits for the 4 KiB and 16 KiB granules only (64 KiB reaches
# them through FEAT_LPA, which the kernel does not build: docs/mm.md, "The LPA2 build").
kernel_features() {
    local features=""
    [ "$1" = 4k ] || features="granule-$1"
    case "${2:-}" in
        "") ;;
        lpa2) [ "$1" != 64k ] || die "lpa2 is for the 4k and 16k granules (64 KiB pages reach 52 bits through FEAT_LPA, which this kernel does not build)"
              features="${features:+$features,}lpa2" ;;
        *) die "unknown variant '$2' (lpa2)" ;;
    esac
    echo "$features"
}

# build_userland GRANULE: the user program, copied into the granule's image directory; the
# kernel embeds it as its built-in demo (kernel/build.rs reads USERLAND_ELF).
build_userland() {
    local dir
    dir="$(granule_images "$1")"
    cd "$ROOT"
    mkdir -p "$dir"
    say "build: userland"
    cargo build -q --release -p userland --target "$USER_TARGET"
    # Copied only when it changed: the kernel's build script watches the file (a new mtime alone
    # would rebuild the kernel).
    cmp -s "$ROOT/target/$USER_TARGET/release/userland" "$dir/userland.elf" \
        || cp "$ROOT/target/$USER_TARGET/release/userland" "$dir/userland.elf"
    export USERLAND_ELF="$dir/userland.elf"
}

# build_kernel FEATURES ELF: the kernel built with FEATURES (comma-separated, may be empty),
# finished as ELF (with its symbol table) and, beside it, the raw Image (ELF's name with kernel
# replaced by Image and .elf dropped: kernel-test-lpa2.elf gives Image-test-lpa2).
build_kernel() {
    local features="$1" elf="$2" image
    image="$(dirname "$elf")/$(basename "$elf" .elf | sed 's/^kernel/Image/')"
    cd "$ROOT"
    cargo build -q --release -p kernel --target "$TARGET" ${features:+--features "$features"}
    finish_image "$ROOT/target/$TARGET/release/kernel" "$elf" "$image"
}

# finish_image BUILT ELF IMAGE: copy, embed the symbol table, make the raw Image.
finish_image() {
    cp "$1" "$2"
    cargo run -q -p image-check --bin kimage -- symbols "$2" >&2
    "$OBJCOPY" -O binary "$2" "$3"
}

# linux_inits DIR: DIR/parity-init, the first process of every Linux reference run
# (tests/programs/parity-init.c: it mounts /proc, /sys, /dev and /tmp as this kernel has them, runs
# its command line as a child and powers off), and DIR/codecalls.so (tests/programs/codecalls.c:
# counts a program's memory calls through the C library), each built again only when its source
# is newer.
linux_inits() {
    local dir="$1"
    ensure_cross_gcc
    mkdir -p "$dir"
    [ "$dir/parity-init" -nt "$ROOT/tests/programs/parity-init.c" ] \
        || build_c_program "$ROOT/tests/programs/parity-init.c" "$dir/parity-init"
    [ "$dir/codecalls.so" -nt "$ROOT/tests/programs/codecalls.c" ] \
        || aarch64-linux-gnu-gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$dir/codecalls.so" "$ROOT/tests/programs/codecalls.c"
}

# rootfs_overlay_initrd IMAGE OUT: IMAGE (a root image of scripts/rootfs) with a second
# cpio archive appended, which Linux and this kernel both unpack over the first, holding
# tests/programs/rootfs/* under /parity/ (the cases' scripts), parity-init and codecalls.so
# (linux_inits; scripts/bench's count of the JIT runtimes' memory calls).
rootfs_overlay_initrd() {
    local image="$1" out="$2" dir="$ROOT/target/rootfs/linux-init" f files=()
    linux_inits "$dir"
    files+=("$dir/parity-init" "$dir/codecalls.so")
    for f in "$ROOT"/tests/programs/rootfs/*; do files+=("parity/${f##*/}=$f"); done
    make_initramfs "$out.overlay" "${files[@]}"
    cat "$image" "$out.overlay" >"$out"
    rm "$out.overlay"
}

# rootfs_parity_initrd PROFILE OUT: the initrd of a parity case whose program comes from a Debian
# root image (PROGRAM = PROFILE:/PATH in tests/linux-parity/cases): scripts/rootfs PROFILE's image
# with the overlay of rootfs_overlay_initrd.
rootfs_parity_initrd() {
    local image
    image="$("$ROOT/scripts/rootfs" "$1" | head -n 1)" && [ -f "$image" ] || return 1
    rootfs_overlay_initrd "$image" "$2"
}

# case_machine ENV: reads a parity case's leading @-words (tests/linux-parity/cases) and sets
# MACHINE to its QEMU machine (@MACHINE, else virt), CASE_SMP to its CPU count (@smp:N, else 1),
# CASE_MEM to its memory (@mem:SIZE, else 512M), CASE_ENV to the rest of ENVIRONMENT and QEMU to
# the emulator: the system's qemu-system-aarch64, or for @qemu10:MACHINE the one
# ensure_qemu_backports unpacks.
case_machine() {
    MACHINE=virt; CASE_SMP=1; CASE_MEM=512M; CASE_ENV="$1"; QEMU=qemu-system-aarch64
    local word
    while [[ "$CASE_ENV" == @* ]]; do
        word="${CASE_ENV%% *}"; CASE_ENV="${CASE_ENV#"$word"}"; CASE_ENV="${CASE_ENV# }"
        case "$word" in
            @smp:*) CASE_SMP="${word#@smp:}" ;;
            @mem:*) CASE_MEM="${word#@mem:}" ;;
            *) MACHINE="${word#@}" ;;
        esac
    done
    if [[ "$MACHINE" == qemu10:* ]]; then
        MACHINE="${MACHINE#qemu10:}"
        ensure_qemu_backports
        QEMU="$QEMU_BACKPORTS"
    fi
}

# make_initramfs OUT FILE...: a cpio "newc" archive (the initramfs format) holding each FILE at
# the root under its own name, or at DEST for a DEST=FILE argument (directories made for it),
# executable. The kernel runs the one `rdinit=/NAME` names.
make_initramfs() {
    local out="$1"; shift
    python3 - "$out" "$@" <<'PY'
import os, sys
out, files = sys.argv[1], sys.argv[2:]
data = bytearray()
def member(name, mode, body, ino):
    global data
    fields = [ino, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(name) + 1, 0]
    data += b"070701" + b"".join(b"%08x" % f for f in fields) + name.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    data += body
    data += b"\0" * (-len(data) % 4)
ino = 0
dirs = set()
for arg in files:
    # DEST=SRC puts SRC at the path DEST (its directories made first); a plain path goes at the
    # root under its own name.
    dest, src = arg.split("=", 1) if "=" in arg else (os.path.basename(arg), arg)
    parts = dest.split("/")
    for i in range(1, len(parts)):
        d = "/".join(parts[:i])
        if d not in dirs:
            dirs.add(d)
            ino += 1
            member(d, 0o040755, b"", ino)
    ino += 1
    member(dest, 0o100755, open(src, "rb").read(), ino)
member("TRAILER!!!", 0, b"", 0)
open(out, "wb").write(data)
PY
}
