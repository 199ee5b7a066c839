// memfd-test: shared memory as an unmodified static glibc program sees it: memfd_create (flags
// and names in Linux's errno order), ftruncate and fstat, read/write/lseek, MAP_SHARED views of
// the same pages, MAP_PRIVATE copy-on-write off the object, mappings surviving close, SIGBUS past
// the end after a shrink, fork sharing a MAP_SHARED memfd mapping, the W^X dual-mapping JIT
// (write through a read-write view, execute through a read-execute view of the same pages), and
// vfork sharing the parent's memory.
// Each case prints "ok - NAME" or "FAIL - NAME"; the last line is "N passed, N failed". The
// output is the same on Linux 6.1 (tests/linux-parity). On this kernel the JIT case also checks
// that the executable view lies in the code window.
// "memfd-test guard" runs the guard-region cases (MADV_GUARD_INSTALL/REMOVE, Linux 6.13: Linux
// 6.1 answers EINVAL, so they are no parity case; the semantics follow Linux's selftests,
// tools/testing/selftests/mm/guard-regions.c). "memfd-test measure" measures the JIT cycle.
// Built by scripts/lib.sh (build_linux_programs) with aarch64-linux-gnu-gcc -static.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "measure.h"

#define PAGE 4096L
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1U
#define MFD_ALLOW_SEALING 2U
#endif
#define SYS_CODE_WINDOW 1001
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103

static int memfd(const char *name, unsigned flags) { return (int)syscall(SYS_memfd_create, name, flags); }

// ---- faults caught: which signal, which code, at which address -----------------------------------

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

static void catch_faults(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

// Reads the byte at p; returns the signal it raised (0 if none), the byte in *out.
static int probe_read(volatile char *p, char *out) {
    fault_sig = 0;
    if (sigsetjmp(fault_jump, 1) == 0) {
        *out = *p;
        return 0;
    }
    return fault_sig;
}

static int probe_write(volatile char *p, char v) {
    fault_sig = 0;
    if (sigsetjmp(fault_jump, 1) == 0) {
        *p = v;
        return 0;
    }
    return fault_sig;
}

// ---- memfd_create, ftruncate, fstat, read/write ---------------------------------------------------

static void test_memfd_create_checks(void) {
    char name[300];
    memset(name, 'n', sizeof name);
    name[249] = 0;
    int fd = memfd(name, 0);
    CHECK(fd >= 0, "a 249-byte name: %s", strerror(errno));
    close(fd);
    name[249] = 'n';
    name[250] = 0;
    CHECK(memfd(name, 0) == -1 && errno == EINVAL, "a 250-byte name: errno %d", errno);
    CHECK(memfd("x", 0x100) == -1 && errno == EINVAL, "unknown flag: errno %d", errno);
    // Flags are checked before the name.
    CHECK(memfd((const char *)8, 0x100) == -1 && errno == EINVAL, "unknown flag, bad name: errno %d", errno);
    CHECK(memfd((const char *)8, 0) == -1 && errno == EFAULT, "bad name: errno %d", errno);
    fd = memfd("cloexec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK(fd >= 0, "MFD_CLOEXEC|MFD_ALLOW_SEALING: %s", strerror(errno));
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC, "FD_CLOEXEC set");
    CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDWR, "opened read-write");
    close(fd);
    fd = memfd("plain", 0);
    CHECK(fcntl(fd, F_GETFD) == 0, "no FD_CLOEXEC");
    close(fd);
}

