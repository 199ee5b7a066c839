#!/usr/bin/env bash
# tests/traces/record.sh [NAME...]: records the programs of tests/traces (every one, or those
# named) under Debian's arm64 Linux 6.1 in QEMU with Debian's strace, then extracts their memory
# calls into tests/traces/NAME.trace (extract.py). The raw logs stay in target/traces/raw/
# (NAME.linux.strace, the program's output in NAME.linux.strace.stdout).
#
# What it uses: the root file system images of scripts/rootfs (the profiles base, python3, node,
# racket, luajit and wasmtime, and images of the packages strace, musl and musl-dev), Debian's
# arm64 Linux (scripts/boards.sh, ensure_linux_image), the init of the Linux reference runs
# (tests/programs/parity-init.c mounts /proc, /sys, /dev and /tmp, runs the command and powers
# off), Debian's cross compiler (the C programs) and Go (the Go program).
# Downloads what is missing (apt, PyPI for the wasmtime wheel); about 15 minutes.
#
# Each program runs as `strace -f -v -s 96 -o /tmp/trace PROGRAM...` in
# `qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -m 2G` with the images concatenated
# (strace's first, the profile's last so that its /etc/ld.so.cache wins), the test programs
# under /t and the init programs; the log is printed after the program's output.
source "$(dirname "$0")/../../scripts/lib.sh"
source "$ROOT/scripts/boards.sh"

HERE="$ROOT/tests/traces"
OUT="$ROOT/target/traces"
ROOTFS="$ROOT/target/rootfs"

# image PROFILE: the path of its image, built if need be.
image() { "$ROOT/scripts/rootfs" "$1" | head -n1; }

# programs: the test programs under $OUT/tree/t (also the root extract.py reads their headers
# from).
programs() {
    local t="$OUT/tree/t"
    rm -rf "$OUT/tree"; mkdir -p "$t"
    ensure_cross_gcc
    aarch64-linux-gnu-gcc -O2 -o "$t/hello-glibc" "$ROOT/elf/fixtures/hello.c"
    # musl: Debian's musl-dev for arm64, unpacked by scripts/rootfs, and a specs file pointing
    # gcc at it (musl-gcc's, with the paths of the unpacked tree).
    image musl-dev >/dev/null
    local m="$ROOTFS/musl-dev" specs="$OUT/musl.specs"
    sed "s|@MUSL@|$m|g" "$HERE/programs/musl.specs.in" >"$specs"
    aarch64-linux-gnu-gcc -specs "$specs" -O2 -o "$t/hello-musl" "$ROOT/elf/fixtures/hello.c"
    aarch64-linux-gnu-gcc -specs "$specs" -O2 -shared -fPIC -o "$t/libfoo.so" "$HERE/programs/foo.c"
    aarch64-linux-gnu-gcc -specs "$specs" -O2 -o "$t/hello-musl-lib" "$HERE/programs/usefoo.c" -L"$t" -lfoo
    command -v go >/dev/null || apt_install golang-go
    (cd "$HERE/programs/goprog" && CGO_ENABLED=0 GOOS=linux GOARCH=arm64 GOPROXY=off go build -o "$t/goprog" .)
    cp "$HERE/programs/pyworld.py" "$HERE/programs/wasm.py" "$t/"
}

# extras_cpio OUT: the test programs as /t/NAME, a cpio archive.
extras_cpio() {
    python3 - "$1" "$OUT/tree/t" <<'PY'
import os, sys
out, src = sys.argv[1], sys.argv[2]
data = bytearray(); ino = 0
def member(name, mode, body):
    global data, ino
    ino += 1
    fields = [ino, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(name) + 1, 0]
    data += b"070701" + b"".join(b"%08x" % f for f in fields) + name.encode() + b"\0"
    data += b"\0" * (-len(data) % 4); data += body; data += b"\0" * (-len(data) % 4)
member("t", 0o40755, b"")
for f in sorted(os.listdir(src)):
    member("t/" + f, 0o100755, open(os.path.join(src, f), "rb").read())
member("TRAILER!!!", 0, b"")
open(out, "wb").write(data)
PY
}

