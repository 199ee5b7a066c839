/* Signals as Linux arm64 delivers them, checked from an unmodified static glibc program.
 *
 *   signals GROUP    one group of checks (sigaction, kill, realtime, sigtimedwait, faults, longjmp,
 *                    altstack, threads, jit)
 *   signals all      every check below; prints "ok NAME" / "FAIL NAME: why", then "N passed, M failed"
 *   signals abort    abort(): the process must end with status 134 (128 + SIGABRT)
 *   signals segv     a NULL load with no handler: status 139 and the kernel's fault report
 *   signals figures  figures (not checks): a raise() round trip, a write-barrier fault round trip
 *
 * Built by scripts/test with aarch64-linux-gnu-gcc -static and run as the initrd, on 1 and 4 CPUs. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <asm/sigcontext.h>
#include <linux/futex.h>

static int passed, failed;
#define CHECK(name, cond, ...)                                                   \
    do {                                                                         \
        if (cond) { passed++; printf("ok   %s\n", name); }                       \
        else { failed++; printf("FAIL %s: ", name); printf(__VA_ARGS__); printf("\n"); } \
    } while (0)

/* Waiting without FUTEX_WAIT_BITSET (which pthread_join and nanosleep-free code would need):
 * poll with sched_yield, so these checks depend on the signal code alone. */
static void sleep_ms(long ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static void join(pthread_t t, void **res) {
    while (pthread_tryjoin_np(t, res) != 0) sched_yield();
}

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }
static int tgkill_(pid_t tgid, pid_t tid, int sig) { return (int)syscall(SYS_tgkill, tgid, tid, sig); }

static void install(int sig, void (*fn)(int, siginfo_t *, void *), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) { printf("sigaction(%d) failed: %s\n", sig, strerror(errno)); exit(2); }
}

static sigset_t current_mask(void) {
    sigset_t m;
    sigprocmask(SIG_SETMASK, NULL, &m);
    return m;
}

/* ---- sigaction rules -------------------------------------------------------------------- */
static void test_sigaction_rules(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    errno = 0;
    CHECK("sigaction-sigkill-einval", sigaction(SIGKILL, &sa, NULL) == -1 && errno == EINVAL, "errno %d", errno);
    errno = 0;
    CHECK("sigaction-sigstop-einval", sigaction(SIGSTOP, &sa, NULL) == -1 && errno == EINVAL, "errno %d", errno);
    CHECK("sigaction-read-sigkill", sigaction(SIGKILL, NULL, &old) == 0 && old.sa_handler == SIG_DFL, "read back");
    /* The raw call: signal 0 and 65 are invalid, the set size must be 8. */
    long r0 = syscall(SYS_rt_sigaction, 0, NULL, NULL, 8);
    long r65 = syscall(SYS_rt_sigaction, 65, NULL, NULL, 8);
    long rsz = syscall(SYS_rt_sigaction, SIGUSR1, NULL, NULL, 16);
    CHECK("sigaction-bad-args", r0 == -1 && r65 == -1 && rsz == -1 && errno == EINVAL, "%ld %ld %ld", r0, r65, rsz);
    /* Unknown flags are cleared (SA_UNSUPPORTED, 0x400, lets a program probe this). */
    struct { void *h; unsigned long flags; void *restorer; unsigned long mask; } k = { (void *)SIG_IGN, 0x400 | SA_RESTART, 0, ~0ul }, kold;
    syscall(SYS_rt_sigaction, SIGUSR2, &k, NULL, 8);
    syscall(SYS_rt_sigaction, SIGUSR2, NULL, &kold, 8);
    CHECK("sigaction-flags-sanitized", kold.flags == SA_RESTART && !(kold.mask & (1ul << (SIGKILL - 1))) &&
          (kold.mask & (1ul << (SIGINT - 1))), "flags %#lx mask %#lx", kold.flags, kold.mask);
    long rf = syscall(SYS_rt_sigaction, SIGUSR2, (void *)8, NULL, 8);
    CHECK("sigaction-efault", rf == -1 && errno == EFAULT, "%ld errno %d", rf, errno);
    signal(SIGUSR2, SIG_DFL);
    sigset_t all, got;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old.sa_mask);
    got = current_mask();
    CHECK("mask-never-holds-kill-stop", !sigismember(&got, SIGKILL) && !sigismember(&got, SIGSTOP) && sigismember(&got, SIGTERM), "mask");
    sigprocmask(SIG_SETMASK, &old.sa_mask, NULL);
    CHECK("sigprocmask-bad-how", syscall(SYS_rt_sigprocmask, 7, &all, NULL, 8) == -1 && errno == EINVAL, "errno %d", errno);
}

