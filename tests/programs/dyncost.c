/* dyncost: what dynamically linked programs cost, measured the same way on this kernel and on
 * Linux, for scripts/bench's section "dynamic programs". A static program; it runs unchanged on
 * both kernels, alone on one CPU (-smp 1).
 *
 * "dyncost measure HELLO" prints one line per figure:
 * - exec of a dynamically linked hello to its exit: fork, execve(HELLO) (the interpreter maps
 *   libc.so.6), the hello's output into a pipe, its exit, and the parent's wait, per cycle;
 * - a fault that hits the page cache: a file in /tmp written first (its pages in the cache), then
 *   mapped MAP_PRIVATE read-only and one byte of every page read, per page touched, with the
 *   faults taken (getrusage's ru_minflt, on both kernels), and the pages one fault maps (the
 *   mapping's Rss in /proc/self/smaps after reading one page: Linux's fault-around maps the cached
 *   neighbours too).
 * "dyncost python N" starts N python3 processes (/usr/bin/python3 of a root image) that import a
 * few modules and then block reading a pipe, and prints each one's /proc/PID/smaps_rollup Rss and
 * Pss with their sums, and /proc/meminfo's used memory (MemTotal - MemAvailable, and MemTotal -
 * MemFree) before the first starts and when all N are ready (Linux's root image is tmpfs: its
 * file pages show as Pss_Shmem there). The modes run in the order given: `dyncost measure /hello
 * python 8` runs both.
 *
 * Guest instructions are counted for the whole CPU, kernel and user alike, across the whole
 * cycle: on Linux a CPU-wide perf_event_open counter (pid -1, cpu 0), on this kernel
 * PMEVCNTR0_EL0 (event counter 0 counts INST_RETIRED at EL0 and EL1 for the CPU, readable at
 * EL0). A per-task counter with `inherit` (tests/programs/measure.h) would miss what Linux does
 * after a child's exit is counted (tearing its memory down), so it is not used here. QEMU's TCG
 * counts instructions only under -icount: scripts/bench takes them from runs with -icount
 * shift=0 and times from runs without (instructions 0 there). Time: CLOCK_MONOTONIC.
 * Anything that goes wrong prints "dyncost: FAIL ..." and the program exits 1. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "measure.h"

#define PAGE 4096UL

static int failures;

static void fail(const char *what) {
    printf("dyncost: FAIL %s\n", what);
    failures++;
}

static long minor_faults(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

/* One fork + execve(path) + exit + wait; the child's output goes into `out`, drained after. */
static void exec_once(const char *path, int out[2]) {
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("exec of the hello (fork, execve or its exit status)");
    char buf[256];
    if (read(out[0], buf, sizeof buf) <= 0) fail("the hello printed nothing");
}

static void exec_cost(const char *path) {
    enum { CYCLES = 20 };
    int out[2];
    if (pipe(out) != 0) {
        fail("pipe");
        return;
    }
    exec_once(path, out); /* the first one reads the files from the initramfs into the cache */
    fflush(stdout);
    uint64_t t0 = now_ns(), i0 = cpu_instructions();
    for (int c = 0; c < CYCLES; c++) exec_once(path, out);
    uint64_t i1 = cpu_instructions(), t1 = now_ns();
    printf("dyncost: exec of a dynamically linked hello to its exit: %lu instructions, %lu ns (per cycle, %d cycles)\n",
           (unsigned long)((i1 - i0) / CYCLES), (unsigned long)((t1 - t0) / CYCLES), CYCLES);
    close(out[0]);
    close(out[1]);
}

/* The Rss in KiB of the smaps block that starts at `start`, or -1. */
static long smaps_rss_kib(const void *start) {
    char want[32], line[256];
    snprintf(want, sizeof want, "%lx-", (unsigned long)start);
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    long rss = -1;
    int in_block = 0;
    while (fgets(line, sizeof line, f)) {
        if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' ') && line[0] != ' ') {
            /* A header line: "start-end perms offset dev inode [name]". */
            int hex = 1;
            for (char *c = line; *c != '-'; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) hex = 0;
            if (hex) in_block = strncmp(line, want, strlen(want)) == 0;
        }
        if (in_block && sscanf(line, "Rss: %ld kB", &rss) == 1) break;
    }
    fclose(f);
    return rss;
}

