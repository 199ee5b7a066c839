// memcost: what fork, a copy-on-write fault and mremap cost, measured the same way on this
// kernel and on Linux (measure.h: guest instructions, TLBIs, faults, time), for scripts/bench.
//
// "memcost-test measure" prints one line per operation:
// - fork + exit + wait of a process with 64 MiB touched, with 4 KiB pages (MADV_NOHUGEPAGE) and
//   with the default (2 MiB blocks here; Debian's Linux THP policy otherwise);
// - the copy-on-write fault: the parent writes one byte per page of 4 MiB shared with a live
//   child (a copy each), then, the child gone, again (each the last reference: a reuse);
// - mremap(MREMAP_MAYMOVE | MREMAP_FIXED) of 1 MiB and 64 MiB of touched memory to a reserved
//   range and back, checking that every page arrived with its contents (moved, not copied: a
//   copy of 64 MiB alone would take millions of instructions).
// Every check prints "memcost: FAIL ..." and the program exits 1 when one fails.
// Built by scripts/bench with aarch64-linux-gnu-gcc -static; runs unchanged on Linux.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure.h"

#define PAGE 4096UL
#define MIB (1UL << 20)

static int failures;

static void fail(const char *what) {
    printf("memcost: FAIL %s\n", what);
    failures++;
}

static char *touched(size_t len, int small_pages) {
    char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) {
        fail("mmap");
        exit(1);
    }
    if (small_pages) madvise(a, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += PAGE) a[i] = (char)(i / PAGE);
    return a;
}

static void fork_exit_wait(int small_pages) {
    enum { ROUNDS = 5 };
    size_t len = 64 * MIB;
    char *a = touched(len, small_pages);
    fflush(stdout);
    struct sample s0 = mark();
    for (int r = 0; r < ROUNDS; r++) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) fail("wait");
    }
    struct sample s1 = mark();
    report(small_pages ? "fork + exit + wait, 64 MiB touched, 4 KiB pages" : "fork + exit + wait, 64 MiB touched, default pages",
           s0, s1, ROUNDS);
    munmap(a, len);
}

static void cow_faults(void) {
    size_t len = 4 * MIB, pages = len / PAGE;
    char *a = touched(len, 1);
    int go[2];
    if (pipe(go) != 0) fail("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        read(go[0], &c, 1); // keeps every page shared until the parent is done writing
        for (size_t i = 0; i < len; i += PAGE)
            if (a[i] != (char)(i / PAGE)) _exit(1);
        _exit(0);
    }
    struct sample s0 = mark();
    for (size_t i = 0; i < len; i += PAGE) a[i] = 'p';
    struct sample s1 = mark();
    write(go[1], "g", 1);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("the child saw the parent's writes");
    report("copy-on-write fault, page shared with a live child (copy)", s0, s1, (unsigned)pages);
    // Again after a fork whose child has exited: each page is the last reference.
    fflush(stdout);
    pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, &status, 0);
    struct sample s2 = mark();
    for (size_t i = 0; i < len; i += PAGE) a[i] = 'q';
    struct sample s3 = mark();
    report("copy-on-write fault, the child gone (reuse)", s2, s3, (unsigned)pages);
    munmap(a, len);
    close(go[0]);
    close(go[1]);
}

static void move(size_t len, const char *what) {
    enum { ROUNDS = 10 };
    char *a = touched(len, 0);
    char *b = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); // a reserved target
    if (b == MAP_FAILED) fail("reserve");
    struct sample s0 = mark();
    for (int r = 0; r < ROUNDS; r++) {
        char *to = r % 2 ? a : b, *from = r % 2 ? b : a;
        if (mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) != to) fail("mremap");
    }
    struct sample s1 = mark();
    report(what, s0, s1, ROUNDS);
    // After an even number of moves the pages are back at `a`, with their contents.
    for (size_t i = 0; i < len; i += PAGE)
        if (a[i] != (char)(i / PAGE)) {
            fail("a moved page lost its contents");
            break;
        }
    munmap(a, len);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || strcmp(argv[1], "measure") != 0) {
        printf("usage: memcost-test measure\n");
        return 2;
    }
    measure_init("memcost");
    fork_exit_wait(1);
    fork_exit_wait(0);
    cow_faults();
    move(1 * MIB, "mremap 1 MiB touched (moved)");
    move(64 * MIB, "mremap 64 MiB touched (moved)");
    printf("memcost: done, %d failed\n", failures);
    return failures != 0;
}