/* ---- kill, tgkill, raise, masks in handlers ------------------------------------------------ */
static volatile int hits, last_code, last_pid, last_sig, in_handler_blocked_self, in_handler_blocked_extra;
static void *volatile returns_to;
static void on_usr(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    hits++;
    returns_to = __builtin_return_address(0);
    last_sig = si->si_signo;
    last_code = si->si_code;
    last_pid = si->si_pid;
    sigset_t m = current_mask();
    in_handler_blocked_self = sigismember(&m, sig);
    in_handler_blocked_extra = sigismember(&m, SIGTERM);
}

static void test_kill_and_masks(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGUSR1, &sa, NULL);
    hits = 0;
    raise(SIGUSR1);
    CHECK("raise-runs-handler", hits == 1 && last_sig == SIGUSR1 && last_code == SI_TKILL && last_pid == getpid(),
          "hits %d sig %d code %d pid %d", hits, last_sig, last_code, last_pid);
    CHECK("handler-mask-has-signal-and-sa_mask", in_handler_blocked_self && in_handler_blocked_extra, "%d %d",
          in_handler_blocked_self, in_handler_blocked_extra);
    /* glibc sets no SA_RESTORER on arm64: the handler returns to the kernel's stub (Linux: the
     * vDSO's __kernel_rt_sigreturn), mov x8, #139; svc #0, mapped high like a vDSO. */
    const uint32_t *stub = returns_to;
    CHECK("handler-returns-to-sigreturn-stub", stub && stub[0] == 0xd2801168 && stub[1] == 0xd4000001 &&
          (uintptr_t)stub > (1ul << 32), "return address %p", (void *)stub);
    sigset_t m = current_mask();
    CHECK("mask-restored-after-handler", !sigismember(&m, SIGUSR1) && !sigismember(&m, SIGTERM), "mask");
    hits = 0;
    kill(getpid(), SIGUSR1);
    CHECK("kill-self", hits == 1 && last_code == SI_USER, "hits %d code %d", hits, last_code);
    hits = 0;
    tgkill_(getpid(), gettid_(), SIGUSR1);
    CHECK("tgkill-self", hits == 1 && last_code == SI_TKILL, "hits %d", hits);
    CHECK("kill-sig0-and-esrch", kill(getpid(), 0) == 0 && kill(12345, SIGUSR1) == -1 && errno == ESRCH, "errno %d", errno);
    CHECK("tgkill-bad", tgkill_(getpid(), 99999, SIGUSR1) == -1 && errno == ESRCH && tgkill_(0, 1, 1) == -1 && errno == EINVAL &&
          kill(getpid(), 65) == -1 && errno == EINVAL, "errno %d", errno);

    /* Blocked: pending, then delivered as soon as it is unblocked; standard signals coalesce. */
    sigset_t b, pend;
    sigemptyset(&b);
    sigaddset(&b, SIGUSR1);
    sigprocmask(SIG_BLOCK, &b, NULL);
    hits = 0;
    raise(SIGUSR1);
    raise(SIGUSR1);
    sigpending(&pend);
    CHECK("blocked-is-pending", hits == 0 && sigismember(&pend, SIGUSR1), "hits %d", hits);
    sigprocmask(SIG_UNBLOCK, &b, NULL);
    CHECK("unblock-delivers-once", hits == 1, "hits %d", hits);

    /* SA_NODEFER: the signal is not blocked in its handler; SA_RESETHAND: one shot. */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    hits = 0;
    raise(SIGUSR1);
    struct sigaction now;
    sigaction(SIGUSR1, NULL, &now);
    CHECK("nodefer-resethand", hits == 1 && !in_handler_blocked_self && now.sa_handler == SIG_DFL, "hits %d blocked %d",
          hits, in_handler_blocked_self);

    /* Default-ignored signals do nothing; a pending signal whose action becomes SIG_IGN is dropped. */
    kill(getpid(), SIGCHLD);
    kill(getpid(), SIGWINCH);
    kill(getpid(), SIGURG);
    CHECK("default-ignore", 1, "%s", "still running");
    sigprocmask(SIG_BLOCK, &b, NULL);
    raise(SIGUSR1);
    signal(SIGUSR1, SIG_IGN);
    sigpending(&pend);
    CHECK("ignore-discards-pending", !sigismember(&pend, SIGUSR1), "still pending");
    sigprocmask(SIG_UNBLOCK, &b, NULL);
    signal(SIGUSR1, SIG_DFL);
}