static void file_fault_cost(void) {
    enum { PAGES = 1024, ROUNDS = 8 };
    size_t len = PAGES * PAGE;
    const char *path = "/tmp/dyncost-file";
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        fail("open /tmp/dyncost-file");
        return;
    }
    char *page = malloc(PAGE);
    for (size_t p = 0; p < PAGES; p++) {
        memset(page, (int)(p & 0xff), PAGE);
        if (write(fd, page, PAGE) != (ssize_t)PAGE) fail("write");
    }
    free(page);
    /* Every page read back once through read(2): all of them are in the page cache. */
    char buf[PAGE];
    if (lseek(fd, 0, SEEK_SET) != 0) fail("lseek");
    while (read(fd, buf, sizeof buf) > 0) {
    }

    uint64_t insns = 0, ns = 0;
    long faults = 0;
    unsigned sum = 0;
    for (int r = 0; r < ROUNDS; r++) {
        volatile char *a = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (a == MAP_FAILED) {
            fail("mmap of the file");
            break;
        }
        long f0 = minor_faults();
        uint64_t t0 = now_ns(), i0 = cpu_instructions();
        for (size_t p = 0; p < PAGES; p++) sum += (unsigned char)a[p * PAGE];
        uint64_t i1 = cpu_instructions(), t1 = now_ns();
        faults += minor_faults() - f0;
        insns += i1 - i0;
        ns += t1 - t0;
        munmap((void *)a, len);
    }
    unsigned want = 0;
    for (size_t p = 0; p < PAGES; p++) want += (unsigned)(p & 0xff);
    if (sum != want * ROUNDS) fail("the mapping's pages do not hold the file's bytes");
    unsigned long touched = (unsigned long)PAGES * ROUNDS;
    printf("dyncost: read fault on a cached file page (MAP_PRIVATE, read-only): %lu instructions, %lu ns "
           "(per page touched, %lu pages), %ld.%02ld pages touched per fault (%ld faults)\n",
           (unsigned long)(insns / touched), (unsigned long)(ns / touched), touched,
           faults ? (long)touched / faults : 0, faults ? (long)touched * 100 / faults % 100 : 0, faults);

    /* Fault-around: the pages mapped by one read fault in the middle of the file's mapping. */
    volatile char *a = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) {
        fail("mmap of the file");
    } else {
        long before = smaps_rss_kib((const void *)a);
        (void)a[PAGES / 2 * PAGE];
        long after = smaps_rss_kib((const void *)a);
        if (before < 0 || after < 0) fail("no smaps block for the file's mapping");
        printf("dyncost: pages mapped by one read fault on a cached file (smaps Rss): %ld (Rss %ld kB before, %ld kB after)\n",
               (after - before) * 1024 / (long)PAGE, before, after);
        munmap((void *)a, len);
    }
    close(fd);
    unlink(path);
}

/* Sums "Key: N kB" fields of a /proc file into vals (keys[i] -> vals[i]; -1 where absent). */
static void read_fields(const char *path, const char *const *keys, long *vals, int n) {
    for (int i = 0; i < n; i++) vals[i] = -1;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        for (int i = 0; i < n; i++) {
            size_t k = strlen(keys[i]);
            long v;
            if (strncmp(line, keys[i], k) == 0 && line[k] == ':' && sscanf(line + k + 1, "%ld", &v) == 1) vals[i] = v;
        }
    }
    fclose(f);
}

static void meminfo_used(long *used_available, long *used_free) {
    static const char *const keys[] = {"MemTotal", "MemFree", "MemAvailable"};
    long v[3];
    read_fields("/proc/meminfo", keys, v, 3);
    *used_available = v[0] < 0 || v[2] < 0 ? -1 : v[0] - v[2];
    *used_free = v[0] < 0 || v[1] < 0 ? -1 : v[0] - v[1];
}

static void python_memory(int n) {
    enum { MAX = 16 };
    static const char *code = "import os, json, pathlib, re, subprocess, threading; "
                              "os.write(1, b'r'); os.read(0, 1)";
    if (n < 1 || n > MAX) n = 8;
    long used0, free0, used1, free1;
    meminfo_used(&used0, &free0);
    pid_t pids[MAX];
    int go[MAX], ready[MAX];
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++) {
        int in[2], out[2];
        if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
            fail("pipe");
            return;
        }
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] == 0) {
            dup2(in[0], 0);
            dup2(out[1], 1);
            execl("/usr/bin/python3", "python3", "-c", code, (char *)NULL);
            _exit(127);
        }
        close(in[0]);
        close(out[1]);
        go[i] = in[1];
        ready[i] = out[0];
    }
    for (int i = 0; i < n; i++) {
        char c;
        if (read(ready[i], &c, 1) != 1) fail("a python3 process did not start");
    }
    uint64_t t1 = now_ns();
    meminfo_used(&used1, &free1);
    static const char *const keys[] = {"Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem"};
    long sum[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        char path[64];
        long v[5];
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pids[i]);
        read_fields(path, keys, v, 5);
        if (v[0] < 0 || v[1] < 0) fail("smaps_rollup has no Rss or Pss");
        printf("dyncost: python3 %d: Rss %ld kB, Pss %ld kB, Pss_Anon %ld kB, Pss_File %ld kB, Pss_Shmem %ld kB\n", i + 1,
               v[0], v[1], v[2], v[3], v[4]);
        for (int k = 0; k < 5; k++) sum[k] += v[k];
    }
    printf("dyncost: %d python3 processes, summed: Pss %ld kB, Rss %ld kB, Pss_Anon %ld kB, Pss_File %ld kB, Pss_Shmem %ld kB\n",
           n, sum[1], sum[0], sum[2], sum[3], sum[4]);
    printf("dyncost: used memory (MemTotal - MemAvailable): %ld kB before, %ld kB with %d python3 (+%ld kB); "
           "MemTotal - MemFree: %ld kB before, %ld kB with them (+%ld kB)\n",
           used0, used1, n, used1 - used0, free0, free1, free1 - free0);
    printf("dyncost: %d python3 started and ready in %lu ms\n", n, (unsigned long)((t1 - t0) / 1000000));
    for (int i = 0; i < n; i++) {
        close(go[i]);
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail("a python3 process did not exit 0");
        close(ready[i]);
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The modes in the order given: "measure HELLO" and "python N", each once at most. */
    int ran = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "measure") == 0 && a + 1 < argc) {
            measure_cpu_only_init("dyncost");
            exec_cost(argv[++a]);
            file_fault_cost();
            ran++;
        } else if (strcmp(argv[a], "python") == 0 && a + 1 < argc) {
            python_memory(atoi(argv[++a]));
            ran++;
        } else {
            ran = 0;
            break;
        }
    }
    if (!ran) {
        printf("usage: dyncost [measure HELLO] [python N]\n");
        return 2;
    }
    printf("dyncost: done, %d failures\n", failures);
    return failures ? 1 : 0;
}
