// memcost: what fork, a copy-on-write fault and mremap cost, measured the same way on this
// kernel and on Linux (measure.h: guest instructions, TLBIs, faults, time), for scripts/bench.
//
// "memcost-test measure" prints one line per operation:
// - fork + exit + wait of a process with 64 MiB touched, with 4 KiB pages (MADV_NOHUGEPAGE) and
//   with the default (2 MiB blocks here; Debian's Linux THP policy otherwise): the whole cycle,
//   the fork call and the exit side, each counting every instruction of the CPU (see
//   fork_exit_wait for why);
// - the copy-on-write fault: the parent writes one byte per page of 4 MiB shared with a live
//   child (a copy each), then, the child gone, again (each the last reference: a reuse);
// - mremap(MREMAP_MAYMOVE | MREMAP_FIXED) of 1 MiB and 64 MiB of touched memory to a reserved
//   range and back, checking that every page arrived with its contents (moved, not copied: a
//   copy of 64 MiB alone would take millions of instructions);
// - a read fault on untouched private anonymous memory (64 MiB, one load per page), and the
//   memory those 64 MiB hold afterwards (the shared zero page: none).
// - clock_gettime(CLOCK_MONOTONIC) through the C library (glibc calls the vDSO's
//   __kernel_clock_gettime where the kernel offers one) and as the system call, per call.
// "memcost-test measure clock" measures only the last; "memcost-test measure mte" only a write
// fault on fresh pages without and with PROT_MTE (tag zeroing's cost, on -M virt,mte=on).
// Every check prints "memcost: FAIL ..." and the program exits 1 when one fails.
// Built by scripts/bench with aarch64-linux-gnu-gcc -static; runs unchanged on Linux.
#define _GNU_SOURCE
#include <fcntl.h>
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

/* Where a forked child leaves its samples for the parent to read after the wait: the first
 * when it is back from fork, the last just before _exit (a MAP_SHARED page; the first is kept on
 * the stack until after the page's first write, so that the fault Linux takes there lies in
 * neither interval). */
struct child_mark {
    volatile int written;
    struct sample returned, exiting;
};

/* b - a added to *sum. */
static void add_interval(struct sample *sum, struct sample a, struct sample b) {
    sum->insns += b.insns - a.insns;
    sum->tlbis += b.tlbis - a.tlbis;
    sum->faults += b.faults - a.faults;
    sum->ns += b.ns - a.ns;
}

/* fork + exit + wait, counted over the whole CPU (cpu_instructions) rather than the task: a
 * count of the task with inherit (measure.h's `instructions`) adds the child's instructions at
 * its exit but not what Linux spends tearing the child's memory down after that (it runs in the
 * parent's wait or outside both tasks), so it undercounts Linux's cycle by millions. With one
 * CPU the CPU-wide count is the whole guest on both kernels, the same method on each. Besides
 * the whole cycle, two intervals of it:
 * - the fork call: the parent's fork() entry to its return, or to the child's return if the
 *   child runs first (a scheduler may switch to it at the end of a long fork: this kernel's
 *   timer does in some rounds), so that the child's life is never inside it;
 * - the exit side: the child's _exit (its last sample) to the parent's waitpid return, the
 *   child's teardown included wherever each kernel does it.
 * The rest of the cycle (the parent entering waitpid and sleeping, the other side's return from
 * fork) is in the whole row only. */
static void fork_exit_wait(int small_pages) {
    enum { ROUNDS = 5 };
    size_t len = 64 * MIB;
    const char *pages = small_pages ? "4 KiB pages" : "default pages";
    char *a = touched(len, small_pages);
    struct child_mark *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        fail("mmap of the shared page");
        return;
    }
    struct sample none = {0}, fork_call = {0}, exit_side = {0};
    int child_first = 0;
    fflush(stdout);
    struct sample s0 = mark_cpu_start();
    for (int r = 0; r < ROUNDS; r++) {
        m->written = 0;
        struct sample entry = mark_cpu_start();
        pid_t pid = fork();
        if (pid == 0) {
            struct sample returned = mark_cpu_end();
            m->written = 1;
            m->returned = returned;
            m->exiting = mark_cpu_start();
            _exit(0);
        }
        struct sample returned = mark_cpu_end();
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) fail("wait");
        struct sample waited = mark_cpu_end();
        if (!m->written) fail("the child's samples");
        // Which side came back first, by time (runs without -icount count no instructions).
        int ran_first = m->returned.ns < returned.ns;
        child_first += ran_first;
        add_interval(&fork_call, entry, ran_first ? m->returned : returned);
        add_interval(&exit_side, m->exiting, waited);
    }
    struct sample s1 = mark_cpu_end();
    char what[160];
    snprintf(what, sizeof what, "fork + exit + wait, 64 MiB touched, %s", pages);
    report(what, s0, s1, ROUNDS);
    snprintf(what, sizeof what, "  fork call, entry to the first return (%s)", pages);
    report(what, none, fork_call, ROUNDS);
    snprintf(what, sizeof what, "  exit side, child's _exit to wait's return (%s)", pages);
    report(what, none, exit_side, ROUNDS);
    if (child_first)
        printf("memcost: note: the child ran before the parent's fork returned in %d of %d rounds (%s): the "
               "fork call ends at the child's return there\n", child_first, ROUNDS, pages);
    munmap(m, PAGE);
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