static void test_ftruncate_and_fstat(void) {
    int fd = memfd("sized", 0);
    CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
    struct stat st;
    CHECK(fstat(fd, &st) == 0, "fstat: %s", strerror(errno));
    CHECK(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0777, "mode %o", st.st_mode);
    CHECK(st.st_size == 0 && st.st_blksize == PAGE && st.st_blocks == 0 && st.st_nlink == 0,
          "size %ld blksize %ld blocks %ld nlink %ld", (long)st.st_size, (long)st.st_blksize,
          (long)st.st_blocks, (long)st.st_nlink);
    CHECK(ftruncate(fd, 3 * PAGE + 5) == 0, "grow: %s", strerror(errno));
    fstat(fd, &st);
    CHECK(st.st_size == 3 * PAGE + 5 && st.st_blocks == 0, "size %ld blocks %ld", (long)st.st_size,
          (long)st.st_blocks);
    CHECK(ftruncate(fd, PAGE) == 0, "shrink");
    fstat(fd, &st);
    CHECK(st.st_size == PAGE, "size %ld", (long)st.st_size);
    CHECK(ftruncate(fd, -1) == -1 && errno == EINVAL, "negative: errno %d", errno);
    CHECK(ftruncate(-5, -1) == -1 && errno == EINVAL, "negative before the descriptor: errno %d", errno);
    CHECK(ftruncate(99, 0) == -1 && errno == EBADF, "bad fd: errno %d", errno);
    CHECK(ftruncate(1, 0) == -1 && errno == EINVAL, "the console: errno %d", errno);
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    CHECK(ftruncate(p[1], 0) == -1 && errno == EINVAL, "a pipe: errno %d", errno);
    close(p[0]);
    close(p[1]);
    close(fd);
}

static void test_read_write_lseek(void) {
    int fd = memfd("rw", 0);
    CHECK(write(fd, "hello, memfd", 12) == 12, "write: %s", strerror(errno));
    struct stat st;
    fstat(fd, &st);
    CHECK(st.st_size == 12 && st.st_blocks == 8, "size %ld blocks %ld", (long)st.st_size, (long)st.st_blocks);
    CHECK(lseek(fd, 0, SEEK_CUR) == 12, "position after write");
    CHECK(lseek(fd, 7, SEEK_SET) == 7, "lseek");
    char buf[32] = {0};
    CHECK(read(fd, buf, sizeof buf) == 5 && memcmp(buf, "memfd", 5) == 0, "read '%s'", buf);
    CHECK(read(fd, buf, sizeof buf) == 0, "end of file");
    CHECK(lseek(fd, -2, SEEK_END) == 10, "SEEK_END");
    CHECK(lseek(fd, -20, SEEK_END) == -1 && errno == EINVAL, "before the start: errno %d", errno);
    // A write past the end leaves a hole that reads zero.
    CHECK(lseek(fd, PAGE + 1, SEEK_SET) == PAGE + 1 && write(fd, "z", 1) == 1, "write past the end");
    lseek(fd, PAGE, SEEK_SET);
    CHECK(read(fd, buf, 2) == 2 && buf[0] == 0 && buf[1] == 'z', "hole then data");
    close(fd);
}

// ---- mappings -------------------------------------------------------------------------------

static void test_shared_views_see_the_same_pages(void) {
    int fd = memfd("views", 0);
    CHECK(ftruncate(fd, 4 * PAGE) == 0, "ftruncate");
    char *a = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *b = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 2 * PAGE);
    CHECK(a != MAP_FAILED && b != MAP_FAILED, "mmap: %s", strerror(errno));
    a[2 * PAGE + 9] = 'A';
    CHECK(b[9] == 'A', "the second view sees the first's write: %d", b[9]);
    b[PAGE] = 'B';
    CHECK(a[3 * PAGE] == 'B', "and the other way round");
    char c;
    CHECK(pread(fd, &c, 1, 3 * PAGE) == 1 && c == 'B', "read() sees the mapping's write");
    CHECK(pwrite(fd, "W", 1, 5) == 1 && a[5] == 'W', "the mapping sees write()");
    // close: the mappings stay.
    close(fd);
    a[1] = 'c';
    CHECK(a[1] == 'c' && b[9] == 'A', "after close");
    munmap(a, 4 * PAGE);
    CHECK(b[9] == 'A', "after unmapping the other view");
    munmap(b, 2 * PAGE);
}

