// growsdown-test: stacks that grow, as Linux 6.1 grows them for an unmodified static glibc
// program. A MAP_GROWSDOWN mapping grows down to the page of a write below it, as far as
// RLIMIT_STACK allows and no closer than the stack guard gap (256 pages, 1 MiB) to an accessible
// mapping below; a refused access is SIGSEGV with SEGV_MAPERR at the faulting address, and the
// mapping stays as it was. The main thread's stack grows the same way within RLIMIT_STACK.
// Addresses are compared, never printed. Each case runs in a child process of its own (check.h's
// run_cases_apart), prints "ok - NAME" or "FAIL - NAME"; the last line is "N passed, N failed";
// the output is Linux 6.1's (tests/linux-parity/growsdown-test.out). Built by scripts/lib.sh
// (build_linux_programs).
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "check.h"

#define PAGE 4096UL
#define MIB (1UL << 20)

static sigjmp_buf fault_jump;
static volatile int fault_sig, fault_code;
static volatile uintptr_t fault_addr;

static void on_fault(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    fault_sig = sig;
    fault_code = si->si_code;
    fault_addr = (uintptr_t)si->si_addr;
    siglongjmp(fault_jump, 1);
}

// catch_faults: SIGSEGV and SIGBUS to on_fault, on an alternate stack (a fault may be the stack's).
static void catch_faults(void) {
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);
    struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

// touch: writes a byte at ADDR; 0 when it worked, else the signal (fault_code/fault_addr say more).
static int touch(uintptr_t addr) {
    fault_sig = 0;
    if (sigsetjmp(fault_jump, 1) == 0) {
        *(volatile char *)addr = 7;
        return 0;
    }
    return fault_sig;
}

// mapping_of: the /proc/self/maps range holding ADDR (start and end), and its smaps VmFlags.
static int mapping_of(uintptr_t addr, uintptr_t *start, uintptr_t *end, char *flags, size_t size) {
    static char buf[1 << 16];
    int fd = open("/proc/self/smaps", O_RDONLY);
    if (fd < 0) return -1;
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0) got += n;
    buf[got] = 0;
    close(fd);
    int found = 0;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        unsigned long s, e;
        if (sscanf(l, "%lx-%lx ", &s, &e) == 2 && strchr(l, ' ') == strchr(l, '-') + 1 + strcspn(strchr(l, '-') + 1, " ")) {
            found = s <= addr && addr < e;
            if (found) *start = s, *end = e;
        } else if (found && strncmp(l, "VmFlags:", 8) == 0) {
            snprintf(flags, size, "%s", l + 8);
            return 0;
        }
    }
    return -1;
}

static void set_stack_limit(rlim_t bytes) {
    struct rlimit rl;
    getrlimit(RLIMIT_STACK, &rl);
    rl.rlim_cur = bytes;
    setrlimit(RLIMIT_STACK, &rl);
}

static void test_growsdown_mapping(void) {
    catch_faults();
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur == 8 * MIB && rl.rlim_max == RLIM_INFINITY, "Linux's default RLIMIT_STACK: %ld", (long)rl.rlim_cur);
    // The layout, from a 40 MiB reservation: a readable floor page at its bottom, a hole, and a
    // one-page MAP_GROWSDOWN mapping 32 MiB up.
    char *r = mmap(NULL, 40 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(r != MAP_FAILED, "reserve");
    uintptr_t floor = (uintptr_t)r, floor_end = floor + PAGE, top = floor + 32 * MIB;
    CHECK_SYS(mprotect(r, PAGE, PROT_READ));
    char *g = mmap((void *)top, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_GROWSDOWN, -1, 0);
    CHECK(g == (char *)top, "the MAP_GROWSDOWN mapping");
    CHECK_SYS(munmap((void *)floor_end, top - floor_end));
    uintptr_t s, e;
    char flags[256];
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == top && e == top + PAGE, "one page at first");
    CHECK(strstr(flags, " gd"), "VmFlags has gd: %s", flags);
    // A write 10 pages below grows the mapping down to that page; the pages between read zero.
    CHECK(touch(top - 10 * PAGE + 5) == 0, "a write below grew it: signal %d code %d", fault_sig, fault_code);
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == top - 10 * PAGE && e == top + PAGE, "the mapping starts 10 pages down: %ld pages", (long)((e - s) / PAGE));
    CHECK(*(volatile char *)(top - 5 * PAGE) == 0 && *(volatile char *)(top - 10 * PAGE + 5) == 7, "contents");
    // A read below grows it too.
    CHECK(*(volatile char *)(top - 12 * PAGE) == 0, "read");
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == top - 12 * PAGE, "a read grew it");
    // RLIMIT_STACK bounds the size: with 1 MiB, a write 2 MiB down is refused.
    set_stack_limit(1 * MIB);
    uintptr_t far = top - 2 * MIB;
    CHECK(touch(far) == SIGSEGV, "past RLIMIT_STACK: signal %d", fault_sig);
    CHECK(fault_code == SEGV_MAPERR && fault_addr == far, "SEGV_MAPERR at the address: code %d, address matches %d", fault_code, fault_addr == far);
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == top - 12 * PAGE, "unchanged after the refusal");
    CHECK(touch(top - 200 * PAGE) == 0, "within the limit it still grows");
    // With room in the limit, the guard gap: no closer than 1 MiB to the readable floor.
    set_stack_limit(64 * MIB);
    CHECK(touch(floor_end + 2 * MIB) == 0, "2 MiB above the floor: signal %d", fault_sig);
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == floor_end + 2 * MIB, "grown to 2 MiB above the floor");
    CHECK(touch(floor_end + MIB + PAGE) == 0, "1 MiB and a page above the floor");
    CHECK(touch(floor_end + MIB) == 0, "exactly 1 MiB above the floor");
    uintptr_t in_gap = floor_end + MIB - PAGE;
    CHECK(touch(in_gap) == SIGSEGV && fault_code == SEGV_MAPERR && fault_addr == in_gap, "inside the guard gap: signal %d code %d", fault_sig, fault_code);
    CHECK(touch(floor_end + 512 * 1024) == SIGSEGV, "deeper in the gap");
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == floor_end + MIB, "stopped at the gap: %ld KiB above the floor", (long)((s - floor_end) >> 10));
    CHECK(touch(floor) == SIGSEGV && fault_code == SEGV_ACCERR, "the read-only floor: code %d", fault_code);
    // An inaccessible (PROT_NONE) mapping below keeps no gap.
    CHECK_SYS(mprotect((void *)floor, PAGE, PROT_NONE));
    CHECK(touch(floor_end + 512 * 1024) == 0, "with a PROT_NONE floor the gap is gone: signal %d", fault_sig);
    CHECK(touch(floor_end) == 0, "right down to it");
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == floor_end, "the mapping meets the floor");
    CHECK(touch(floor) == SIGSEGV && fault_code == SEGV_ACCERR, "and no further: code %d", fault_code);
    // The grown pages are ordinary: munmap of the middle splits it.
    CHECK_SYS(munmap((void *)(top - 16 * PAGE), PAGE));
    CHECK(mapping_of(top, &s, &e, flags, sizeof flags) == 0 && s == top - 15 * PAGE, "split by munmap");
}