/* ---- real-time signals queue, sigqueue carries a value ------------------------------------ */
static volatile int rt_hits, rt_value, rt_code;
static void on_rt(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    rt_hits++;
    rt_value = si->si_value.sival_int;
    rt_code = si->si_code;
}

static void test_realtime(void) {
    install(SIGRTMIN + 2, on_rt, 0);
    sigset_t b;
    sigemptyset(&b);
    sigaddset(&b, SIGRTMIN + 2);
    sigprocmask(SIG_BLOCK, &b, NULL);
    for (int i = 1; i <= 3; i++) sigqueue(getpid(), SIGRTMIN + 2, (union sigval){ .sival_int = 40 + i });
    rt_hits = 0;
    sigprocmask(SIG_UNBLOCK, &b, NULL);
    CHECK("realtime-queues-each", rt_hits == 3 && rt_value == 43 && rt_code == SI_QUEUE, "hits %d value %d code %d",
          rt_hits, rt_value, rt_code);
}

/* ---- sigtimedwait ------------------------------------------------------------------------- */
static void test_sigtimedwait(void) {
    sigset_t b;
    sigemptyset(&b);
    sigaddset(&b, SIGUSR2);
    sigprocmask(SIG_BLOCK, &b, NULL);
    struct timespec zero = { 0, 0 }, short_wait = { 0, 20 * 1000 * 1000 };
    errno = 0;
    int r = sigtimedwait(&b, NULL, &zero);
    CHECK("sigtimedwait-poll-eagain", r == -1 && errno == EAGAIN, "r %d errno %d", r, errno);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = sigtimedwait(&b, NULL, &short_wait);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    CHECK("sigtimedwait-times-out", r == -1 && errno == EAGAIN && ms >= 19, "r %d errno %d after %ld ms", r, errno, ms);
    raise(SIGUSR2);
    siginfo_t si;
    r = sigtimedwait(&b, &si, &zero);
    /* glibc reports raise()'s SI_TKILL as SI_USER. */
    CHECK("sigtimedwait-takes-pending", r == SIGUSR2 && si.si_signo == SIGUSR2 && si.si_code == SI_USER, "r %d code %d",
          r, si.si_code);
    struct timespec bad = { 0, 2000000000 };
    CHECK("sigtimedwait-einval", sigtimedwait(&b, NULL, &bad) == -1 && errno == EINVAL, "errno %d", errno);
    sigprocmask(SIG_UNBLOCK, &b, NULL);
}

/* ---- threads: sigsuspend woken by tgkill, futex EINTR and SA_RESTART ------------------------ */
static pid_t main_tid;
static volatile int futex_word;
static volatile pid_t waiter_tid;
static volatile long waiter_result = 1;
static volatile int waiter_errno;

static void *send_usr1_later(void *arg) {
    (void)arg;
    sleep_ms(20);
    tgkill_(getpid(), main_tid, SIGUSR1);
    return NULL;
}

static void *futex_waiter(void *arg) {
    (void)arg;
    waiter_tid = gettid_();
    long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    waiter_errno = errno;
    waiter_result = r;
    return NULL;
}

/* Blocking calls other than futexes: a 10 s nanosleep and a console read (QEMU's stdin gives no
 * input) each end with EINTR when a handler without SA_RESTART runs. */
static void *nanosleeper(void *arg) {
    (void)arg;
    waiter_tid = gettid_();
    struct timespec ts = {10, 0};
    long r = syscall(SYS_nanosleep, &ts, NULL);
    waiter_errno = errno;
    waiter_result = r;
    return NULL;
}

static void *console_reader(void *arg) {
    (void)arg;
    waiter_tid = gettid_();
    char c;
    long r = syscall(SYS_read, 0, &c, 1);
    waiter_errno = errno;
    waiter_result = r;
    return NULL;
}