static void test_private_mapping_copies_on_write(void) {
    int fd = memfd("private", 0);
    ftruncate(fd, 2 * PAGE);
    char *s = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(s != MAP_FAILED && p != MAP_FAILED, "mmap: %s", strerror(errno));
    s[0] = 'S';
    CHECK(p[0] == 'S', "a private view reads the object");
    p[0] = 'P';
    CHECK(s[0] == 'S' && p[0] == 'P', "its write is its own: %c %c", s[0], p[0]);
    char c;
    CHECK(pread(fd, &c, 1, 0) == 1 && c == 'S', "the object is unchanged");
    s[PAGE] = 'T'; // not yet copied in the private view: it sees the object
    CHECK(p[PAGE] == 'T', "an untouched private page follows the object");
    CHECK(mprotect(p, 2 * PAGE, PROT_READ) == 0 && mprotect(p, 2 * PAGE, PROT_READ | PROT_WRITE) == 0, "mprotect");
    p[PAGE] = 'Q';
    CHECK(s[PAGE] == 'T', "mprotect did not open the object's page to the private view");
    munmap(s, 2 * PAGE);
    munmap(p, 2 * PAGE);
    close(fd);
}

static void test_shrink_unmaps_and_access_is_sigbus(void) {
    catch_faults();
    int fd = memfd("shrink", 0);
    ftruncate(fd, 3 * PAGE);
    char *a = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *p = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(a != MAP_FAILED && p != MAP_FAILED, "mmap");
    memset(a, 'x', 3 * PAGE);
    p[2 * PAGE] = 'p'; // a private copy past the new end
    CHECK(ftruncate(fd, PAGE + 100) == 0, "ftruncate");
    char c = 1;
    CHECK(probe_read(a + 100, &c) == 0 && c == 'x', "the head of the file stays");
    CHECK(probe_read(a + PAGE + 99, &c) == 0 && c == 'x', "up to the end");
    CHECK(probe_read(a + PAGE + 100, &c) == 0 && c == 0, "the rest of the cut page reads zero: %d", c);
    int sig = probe_read(a + 2 * PAGE, &c);
    CHECK(sig == SIGBUS && fault_code == BUS_ADRERR && fault_addr == (uintptr_t)(a + 2 * PAGE),
          "past the end: signal %d code %d addr %p", sig, fault_code, (void *)fault_addr);
    sig = probe_read(p + 2 * PAGE, &c);
    CHECK(sig == SIGBUS, "a private copy past the end is gone too: signal %d", sig);
    CHECK(probe_write(a + 2 * PAGE, 1) == SIGBUS, "a write past the end");
    CHECK(ftruncate(fd, 3 * PAGE) == 0, "grow again");
    CHECK(probe_read(a + 2 * PAGE, &c) == 0 && c == 0, "the grown page reads zero: %d", c);
    munmap(a, 3 * PAGE);
    munmap(p, 3 * PAGE);
    close(fd);
}

static void test_fork_shares_memfd_mappings(void) {
    int fd = memfd("fork", 0);
    ftruncate(fd, 3 * PAGE);
    char *s = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(s != MAP_FAILED && p != MAP_FAILED, "mmap");
    s[0] = 1;
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        s[0] = 2;          // touched before the fork
        s[PAGE] = 3;       // untouched before the fork
        s[2 * PAGE] += 10; // reads zero, writes 10
        p[0] = 9;          // private: the parent's stays
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
    CHECK(s[0] == 2 && s[PAGE] == 3 && s[2 * PAGE] == 10, "the child's writes: %d %d %d", s[0], s[PAGE], s[2 * PAGE]);
    CHECK(p[0] == 2, "the private view reads the object, not the child's copy: %d", p[0]);
    // A truncation in the child reaches the parent's mapping.
    catch_faults();
    fflush(stdout);
    pid = fork();
    if (pid == 0) _exit(ftruncate(fd, PAGE) == 0 ? 0 : 1);
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ftruncate in the child");
    char c;
    CHECK(probe_read(s + 2 * PAGE, &c) == SIGBUS, "the parent's page past the new end");
    munmap(s, 3 * PAGE);
    munmap(p, PAGE);
    close(fd);
}

