// profcase: one memory operation N times, for scripts/guest-profile, which runs it with N = 0
// and with N and divides the difference of the kernel's instruction profile by N.
//
// "profcase CASE N", CASE one of:
//   cow-reuse   N write faults on pages shared with a child that has exited (each one reused)
//   cow-copy    N write faults on pages shared with a live child (each one copied)
//   mprotect1   N pairs mprotect(PROT_NONE) + mprotect(PROT_READ | PROT_WRITE) of one untouched
//               page held among ten single-page mappings of alternating protections (nothing
//               merges), as scripts/bench's "mprotect pair of a held page" row
//   mprotect16  N pairs mprotect(PROT_READ) + mprotect(PROT_READ | PROT_WRITE) of 16 touched pages
//   file-fault  N read faults on a MAP_PRIVATE mapping of a file in /tmp whose pages are cached,
//               one per 64 KiB (what one fault maps with its neighbours)
//   mremap      N moves of 1 MiB of touched memory to a reserved range (MREMAP_FIXED) and back
//   fork        fork + exit + wait with N pages touched (4 KiB pages): the cost per page
//   fork64      N rounds of fork + exit + wait of a process with 64 MiB touched (4 KiB pages), as
//               scripts/bench's fork row: the cost of one round, the fork call and the child's
//               teardown told apart by their functions (N at most 64)
// N is at most 1024 except for fork.
// Prints "profcase: done" at the end; "profcase: FAIL ..." and exits 1 if a call fails.
// Built by scripts/guest-profile with aarch64-linux-gnu-gcc -static.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL

static void fail(const char *what) {
    printf("profcase: FAIL %s\n", what);
    exit(1);
}

static char *map(size_t len, int prot) {
    char *a = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) fail("mmap");
    return a;
}

static char *touched(size_t len) {
    char *a = map(len, PROT_READ | PROT_WRITE);
    madvise(a, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += PAGE) a[i] = 1;
    return a;
}

/* The setup of every case but fork is the same whatever N (up to LIMIT), so that it cancels. */
#define LIMIT 1024

static void cow(long n, int copy) {
    char *a = touched(LIMIT * PAGE);
    int p[2];
    if (pipe(p) != 0) fail("pipe");
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child == 0) {
        char b;
        close(p[1]);
        (void)!read(p[0], &b, 1);
        _exit(0);
    }
    close(p[0]);
    if (!copy) {
        close(p[1]);
        waitpid(child, NULL, 0);
    }
    for (long i = 0; i < n; i++) a[i * PAGE] = 2;
    if (copy) {
        close(p[1]);
        waitpid(child, NULL, 0);
    }
}

static void mprotect_pairs(long n, size_t pages) {
    char *held[10];
    for (int i = 0; i < 10; i++)
        held[i] = map(pages * PAGE, pages > 1 || i % 2 == 1 ? PROT_READ | PROT_WRITE : PROT_READ);
    char *a = held[5];
    int first = pages > 1 ? PROT_READ : PROT_NONE, back = PROT_READ | PROT_WRITE;
    if (pages > 1)
        for (size_t i = 0; i < pages; i++) a[i * PAGE] = 1;
    for (long i = 0; i < n; i++)
        if (mprotect(a, pages * PAGE, first) != 0 || mprotect(a, pages * PAGE, back) != 0) fail("mprotect");
}

static void file_faults(long n) {
    size_t len = LIMIT * 16 * PAGE;
    int fd = open("/tmp/profcase", O_RDWR | O_CREAT | O_TRUNC, 0600);
    char *buf = calloc(1, len);
    if (fd < 0 || !buf || write(fd, buf, len) != (ssize_t)len) fail("writing /tmp/profcase");
    volatile char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) fail("mmap of the file");
    for (long i = 0; i < n; i++) (void)m[i * 16 * PAGE];
}

static void moves(long n) {
    size_t len = 256 * PAGE;
    char *a = touched(len), *r = map(len, PROT_NONE);
    for (long i = 0; i < n; i++) {
        if (mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, r) != r) fail("mremap");
        char *t = a;
        a = r;
        r = t;
        if (mmap(r, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != r) fail("mmap");
    }
}

int main(int argc, char **argv) {
    if (argc != 3) fail("usage: profcase CASE N");
    const char *what = argv[1];
    long n = atol(argv[2]);
    if (n < 0 || (n > LIMIT && strcmp(what, "fork") != 0) || (n > 64 && !strcmp(what, "fork64")))
        fail("N must be 0 to 1024 (any for fork, at most 64 for fork64)");
    if (!strcmp(what, "cow-reuse")) cow(n, 0);
    else if (!strcmp(what, "cow-copy")) cow(n, 1);
    else if (!strcmp(what, "mprotect1")) mprotect_pairs(n, 1);
    else if (!strcmp(what, "mprotect16")) mprotect_pairs(n, 16);
    else if (!strcmp(what, "file-fault")) file_faults(n);
    else if (!strcmp(what, "mremap")) moves(n);
    else if (!strcmp(what, "fork")) {
        touched((size_t)(n + 1) * PAGE);
        pid_t child = fork();
        if (child < 0) fail("fork");
        if (child == 0) _exit(0);
        waitpid(child, NULL, 0);
    } else if (!strcmp(what, "fork64")) {
        touched(64UL << 20);
        for (long i = 0; i < n; i++) {
            pid_t child = fork();
            if (child < 0) fail("fork");
            if (child == 0) _exit(0);
            if (waitpid(child, NULL, 0) != child) fail("waitpid");
        }
    } else fail("unknown case");
    printf("profcase: done\n");
    return 0;
}