static void clock_reads(void) {
    enum { ROUNDS = 1000 };
    struct timespec t, last = {0, 0};
    struct sample s0 = mark();
    for (int r = 0; r < ROUNDS; r++) clock_gettime(CLOCK_MONOTONIC, &t);
    struct sample s1 = mark();
    // Not measured: the reading never goes back.
    for (int r = 0; r < ROUNDS; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec < last.tv_sec || (t.tv_sec == last.tv_sec && t.tv_nsec < last.tv_nsec)) fail("the clock went back");
        last = t;
    }
    report("clock_gettime(CLOCK_MONOTONIC) through the C library (the vDSO)", s0, s1, ROUNDS);
    s0 = mark();
    for (int r = 0; r < ROUNDS; r++) syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    s1 = mark();
    report("clock_gettime(CLOCK_MONOTONIC) as a system call", s0, s1, ROUNDS);
}

// The number after `key` in /proc/self/smaps's block of the area starting at `start` (or in
// /proc/meminfo with start NULL), in kB, or -1; read into a static buffer (no heap).
static long kb_of(const void *start, const char *key) {
    static char text[1 << 16];
    size_t len = 0;
    ssize_t n;
    int fd = open(start ? "/proc/self/smaps" : "/proc/meminfo", O_RDONLY);
    while (fd >= 0 && len < sizeof text - 1 && (n = read(fd, text + len, sizeof text - 1 - len)) > 0) len += n;
    if (fd >= 0) close(fd);
    text[len] = 0;
    char head[32];
    snprintf(head, sizeof head, "\n%08lx-", (unsigned long)start);
    const char *at = start ? strstr(text, head) : text;
    at = at ? strstr(at, key) : NULL;
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

// A load from each page of 64 MiB of private anonymous memory never written (4 KiB pages: no
// huge zero page on Linux), per page, then what the area holds: its Rss in /proc/self/smaps
// (Linux maps its shared zero page, which Rss does not count) and how far MemFree fell.
static void read_untouched(void) {
    size_t len = 64 * MIB;
    volatile char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) {
        fail("mmap");
        return;
    }
    madvise((void *)a, len, MADV_NOHUGEPAGE);
    long free0 = kb_of(NULL, "MemFree:");
    unsigned long sum = 0;
    struct sample s0 = mark();
    for (size_t i = 0; i < len; i += PAGE) sum += a[i];
    struct sample s1 = mark();
    long free1 = kb_of(NULL, "MemFree:");
    report("read fault, 64 MiB untouched (per page)", s0, s1, len / PAGE);
    if (sum != 0) fail("untouched memory read non-zero");
    printf("memcost: read 64 MiB untouched: %ld kB held (Rss), MemFree %ld kB lower\n", kb_of((void *)a, "Rss:"),
           free0 - free1);
    munmap((void *)a, len);
}

// A write to each page of 16 MiB of fresh private anonymous memory (4 KiB pages), per page,
// without and with PROT_MTE: on a CPU with MTE (-M virt,mte=on) a tagged page's fresh frame is
// zeroed with its allocation tags (STZ2G here, Linux's mte_zero_clear_page_tags), so the
// difference is what tag zeroing costs per page. Without MTE both kernels ignore PROT_MTE.
static void tag_zeroing(void) {
    for (int tagged = 0; tagged < 2; tagged++) {
        size_t len = 16 * MIB;
        int prot = PROT_READ | PROT_WRITE | (tagged ? 0x20 /* PROT_MTE */ : 0);
        volatile char *a = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED) {
            fail("mmap");
            continue;
        }
        madvise((void *)a, len, MADV_NOHUGEPAGE);
        struct sample s0 = mark();
        for (size_t i = 0; i < len; i += PAGE) a[i] = 1;
        struct sample s1 = mark();
        report(tagged ? "write fault, fresh page, PROT_MTE (per page)" : "write fault, fresh page (per page)", s0, s1,
               len / PAGE);
        munmap((void *)a, len);
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || strcmp(argv[1], "measure") != 0) {
        printf("usage: memcost-test measure [clock|mte]\n");
        return 2;
    }
    measure_init("memcost");
    if (argc > 2 && (strcmp(argv[2], "clock") == 0 || strcmp(argv[2], "mte") == 0)) {
        if (strcmp(argv[2], "clock") == 0)
            clock_reads();
        else
            tag_zeroing();
        printf("memcost: done, %d failed\n", failures);
        return failures != 0;
    }
    measure_cpu_init();
    fork_exit_wait(1);
    fork_exit_wait(0);
    cow_faults();
    move(1 * MIB, "mremap 1 MiB touched (moved)");
    move(64 * MIB, "mremap 64 MiB touched (moved)");
    clock_reads();
    read_untouched();
    printf("memcost: done, %d failed\n", failures);
    return failures != 0;
}