/* Up to 5 s for the waiter's FUTEX_WAIT to return (QEMU's CPUs may be slow on a loaded host). */
static int wait_for_result(void) {
    for (int i = 0; i < 5000 && waiter_result == 1; i++) sleep_ms(1);
    return waiter_result != 1;
}

/* Ends the waiter whatever happened: the word changes and it is woken. */
static void release_waiter(pthread_t t) {
    futex_word = 1;
    syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    join(t, NULL);
}

static void wait_until_blocked(void) {
    while (!waiter_tid) sched_yield();
    sleep_ms(30); /* it is in FUTEX_WAIT by now */
}

static volatile int spin_stop;
static volatile pid_t spinner_tid;
static void on_stop_spin(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)si; (void)uc;
    spin_stop = 1;
}

/* Busy in user mode: only a signal delivered to a running (or preempted) thread stops it. */
static void *spinner(void *arg) {
    (void)arg;
    spinner_tid = gettid_();
    while (!spin_stop) {
    }
    return (void *)1;
}

static void test_threads(void) {
    /* A signal for a thread running on another CPU (an IPI makes it enter the kernel) or
     * preempted on this one. */
    install(SIGUSR1, on_stop_spin, 0);
    spin_stop = 0; spinner_tid = 0;
    pthread_t s;
    pthread_create(&s, NULL, spinner, NULL);
    while (!spinner_tid) sched_yield();
    sleep_ms(10);
    tgkill_(getpid(), spinner_tid, SIGUSR1);
    void *sres = NULL;
    for (int i = 0; i < 5000 && pthread_tryjoin_np(s, &sres) != 0; i++) sleep_ms(1);
    CHECK("signal-to-a-running-thread", sres == (void *)1 && spin_stop, "result %p stop %d", sres, spin_stop);

    main_tid = gettid_();
    install(SIGUSR1, on_usr, 0);
    sigset_t b, empty, after;
    sigemptyset(&b);
    sigaddset(&b, SIGUSR1);
    sigemptyset(&empty);
    sigprocmask(SIG_BLOCK, &b, NULL);
    hits = 0;
    pthread_t t;
    pthread_create(&t, NULL, send_usr1_later, NULL);
    int r = sigsuspend(&empty);
    int e = errno;
    join(t, NULL);
    after = current_mask();
    CHECK("sigsuspend-eintr", r == -1 && e == EINTR && hits == 1 && sigismember(&after, SIGUSR1), "r %d errno %d hits %d", r, e, hits);
    sigprocmask(SIG_UNBLOCK, &b, NULL);

    /* A handler without SA_RESTART: FUTEX_WAIT returns EINTR. */
    install(SIGUSR2, on_usr, 0);
    futex_word = 0; waiter_tid = 0; waiter_result = 1; hits = 0;
    pthread_create(&t, NULL, futex_waiter, NULL);
    wait_until_blocked();
    tgkill_(getpid(), waiter_tid, SIGUSR2);
    int waited = wait_for_result();
    CHECK("futex-wait-eintr", waited && waiter_result == -1 && waiter_errno == EINTR && hits == 1,
          "result %ld errno %d hits %d", waiter_result, waiter_errno, hits);
    release_waiter(t);

    /* With SA_RESTART the wait goes on after the handler, until a real wake: the call returns 0,
     * or EAGAIN if the restarted call only began after the word changed; never EINTR. */
    install(SIGUSR2, on_usr, SA_RESTART);
    futex_word = 0; waiter_tid = 0; waiter_result = 1; hits = 0;
    pthread_create(&t, NULL, futex_waiter, NULL);
    wait_until_blocked();
    tgkill_(getpid(), waiter_tid, SIGUSR2);
    for (int i = 0; i < 5000 && hits == 0; i++) sleep_ms(1);
    sleep_ms(30);
    int still_waiting = waiter_result == 1 && hits == 1;
    release_waiter(t);
    CHECK("futex-wait-sa_restart", still_waiting && (waiter_result == 0 || (waiter_result == -1 && waiter_errno == EAGAIN)),
          "still waiting %d result %ld errno %d hits %d", still_waiting, waiter_result, waiter_errno, hits);

    /* nanosleep and a console read, interrupted (no SA_RESTART): EINTR long before 10 s. */
    install(SIGUSR2, on_usr, 0);
    void *(*const blockers[2])(void *) = {nanosleeper, console_reader};
    const char *const names[2] = {"nanosleep-eintr", "console-read-eintr"};
    for (int i = 0; i < 2; i++) {
        waiter_tid = 0; waiter_result = 1; hits = 0;
        pthread_create(&t, NULL, blockers[i], NULL);
        wait_until_blocked();
        tgkill_(getpid(), waiter_tid, SIGUSR2);
        waited = wait_for_result();
        CHECK(names[i], waited && waiter_result == -1 && waiter_errno == EINTR && hits == 1,
              "result %ld errno %d hits %d", waiter_result, waiter_errno, hits);
        if (waited) join(t, NULL); /* else it still blocks: leave it to exit_group */
    }
    signal(SIGUSR2, SIG_DFL);
}

