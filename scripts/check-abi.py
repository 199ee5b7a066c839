#!/usr/bin/env python3
"""check-abi.py: every constant of the linux-abi crate, checked against the C headers of the
installed aarch64 cross compiler (Debian's linux-libc-dev for arm64: Linux 6.1's uapi headers,
and glibc's for the few names only the C library defines).

For each `pub const NAME: T = VALUE;` (and each row of the errno and system-call tables) it
writes `_Static_assert((long long)(NAME) == VALUE)` guarded by `#ifdef NAME`, compiles the file
with aarch64-linux-gnu-gcc, and fails on any mismatch. Names the headers do not define (calls
and flags newer than Linux 6.1, or this crate's own names) are listed as unchecked: each must be
in ALLOWED_UNCHECKED below, with the reason, so a typo in a name cannot pass as "not in the
headers".

    scripts/check-abi.py            check; print a summary; exit 1 on a mismatch
"""
import os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "linux-abi", "src")

# Names the 6.1 headers lack, each for a stated reason.
ALLOWED_UNCHECKED = {
    # Added after Linux 6.1 (the version is in each constant's documentation).
    "MADV_GUARD_INSTALL", "MADV_GUARD_REMOVE", "MFD_NOEXEC_SEAL", "MFD_EXEC", "F_SEAL_EXEC",
    "PR_SET_MDWE", "PR_GET_MDWE", "PR_MDWE_REFUSE_EXEC_GAIN", "PR_MDWE_NO_INHERIT", "ILL_BTCFI",
    "AT_RSEQ_FEATURE_SIZE", "AT_RSEQ_ALIGN",
    "__NR_cachestat", "__NR_fchmodat2", "__NR_map_shadow_stack", "__NR_futex_wake", "__NR_futex_wait",
    "__NR_futex_requeue", "__NR_statmount", "__NR_listmount", "__NR_lsm_get_self_attr",
    "__NR_lsm_set_self_attr", "__NR_lsm_list_modules", "__NR_mseal", "__NR_setxattrat", "__NR_getxattrat",
    "__NR_listxattrat", "__NR_removexattrat", "__NR_open_tree_attr",
    # Kernel-internal (include/linux/errno.h, not uapi): never seen by a program.
    "ERESTARTSYS", "ERESTARTNOINTR", "ERESTARTNOHAND", "ENOIOCTLCMD", "ERESTART_RESTARTBLOCK",
    # The counter scale's fixed shift (time.rs, CounterScale): the kernel's and the vDSO's
    # arithmetic, not a value of the ABI.
    "SHIFT",
    # Kernel-internal mode bits of a segment (include/linux/shm.h), which IPC_STAT shows.
    "SHM_DEST", "SHM_LOCKED",
    # Kernel-internal limits and values with no uapi macro of that name.
    "MAXSYMLINKS", "PERSONALITY_QUERY", "NSEC_PER_SEC",
    "STAT_SIZE", "SYSINFO_SIZE", "TERMIOS_SIZE", "IOV_MAX", "SHMID_DS_SIZE",
    # Kernel-internal socket limits and sizes (include/net/scm.h, struct sockaddr_un's layout).
    "SCM_MAX_FD", "SOCKADDR_UN_SIZE", "SUN_PATH_OFFSET", "SOCK_TYPE_MASK",
}

INCLUDES_KERNEL = """
#include <asm/unistd.h>
#include <asm-generic/errno.h>
#include <linux/fcntl.h>
#include <linux/signal.h>
#include <linux/pidfd.h>
#include <linux/stat.h>
#include <linux/openat2.h>
#include <linux/falloc.h>
#include <linux/limits.h>
#include <linux/mman.h>
#include <linux/memfd.h>
#include <asm/signal.h>
#include <asm-generic/siginfo.h>
#include <linux/futex.h>
#include <limits.h>
#include <linux/ipc.h>
#include <linux/shm.h>
#include <linux/wait.h>
#include <linux/resource.h>
#include <linux/prctl.h>
#include <linux/personality.h>
#include <linux/auxvec.h>
#include <asm/hwcap.h>
#include <linux/sched.h>
#include <linux/random.h>
#include <linux/membarrier.h>
#include <linux/rseq.h>
#include <linux/eventpoll.h>
#include <linux/poll.h>
#include <linux/time.h>
#include <asm/termbits.h>
#include <asm/ioctls.h>
"""
# Names only the C library defines (its values are the kernel's).
INCLUDES_LIBC = """
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sched.h>
#include <sys/rseq.h>
#include <sys/socket.h>
#include <sys/un.h>
"""

MAX = {"u8::MAX": 0xff, "u16::MAX": 0xffff, "u32::MAX": 0xffffffff, "u64::MAX": 2**64 - 1, "i64::MAX": 2**63 - 1}


