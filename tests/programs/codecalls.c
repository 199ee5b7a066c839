/*
 * codecalls.so: counts the memory calls a program makes through the C library, for the JIT
 * runtimes' table of scripts/bench (section 14), the same on this kernel and on Linux. Loaded with
 * LD_PRELOAD=/codecalls.so CODECALLS=NAME: in the first process whose name is NAME (node, not the
 * setarch that runs it) it takes LD_PRELOAD out of the environment, so that only that process
 * counts (node's child process and anything else it runs do not), and at exit it prints one line
 * on standard error:
 *
 *   codecalls: mmap N (hinted H, not honoured M), with PROT_EXEC E; mprotect P, to PROT_EXEC X; munmap U
 *
 * "Hinted": an address given without MAP_FIXED or MAP_FIXED_NOREPLACE; "not honoured": the
 * mapping went elsewhere (or MAP_FIXED_NOREPLACE failed), which a JIT that needs its code near its
 * text pays for with another call (LuaJIT probes with a new hint, then unmaps). A program that
 * makes its system calls itself (Rust's rustix, Go) is not seen: a count of 0 there means nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*mprotect_fn)(void *, size_t, int);
typedef int (*munmap_fn)(void *, size_t);

static atomic_ulong n_mmap, n_hinted, n_missed, n_exec, n_mprotect, n_to_exec, n_munmap;
static pid_t owner;

static mmap_fn real_mmap(void) {
    static mmap_fn f;
    if (!f)
        f = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
    return f;
}

__attribute__((constructor)) static void start(void) {
    const char *want = getenv("CODECALLS");
    if (!want || strcmp(want, program_invocation_short_name) != 0)
        return;
    owner = getpid();
    unsetenv("LD_PRELOAD");
}

__attribute__((destructor)) static void report(void) {
    if (owner == 0 || getpid() != owner)
        return;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "codecalls: mmap %lu (hinted %lu, not honoured %lu), with PROT_EXEC %lu; "
                     "mprotect %lu, to PROT_EXEC %lu; munmap %lu\n",
                     atomic_load(&n_mmap), atomic_load(&n_hinted), atomic_load(&n_missed),
                     atomic_load(&n_exec), atomic_load(&n_mprotect), atomic_load(&n_to_exec),
                     atomic_load(&n_munmap));
    if (n > 0 && write(2, line, (size_t)n) < 0)
        return;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    mmap_fn f = real_mmap();
    if (!f) {
        errno = ENOSYS;
        return MAP_FAILED;
    }
    void *r = f(addr, len, prot, flags, fd, off);
    atomic_fetch_add(&n_mmap, 1);
    if (prot & PROT_EXEC)
        atomic_fetch_add(&n_exec, 1);
    if (addr && !(flags & MAP_FIXED)) {
        atomic_fetch_add(&n_hinted, 1);
        if (r != addr)
            atomic_fetch_add(&n_missed, 1);
    }
    return r;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return mmap(addr, len, prot, flags, fd, off);
}

int mprotect(void *addr, size_t len, int prot) {
    static mprotect_fn f;
    if (!f)
        f = (mprotect_fn)dlsym(RTLD_NEXT, "mprotect");
    atomic_fetch_add(&n_mprotect, 1);
    if (prot & PROT_EXEC)
        atomic_fetch_add(&n_to_exec, 1);
    return f ? f(addr, len, prot) : (errno = ENOSYS, -1);
}

int munmap(void *addr, size_t len) {
    static munmap_fn f;
    if (!f)
        f = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
    atomic_fetch_add(&n_munmap, 1);
    return f ? f(addr, len) : (errno = ENOSYS, -1);
}
