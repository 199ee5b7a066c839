# Shared by scripts/test (boards section) and scripts/sdcard. Source it after lib.sh; do not run it.
#
# Real components for the board tests, all from Debian's packages, cached under target/boards/:
# - the Raspberry Pi 3 device tree from Debian's arm64 kernel package (apt-get download, then
#   dpkg-deb -x; the package is not installed): target/boards/bcm2837-rpi-3-b.dtb (and the Pi 4's);
# - every .dtb of that package, for the device-tree reader's corpus test: target/boards/linux-dtbs/;
# - U-Boot for QEMU virt: the u-boot-qemu package (installed): /usr/lib/u-boot/qemu_arm64/u-boot.bin;
# - U-Boot for the Raspberry Pi: u-boot-rpi:arm64 (downloaded and unpacked, not installed, since it
#   is an arm64 package): target/boards/u-boot-rpi/usr/lib/u-boot/rpi_arm64/u-boot.bin.
# The arm64 packages need arm64 as a dpkg foreign architecture; it is added (with apt-get update)
# when missing, which needs root, like every other install in lib.sh.

BOARDS="$ROOT/target/boards"

ensure_arm64_arch() {
    dpkg --print-foreign-architectures | grep -qx arm64 && return 0
    [ "$(id -u)" = 0 ] || die "the arm64 Debian packages need 'sudo dpkg --add-architecture arm64 && sudo apt-get update'"
    say "setup: adding arm64 as a dpkg foreign architecture (for apt-get download of arm64 packages)"
    dpkg --add-architecture arm64
    apt-get update -q >/tmp/apt-update.log 2>&1 || die "apt-get update failed (see /tmp/apt-update.log)"
}