def rust_value(expr, env):
    e = expr.strip()
    for k, v in MAX.items():
        e = e.replace(k, str(v))
    e = re.sub(r"\bErrno::([A-Z_0-9]+)", r"\1", e)
    e = re.sub(r"\b(\d[\d_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)(u8|u16|u32|u64|i32|i64|usize)\b", r"\1", e)
    e = re.sub(r"\bas (u8|u16|u32|u64|i32|i64|usize)\b", "", e)
    try:
        return eval(e, {"__builtins__": {}}, env)
    except Exception:
        return None


def collect():
    consts = {}  # C name -> value
    for fn in sorted(os.listdir(SRC)):
        if not fn.endswith(".rs"):
            continue
        text = open(os.path.join(SRC, fn)).read()
        text = text.split("#[cfg(test)]")[0]
        env = {}
        for m in re.finditer(r"pub const ([A-Z_][A-Z0-9_]*): [A-Za-z0-9]+ = ([^;]+);", text):
            name, expr = m.group(1), m.group(2)
            v = rust_value(expr, env)
            if v is None:
                continue  # a structure value, not a number
            env[name] = v
            if name in consts and consts[name] != v:
                sys.exit(f"check-abi: {name} defined twice with different values ({consts[name]}, {v})")
            consts[name] = v
        if fn == "errno.rs":
            for m in re.finditer(r"^\s+([A-Z_0-9]+) = (\d+) \"", text, re.M):
                consts[m.group(1)] = int(m.group(2))
        if fn == "syscalls.rs":
            for m in re.finditer(r"^\s+[A-Z_0-9]+ = (\d+) \"([a-z_0-9]+)\",", text, re.M):
                consts["__NR_" + m.group(2)] = int(m.group(1))
    return consts


def c_literal(v):
    if v < 0:
        return f"({v}LL)"
    return f"((long long){v}ULL)"


def run(includes, names, consts, gcc):
    """Which of `names` the headers define (checking each), and the compiler's complaints."""
    body = [includes, "#define CHECK(n, v) _Static_assert((long long)(n) == (v), #n);"]
    for n in names:
        body.append(f"#ifdef {n}\nCHECK({n}, {c_literal(consts[n])})\nint defined_{n};\n#endif")
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "abi.c")
        o = os.path.join(d, "abi.o")
        open(c, "w").write("\n".join(body) + "\n")
        r = subprocess.run([gcc, "-c", "-o", o, c], capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr
        syms = subprocess.run(["aarch64-linux-gnu-nm", o], capture_output=True, text=True).stdout
        return {l.split()[-1][len("defined_"):] for l in syms.splitlines() if "defined_" in l}, ""


def one(includes, name, value, gcc):
    """(defined, complaint) for one name, macro or enumeration member."""
    src = includes + f"\n_Static_assert((long long)({name}) == {c_literal(value)}, \"{name}\");\n"
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "one.c")
        open(c, "w").write(src)
        r = subprocess.run([gcc, "-fsyntax-only", c], capture_output=True, text=True)
    if r.returncode == 0:
        return True, ""
    if "static assertion failed" in r.stderr:
        return True, r.stderr
    return False, ""


def main():
    gcc = "aarch64-linux-gnu-gcc"
    consts = collect()
    names = sorted(consts)
    # A name that is a macro in both worlds is checked in the kernel's; many uapi names are
    # enum members or plain macros glibc also defines.
    found_k, err = run(INCLUDES_KERNEL, names, consts, gcc)
    if found_k is None:
        print(err)
        print("check-abi: a constant differs from the kernel headers (the assertion names it)")
        return 1
    rest = [n for n in names if n not in found_k]
    found_c, err = run(INCLUDES_LIBC, rest, consts, gcc)
    if found_c is None:
        print(err)
        print("check-abi: a constant differs from the C library's headers (the assertion names it)")
        return 1
    # Enumeration members (membarrier commands, personality flags) are no macros: one small
    # compile each tells whether the name exists and, if so, whether its value matches.
    left = [n for n in rest if n not in found_c]
    unchecked, enum_found = [], 0
    for n in left:
        ok, mismatch = one(INCLUDES_KERNEL, n, consts[n], gcc)
        if mismatch:
            print(mismatch)
            print(f"check-abi: {n} differs from the kernel headers")
            return 1
        if ok:
            enum_found += 1
        else:
            unchecked.append(n)
    unexplained = [n for n in unchecked if n not in ALLOWED_UNCHECKED]
    stale = sorted(ALLOWED_UNCHECKED - set(unchecked))
    print(f"check-abi: {len(names)} constants: {len(found_k)} match Linux 6.1's uapi headers, "
          f"{len(found_c)} glibc's, {enum_found} enumeration members; {len(unchecked)} not in the headers (newer or kernel-internal)")
    if unexplained:
        print("check-abi: not in the headers and not explained in ALLOWED_UNCHECKED: " + ", ".join(unexplained))
    if stale:
        print("check-abi: ALLOWED_UNCHECKED lists names the headers do define (or that are gone): " + ", ".join(stale))
    return 1 if unexplained or stale else 0


if __name__ == "__main__":
    sys.exit(main())
