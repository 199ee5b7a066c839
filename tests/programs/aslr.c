/* aslr.c: measures address-space randomisation. `aslr-test N` forks and execs `/aslr-child`
 * (this file built as a static PIE) N times; each child writes one line: the address of its
 * `main` (the PIE base plus a constant), of its first anonymous mmap (the mmap base less what
 * the C library mapped first), of a local (the stack), sbrk(0) (the heap), and its code window
 * (this kernel's SYS_CODE_WINDOW; 0 0 on Linux, which has none). The parent prints, per base,
 * the distinct values, the Shannon entropy of the sample (at most log2(N): a sample of N cannot
 * show more), the bit positions that vary, and the sum over bit positions of each bit's entropy
 * ("bits": close to the number of random bits when each is uniform; what scripts/bench
 * compares with Linux). Case checks (`check` as the second argument): every base took more
 * than N/2 distinct values and, where a code window exists, every child's text was inside its
 * window, the window aligned to its size, with at least a quarter of it below the text.
 * `norandomize` as the second argument: personality(ADDR_NO_RANDOMIZE) first (`setarch -R`),
 * which the children inherit. When `/aslr-dyn` exists (this file built as a dynamically linked
 * PIE, with its interpreter and libraries in /lib), it is exec'd N times as well, for two more
 * bases: the interpreter's (AT_BASE) and the address of a libc function (libc's base plus a
 * constant). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* This kernel's SYS_CODE_WINDOW and WINDOW_GET (ext-abi/src/lib.rs); Linux answers ENOSYS. */
#define SYS_CODE_WINDOW 1001
#define WINDOW_GET 0
struct code_window { uint64_t base, size, used, placed_outside, strict; };

/* The static child's four bases, then the dynamic child's two. */
enum { PIE, MMAP, STACK, BRK, INTERP, LIBC, BASES };
static const char *names[BASES] = {"pie", "mmap", "stack", "brk", "interp", "libc"};

static int child(void) {
    volatile int local = 0;
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct code_window w = {0};
    if (syscall(SYS_CODE_WINDOW, WINDOW_GET, 0, &w) != 0) memset(&w, 0, sizeof w);
    printf("%llx %llx %llx %llx %llx %llx %llx %llx\n", (unsigned long long)(uintptr_t)&child,
           (unsigned long long)(uintptr_t)m, (unsigned long long)(uintptr_t)&local,
           (unsigned long long)(uintptr_t)sbrk(0), (unsigned long long)w.base, (unsigned long long)w.size,
           (unsigned long long)getauxval(AT_BASE), (unsigned long long)(uintptr_t)&fopen);
    return 0;
}

/* Execs `path` once; its record in x[8]. 0 on success. */
static int run_child(const char *path, int i, unsigned long long x[8]) {
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(path, path, "child", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[512] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof line - 1 && (r = read(fds[0], line + got, sizeof line - 1 - got)) > 0) got += r;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (sscanf(line, "%llx %llx %llx %llx %llx %llx %llx %llx", &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6],
               &x[7]) != 8) {
        printf("aslr: %s %d wrote no record (status %d)\n", path, i, status);
        return 1;
    }
    return 0;
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
    setvbuf(stdout, NULL, _IONBF, 0);
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int check = argc > 2 && strcmp(argv[2], "check") == 0;
    if (n < 2) n = 2;
    if (argc > 2 && strcmp(argv[2], "norandomize") == 0 && personality(ADDR_NO_RANDOMIZE) == -1) {
        perror("personality");
        return 1;
    }
    uint64_t *v[BASES];
    for (int b = 0; b < BASES; b++) v[b] = calloc(n, sizeof(uint64_t));
    int window_bad = 0, windows = 0;
    int dynamic = access("/aslr-dyn", X_OK) == 0;
    for (int i = 0; i < n; i++) {
        unsigned long long x[8];
        if (dynamic) {
            if (run_child("/aslr-dyn", i, x)) return 1;
            v[INTERP][i] = x[6];
            v[LIBC][i] = x[7];
            /* The interpreter in the window with the text, where there is one. */
            if (x[5] && (x[6] < x[4] || x[6] >= x[4] + x[5]) && window_bad++ < 3)
                printf("aslr: interpreter 0x%llx, window 0x%llx + 0x%llx\n", x[6], x[4], x[5]);
        }
        if (run_child("/aslr-child", i, x)) return 1;
        for (int b = 0; b < INTERP; b++) v[b][i] = x[b];
        if (x[5]) {
            windows++;
            uint64_t base = x[4], size = x[5], text = x[0];
            if (base % size || text < base + size / 4 || text >= base + size) {
                if (window_bad++ < 3) printf("aslr: text 0x%llx, window 0x%llx + 0x%llx\n", x[0], x[4], x[5]);
            }
        }
    }
    int ok = 1;
    printf("aslr: %d execs of /aslr-child%s\n", n, dynamic ? " and of /aslr-dyn" : "");
    for (int b = 0; b < (dynamic ? BASES : INTERP); b++) {
        uint64_t varying = 0, ones[64] = {0};
        for (int i = 0; i < n; i++) {
            varying |= v[b][i] ^ v[b][0];
            for (int k = 0; k < 64; k++) ones[k] += (v[b][i] >> k) & 1;
        }
        double bits = 0;
        for (int k = 0; k < 64; k++) {
            double p = (double)ones[k] / n;
            if (p > 0 && p < 1) bits -= p * log2(p) + (1 - p) * log2(1 - p);
        }
        qsort(v[b], n, sizeof(uint64_t), compare);
        int distinct = 0;
        double shannon = 0;
        for (int i = 0, j; i < n; i = j) {
            for (j = i; j < n && v[b][j] == v[b][i]; j++) {}
            double p = (double)(j - i) / n;
            shannon -= p * log2(p);
            distinct++;
        }
        printf("aslr: %-5s distinct %d, shannon %.2f bits, varying bits %d (mask 0x%llx), bits %.2f\n", names[b],
               distinct, shannon, __builtin_popcountll(varying), (unsigned long long)varying, bits);
        if (check && distinct <= n / 2) {
            printf("aslr: FAIL %s took only %d values in %d execs\n", names[b], distinct, n);
            ok = 0;
        }
    }
    if (windows)
        printf("aslr: code window: %d of %d texts%s outside the rule\n", window_bad, windows,
               dynamic ? " (or interpreters)" : "");
    if (check && window_bad) ok = 0;
    if (check) printf("aslr: %s\n", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}