/* ---- faults ------------------------------------------------------------------------------- */
static char *page;
static volatile int segv_hits, segv_code;
static volatile void *segv_addr;
static volatile unsigned esr_seen, fpsimd_seen;
static volatile __uint128_t v16_seen;

static struct _aarch64_ctx *find_record(ucontext_t *uc, unsigned magic) {
    unsigned char *p = (unsigned char *)uc->uc_mcontext.__reserved;
    for (;;) {
        struct _aarch64_ctx *h = (struct _aarch64_ctx *)p;
        if (h->magic == 0 || h->size == 0) return NULL;
        if (h->magic == magic) return h;
        p += h->size;
    }
}

/* The JIT/GC write barrier: the first write to a read-only page faults, the handler makes the
 * page writable and returns, and the write completes. */
static void on_segv_unprotect(int sig, siginfo_t *si, void *ucv) {
    (void)sig;
    ucontext_t *uc = ucv;
    segv_hits++;
    segv_code = si->si_code;
    segv_addr = si->si_addr;
    struct esr_context *esr = (struct esr_context *)find_record(uc, ESR_MAGIC);
    struct fpsimd_context *fp = (struct fpsimd_context *)find_record(uc, FPSIMD_MAGIC);
    esr_seen = esr ? (unsigned)(esr->esr >> 26) : 0;
    fpsimd_seen = fp ? fp->head.size : 0;
    v16_seen = fp ? fp->vregs[16] : 0;
    /* Clobber v16 here: the interrupted code must get its own value back. */
    __asm__ volatile("movi v16.16b, #0x5a" ::: "v16");
    mprotect((void *)((uintptr_t)si->si_addr & ~4095ul), 4096, PROT_READ | PROT_WRITE);
}

/* A handler that skips the faulting instruction by moving uc_mcontext.pc. */
static void on_fault_skip(int sig, siginfo_t *si, void *ucv) {
    ucontext_t *uc = ucv;
    segv_hits++;
    last_sig = sig;
    segv_code = si->si_code;
    segv_addr = si->si_addr;
    uc->uc_mcontext.pc += 4;
}