static void test_mmap_checks(void) {
    int fd = memfd("checks", 0);
    ftruncate(fd, PAGE);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 1) == MAP_FAILED && errno == EINVAL, "unaligned offset: %d", errno);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, 77, 1) == MAP_FAILED && errno == EINVAL, "offset before fd: %d", errno);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, 77, 0) == MAP_FAILED && errno == EBADF, "bad fd: %d", errno);
    CHECK(mmap(NULL, 0, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EINVAL, "zero length: %d", errno);
    int pp[2];
    pipe(pp);
    CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, pp[0], 0) == MAP_FAILED && errno == ENODEV, "a pipe: %d", errno);
    close(pp[0]);
    close(pp[1]);
    char *v = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE, fd, 0);
    CHECK(v != MAP_FAILED, "MAP_SHARED_VALIDATE: %s", strerror(errno));
    v[0] = 1;
    munmap(v, PAGE);
    close(fd);
}

// ---- the W^X dual-mapping JIT --------------------------------------------------------------------

// Publishes [rw, rw + len) written through the read-write view for execution through the
// read-execute view at rx: DC CVAU by the written view's addresses, DSB ISH, IC IVAU by the
// executing view's, DSB ISH, ISB (Linux's __flush_icache_range does the first two steps by the
// addresses it is given; the I-cache invalidation by the executed addresses holds whether the
// I-cache is PIPT or VIPT).
static void publish(char *rw, char *rx, size_t len) {
    uint64_t ctr;
    __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr));
    size_t dline = 4UL << ((ctr >> 16) & 15), iline = 4UL << (ctr & 15);
    for (uintptr_t a = (uintptr_t)rw & ~(dline - 1); a < (uintptr_t)rw + len; a += dline)
        __asm__ volatile("dc cvau, %0" ::"r"(a) : "memory");
    __asm__ volatile("dsb ish" ::: "memory");
    for (uintptr_t a = (uintptr_t)rx & ~(iline - 1); a < (uintptr_t)rx + len; a += iline)
        __asm__ volatile("ic ivau, %0" ::"r"(a) : "memory");
    __asm__ volatile("dsb ish\n\tisb" ::: "memory");
}

// mov w0, #n; ret
static void emit_const(uint32_t *at, uint32_t n) {
    at[0] = 0x52800000u | ((n & 0xffff) << 5);
    at[1] = 0xd65f03c0u;
}

struct code_window {
    uint64_t base, size;
    uint64_t rest[8];
};

static void test_jit_dual_mapping(void) {
    int fd = memfd("jit", MFD_CLOEXEC);
    CHECK(fd >= 0 && ftruncate(fd, PAGE) == 0, "memfd: %s", strerror(errno));
    uint32_t *rw = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *rx = mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    CHECK(rw != MAP_FAILED && rx != MAP_FAILED, "mmap: %s", strerror(errno));
    close(fd);
    struct code_window w;
    if (syscall(SYS_CODE_WINDOW, 0, 0, &w) == 0) {
        // This kernel: the executable view is code, placed in the code window; the data view not.
        CHECK((uintptr_t)rx >= w.base && (uintptr_t)rx < w.base + w.size, "exec view %p outside the window [%#lx, +%#lx)",
              (void *)rx, (unsigned long)w.base, (unsigned long)w.size);
        CHECK((uintptr_t)rw < w.base || (uintptr_t)rw >= w.base + w.size, "data view %p inside the window", (void *)rw);
    }
    int (*fn)(void) = (int (*)(void))(void *)rx;
    int (*fn2)(void) = (int (*)(void))(void *)(rx + 64);
    emit_const(rw, 42);
    emit_const(rw + 16, 7);
    publish((char *)rw, rx, 128);
    CHECK(fn() == 42 && fn2() == 7, "first code");
    for (uint32_t n = 100; n < 110; n++) {
        emit_const(rw, n);
        publish((char *)rw, rx, 8);
        int got = fn();
        CHECK(got == (int)n, "rewritten code returns %d, expected %u", got, n);
    }
    CHECK(fn2() == 7, "the other function is untouched");
    munmap(rw, PAGE);
    CHECK(fn() == 109, "the exec view survives the data view's munmap");
    munmap(rx, PAGE);
}