# trace NAME PROFILE[,PROFILE...] COMMAND...: one run under strace, with those images after
# strace's; the log in $OUT/raw/NAME.linux.strace.
trace() {
    local name="$1" profiles="$2" p images=(); shift 2
    for p in strace ${profiles//,/ }; do images+=("$(image "$p")"); done
    local cmd="$*" raw="$OUT/raw/$name.linux.strace"
    case "$cmd" in *'"'*) die "Linux's command line cannot hold a double quote: $cmd" ;; esac
    say "traces: $name: $cmd"
    cat "${images[@]}" "$OUT/t.cpio" "$OUT/init.cpio" >"$OUT/initrd.cpio"
    timeout 900 qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -m 2G -nographic -no-reboot \
        -kernel "$LINUX_IMAGE" -initrd "$OUT/initrd.cpio" \
        -append "console=ttyAMA0 quiet panic=-1 rdinit=/parity-init -- /usr/bin/bash -c \"cd /tmp; /usr/bin/strace -f -v -s 96 -o /tmp/trace $cmd; echo; echo ===TRACE===; cat /tmp/trace\"" \
        </dev/null >"$raw.console" 2>&1 || true
    # The log: the lines between the marker and parity-init's last line, without the kernel's.
    tr -d '\r' <"$raw.console" | sed -n '/===TRACE===/,/^parity: exit/p' | sed '1d;$d' \
        | grep -v '^\[ *[0-9]*\.[0-9]*\] ' >"$raw"
    tr -d '\r' <"$raw.console" | sed -n '1,/===TRACE===/p' | grep -v '^\[ *[0-9]*\.[0-9]*\] ' \
        | sed '$d' >"$raw.stdout"
    say "traces: $name: $(wc -l <"$raw") lines"
}

ensure_qemu
ensure_linux_image
mkdir -p "$OUT/raw"
programs
extras_cpio "$OUT/t.cpio"
# The init programs, built by scripts/rootfs --linux (one boot of the base image).
linux_inits "$OUT" && make_initramfs "$OUT/init.cpio" "$OUT/parity-init"

want=" $* "
run() { [ "$want" = "  " ] || [[ "$want" == *" $1 "* ]] && trace "$@"; return 0; }
run hello-glibc base /t/hello-glibc one two
run hello-musl musl,base /t/hello-musl one two
run hello-musl-lib musl,base /usr/bin/env LD_LIBRARY_PATH=/t /t/hello-musl-lib
run ls base /usr/bin/ls -l /
run bash base /usr/bin/bash -c \'echo hi \| cat\; sleep 0.1 \& wait\'
run python3 python3 /usr/bin/python3 -c \'print\(1\)\'
run pyworld python3 /usr/bin/python3 /t/pyworld.py
run node node /usr/bin/node -e \'console.log\(1+1\)\'
run racket racket /usr/bin/racket -e \'\(display 42\)\'
run luajit luajit /usr/bin/luajit -jv -e \'local s=0 for i=1,1e6 do s=s+i end print\(s\)\'
run wasmtime wasmtime /usr/bin/python3 /t/wasm.py
run goprog base /t/goprog
run maps base /usr/bin/bash -c \'cat /proc/self/maps\; /t/hello-musl \> /dev/null\'

# The extracts: the headers of each program and its interpreter are read from the trees the
# programs ran in (the profile's last, as in the image).
roots=(--root "$OUT/tree")
for p in musl base python3 node racket luajit wasmtime; do roots+=(--root "$ROOTFS/$p"); done
logs=()
for f in "$OUT"/raw/*.linux.strace; do
    n=$(basename "$f" .linux.strace)
    [ "$want" = "  " ] || [[ "$want" == *" $n "* ]] && logs+=("$f")
done
python3 "$HERE/extract.py" "${roots[@]}" "${logs[@]}"