static void test_faults(void) {
    page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    install(SIGSEGV, on_segv_unprotect, 0);
    segv_hits = 0;
    char *target = page + 123;
    uint64_t before = 0x0123456789abcdefull, after = 0;
    __asm__ volatile(
        "fmov d16, %[in]\n"
        "mov v16.d[1], %[in]\n"
        "strb wzr, [%[p]]\n"
        "fmov %[out], d16\n"
        : [out] "=r"(after)
        : [in] "r"(before), [p] "r"(target)
        : "v16", "memory");
    target[1] = 7;
    CHECK("write-barrier-mprotect-and-return", segv_hits == 1 && segv_code == SEGV_ACCERR && segv_addr == target &&
          target[1] == 7, "hits %d code %d addr %p (want %p)", segv_hits, segv_code, segv_addr, target);
    CHECK("fault-esr-record", esr_seen == 0x24, "EC %#x", esr_seen);
    CHECK("fpsimd-record-and-restore", fpsimd_seen == 528 && (uint64_t)v16_seen == before && after == before,
          "size %u saved %#llx restored %#llx", fpsimd_seen, (unsigned long long)(uint64_t)v16_seen, (unsigned long long)after);

    /* An unmapped address (a page just unmapped): SEGV_MAPERR with the exact address; the
     * handler skips the load. */
    install(SIGSEGV, on_fault_skip, 0);
    segv_hits = 0;
    char *gone = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4096);
    volatile uint64_t *nowhere = (uint64_t *)(gone + 8);
    uint64_t v;
    __asm__ volatile("ldr %0, [%1]" : "=r"(v) : "r"(nowhere) : "memory");
    CHECK("segv-maperr-skip-pc", segv_hits == 1 && segv_code == SEGV_MAPERR && segv_addr == (void *)nowhere,
          "hits %d code %d addr %p", segv_hits, segv_code, segv_addr);

    /* SIGILL (udf), SIGTRAP (brk), SIGBUS (misaligned exclusive load). */
    install(SIGILL, on_fault_skip, 0);
    segv_hits = 0;
    void *pc_udf;
    __asm__ volatile("adr %0, 1f\n1: udf #0" : "=r"(pc_udf));
    CHECK("sigill-illopc", segv_hits == 1 && last_sig == SIGILL && segv_code == ILL_ILLOPC && segv_addr == pc_udf,
          "hits %d code %d addr %p pc %p", segv_hits, segv_code, segv_addr, pc_udf);
    install(SIGTRAP, on_fault_skip, 0);
    segv_hits = 0;
    void *pc_brk;
    __asm__ volatile("adr %0, 1f\n1: brk #0x7" : "=r"(pc_brk));
    CHECK("sigtrap-brkpt", segv_hits == 1 && last_sig == SIGTRAP && segv_code == TRAP_BRKPT && segv_addr == pc_brk,
          "hits %d code %d", segv_hits, segv_code);
    install(SIGBUS, on_fault_skip, 0);
    segv_hits = 0;
    static uint64_t words[4];
    char *odd = (char *)words + 1;
    __asm__ volatile("ldxr %0, [%1]" : "=r"(v) : "r"(odd) : "memory");
    CHECK("sigbus-adraln", segv_hits == 1 && last_sig == SIGBUS && segv_code == BUS_ADRALN && segv_addr == odd,
          "hits %d sig %d code %d addr %p", segv_hits, last_sig, segv_code, segv_addr);
    signal(SIGILL, SIG_DFL);
    signal(SIGTRAP, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
}

/* ---- the JIT pattern: code pages writable on the first write fault, executable again on the
 * first execute fault (W^X kept throughout) ------------------------------------------------ */
static uint32_t *jit;
static volatile int jit_write_faults, jit_exec_faults;
static void on_jit_fault(int sig, siginfo_t *si, void *ucv) {
    (void)sig;
    struct esr_context *esr = (struct esr_context *)find_record(ucv, ESR_MAGIC);
    unsigned ec = esr ? (unsigned)(esr->esr >> 26) : 0;
    if ((uintptr_t)si->si_addr - (uintptr_t)jit >= 4096 || si->si_code != SEGV_ACCERR) {
        signal(SIGSEGV, SIG_DFL); /* not ours: the retry dies with the default action */
        return;
    }
    if (ec == 0x24) { /* data abort: a write to the executable page */
        jit_write_faults++;
        mprotect(jit, 4096, PROT_READ | PROT_WRITE);
    } else if (ec == 0x20) { /* instruction abort: running the writable page */
        jit_exec_faults++;
        __builtin___clear_cache((char *)jit, (char *)jit + 4096);
        mprotect(jit, 4096, PROT_READ | PROT_EXEC);
    }
}

static void test_jit(void) {
    jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    install(SIGSEGV, on_jit_fault, 0);
    jit_write_faults = jit_exec_faults = 0;
    int right = 0;
    for (int round = 1; round <= 3; round++) {
        jit[0] = 0xd2800000u | ((uint32_t)(round * 7) << 5); /* movz x0, #(round * 7) */
        jit[1] = 0xd65f03c0u;                                /* ret */
        long (*fn)(void) = (long (*)(void))(uintptr_t)jit;
        right += fn() == round * 7;
    }
    CHECK("jit-write-then-execute-faults", right == 3 && jit_write_faults == 3 && jit_exec_faults == 3,
          "right %d write faults %d exec faults %d", right, jit_write_faults, jit_exec_faults);
    signal(SIGSEGV, SIG_DFL);
    munmap(jit, 4096);
}

/* ---- siglongjmp out of a handler, and a bad frame given to rt_sigreturn ---------------------- */
static sigjmp_buf jump;
static void on_segv_jump(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    segv_addr = si->si_addr;
    segv_code = si->si_code;
    siglongjmp(jump, 1);
}