// ---- vfork ----------------------------------------------------------------------------------------

static volatile int vfork_seen;

static void test_vfork_shares_memory(void) {
    // Globals and the heap (a local could be kept in a register or stored after the call).
    volatile int *heap = malloc(sizeof *heap);
    CHECK(heap != NULL, "malloc");
    vfork_seen = 1;
    *heap = 5;
    fflush(stdout);
    pid_t pid = vfork();
    if (pid == 0) {
        vfork_seen = 2; // the parent is suspended and sees this: the memory is its own
        *heap = 6;
        _exit(0);
    }
    CHECK(pid > 0, "vfork: %s", strerror(errno));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "child");
    CHECK(vfork_seen == 2 && *heap == 6, "the child's writes: %d %d", vfork_seen, *heap);
    free((void *)heap);
}

// vfork from a multithreaded parent: only the calling thread waits for the child; the others go
// on running (on other CPUs with -smp 4), mapping, writing and unmapping pages of their own
// while the child lives, in the memory the child shares. Each round the child writes a global,
// sleeps a little, then exits or execs, as a correct vfork child does; the caller finds the
// child's write (the memory is its own, not a copy), that the threads made progress while it
// waited, and that the threads' fresh pages always read zero and hold what they wrote.
enum { VFORK_THREADS = 3, VFORK_ROUNDS = 8 };
static char *self_path = "/memfd-test";
static volatile int vfork_stop;
static volatile int vfork_child_wrote;
static volatile unsigned long vfork_progress[VFORK_THREADS];
static volatile int vfork_thread_bad;

static void *vfork_worker(void *arg) {
    long me = (long)arg;
    while (!vfork_stop) {
        // A fresh mapping each time: a stale translation of the previous one would show its value.
        volatile unsigned long *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            vfork_thread_bad = 1;
            break;
        }
        if (p[0] != 0 || p[PAGE / sizeof *p] != 0) vfork_thread_bad = 2;
        p[0] = vfork_progress[me] + 1;
        p[PAGE / sizeof *p] = (unsigned long)me;
        if (p[0] != vfork_progress[me] + 1 || p[PAGE / sizeof *p] != (unsigned long)me) vfork_thread_bad = 3;
        munmap((void *)p, 2 * PAGE);
        vfork_progress[me]++;
    }
    return NULL;
}

static unsigned long vfork_total(void) {
    unsigned long n = 0;
    for (int i = 0; i < VFORK_THREADS; i++) n += vfork_progress[i];
    return n;
}

// Starts the worker threads and waits until each has run once.
static void vfork_workers_start(pthread_t *t) {
    vfork_stop = 0;
    for (long i = 0; i < VFORK_THREADS; i++) CHECK(pthread_create(&t[i], NULL, vfork_worker, (void *)i) == 0, "thread");
    while (vfork_total() < VFORK_THREADS) sched_yield(); // every thread has started
}

static void vfork_workers_stop(pthread_t *t) {
    vfork_stop = 1;
    for (int i = 0; i < VFORK_THREADS; i++) pthread_join(t[i], NULL);
    CHECK(!vfork_thread_bad, "a thread's page was wrong (%d)", vfork_thread_bad);
}