static void test_growsdown_limits(void) {
    catch_faults();
    // MAP_GROWSDOWN with a file, or in a shared mapping, is refused.
    int fd = open("/tmp/growsdown-file", O_RDWR | O_CREAT, 0644);
    CHECK_SYS(ftruncate(fd, PAGE));
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_GROWSDOWN, fd, 0) == MAP_FAILED && errno == EINVAL, "a file: %s", strerrorname_np(errno));
    CHECK(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0) == MAP_FAILED && errno == EINVAL, "shared anonymous: %s", strerrorname_np(errno));
    // A growsdown mapping placed by the kernel keeps the guard gap from what is mapped below it
    // when growing: touching the page right below it works.
    char *g = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
    CHECK(g != MAP_FAILED, "mmap");
    int sig = touch((uintptr_t)g - PAGE);
    printf("    a kernel-placed MAP_GROWSDOWN mapping, one page below: signal %d\n", sig);
    // mprotect with PROT_GROWSDOWN applies down to the mapping's start.
    CHECK(touch((uintptr_t)g + PAGE) == 0, "inside");
    CHECK_SYS(mprotect(g + 2 * PAGE, PAGE, PROT_READ | PROT_GROWSDOWN));
    CHECK(touch((uintptr_t)g + PAGE) == SIGSEGV && fault_code == SEGV_ACCERR, "PROT_GROWSDOWN made the lower pages read-only too: %d", fault_sig);
    char *plain = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mprotect(plain, PAGE, PROT_READ | PROT_GROWSDOWN) == -1 && errno == EINVAL, "PROT_GROWSDOWN on a plain mapping: %s", strerrorname_np(errno));
}

static void test_main_stack(void) {
    catch_faults();
    volatile char here = 0;
    uintptr_t sp = (uintptr_t)&here;
    // The main stack grows on demand, as far as RLIMIT_STACK (8 MiB).
    CHECK(touch(sp - 4 * MIB) == 0, "4 MiB below the stack pointer: signal %d", fault_sig);
    CHECK(touch(sp - 7 * MIB) == 0, "7 MiB below: signal %d", fault_sig);
    uintptr_t deep = sp - 12 * MIB;
    CHECK(touch(deep) == SIGSEGV && fault_code == SEGV_MAPERR && fault_addr == deep, "12 MiB below: signal %d code %d", fault_sig, fault_code);
    // Raising the limit lets it grow further; lowering it stops growth, not what is there.
    set_stack_limit(32 * MIB);
    CHECK(touch(deep) == 0, "with 32 MiB: signal %d", fault_sig);
    set_stack_limit(1 * MIB);
    CHECK(touch(sp - 10 * MIB) == 0, "already there");
    CHECK(touch(sp - 20 * MIB) == SIGSEGV && fault_code == SEGV_MAPERR, "1 MiB limit: signal %d", fault_sig);
    char flags[256];
    uintptr_t s, e;
    CHECK(mapping_of(sp, &s, &e, flags, sizeof flags) == 0 && strstr(flags, " gd") && s <= deep, "the stack is one growsdown mapping: %s", flags);
    // A child process sees the limit it inherits.
    set_stack_limit(8 * MIB);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_STACK, &rl);
        _exit(rl.rlim_cur == 8 * MIB ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "inherited limit");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"growsdown_mapping", test_growsdown_mapping},
        {"growsdown_limits", test_growsdown_limits},
        {"main_stack", test_main_stack},
    };
    return run_cases_apart(cases, sizeof cases / sizeof cases[0], argc, argv, 15);
}