static uint64_t junk[2048] __attribute__((aligned(16)));

static void test_longjmp_and_bad_frame(void) {
    install(SIGSEGV, on_segv_jump, 0);
    volatile int jumped = 0;
    if (sigsetjmp(jump, 1) == 0) {
        *(volatile int *)0 = 1;
    } else {
        jumped = 1;
    }
    sigset_t m = current_mask();
    CHECK("siglongjmp-out-of-handler", jumped && segv_addr == 0 && !sigismember(&m, SIGSEGV), "jumped %d addr %p", jumped, segv_addr);

    /* rt_sigreturn on a frame of 0xff bytes with an empty signal mask. As on Linux, the frame's
     * mask and general registers are in place before the frame is found bad (its pstate is
     * invalid), so the SIGSEGV reports the frame's sp (all ones) and can only be taken on the
     * alternate stack; the handler jumps back. Never a kernel panic. */
    memset(junk, 0xff, sizeof junk);
    uint64_t *sp = &junk[1536];
    sp[(128 + 40) / 8] = 0; /* uc_sigmask: siginfo (128 bytes), then uc_flags, uc_link, uc_stack */
    static char bad_alt[64 * 1024];
    stack_t ss = { .ss_sp = bad_alt, .ss_size = sizeof bad_alt, .ss_flags = 0 }, off = { .ss_flags = SS_DISABLE };
    sigaltstack(&ss, NULL);
    install(SIGSEGV, on_segv_jump, SA_ONSTACK);
    jumped = 0;
    if (sigsetjmp(jump, 1) == 0) {
        __asm__ volatile("mov sp, %0\n mov x8, %1\n svc #0" :: "r"(sp), "r"((long)SYS_rt_sigreturn) : "x8", "memory");
    } else {
        jumped = 1;
    }
    sigaltstack(&off, NULL);
    CHECK("bad-sigreturn-frame-segv-at-its-sp", jumped && segv_addr == (void *)UINTPTR_MAX, "jumped %d addr %p", jumped, segv_addr);
    signal(SIGSEGV, SIG_DFL);
}

/* `signals badframe`: rt_sigreturn on a frame of 0xff bytes (every signal masked, sp all ones)
 * with a SIGSEGV handler installed: the forced SIGSEGV is blocked, so it takes its default
 * action and the process ends with 139, on Linux as here. */
static void bad_frame_ends_the_process(void) {
    install(SIGSEGV, on_segv_jump, 0);
    memset(junk, 0xff, sizeof junk);
    printf("signals: rt_sigreturn on a frame of 0xff bytes\n");
    __asm__ volatile("mov sp, %0\n mov x8, %1\n svc #0" :: "r"(&junk[1536]), "r"((long)SYS_rt_sigreturn) : "x8", "memory");
    printf("signals: still running after a bad frame\n");
}

/* ---- sigaltstack, and a thread's stack overflow caught on it -------------------------------- */
static volatile uintptr_t handler_sp;
static volatile int alt_flags_in_handler, alt_eperm;
static char *alt_base;
static size_t alt_size = 64 * 1024;

static void on_overflow(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    int local;
    handler_sp = (uintptr_t)&local;
    segv_addr = si->si_addr;
    stack_t now, other = { .ss_sp = alt_base, .ss_size = alt_size, .ss_flags = 0 };
    sigaltstack(NULL, &now);
    alt_flags_in_handler = now.ss_flags;
    alt_eperm = sigaltstack(&other, NULL) == -1 && errno == EPERM;
    siglongjmp(jump, 1);
}

static volatile uintptr_t stack_low, guard_size;
#pragma GCC diagnostic ignored "-Winfinite-recursion"
static int recurse(int n) {
    volatile char pad[256];
    pad[0] = (char)n;
    return recurse(n + 1) + pad[0];
}

static void *overflow_thread(void *arg) {
    (void)arg;
    stack_t ss = { .ss_sp = alt_base, .ss_size = alt_size, .ss_flags = 0 };
    sigaltstack(&ss, NULL);
    pthread_attr_t a;
    void *lo;
    size_t size, guard;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_getguardsize(&a, &guard);
    stack_low = (uintptr_t)lo;
    guard_size = guard;
    if (sigsetjmp(jump, 1) == 0) recurse(0);
    return (void *)1;
}

