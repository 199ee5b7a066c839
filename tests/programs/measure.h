/* measure.h: what the repository's measuring programs (memfd.c and memcost.c in their "measure"
 * modes) read around an operation, the same way on this kernel and on Linux, so that
 * scripts/bench can print the two side by side.
 *
 * - Guest instructions retired (user and kernel): Linux through perf_event_open (the task and,
 *   with inherit, the children it waited for), this kernel from PMEVCNTR0_EL0 (programmed to
 *   INST_RETIRED and opened to EL0; it counts the CPU). QEMU's TCG counts them only under
 *   -icount, so they come from separate runs with -icount shift=0; 0 without it.
 * - Or every instruction the CPU retires, whatever task runs (cpu_instructions after
 *   measure_cpu_init): Linux through perf_event_open on CPU 0 for every task, this kernel from
 *   the same PMEVCNTR0_EL0. With one CPU that is the whole guest, the same count on both kernels;
 *   the task count misses what Linux does outside the task (a child's teardown after its exit).
 * - TLBIs and page faults: this kernel's SYS_MM_STATS (Linux has no such counter: 0 there).
 * - Time: CLOCK_MONOTONIC. */
#ifndef MEASURE_H
#define MEASURE_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SYS_MM_STATS 1002

struct mm_stats {
    uint64_t tlbi[8], promotions, demotions, page_faults, rest[16];
};

static int perf_fd = -1;
static int cpu_perf_fd = -1;
static int have_stats;
/* The program name the report lines begin with. */
static const char *measure_prefix = "measure";

/* Opens the instruction counter (Linux) and finds SYS_MM_STATS (this kernel); prints which. */
static inline void measure_init(const char *prefix) {
    measure_prefix = prefix;
    struct {
        uint32_t type, size;
        uint64_t config, sample, sample_type, read_format, flags, rest[10];
    } attr;
    memset(&attr, 0, sizeof attr);
    attr.type = 0;     /* PERF_TYPE_HARDWARE */
    attr.size = 128;   /* PERF_ATTR_SIZE_VER7 and below accept this */
    attr.config = 1;   /* PERF_COUNT_HW_INSTRUCTIONS; kernel and user counted */
    attr.flags = 1u << 1; /* inherit: a child's count joins the parent's when it exits */
    perf_fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    struct mm_stats st;
    have_stats = syscall(SYS_MM_STATS, &st, sizeof st) > 0; /* bytes written; Linux: ENOSYS */
    printf("%s: measuring on %s (instructions from %s)\n", prefix, have_stats ? "this kernel" : "Linux",
           perf_fd >= 0 ? "perf_event_open" : have_stats ? "PMEVCNTR0_EL0" : "nothing");
}

static inline uint64_t instructions(void) {
    if (perf_fd >= 0) {
        uint64_t n = 0;
        return read(perf_fd, &n, sizeof n) == sizeof n ? n : 0;
    }
    if (!have_stats) return 0; /* Linux without a counter: PMEVCNTR0_EL0 is closed to EL0 */
    uint64_t n;
    __asm__ volatile("mrs %0, pmevcntr0_el0" : "=r"(n));
    return n;
}

/* Opens the CPU-wide count (Linux: CPU 0, every task; this kernel's PMEVCNTR0_EL0 already is
 * one); prints which. Every function here is `static inline`: a program that includes this header
 * and uses a part of it (memfd.c, dyncost.c) builds without unused-function warnings. */
static inline void measure_cpu_init(void) {
    struct {
        uint32_t type, size;
        uint64_t config, sample, sample_type, read_format, flags, rest[10];
    } attr;
    memset(&attr, 0, sizeof attr);
    attr.type = 0;   /* PERF_TYPE_HARDWARE */
    attr.size = 128; /* PERF_ATTR_SIZE_VER7 and below accept this */
    attr.config = 1; /* PERF_COUNT_HW_INSTRUCTIONS; kernel and user counted */
    cpu_perf_fd = (int)syscall(SYS_perf_event_open, &attr, -1, 0, -1, 0);
    printf("%s: CPU-wide instructions from %s\n", measure_prefix,
           cpu_perf_fd >= 0 ? "perf_event_open (CPU 0, every task)" : have_stats ? "PMEVCNTR0_EL0" : "nothing");
}

/* For a program that counts CPU-wide only (dyncost.c): finds SYS_MM_STATS and opens the CPU-wide
 * count, without measure_init's task counter, whose inheritance would add work to every fork
 * and exit on Linux. */
static inline void measure_cpu_only_init(const char *prefix) {
    measure_prefix = prefix;
    struct mm_stats st;
    have_stats = syscall(SYS_MM_STATS, &st, sizeof st) > 0; /* bytes written; Linux: ENOSYS */
    measure_cpu_init();
}

static inline uint64_t cpu_instructions(void) {
    uint64_t n = 0;
    if (cpu_perf_fd >= 0) return read(cpu_perf_fd, &n, sizeof n) == sizeof n ? n : 0;
    if (have_stats) __asm__ volatile("mrs %0, pmevcntr0_el0" : "=r"(n));
    return n;
}

static inline void counters(uint64_t *tlbis, uint64_t *faults) {
    struct mm_stats st;
    memset(&st, 0, sizeof st);
    *tlbis = *faults = 0;
    if (!have_stats) return;
    syscall(SYS_MM_STATS, &st, sizeof st);
    for (int i = 0; i < 8; i++) *tlbis += st.tlbi[i];
    *faults = st.page_faults;
}

struct sample {
    uint64_t insns, tlbis, faults, ns;
};

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline struct sample mark(void) {
    struct sample s;
    counters(&s.tlbis, &s.faults);
    s.ns = now_ns();
    s.insns = instructions();
    return s;
}

/* The CPU-wide samples: one that opens an interval reads the count last, one that closes it
 * reads it first, so that the interval holds as little of the reading (SYS_MM_STATS and
 * clock_gettime are system calls here) as possible. */
static inline struct sample mark_cpu_start(void) {
    struct sample s;
    counters(&s.tlbis, &s.faults);
    s.ns = now_ns();
    s.insns = cpu_instructions();
    return s;
}

static inline struct sample mark_cpu_end(void) {
    struct sample s;
    s.insns = cpu_instructions();
    s.ns = now_ns();
    counters(&s.tlbis, &s.faults);
    return s;
}

/* "PREFIX: WHAT: N instructions, T TLBIs, F faults, NS ns (per round, n rounds)" for b - a over n. */
static inline void report(const char *what, struct sample a, struct sample b, unsigned n) {
    printf("%s: %s: %lu instructions, %lu.%02lu TLBIs, %lu.%02lu faults, %lu ns (per round, %u rounds)\n",
           measure_prefix, what, (unsigned long)((b.insns - a.insns) / n), (unsigned long)((b.tlbis - a.tlbis) / n),
           (unsigned long)((b.tlbis - a.tlbis) * 100 / n % 100), (unsigned long)((b.faults - a.faults) / n),
           (unsigned long)((b.faults - a.faults) * 100 / n % 100), (unsigned long)((b.ns - a.ns) / n), n);
}
#endif