static void test_vfork_from_threads(void) {
    pthread_t t[VFORK_THREADS];
    vfork_workers_start(t);
    int bad = 0, ran = 0;
    for (int round = 0; round < VFORK_ROUNDS && !bad; round++) {
        unsigned long before = vfork_total();
        vfork_child_wrote = 0;
        fflush(stdout);
        pid_t pid = vfork();
        if (pid == 0) {
            vfork_child_wrote = round + 1; // into the parent's memory
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
            if (round % 2) {
                char *args[] = {"exec-child", NULL};
                execve(self_path, args, environ);
                _exit(126); // the execve failed
            }
            _exit(7);
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid) bad = 1;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != (round % 2 ? 8 : 7)) bad = 2;
        else if (vfork_child_wrote != round + 1) bad = 3; // the child ran on a copy
        ran += vfork_total() > before;
    }
    vfork_workers_stop(t);
    CHECK(!bad, "a vfork round failed (%d; child wrote %d)", bad, vfork_child_wrote);
    // (Not every round: under a loaded host a vCPU may not be scheduled for the child's 20 ms.)
    CHECK(ran >= VFORK_ROUNDS / 2, "the other threads ran during %d of %d vfork children", ran, VFORK_ROUNDS);
}

// glibc's posix_spawn (clone with CLONE_VM | CLONE_VFORK on a stack of its own) from a
// multithreaded program: the child reports a failed execve through the memory it shares with
// the parent, so a missing program is ENOENT from posix_spawn itself, and a present one runs.
static void test_posix_spawn_from_threads(void) {
    pthread_t t[VFORK_THREADS];
    vfork_workers_start(t);
    pid_t pid = -1;
    char *missing[] = {"missing", NULL};
    int e = posix_spawn(&pid, "/no-such-program", NULL, NULL, missing, environ);
    // glibc reaps the failed child itself before it returns the error: no child is left.
    pid_t left = waitpid(-1, NULL, WNOHANG);
    int left_errno = errno;
    char *present[] = {"exec-child", NULL};
    pid_t pid2 = -1;
    int e2 = posix_spawn(&pid2, self_path, NULL, NULL, present, environ);
    int status2 = -1;
    pid_t reaped2 = e2 == 0 ? waitpid(pid2, &status2, 0) : -1;
    vfork_workers_stop(t);
    CHECK(e == ENOENT, "posix_spawn of a missing program: %d (%s)", e, strerror(e));
    CHECK(left == -1 && left_errno == ECHILD, "a child is left: waitpid %d (%s)", left, strerror(left_errno));
    CHECK(e2 == 0 && reaped2 == pid2 && WIFEXITED(status2) && WEXITSTATUS(status2) == 8,
          "posix_spawn of a program: %d, status %#x", e2, status2);
}

// ---- guard regions (this kernel; Linux 6.13) -------------------------------------------------------

// The lines of /proc/self/maps (one per mapping), or -1.
static int maps_lines(void) {
    int fd = open("/proc/self/maps", O_RDONLY), lines = 0;
    if (fd < 0) return -1;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
    close(fd);
    return lines;
}