static void test_altstack(void) {
    stack_t ss, old;
    sigaltstack(NULL, &old);
    CHECK("altstack-initially-disabled", old.ss_flags == SS_DISABLE, "flags %d", old.ss_flags);
    alt_base = malloc(alt_size);
    ss.ss_sp = alt_base; ss.ss_size = 1024; ss.ss_flags = 0;
    CHECK("altstack-too-small-enomem", sigaltstack(&ss, NULL) == -1 && errno == ENOMEM, "errno %d", errno);
    ss.ss_flags = 8;
    ss.ss_size = alt_size;
    CHECK("altstack-bad-flags-einval", sigaltstack(&ss, NULL) == -1 && errno == EINVAL, "errno %d", errno);

    install(SIGSEGV, on_overflow, SA_ONSTACK);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 * 1024);
    pthread_attr_setguardsize(&a, 4096);
    pthread_t t;
    handler_sp = 0; segv_addr = 0;
    pthread_create(&t, &a, overflow_thread, NULL);
    void *res;
    join(t, &res);
    uintptr_t lo = (uintptr_t)alt_base, hi = lo + alt_size;
    uintptr_t fault = (uintptr_t)segv_addr;
    CHECK("overflow-caught-on-altstack", res == (void *)1 && handler_sp > lo && handler_sp < hi, "sp %#lx alt [%#lx, %#lx)",
          (unsigned long)handler_sp, (unsigned long)lo, (unsigned long)hi);
    CHECK("overflow-address-in-guard-page", guard_size >= 4096 && fault < stack_low && fault >= stack_low - guard_size,
          "fault %#lx stack from %#lx, guard %#lx", (unsigned long)fault, (unsigned long)stack_low, (unsigned long)guard_size);
    CHECK("altstack-onstack-and-eperm", alt_flags_in_handler == SS_ONSTACK && alt_eperm, "flags %d eperm %d",
          alt_flags_in_handler, alt_eperm);
    sigaltstack(NULL, &old);
    CHECK("altstack-per-thread", old.ss_flags == SS_DISABLE, "main thread flags %d", old.ss_flags);
    signal(SIGSEGV, SIG_DFL);
}

/* ---- figures (not checks): `signals figures` ------------------------------------------------- */
static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void bench(void) {
    install(SIGUSR1, on_usr, 0);
    const int n = 2000;
    hits = 0;
    double t0 = now_us();
    for (int i = 0; i < n; i++) raise(SIGUSR1);
    double t1 = now_us();
    printf("figures: raise(SIGUSR1) to a handler and back: %.2f us each (%d rounds, %d handled)\n", (t1 - t0) / n, n, hits);
    /* The write barrier: protect, write (fault, handler unprotects, return), 512 pages. */
    const int pages = 512;
    char *area = mmap(NULL, pages * 4096ul, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < pages; i++) area[i * 4096] = 1;
    install(SIGSEGV, on_segv_unprotect, 0);
    segv_hits = 0;
    mprotect(area, pages * 4096ul, PROT_READ);
    t0 = now_us();
    for (int i = 0; i < pages; i++) area[i * 4096 + 1] = 2;
    t1 = now_us();
    printf("figures: write-barrier fault, handler mprotect, return: %.2f us each (%d pages, %d faults)\n", (t1 - t0) / pages,
           pages, segv_hits);
    signal(SIGSEGV, SIG_DFL);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "all";
    if (strcmp(mode, "abort") == 0) {
        printf("signals: calling abort()\n");
        abort();
    }
    if (strcmp(mode, "figures") == 0) {
        bench();
        return 0;
    }
    if (strcmp(mode, "badframe") == 0) {
        bad_frame_ends_the_process();
        return 1;
    }
    if (strcmp(mode, "segv") == 0) {
        printf("signals: loading from NULL with no handler\n");
        return *(volatile int *)0;
    }
    static const struct { const char *name; void (*run)(void); } groups[] = {
        { "sigaction", test_sigaction_rules }, { "kill", test_kill_and_masks }, { "realtime", test_realtime },
        { "sigtimedwait", test_sigtimedwait }, { "faults", test_faults }, { "longjmp", test_longjmp_and_bad_frame },
        { "altstack", test_altstack }, { "threads", test_threads }, { "jit", test_jit },
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (strcmp(mode, "all") == 0 || strcmp(mode, groups[i].name) == 0) groups[i].run();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