# apt_fetch PACKAGE DIR: downloads PACKAGE's .deb into $BOARDS and unpacks it into DIR (cached).
apt_fetch() {
    local pkg="$1" dir="$2" deb
    [ -d "$dir" ] && return 0
    mkdir -p "$BOARDS"
    deb=$(ls "$BOARDS"/"${pkg%%:*}"_*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        say "setup: downloading $pkg from Debian (apt-get download, not installed)"
        (cd "$BOARDS" && apt-get download -q "$pkg" >/tmp/apt-download.log 2>&1) || {
            apt-get update -q >/tmp/apt-update.log 2>&1 || true
            (cd "$BOARDS" && apt-get download -q "$pkg" >/tmp/apt-download.log 2>&1) \
                || { tail -n 5 /tmp/apt-download.log >&2; die "could not download $pkg"; }
        }
        deb=$(ls "$BOARDS"/"${pkg%%:*}"_*.deb | head -n1)
    fi
    mkdir -p "$dir.tmp" && dpkg-deb -x "$deb" "$dir.tmp" && mv "$dir.tmp" "$dir"
}

# linux_deb: sets LINUX_DEB to the newest 6.1 arm64 kernel package apt-cache knows, downloaded
# into $BOARDS (apt-get download, not installed; the .deb is kept, about 60 MB, so this happens once).
linux_deb() {
    ensure_arm64_arch
    local pkg
    pkg=$(apt-cache search --names-only '^linux-image-6\.1\.[0-9]+-[0-9]+-arm64$' | awk '{print $1}' | sort -V | tail -n1)
    [ -n "$pkg" ] || die "apt-cache knows no linux-image-6.1.*-arm64 package (is arm64 in dpkg's architectures?)"
    LINUX_DEB=$(ls "$BOARDS/${pkg}"_*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$LINUX_DEB" ]; then
        mkdir -p "$BOARDS"
        say "setup: downloading $pkg:arm64 from Debian (apt-get download, not installed; ~60 MB, once)"
        (cd "$BOARDS" && apt-get download -q "$pkg:arm64" >/tmp/apt-download.log 2>&1) \
            || { tail -n 5 /tmp/apt-download.log >&2; die "could not download $pkg:arm64"; }
        LINUX_DEB=$(ls "$BOARDS/${pkg}"_*.deb | head -n1)
    fi
}

# ensure_linux_image: sets LINUX_IMAGE to Debian's arm64 Linux kernel (the raw Image from the
# package's /boot/vmlinuz-*), unpacked once into target/boards/linux/. scripts/bench boots it.
ensure_linux_image() {
    local dir="$BOARDS/linux"
    LINUX_IMAGE=$(ls "$dir"/boot/vmlinuz-* 2>/dev/null | head -n1 || true)
    [ -n "$LINUX_IMAGE" ] && return 0
    linux_deb
    rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
    dpkg-deb --fsys-tarfile "$LINUX_DEB" | tar -x -C "$dir.tmp" --wildcards './boot/vmlinuz-*' './boot/config-*'
    rm -rf "$dir"; mv "$dir.tmp" "$dir"
    LINUX_IMAGE=$(ls "$dir"/boot/vmlinuz-* | head -n1)
    say "setup: Linux kernel $(basename "$LINUX_IMAGE") from $(basename "$LINUX_DEB") in $dir"
}

# ensure_pi_dtbs: target/boards/bcm2837-rpi-3-b.dtb and bcm2711-rpi-4-b.dtb from the same package.
ensure_pi_dtbs() {
    [ -f "$BOARDS/bcm2837-rpi-3-b.dtb" ] && [ -f "$BOARDS/bcm2711-rpi-4-b.dtb" ] && return 0
    linux_deb
    local deb="$LINUX_DEB" pkg
    pkg=$(basename "$deb" | cut -d_ -f1)
    # Only the two device trees are unpacked (dpkg-deb's data archive, filtered by tar).
    local tmp="$BOARDS/dtb.tmp" dtb
    rm -rf "$tmp"; mkdir -p "$tmp"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards '*/broadcom/bcm2837-rpi-3-b.dtb' '*/broadcom/bcm2711-rpi-4-b.dtb'
    for dtb in bcm2837-rpi-3-b bcm2711-rpi-4-b; do
        cp "$(find "$tmp" -name "$dtb.dtb" | head -n1)" "$BOARDS/$dtb.dtb" || die "$dtb.dtb not found in $pkg"
    done
    rm -rf "$tmp"
    say "setup: Pi device trees from $pkg in $BOARDS"
}

# ensure_dtb_corpus: every .dtb of that same kernel package (about 580 board trees, 27 MB) in
# target/boards/linux-dtbs/, for the devicetree crate's corpus test (devicetree/tests/boards.rs).
ensure_dtb_corpus() {
    [ -d "$BOARDS/linux-dtbs" ] && return 0
    ensure_pi_dtbs
    local deb
    deb=$(ls "$BOARDS"/linux-image-*_arm64.deb 2>/dev/null | sort -V | tail -n1 || true)
    [ -n "$deb" ] || die "no linux-image .deb in $BOARDS (remove $BOARDS/*.dtb to download it again)"
    rm -rf "$BOARDS/linux-dtbs.tmp"; mkdir -p "$BOARDS/linux-dtbs.tmp"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$BOARDS/linux-dtbs.tmp" --wildcards '*.dtb'
    mv "$BOARDS/linux-dtbs.tmp" "$BOARDS/linux-dtbs"
    say "setup: $(find "$BOARDS/linux-dtbs" -name '*.dtb' | wc -l) board device trees from $(basename "$deb") in $BOARDS/linux-dtbs"
}

ensure_uboot() {
    [ -f /usr/lib/u-boot/qemu_arm64/u-boot.bin ] || apt_install u-boot-qemu
    ensure_arm64_arch
    apt_fetch u-boot-rpi:arm64 "$BOARDS/u-boot-rpi"
    UBOOT_VIRT=/usr/lib/u-boot/qemu_arm64/u-boot.bin
    UBOOT_RPI="$BOARDS/u-boot-rpi/usr/lib/u-boot/rpi_arm64/u-boot.bin"
    [ -f "$UBOOT_RPI" ] || die "no rpi_arm64/u-boot.bin in u-boot-rpi"
}

# build_board_image BOARD [test] [GRANULE]: the kernel (or the test image) built for a board's
# fallback console (kernel/src/board/) and the translation granule GRANULE (default 4k):
# $(granule_images GRANULE)/Image-BOARD[-test]. BOARD: raspi3, raspi4, raspi5. A Pi 3's
# Cortex-A53 and a Pi 4's Cortex-A72 have no 16 KiB granule: that build would only refuse to
# boot there (on the mini UART), so it is refused here; the Pi 5's Cortex-A76 has all three.
build_board_image() {
    local board="$1" kind="${2:-}" granule="${3:-4k}" features="board-$1" suffix="" dir
    dir="$(granule_images "$granule")"
    case "$board:$granule" in
        raspi3:16k) die "raspi3: the Pi 3's Cortex-A53 has no 16 KiB translation granule; build 4k or 64k" ;;
        raspi4:16k) die "raspi4: the Pi 4's Cortex-A72 has no 16 KiB translation granule; build 4k or 64k" ;;
    esac
    [ "$granule" = 4k ] || features="$features,granule-$granule"
    if [ "$kind" = test ]; then features="$features,test-image"; suffix="-test"; fi
    build_userland "$granule"
    say "build: kernel for $board ($granule pages)${suffix:+ (test image)}"
    cd "$ROOT"
    cargo build -q --release -p kernel --target "$TARGET" --no-default-features --features "$features"
    finish_image "$ROOT/target/$TARGET/release/kernel" "$dir/kernel-$board$suffix.elf" "$dir/Image-$board$suffix"
}

# uboot_typist FIFO LOG TIMEOUT LINE...: feeds U-Boot's console. Opens FIFO for writing (QEMU
# reads it as stdin), waits until LOG shows "Hit any key to stop autoboot", types a key, then each
# LINE once LOG shows a U-Boot prompt ("=> " or "U-Boot> "). Keeps the FIFO open until killed or
# TIMEOUT seconds pass. Run it in the background before qemu_case.
uboot_typist() {
    local fifo="$1" log="$2" limit="$3"; shift 3
    exec 3>"$fifo"
    local t=0
    while ! grep -q "Hit any key to stop autoboot" "$log" 2>/dev/null; do
        sleep 0.2; t=$((t + 1)); [ $t -gt $((limit * 5)) ] && return 1
    done
    printf ' ' >&3
    local line prompts=0
    for line in "$@"; do
        while [ "$(grep -Eo '(=>|U-Boot>) ' "$log" 2>/dev/null | wc -l)" -le "$prompts" ]; do
            sleep 0.2; t=$((t + 1)); [ $t -gt $((limit * 5)) ] && return 1
        done
        prompts=$((prompts + 1))
        printf '%s\r' "$line" >&3
    done
    # Keep QEMU's stdin open while it runs (short sleeps: killing this leaves no long sleep behind).
    while [ $t -le $((limit * 5)) ]; do sleep 0.2; t=$((t + 1)); done
}