static void test_guard_regions(void) {
    catch_faults();
    char *a = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED, "mmap");
    memset(a, 'g', 8 * PAGE);
    int mappings = maps_lines();
    CHECK(madvise(a + 2 * PAGE, 2 * PAGE, MADV_GUARD_INSTALL) == 0, "install: %s", strerror(errno));
    CHECK(mappings > 0 && maps_lines() == mappings, "/proc/self/maps: %d lines, then %d", mappings, maps_lines());
    char c;
    int sig = probe_read(a + 2 * PAGE + 5, &c);
    // arm64 Linux reports the VM_FAULT_SIGSEGV of a guard marker as SEGV_MAPERR.
    CHECK(sig == SIGSEGV && fault_code == SEGV_MAPERR && fault_addr == (uintptr_t)(a + 2 * PAGE + 5),
          "a guard page: signal %d code %d", sig, fault_code);
    CHECK(probe_write(a + 3 * PAGE, 1) == SIGSEGV, "a write to a guard page");
    CHECK(probe_read(a + 4 * PAGE, &c) == 0 && c == 'g', "the page after keeps its data");
    CHECK(probe_read(a + PAGE, &c) == 0 && c == 'g', "the page before keeps its data");
    // The mapping is not split; the guarded pages are not resident; populating them fails.
    unsigned char vec[8];
    CHECK(mincore(a, 8 * PAGE, vec) == 0, "mincore over the guards: %s", strerror(errno));
    CHECK(vec[1] == 1 && vec[2] == 0 && vec[3] == 0 && vec[4] == 1, "residency %d%d%d%d", vec[1], vec[2], vec[3], vec[4]);
    CHECK(madvise(a, 8 * PAGE, MADV_POPULATE_READ) == -1 && errno == EFAULT, "populate a guard: %d", errno);
    // MADV_DONTNEED leaves the guards (and drops the other pages); a forked child has them too.
    CHECK(madvise(a, 8 * PAGE, MADV_DONTNEED) == 0, "dontneed");
    CHECK(probe_read(a + 2 * PAGE, &c) == SIGSEGV, "the guard survives MADV_DONTNEED");
    CHECK(probe_read(a + 4 * PAGE, &c) == 0 && c == 0, "the other pages were dropped");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(probe_read(a + 3 * PAGE, &c) == SIGSEGV ? 0 : 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's guard");
    // Installing again is fine; removing takes only the guards (the pages then read zero).
    a[5 * PAGE] = 'h';
    CHECK(madvise(a + 2 * PAGE, PAGE, MADV_GUARD_INSTALL) == 0, "install twice");
    CHECK(madvise(a, 8 * PAGE, MADV_GUARD_REMOVE) == 0, "remove: %s", strerror(errno));
    CHECK(probe_read(a + 2 * PAGE, &c) == 0 && c == 0, "a removed guard reads zero: %d", c);
    CHECK(probe_read(a + 5 * PAGE, &c) == 0 && c == 'h', "remove leaves the pages alone");
    // munmap takes the guards with the range.
    CHECK(madvise(a + 7 * PAGE, PAGE, MADV_GUARD_INSTALL) == 0, "install");
    munmap(a + 7 * PAGE, PAGE);
    char *b = mmap(a + 7 * PAGE, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(b == a + 7 * PAGE && probe_read(b, &c) == 0 && c == 0, "munmap cleared the guard");
    // mremap moves the guards with the entries; MREMAP_DONTUNMAP leaves the source without them
    // (Linux's move_ptes moves the markers).
    char *m = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap");
    m[0] = 'm';
    CHECK(madvise(m + PAGE, PAGE, MADV_GUARD_INSTALL) == 0, "install before mremap");
    char *n = mremap(m, 4 * PAGE, 4 * PAGE, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
    CHECK(n != MAP_FAILED && n != m, "mremap(MREMAP_DONTUNMAP): %s", strerror(errno));
    CHECK(probe_read(n + PAGE, &c) == SIGSEGV, "the guard moved");
    CHECK(probe_read(n, &c) == 0 && c == 'm', "the data moved");
    CHECK(probe_read(m + PAGE, &c) == 0 && c == 0, "the source is left without the guard");
    munmap(m, 4 * PAGE);
    munmap(n, 4 * PAGE);
    // Errors: unaligned EINVAL, a locked area EINVAL, unmapped ENOMEM.
    CHECK(madvise(a + 1, PAGE, MADV_GUARD_INSTALL) == -1 && errno == EINVAL, "unaligned: %d", errno);
    CHECK(mlock(a, PAGE) == 0, "mlock");
    CHECK(madvise(a, PAGE, MADV_GUARD_INSTALL) == -1 && errno == EINVAL, "locked: %d", errno);
    munmap(a, 8 * PAGE);
    CHECK(madvise(a, PAGE, MADV_GUARD_INSTALL) == -1 && errno == ENOMEM, "unmapped: %d", errno);
}

// ---- the JIT cycle, measured -------------------------------------------------------------------

// The JIT cycle, measured: a round is "write two instructions, publish, call". The dual mapping
// publishes with cache maintenance only; the mprotect pattern (one mapping switched RW -> RX ->
// RW) needs two protection changes per round, each a flush.
static void measure(void) {
    measure_init("memfd-test");
    enum { ROUNDS = 1000 };
    unsigned wrong = 0;
    // Set-up: memfd_create, ftruncate, two mmaps, close, the first write and call.
    struct sample s0 = mark();
    int fd = memfd("jit", 0);
    ftruncate(fd, PAGE);
    uint32_t *rw = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *rx = mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    close(fd);
    int (*fn)(void) = (int (*)(void))(void *)rx;
    emit_const(rw, 1);
    publish((char *)rw, rx, 8);
    wrong += fn() != 1;
    struct sample s1 = mark();
    report("dual-mapping set-up (memfd, 2 mmaps, first write and run)", s0, s1, 1);
    for (uint32_t n = 0; n < ROUNDS; n++) {
        emit_const(rw, n & 0xffff);
        publish((char *)rw, rx, 8);
        wrong += fn() != (int)(n & 0xffff);
    }
    struct sample s2 = mark();
    report("dual-mapping JIT cycle (write, DC CVAU + IC IVAU, run)", s1, s2, ROUNDS);
    // The same with one anonymous mapping and mprotect: RW, write, RX, publish, run.
    uint32_t *one = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int (*fone)(void) = (int (*)(void))(void *)one;
    one[0] = 0;
    struct sample s3 = mark();
    for (uint32_t n = 0; n < ROUNDS; n++) {
        mprotect(one, PAGE, PROT_READ | PROT_WRITE);
        emit_const(one, n & 0xffff);
        publish((char *)one, (char *)one, 8);
        mprotect(one, PAGE, PROT_READ | PROT_EXEC);
        wrong += fone() != (int)(n & 0xffff);
    }
    struct sample s4 = mark();
    report("mprotect JIT cycle (RW, write, DC CVAU + IC IVAU, RX, run)", s3, s4, ROUNDS);
    printf("memfd-test: %u wrong results\n", wrong);
}

int main(int argc, char **argv) {
    if (argc >= 1 && strcmp(argv[0], "exec-child") == 0) return 8; // test_vfork_from_threads
    if (argc >= 1 && argv[0][0] == '/') self_path = argv[0];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "measure") == 0) {
        measure();
        return 0;
    }
    static const struct test_case guard[] = {{"guard_regions", test_guard_regions}};
    if (argc > 1 && strcmp(argv[1], "guard") == 0) return run_cases(guard, 1, 1, argv, 0, 0);
    static const struct test_case cases[] = {
        {"memfd_create_checks", test_memfd_create_checks},
        {"ftruncate_and_fstat", test_ftruncate_and_fstat},
        {"read_write_lseek", test_read_write_lseek},
        {"shared_views_see_the_same_pages", test_shared_views_see_the_same_pages},
        {"private_mapping_copies_on_write", test_private_mapping_copies_on_write},
        {"shrink_unmaps_and_access_is_sigbus", test_shrink_unmaps_and_access_is_sigbus},
        {"fork_shares_memfd_mappings", test_fork_shares_memfd_mappings},
        {"mmap_checks", test_mmap_checks},
        {"jit_dual_mapping", test_jit_dual_mapping},
        {"vfork_shares_memory", test_vfork_shares_memory},
        {"vfork_from_threads", test_vfork_from_threads},
        {"posix_spawn_from_threads", test_posix_spawn_from_threads},
    };
    return run_cases(cases, sizeof cases / sizeof cases[0], argc, argv, 0, 0);
}
