// restart-test: how Linux 6.1 ends or restarts a blocking system call that a signal interrupts,
// and the timers that send such signals, as an unmodified static glibc program sees them.
// A handler installed with or without SA_RESTART interrupts wait4, a pipe read, a futex wait
// (with and without a timeout), nanosleep (EINTR with the time left), epoll_wait, poll,
// pause and sigsuspend (always EINTR); a stop (SIGSTOP) and continue (SIGCONT) with no handler
// resumes nanosleep and clock_nanosleep with the time left, but ends epoll_wait and sigtimedwait
// with EINTR (signal(7)); alarm + pause; setitimer/getitimer (ITIMER_REAL, ITIMER_VIRTUAL,
// ITIMER_PROF); POSIX timers (SIGEV_SIGNAL with si_value, SI_TIMER and si_overrun, SIGEV_THREAD_ID,
// SIGEV_NONE, a CPU-time clock); CLOCK_PROCESS_CPUTIME_ID/CLOCK_THREAD_CPUTIME_ID; RLIMIT_CPU
// (SIGXCPU at the soft limit, SIGKILL at the hard one); clone(CLONE_PARENT); getresuid and
// getresgid; F_GETPIPE_SZ/F_SETPIPE_SZ; pipe2(O_DIRECT) packets; futex_waitv; the vDSO (mapped
// as [vvar] and [vdso], AT_SYSINFO_EHDR, its clocks never behind the system call's, a handler
// returning through its rt_sigreturn, wherever mremap moved it, and SIGSEGV once it is unmapped).
// Timer cases check lower bounds and counts "at least", never exact values. Each case runs in a
// child process of its own (check.h's run_cases_apart), prints "ok - NAME" or "FAIL - NAME"; the
// last line is "N passed, N failed"; the output is Linux 6.1's (tests/linux-parity/restart-test.out).
// Built by scripts/lib.sh (build_linux_programs).
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <time.h>

#include "check.h"

static int64_t now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
#define MS 1000000LL

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static void spin_cpu_ms(int ms) {
    int64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + ms * MS;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    }
}

static volatile sig_atomic_t handled, handled_tid;
static void on_signal(int sig) {
    handled++;
    (void)sig;
}

static void handle(int sig, int flags) {
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = flags};
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    handled = 0;
}

// kick: a thread that sends SIG to the calling thread after MS milliseconds.
struct kick {
    pthread_t target;
    int sig, ms;
};
static void *kick_thread(void *arg) {
    struct kick *k = arg;
    sleep_ms(k->ms);
    pthread_kill(k->target, k->sig);
    free(k);
    return NULL;
}
static void kick(int sig, int ms) {
    struct kick *k = malloc(sizeof *k);
    *k = (struct kick){pthread_self(), sig, ms};
    pthread_t t;
    pthread_create(&t, NULL, kick_thread, k);
    pthread_detach(t);
}

// stop_and_continue: a process that stops TARGET after STOP_MS and continues it CONT_MS later.
static pid_t stop_and_continue(pid_t target, int stop_ms, int cont_ms) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(stop_ms);
        kill(target, SIGSTOP);
        sleep_ms(cont_ms);
        kill(target, SIGCONT);
        _exit(0);
    }
    return pid;
}

// later_child: a child that sleeps MS and exits with CODE.
static pid_t later_child(int ms, int code) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(ms);
        _exit(code);
    }
    return pid;
}

static long futex(uint32_t *uaddr, int op, uint32_t val, const struct timespec *t) { return syscall(SYS_futex, uaddr, op, val, t, NULL, 0); }

// ---- handlers with and without SA_RESTART ----------------------------------------------------------

static void test_wait4(void) {
    handle(SIGUSR1, SA_RESTART);
    pid_t child = later_child(200, 5);
    kick(SIGUSR1, 50);
    int status;
    CHECK(wait4(child, &status, 0, NULL) == child && WEXITSTATUS(status) == 5, "SA_RESTART: wait4 restarted: %s", strerrorname_np(errno));
    CHECK(handled == 1, "the handler ran");
    handle(SIGUSR1, 0);
    child = later_child(200, 6);
    kick(SIGUSR1, 50);
    CHECK_ERR(wait4(child, &status, 0, NULL), EINTR);
    CHECK(handled == 1, "the handler ran");
    CHECK(wait4(child, &status, 0, NULL) == child && WEXITSTATUS(status) == 6, "the child is still there to wait for");
}

static void test_pipe_read(void) {
    int p[2];
    CHECK_SYS(pipe(p));
    handle(SIGUSR1, SA_RESTART);
    fflush(stdout);
    pid_t writer = fork();
    if (writer == 0) {
        sleep_ms(200);
        _exit(write(p[1], "late", 4) == 4 ? 0 : 1);
    }
    kick(SIGUSR1, 50);
    char buf[8];
    CHECK(read(p[0], buf, sizeof buf) == 4 && handled == 1, "SA_RESTART: the read restarted and got the data (%d)", handled);
    waitpid(writer, NULL, 0);
    handle(SIGUSR1, 0);
    kick(SIGUSR1, 50);
    CHECK_ERR(read(p[0], buf, sizeof buf), EINTR);
    // A read that already has data returns it, not EINTR; so does a write that wrote some.
    CHECK(write(p[1], "ab", 2) == 2 && read(p[0], buf, sizeof buf) == 2, "ready data");
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) == 4096, "a one-page pipe");
    static char big[16384];
    kick(SIGUSR1, 50);
    ssize_t n = write(p[1], big, sizeof big);
    CHECK(n == 4096, "an interrupted write reports what it wrote: %zd", n);
}

static void test_nanosleep(void) {
    handle(SIGUSR1, SA_RESTART);
    kick(SIGUSR1, 50);
    struct timespec req = {0, 300 * MS}, rem = {0, 0};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(nanosleep(&req, &rem), EINTR); // even with SA_RESTART
    int64_t slept = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(handled == 1 && slept < 300 * MS, "interrupted after %lld ms", (long long)(slept / MS));
    // The time left is what was not slept: at most 250 ms (the signal came after 50 ms), and no
    // less than what this thread did not see pass.
    CHECK(rem.tv_sec == 0 && rem.tv_nsec > 0 && rem.tv_nsec < 260 * MS && rem.tv_nsec + slept >= 299 * MS, "the time left: %ld ms after %lld ms", rem.tv_nsec / 1000000, (long long)(slept / MS));
    kick(SIGUSR1, 50);
    struct timespec left = {0, 0};
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &left);
    CHECK(r == EINTR && left.tv_nsec > 0, "clock_nanosleep returned %d (EINTR, returned), left %ld ns, handled %d", r, left.tv_nsec, handled);
    int64_t deadline = now_ns(CLOCK_MONOTONIC) + 200 * MS;
    struct timespec abs = {deadline / 1000000000, deadline % 1000000000};
    kick(SIGUSR1, 50);
    left = (struct timespec){7, 7};
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, &left) == EINTR, "absolute: EINTR");
    CHECK(left.tv_sec == 7 && left.tv_nsec == 7, "an absolute sleep leaves its `remain` alone");
    // An ignored signal does not interrupt.
    signal(SIGUSR2, SIG_IGN);
    kick(SIGUSR2, 20);
    req = (struct timespec){0, 100 * MS};
    CHECK_SYS(nanosleep(&req, NULL));
    struct timespec bad = {0, 1000000000};
    CHECK_ERR(nanosleep(&bad, NULL), EINVAL);
    bad = (struct timespec){-1, 0};
    CHECK_ERR(nanosleep(&bad, NULL), EINVAL);
}

static void test_epoll_wait_and_poll(void) {
    int ep = epoll_create1(0);
    int p[2];
    CHECK_SYS(pipe(p));
    struct epoll_event e = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e);
    handle(SIGUSR1, SA_RESTART);
    kick(SIGUSR1, 50);
    CHECK_ERR(epoll_wait(ep, &e, 1, 1000), EINTR); // never restarted
    CHECK(handled == 1, "handler");
    kick(SIGUSR1, 50);
    CHECK_ERR(epoll_wait(ep, &e, 1, -1), EINTR);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    kick(SIGUSR1, 50);
    CHECK_ERR(poll(&pf, 1, 1000), EINTR);
    kick(SIGUSR1, 50);
    CHECK_ERR(poll(&pf, 1, -1), EINTR);
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(p[0], &rd);
    kick(SIGUSR1, 50);
    CHECK_ERR(select(p[0] + 1, &rd, NULL, NULL, NULL), EINTR);
}

static void test_pause_and_sigsuspend(void) {
    handle(SIGUSR1, SA_RESTART);
    kick(SIGUSR1, 50);
    CHECK_ERR(pause(), EINTR);
    CHECK(handled == 1, "handler");
    sigset_t block, empty;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigemptyset(&empty);
    sigprocmask(SIG_BLOCK, &block, NULL);
    raise(SIGUSR1);
    CHECK_ERR(sigsuspend(&empty), EINTR);
    CHECK(handled == 2, "the pending signal was taken inside sigsuspend");
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(sigismember(&now, SIGUSR1), "sigsuspend restored the mask");
    kick(SIGUSR1, 50);
    CHECK_ERR(sigsuspend(&empty), EINTR);
}

// ---- stop and continue -----------------------------------------------------------------------------

static void test_stop_and_continue(void) {
    // nanosleep: resumed with the time left; the whole sleep lasts at least what was asked.
    pid_t sc = stop_and_continue(getpid(), 50, 100);
    struct timespec req = {0, 300 * MS};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(nanosleep(&req, NULL) == 0, "nanosleep resumed: %s", strerrorname_np(errno));
    int64_t slept = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(slept >= 300 * MS, "slept %lld ms", (long long)(slept / MS));
    waitpid(sc, NULL, 0);
    // Stopped past the end of the sleep: it ends as soon as it is continued.
    sc = stop_and_continue(getpid(), 30, 300);
    req = (struct timespec){0, 100 * MS};
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL) == 0, "clock_nanosleep resumed");
    slept = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(slept >= 300 * MS, "returned after the continue (300 ms after the stop): %lld ms", (long long)(slept / MS));
    waitpid(sc, NULL, 0);
    int64_t deadline = now_ns(CLOCK_MONOTONIC) + 250 * MS;
    struct timespec abs = {deadline / 1000000000, deadline % 1000000000};
    sc = stop_and_continue(getpid(), 50, 50);
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL) == 0 && now_ns(CLOCK_MONOTONIC) >= deadline, "absolute sleep resumed");
    waitpid(sc, NULL, 0);
    // epoll_wait and sigtimedwait end with EINTR after a stop, even with no handler.
    int ep = epoll_create1(0);
    int p[2];
    CHECK_SYS(pipe(p));
    struct epoll_event e = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e);
    sc = stop_and_continue(getpid(), 50, 50);
    CHECK_ERR(epoll_wait(ep, &e, 1, 2000), EINTR);
    waitpid(sc, NULL, 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct timespec ts = {2, 0};
    sc = stop_and_continue(getpid(), 50, 50);
    CHECK_ERR(sigtimedwait(&set, NULL, &ts), EINTR);
    waitpid(sc, NULL, 0);
    // A pipe read and poll are restarted (no handler: ERESTARTSYS and ERESTARTNOHAND restart).
    fflush(stdout);
    pid_t writer = fork();
    if (writer == 0) {
        sleep_ms(250);
        _exit(write(p[1], "w", 1) == 1 ? 0 : 1);
    }
    sc = stop_and_continue(getpid(), 50, 50);
    char c;
    CHECK(read(p[0], &c, 1) == 1, "the read resumed: %s", strerrorname_np(errno));
    waitpid(sc, NULL, 0);
    waitpid(writer, NULL, 0);
    sc = stop_and_continue(getpid(), 50, 50);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(poll(&pf, 1, 250) == 0 && now_ns(CLOCK_MONOTONIC) - t0 >= 250 * MS, "poll resumed with the time left");
    waitpid(sc, NULL, 0);
    // With a SIGCONT handler the continue is a handled signal: nanosleep says EINTR.
    handle(SIGCONT, SA_RESTART);
    sc = stop_and_continue(getpid(), 50, 50);
    struct timespec rem;
    req = (struct timespec){0, 300 * MS};
    CHECK_ERR(nanosleep(&req, &rem), EINTR);
    CHECK(handled == 1, "SIGCONT's handler ran");
    waitpid(sc, NULL, 0);
    // The parent sees the stop and the continue with WUNTRACED/WCONTINUED.
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        sleep_ms(300);
        _exit(0);
    }
    int status;
    kill(child, SIGSTOP);
    CHECK(waitpid(child, &status, WUNTRACED) == child && WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP, "stopped: %#x", status);
    kill(child, SIGCONT);
    CHECK(waitpid(child, &status, WCONTINUED) == child && WIFCONTINUED(status), "continued: %#x", status);
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status), "exited");
}

// ---- futexes ---------------------------------------------------------------------------------------

static uint32_t word;
static void *wake_after_200ms(void *arg) {
    (void)arg;
    sleep_ms(200);
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL);
    return NULL;
}

static void test_futex_restart(void) {
    handle(SIGUSR1, SA_RESTART);
    word = 0;
    pthread_t t;
    pthread_create(&t, NULL, wake_after_200ms, NULL);
    kick(SIGUSR1, 50);
    long r;
    while ((r = futex(&word, FUTEX_WAIT_PRIVATE, 0, NULL)) == -1 && errno == EAGAIN && word == 0) {
    }
    CHECK(r == 0 || (r == -1 && errno == EAGAIN), "SA_RESTART: no timeout, restarted until woken: %ld %s", r, strerrorname_np(errno));
    CHECK(handled == 1 && word == 1, "the handler ran (%d) and the wake came (%u)", handled, word);
    pthread_join(t, NULL);
    // Without SA_RESTART: EINTR.
    handle(SIGUSR1, 0);
    word = 0;
    kick(SIGUSR1, 50);
    CHECK_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, NULL), EINTR);
    // With a timeout, a handled signal is EINTR even under SA_RESTART (ERESTART_RESTARTBLOCK).
    handle(SIGUSR1, SA_RESTART);
    struct timespec ts = {1, 0};
    kick(SIGUSR1, 50);
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, &ts), EINTR);
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 < 900 * MS, "it did not wait out the timeout");
    ts = (struct timespec){0, 50 * MS};
    CHECK_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 0, &ts), ETIMEDOUT);
    CHECK_ERR(futex(&word, FUTEX_WAIT_PRIVATE, 1, &ts), EAGAIN);
}

static void *wake_second_after_100ms(void *arg) {
    uint32_t *w = arg;
    sleep_ms(100);
    __atomic_store_n(&w[1], 1, __ATOMIC_SEQ_CST);
    futex(&w[1], FUTEX_WAKE_PRIVATE, 1, NULL);
    return NULL;
}

static long waitv(struct futex_waitv *w, unsigned n, unsigned flags, struct timespec *t, clockid_t c) {
    return syscall(SYS_futex_waitv, w, n, flags, t, c);
}

static void test_futex_waitv(void) {
    static uint32_t words[2] __attribute__((aligned(8)));
    struct futex_waitv w[2] = {{.val = 0, .uaddr = (uintptr_t)&words[0], .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
                               {.val = 0, .uaddr = (uintptr_t)&words[1], .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG}};
    pthread_t t;
    pthread_create(&t, NULL, wake_second_after_100ms, words);
    long r = waitv(w, 2, 0, NULL, 0);
    CHECK(r == 1, "woken on the second word: %ld %s", r, r < 0 ? strerrorname_np(errno) : "");
    pthread_join(t, NULL);
    CHECK_ERR(waitv(w, 2, 0, NULL, 0), EAGAIN); // words[1] is 1 now, not 0
    words[1] = 0;
    int64_t at = now_ns(CLOCK_MONOTONIC) + 50 * MS;
    struct timespec abs = {at / 1000000000, at % 1000000000};
    CHECK_ERR(waitv(w, 2, 0, &abs, CLOCK_MONOTONIC), ETIMEDOUT);
    CHECK(now_ns(CLOCK_MONOTONIC) >= at, "the timeout is absolute");
    at = now_ns(CLOCK_REALTIME) + 30 * MS;
    abs = (struct timespec){at / 1000000000, at % 1000000000};
    CHECK_ERR(waitv(w, 2, 0, &abs, CLOCK_REALTIME), ETIMEDOUT);
    CHECK_ERR(waitv(w, 2, 1, NULL, 0), EINVAL);
    CHECK_ERR(waitv(w, 0, 0, NULL, 0), EINVAL);
    static struct futex_waitv many[129];
    CHECK_ERR(waitv(many, 129, 0, NULL, 0), EINVAL);
    CHECK_ERR(waitv(w, 2, 0, &abs, CLOCK_BOOTTIME), EINVAL);
    struct futex_waitv bad = {.val = 0, .uaddr = (uintptr_t)&words[0] + 1, .flags = FUTEX_32};
    CHECK_ERR(waitv(&bad, 1, 0, NULL, 0), EINVAL);
    bad = (struct futex_waitv){.val = 0, .uaddr = (uintptr_t)&words[0], .flags = 0};
    CHECK_ERR(waitv(&bad, 1, 0, NULL, 0), EINVAL);
    bad = (struct futex_waitv){.val = 0, .uaddr = (uintptr_t)&words[0], .flags = FUTEX_32, .__reserved = 1};
    CHECK_ERR(waitv(&bad, 1, 0, NULL, 0), EINVAL);
    // A shared (not private) word between processes.
    uint32_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(100);
        __atomic_store_n(shared, 1, __ATOMIC_SEQ_CST);
        _exit(futex(shared, FUTEX_WAKE, 1, NULL) == 1 ? 0 : 1);
    }
    struct futex_waitv sw = {.val = 0, .uaddr = (uintptr_t)shared, .flags = FUTEX_32};
    CHECK(waitv(&sw, 1, 0, NULL, 0) == 0, "woken by another process: %s", strerrorname_np(errno));
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "the child woke one waiter");
}

// ---- timers ----------------------------------------------------------------------------------------

static void test_alarm_and_pause(void) {
    handle(SIGALRM, 0);
    CHECK(alarm(5) == 0, "no alarm before");
    CHECK(alarm(1) == 5, "alarm returns the seconds left");
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(pause(), EINTR);
    int64_t waited = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(handled == 1 && waited >= 990 * MS, "SIGALRM after %lld ms", (long long)(waited / MS));
    CHECK(alarm(0) == 0, "nothing left");
    CHECK(alarm(10) == 0 && alarm(0) == 10, "alarm(0) cancels and says what was left");
    struct itimerval it;
    CHECK(getitimer(ITIMER_REAL, &it) == 0 && it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0, "cancelled");
    alarm(3);
    CHECK(getitimer(ITIMER_REAL, &it) == 0 && it.it_value.tv_sec >= 2 && it.it_value.tv_sec <= 3 && it.it_interval.tv_sec == 0, "alarm is ITIMER_REAL");
    alarm(0);
    // An alarm's SIGALRM with the default action ends the process.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        struct itimerval short_one = {.it_value = {0, 50000}};
        setitimer(ITIMER_REAL, &short_one, NULL);
        for (;;) pause();
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM, "status %#x", status);
}

static void test_setitimer(void) {
    handle(SIGALRM, SA_RESTART);
    struct itimerval it = {.it_value = {0, 50000}, .it_interval = {0, 50000}}, old, cur;
    CHECK_SYS(setitimer(ITIMER_REAL, &it, &old));
    CHECK(old.it_value.tv_sec == 0 && old.it_value.tv_usec == 0, "no timer before");
    CHECK(getitimer(ITIMER_REAL, &cur) == 0 && cur.it_interval.tv_usec == 50000 && cur.it_value.tv_usec > 0 && cur.it_value.tv_usec <= 50000, "getitimer: %ld us left", (long)cur.it_value.tv_usec);
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    while (now_ns(CLOCK_MONOTONIC) - t0 < 280 * MS) sleep_ms(10);
    it = (struct itimerval){0};
    CHECK_SYS(setitimer(ITIMER_REAL, &it, &old));
    CHECK(old.it_interval.tv_usec == 50000, "the old interval");
    // 5 expirations; a signal still pending when the next expires is not queued twice.
    CHECK(handled >= 3 && handled <= 6, "a 50 ms periodic timer over 280 ms: %d signals", handled);
    // ITIMER_VIRTUAL counts user CPU time only: a sleep does not advance it.
    handle(SIGVTALRM, 0);
    it = (struct itimerval){.it_value = {0, 100000}};
    CHECK_SYS(setitimer(ITIMER_VIRTUAL, &it, NULL));
    sleep_ms(200);
    CHECK(handled == 0, "sleeping used no CPU time");
    t0 = now_ns(CLOCK_MONOTONIC);
    while (!handled && now_ns(CLOCK_MONOTONIC) - t0 < 3000 * MS) {
    }
    CHECK(handled == 1, "SIGVTALRM after 100 ms of CPU");
    CHECK(getitimer(ITIMER_VIRTUAL, &cur) == 0 && cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0, "a one-shot is disarmed after it fired");
    handle(SIGPROF, 0);
    it = (struct itimerval){.it_value = {0, 50000}, .it_interval = {0, 50000}};
    CHECK_SYS(setitimer(ITIMER_PROF, &it, NULL));
    t0 = now_ns(CLOCK_MONOTONIC);
    while (handled < 3 && now_ns(CLOCK_MONOTONIC) - t0 < 3000 * MS) {
    }
    CHECK(handled >= 3, "SIGPROF three times: %d", handled);
    it = (struct itimerval){0};
    CHECK_SYS(setitimer(ITIMER_PROF, &it, NULL));
    CHECK_ERR(setitimer(7, &it, NULL), EINVAL);
    it.it_value.tv_usec = 1000000;
    CHECK_ERR(setitimer(ITIMER_REAL, &it, NULL), EINVAL);
    CHECK_ERR(getitimer(7, &cur), EINVAL);
    // Timers are not inherited by fork; they survive execve (not tested here).
    it = (struct itimerval){.it_value = {5, 0}};
    CHECK_SYS(setitimer(ITIMER_REAL, &it, NULL));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(getitimer(ITIMER_REAL, &cur) == 0 && cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0 ? 0 : 1);
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "a child starts with no timer");
}

static volatile sig_atomic_t timer_tid;
static siginfo_t last_info;
static void on_timer(int sig, siginfo_t *si, void *ctx) {
    (void)sig, (void)ctx;
    last_info = *si;
    timer_tid = gettid();
    handled++;
}

static pid_t spinner_tid;
static void *spin_until_handled(void *arg) {
    (void)arg;
    __atomic_store_n(&spinner_tid, gettid(), __ATOMIC_SEQ_CST);
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    while (!handled && now_ns(CLOCK_MONOTONIC) - t0 < 2000 * MS) sleep_ms(1);
    return (void *)(intptr_t)gettid();
}

static void test_posix_timers(void) {
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &rt, NULL);
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN, .sigev_value.sival_int = 1234};
    timer_t t;
    CHECK_SYS(timer_create(CLOCK_MONOTONIC, &sev, &t));
    struct itimerspec its = {.it_value = {0, 30 * MS}}, cur;
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_SYS(timer_settime(t, 0, &its, NULL));
    CHECK(timer_gettime(t, &cur) == 0 && cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 0 && cur.it_value.tv_nsec <= 30 * MS, "gettime");
    siginfo_t si;
    CHECK(sigwaitinfo(&rt, &si) == SIGRTMIN, "the timer's signal");
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 30 * MS, "not early");
    CHECK(si.si_code == SI_TIMER && si.si_value.sival_int == 1234 && si.si_overrun == 0, "code %d value %d overrun %d", si.si_code, si.si_value.sival_int, si.si_overrun);
    // Overruns: a 10 ms periodic timer whose signal stays blocked for 100 ms is one signal.
    its = (struct itimerspec){.it_value = {0, 10 * MS}, .it_interval = {0, 10 * MS}};
    CHECK_SYS(timer_settime(t, 0, &its, NULL));
    sleep_ms(105);
    CHECK(sigwaitinfo(&rt, &si) == SIGRTMIN, "signal");
    CHECK(si.si_overrun >= 5 && si.si_overrun <= 100, "si_overrun %d", si.si_overrun);
    CHECK(timer_getoverrun(t) == si.si_overrun, "timer_getoverrun %d, si_overrun %d", timer_getoverrun(t), si.si_overrun);
    CHECK(timer_gettime(t, &cur) == 0 && cur.it_interval.tv_nsec == 10 * MS && cur.it_value.tv_nsec <= 10 * MS, "periodic gettime");
    CHECK_SYS(timer_delete(t));
    CHECK_ERR(timer_settime(t, 0, &its, NULL), EINVAL);
    CHECK_ERR(timer_gettime(t, &cur), EINVAL);
    CHECK_ERR(timer_delete(t), EINVAL);
    // Absolute, CLOCK_REALTIME.
    CHECK_SYS(timer_create(CLOCK_REALTIME, &sev, &t));
    int64_t at = now_ns(CLOCK_REALTIME) + 30 * MS;
    its = (struct itimerspec){.it_value = {at / 1000000000, at % 1000000000}};
    CHECK_SYS(timer_settime(t, TIMER_ABSTIME, &its, NULL));
    CHECK(sigwaitinfo(&rt, &si) == SIGRTMIN && now_ns(CLOCK_REALTIME) >= at, "absolute");
    timer_delete(t);
    // SIGEV_NONE: no signal, the time still runs.
    struct sigevent none = {.sigev_notify = SIGEV_NONE};
    CHECK_SYS(timer_create(CLOCK_MONOTONIC, &none, &t));
    its = (struct itimerspec){.it_value = {10, 0}};
    CHECK_SYS(timer_settime(t, 0, &its, NULL));
    sleep_ms(20);
    CHECK(timer_gettime(t, &cur) == 0 && cur.it_value.tv_sec == 9, "SIGEV_NONE counts down: %ld s", (long)cur.it_value.tv_sec);
    timer_delete(t);
    // SIGEV_THREAD_ID: the signal goes to the named thread.
    struct sigaction sa = {.sa_sigaction = on_timer, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN + 1, &sa, NULL);
    handled = 0;
    pthread_t th;
    spinner_tid = 0;
    pthread_create(&th, NULL, spin_until_handled, NULL);
    while (!__atomic_load_n(&spinner_tid, __ATOMIC_SEQ_CST)) sleep_ms(1);
    void *ret;
    struct sigevent tid_ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN + 1};
    struct {
        pid_t tid;
    } target = {spinner_tid};
    tid_ev._sigev_un._tid = target.tid;
    CHECK_SYS(timer_create(CLOCK_MONOTONIC, &tid_ev, &t));
    its = (struct itimerspec){.it_value = {0, 20 * MS}};
    CHECK_SYS(timer_settime(t, 0, &its, NULL));
    pthread_join(th, &ret);
    CHECK(handled == 1 && timer_tid == target.tid && (intptr_t)ret == target.tid, "delivered to thread %d, wanted %d", timer_tid, target.tid);
    CHECK(last_info.si_code == SI_TIMER, "SI_TIMER");
    timer_delete(t);
    tid_ev._sigev_un._tid = 999999;
    CHECK_ERR(timer_create(CLOCK_MONOTONIC, &tid_ev, &t), EINVAL);
    CHECK_ERR(timer_create(99, &sev, &t), EINVAL);
    struct sigevent bad = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = 0};
    CHECK_ERR(timer_create(CLOCK_MONOTONIC, &bad, &t), EINVAL);
    // A CPU-time timer fires after CPU time, not wall time.
    CHECK_SYS(timer_create(CLOCK_PROCESS_CPUTIME_ID, &sev, &t));
    its = (struct itimerspec){.it_value = {0, 50 * MS}};
    CHECK_SYS(timer_settime(t, 0, &its, NULL));
    sleep_ms(100);
    sigset_t pend;
    sigpending(&pend);
    CHECK(!sigismember(&pend, SIGRTMIN), "not after a sleep");
    int64_t c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    struct timespec poll_ts = {0, 0};
    while (sigtimedwait(&rt, &si, &poll_ts) != SIGRTMIN && now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0 < 2000 * MS) {
    }
    CHECK(si.si_code == SI_TIMER && now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0 >= 40 * MS, "after %lld ms of CPU", (long long)((now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / MS));
    timer_delete(t);
}

static void *spin_100ms(void *arg) {
    spin_cpu_ms(100);
    return arg;
}

static void test_cpu_clocks(void) {
    struct timespec res;
    CHECK(clock_getres(CLOCK_PROCESS_CPUTIME_ID, &res) == 0 && res.tv_sec == 0 && res.tv_nsec == 1, "resolution %ld ns", res.tv_nsec);
    CHECK(clock_getres(CLOCK_THREAD_CPUTIME_ID, &res) == 0 && res.tv_nsec == 1, "thread resolution %ld ns", res.tv_nsec);
    int64_t p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), t0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
    sleep_ms(100);
    int64_t slept_cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    CHECK(slept_cpu < 30 * MS, "a 100 ms sleep used %lld ms of CPU", (long long)(slept_cpu / MS));
    int64_t t1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t w1 = now_ns(CLOCK_MONOTONIC);
    while (now_ns(CLOCK_MONOTONIC) - w1 < 100 * MS) {
    }
    int64_t spun = now_ns(CLOCK_THREAD_CPUTIME_ID) - t1;
    CHECK(spun >= 50 * MS && spun <= now_ns(CLOCK_MONOTONIC) - w1 + 10 * MS, "100 ms of spinning: %lld ms of CPU", (long long)(spun / MS));
    CHECK(now_ns(CLOCK_PROCESS_CPUTIME_ID) - p0 >= spun && now_ns(CLOCK_PROCESS_CPUTIME_ID) - p0 <= now_ns(CLOCK_MONOTONIC) - w0 + 10 * MS, "the process clock");
    // Another thread's CPU time: its clock advances, ours does not.
    pthread_t th;
    int64_t mine0 = now_ns(CLOCK_THREAD_CPUTIME_ID), proc0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    pthread_create(&th, NULL, spin_100ms, NULL);
    clockid_t tc;
    CHECK(pthread_getcpuclockid(th, &tc) == 0, "pthread_getcpuclockid");
    sleep_ms(50);
    int64_t theirs = now_ns(tc);
    pthread_join(th, NULL);
    CHECK(theirs > 0, "the thread's clock: %lld ns", (long long)theirs);
    CHECK(now_ns(CLOCK_THREAD_CPUTIME_ID) - mine0 < 30 * MS, "ours did not move much");
    CHECK(now_ns(CLOCK_PROCESS_CPUTIME_ID) - proc0 >= 90 * MS, "the process's includes the thread: %lld ms", (long long)((now_ns(CLOCK_PROCESS_CPUTIME_ID) - proc0) / MS));
    // A child's process clock.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        spin_cpu_ms(100);
        sleep_ms(300);
        _exit(0);
    }
    clockid_t cc;
    CHECK(clock_getcpuclockid(pid, &cc) == 0, "clock_getcpuclockid");
    sleep_ms(200);
    int64_t child = now_ns(cc);
    CHECK(child >= 90 * MS, "the child's CPU time: %lld ms", (long long)(child / MS));
    waitpid(pid, NULL, 0);
    struct rusage ru;
    CHECK(getrusage(RUSAGE_CHILDREN, &ru) == 0 && ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 + ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000 >= 80, "RUSAGE_CHILDREN counts the reaped child");
    CHECK_ERR(clock_gettime(cc, &res), EINVAL);
}

static void test_rlimit_cpu(void) {
    int p[2];
    CHECK_SYS(pipe(p));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {1, 2};
        setrlimit(RLIMIT_CPU, &rl);
        handle(SIGXCPU, 0);
        // Bounded in wall time, so a kernel without RLIMIT_CPU fails the case, not the suite.
        for (int64_t t0 = now_ns(CLOCK_MONOTONIC); now_ns(CLOCK_MONOTONIC) - t0 < 10000 * MS;) {
            if (handled) {
                handled = 0;
                if (write(p[1], "X", 1) != 1) _exit(1);
            }
        }
        _exit(99);
    }
    close(p[1]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "wait");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "killed by SIGKILL at the hard limit: %#x", status);
    char buf[8];
    ssize_t n = read(p[0], buf, sizeof buf);
    CHECK(n >= 1, "SIGXCPU at the soft limit first: %zd", n);
    struct rusage ru;
    CHECK(getrusage(RUSAGE_CHILDREN, &ru) == 0 && ru.ru_utime.tv_sec + ru.ru_stime.tv_sec >= 1, "it used about 2 s of CPU");
    // Without a handler SIGXCPU ends the process (its default action).
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        struct rlimit rl = {1, RLIM_INFINITY};
        setrlimit(RLIMIT_CPU, &rl);
        for (int64_t t0 = now_ns(CLOCK_MONOTONIC); now_ns(CLOCK_MONOTONIC) - t0 < 10000 * MS;) {
        }
        _exit(99);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU, "SIGXCPU: %#x", status);
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_CPU, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY && rl.rlim_max == RLIM_INFINITY, "unlimited by default");
}

// ---- processes and identities ----------------------------------------------------------------------

static void test_clone_parent(void) {
    int p[2], q[2];
    CHECK_SYS(pipe(p));
    CHECK_SYS(pipe(q));
    pid_t me = getpid();
    fflush(stdout);
    pid_t middle = fork();
    if (middle == 0) {
        long c = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, NULL, NULL, 0);
        if (c == 0) {
            pid_t pp = getppid();
            if (write(p[1], &pp, sizeof pp) != sizeof pp) _exit(1);
            sleep_ms(50);
            _exit(42);
        }
        // The clone is a sibling: this process cannot wait for it.
        int bad = c < 0 || waitpid(c, NULL, WNOHANG) != -1 || errno != ECHILD;
        if (write(q[1], &c, sizeof(pid_t)) != sizeof(pid_t)) bad = 1;
        _exit(bad ? 1 : 3);
    }
    pid_t seen_parent = 0, grandchild = 0;
    CHECK(read(p[0], &seen_parent, sizeof seen_parent) == sizeof seen_parent, "read");
    CHECK(read(q[0], &grandchild, sizeof grandchild) == sizeof grandchild, "read");
    CHECK(seen_parent == me, "the clone's parent is the caller's parent");
    int status;
    CHECK(waitpid(middle, &status, 0) == middle && WEXITSTATUS(status) == 3, "the middle process: %#x", status);
    CHECK(waitpid(grandchild, &status, 0) == grandchild && WEXITSTATUS(status) == 42, "this process waits for the clone: %#x", status);
    CHECK_ERR(waitpid(-1, &status, 0), ECHILD);
    // clone(CLONE_PARENT) of an init process is refused: not testable here (not pid 1).
}

static void test_getresuid_and_getresgid(void) {
    uid_t r, e, s;
    gid_t gr, ge, gs;
    CHECK(getresuid(&r, &e, &s) == 0 && r == 0 && e == 0 && s == 0, "root: %d %d %d", r, e, s);
    CHECK(getresgid(&gr, &ge, &gs) == 0 && gr == 0 && ge == 0 && gs == 0, "root group");
    CHECK_SYS(setresgid(100, 200, 300));
    CHECK(getresgid(&gr, &ge, &gs) == 0 && gr == 100 && ge == 200 && gs == 300, "setresgid: %d %d %d", gr, ge, gs);
    CHECK(getegid() == 200 && getgid() == 100, "getgid/getegid");
    CHECK_SYS(setresuid(1000, 2000, 3000));
    CHECK(getresuid(&r, &e, &s) == 0 && r == 1000 && e == 2000 && s == 3000, "setresuid: %d %d %d", r, e, s);
    CHECK(geteuid() == 2000 && getuid() == 1000, "getuid/geteuid");
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strstr(buf, "\nUid:\t1000\t2000\t3000\t2000\n") && strstr(buf, "\nGid:\t100\t200\t300\t200\n"), "/proc/self/status: real, effective, saved, filesystem");
    CHECK(strstr(buf, "\nCapEff:\t0000000000000000\n"), "no root uid left: no capabilities");
    // Unprivileged: any of the three ids may be set to any of the three.
    CHECK_SYS(setresuid(-1, 3000, -1));
    CHECK(getresuid(&r, &e, &s) == 0 && e == 3000, "effective from saved");
    CHECK_SYS(setresuid(1000, -1, -1));
    CHECK_ERR(setresuid(-1, 4000, -1), EPERM);
    CHECK_ERR(setresuid(0, -1, -1), EPERM);
    CHECK_ERR(setresgid(-1, 0, -1), EPERM);
    CHECK_SYS(seteuid(1000));
    CHECK(getresuid(&r, &e, &s) == 0 && r == 1000 && e == 1000 && s == 3000, "seteuid keeps the saved id: %d %d %d", r, e, s);
    CHECK_SYS(setuid(1000));
    CHECK(getresuid(&r, &e, &s) == 0 && s == 3000, "setuid without privilege sets only the effective id");
    CHECK_ERR(syscall(SYS_getresuid, &r, &e, (uid_t *)8), EFAULT);
}

static void test_pipe_sizes(void) {
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK(fcntl(p[0], F_GETPIPE_SZ) == 65536 && fcntl(p[1], F_GETPIPE_SZ) == 65536, "the default: %d", fcntl(p[0], F_GETPIPE_SZ));
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) == 4096, "one page");
    CHECK(fcntl(p[0], F_GETPIPE_SZ) == 4096, "both ends see it");
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 5000) == 8192, "rounded up to a power of two pages: %d", fcntl(p[1], F_GETPIPE_SZ));
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 0) == 4096, "at least a page: %d", fcntl(p[1], F_GETPIPE_SZ));
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 1 << 20) == 1 << 20, "pipe-max-size");
    CHECK(fcntl(p[1], F_SETPIPE_SZ, (1 << 20) + 1) == 2 << 20, "root may exceed pipe-max-size: %d", fcntl(p[1], F_GETPIPE_SZ));
    CHECK_SYS(fcntl(p[1], F_SETPIPE_SZ, 4096));
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    static char buf[8192];
    CHECK(write(p[1], buf, 8192) == 4096, "a one-page pipe takes 4096 bytes");
    CHECK_ERR(write(p[1], buf, 1), EAGAIN);
    CHECK(read(p[0], buf, 100) == 100, "read some");
    CHECK_ERR(write(p[1], buf, 100), EAGAIN); // the page is still in use
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 65536) == 65536 && write(p[1], buf, 100) == 100, "grown while holding data");
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 8192) == 8192, "shrunk to what it holds (2 buffers)");
    CHECK(write(p[1], buf, 4096) == 0 || errno == EAGAIN, "full");
    CHECK_ERR(fcntl(p[1], F_SETPIPE_SZ, 4096), EBUSY);
    int fd = open("/dev/null", O_RDONLY);
    CHECK_ERR(fcntl(fd, F_GETPIPE_SZ), EBADF);
    CHECK_ERR(fcntl(fd, F_SETPIPE_SZ, 4096), EBADF);
    char path[64];
    int q[2];
    CHECK_SYS(pipe(q));
    snprintf(path, sizeof path, "/proc/sys/fs/pipe-max-size");
    int m = open(path, O_RDONLY);
    char v[32] = {0};
    CHECK(m >= 0 && read(m, v, sizeof v - 1) > 0 && strcmp(v, "1048576\n") == 0, "fs.pipe-max-size %s", v);
}

static void test_pipe2_o_direct(void) {
    int p[2];
    CHECK_SYS(pipe2(p, O_DIRECT));
    CHECK((fcntl(p[1], F_GETFL) & O_DIRECT) && !(fcntl(p[0], F_GETFL) & O_DIRECT), "O_DIRECT on the write end only: %#x %#x", fcntl(p[0], F_GETFL), fcntl(p[1], F_GETFL));
    CHECK(write(p[1], "abc", 3) == 3 && write(p[1], "de", 2) == 2, "two writes");
    char buf[16384];
    CHECK(read(p[0], buf, sizeof buf) == 3 && memcmp(buf, "abc", 3) == 0, "the first packet alone");
    CHECK(read(p[0], buf, sizeof buf) == 2 && memcmp(buf, "de", 2) == 0, "then the second");
    // A write larger than a page is split in page-sized packets.
    static char big[6000];
    memset(big, 'x', sizeof big);
    CHECK(write(p[1], big, sizeof big) == sizeof big, "write 6000");
    CHECK(read(p[0], buf, sizeof buf) == 4096 && read(p[0], buf, sizeof buf) == 6000 - 4096, "4096 then 1904");
    // A read smaller than the packet takes part of it; the rest of that packet is discarded.
    CHECK(write(p[1], "123456", 6) == 6 && write(p[1], "78", 2) == 2, "write");
    CHECK(read(p[0], buf, 4) == 4 && memcmp(buf, "1234", 4) == 0, "part of a packet");
    CHECK(read(p[0], buf, sizeof buf) == 2 && memcmp(buf, "78", 2) == 0, "the rest of it was discarded");
    int fl = fcntl(p[1], F_GETFL);
    CHECK_SYS(fcntl(p[1], F_SETFL, fl & ~O_DIRECT));
    CHECK(write(p[1], "ab", 2) == 2 && write(p[1], "cd", 2) == 2 && read(p[0], buf, sizeof buf) == 4, "F_SETFL clears packet mode: a stream again");
    CHECK_ERR(pipe2(p, O_DIRECT | O_SYNC), EINVAL);
}

// The [vvar] and [vdso] lines of /proc/self/maps: their ranges and permissions.
struct special { unsigned long start, end; char perms[5]; };
static int find_special(const char *name, struct special *out) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        size_t n = strlen(line), k = strlen(name);
        if (n > k && strcmp(line + n - k, name) == 0 && line[n - k - 1] == ' ')
            found = sscanf(line, "%lx-%lx %4s", &out->start, &out->end, out->perms) == 3;
    }
    fclose(f);
    return found;
}

static void test_vdso_mapped(void) {
    unsigned long ehdr = getauxval(AT_SYSINFO_EHDR);
    CHECK(ehdr != 0, "AT_SYSINFO_EHDR is 0");
    CHECK(memcmp((const void *)ehdr, "\177ELF", 4) == 0, "no ELF header at AT_SYSINFO_EHDR");
    struct special vdso, vvar;
    CHECK(find_special("[vdso]", &vdso), "no [vdso] in /proc/self/maps");
    CHECK(find_special("[vvar]", &vvar), "no [vvar] in /proc/self/maps");
    CHECK(vdso.start == ehdr, "[vdso] does not start at AT_SYSINFO_EHDR");
    printf("    [vvar] %s, [vdso] %s, [vvar] just below [vdso]: %s\n", vvar.perms, vdso.perms,
           vvar.end == vdso.start ? "yes" : "no");
    // Linux refuses to make either writable through a shared mapping's rules: [vvar] never.
    CHECK_ERR(mprotect((void *)vvar.start, vvar.end - vvar.start, PROT_READ | PROT_WRITE), EACCES);
}

// Each clock read by the system call, then the vDSO (glibc's clock_gettime), then the system
// call: the three never go backwards; likewise gettimeofday; clock_getres agrees.
static void test_vdso_clocks_agree(void) {
    static const clockid_t clocks[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW,
                                       CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME};
    for (size_t c = 0; c < sizeof clocks / sizeof clocks[0]; c++) {
        for (int i = 0; i < 2000; i++) {
            struct timespec a, b, d;
            CHECK_SYS(syscall(SYS_clock_gettime, clocks[c], &a));
            CHECK_SYS(clock_gettime(clocks[c], &b));
            CHECK_SYS(syscall(SYS_clock_gettime, clocks[c], &d));
            long long ta = a.tv_sec * 1000000000LL + a.tv_nsec, tb = b.tv_sec * 1000000000LL + b.tv_nsec,
                      td = d.tv_sec * 1000000000LL + d.tv_nsec;
            CHECK(ta <= tb && tb <= td, "clock %d: system call %lld, vDSO %lld, system call %lld", (int)clocks[c], ta, tb, td);
        }
        struct timespec r1, r2;
        CHECK_SYS(syscall(SYS_clock_getres, clocks[c], &r1));
        CHECK_SYS(clock_getres(clocks[c], &r2));
        CHECK(r1.tv_sec == r2.tv_sec && r1.tv_nsec == r2.tv_nsec, "clock %d: resolution %ld vs %ld", (int)clocks[c], r1.tv_nsec, r2.tv_nsec);
    }
    for (int i = 0; i < 2000; i++) {
        struct timeval a, b, d;
        CHECK_SYS(syscall(SYS_gettimeofday, &a, NULL));
        CHECK_SYS(gettimeofday(&b, NULL));
        CHECK_SYS(syscall(SYS_gettimeofday, &d, NULL));
        long long ta = a.tv_sec * 1000000LL + a.tv_usec, tb = b.tv_sec * 1000000LL + b.tv_usec,
                  td = d.tv_sec * 1000000LL + d.tv_usec;
        CHECK(ta <= tb && tb <= td, "gettimeofday: %lld, %lld, %lld", ta, tb, td);
    }
    // The clocks the vDSO leaves to the kernel still answer.
    struct timespec t;
    CHECK_SYS(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t));
    CHECK_ERR(clock_gettime((clockid_t)99, &t), EINVAL);
}

static volatile unsigned long handler_return;
static void note_return(int sig) {
    (void)sig;
    handler_return = (unsigned long)__builtin_return_address(0);
}

// A handler installed without SA_RESTORER returns through the vDSO's __kernel_rt_sigreturn
// (`mov x8, #139; svc #0`), also after mremap moved the image; with the image unmapped, the
// return faults: SIGSEGV.
static void test_vdso_sigreturn(void) {
    struct special vdso;
    CHECK(find_special("[vdso]", &vdso), "no [vdso]");
    // The raw call, flags 0: no SA_RESTORER whatever the C library would add.
    CHECK_SYS(syscall(SYS_rt_sigaction, SIGUSR1, &(struct { void *h; unsigned long f; void *r; uint64_t m; }){(void *)note_return, 0, NULL, 0}, NULL, 8));
    CHECK_SYS(raise(SIGUSR1));
    CHECK(handler_return >= vdso.start && handler_return < vdso.end, "the handler returned to %#lx, not into [vdso] %#lx-%#lx", handler_return, vdso.start, vdso.end);
    static const uint32_t sigreturn[2] = {0xd2801168, 0xd4000001};
    CHECK(memcmp((const void *)handler_return, sigreturn, 8) == 0, "not mov x8, #139; svc #0 there");
    unsigned long offset = handler_return - vdso.start, len = vdso.end - vdso.start;
    void *to = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(to != MAP_FAILED, "mmap");
    void *moved = mremap((void *)vdso.start, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
    CHECK(moved == to, "mremap of [vdso]: %s", strerrorname_np(errno));
    struct special after;
    CHECK(find_special("[vdso]", &after) && after.start == (unsigned long)to, "[vdso] not where it was moved");
    handler_return = 0;
    CHECK_SYS(raise(SIGUSR1));
    CHECK(handler_return == (unsigned long)to + offset, "after mremap the handler returned to %#lx, not the moved image's %#lx", handler_return, (unsigned long)to + offset);
    pid_t child = fork();
    CHECK_SYS(child);
    if (child == 0) {
        // Inherited by fork: the handler returns into the child's image, then unmapped: SIGSEGV.
        raise(SIGUSR1);
        if (handler_return != (unsigned long)to + offset) _exit(2);
        munmap(to, len);
        raise(SIGUSR1);
        _exit(3);
    }
    int status;
    CHECK_SYS(waitpid(child, &status, 0));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "the child's status %#x, not SIGSEGV", status);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"wait4", test_wait4},
        {"pipe_read", test_pipe_read},
        {"futex_restart", test_futex_restart},
        {"nanosleep", test_nanosleep},
        {"epoll_wait_and_poll", test_epoll_wait_and_poll},
        {"pause_and_sigsuspend", test_pause_and_sigsuspend},
        {"stop_and_continue", test_stop_and_continue},
        {"alarm_and_pause", test_alarm_and_pause},
        {"setitimer", test_setitimer},
        {"posix_timers", test_posix_timers},
        {"cpu_clocks", test_cpu_clocks},
        {"rlimit_cpu", test_rlimit_cpu},
        {"clone_parent", test_clone_parent},
        {"getresuid_and_getresgid", test_getresuid_and_getresgid},
        {"pipe_sizes", test_pipe_sizes},
        {"pipe2_o_direct", test_pipe2_o_direct},
        {"futex_waitv", test_futex_waitv},
        {"vdso_mapped", test_vdso_mapped},
        {"vdso_clocks_agree", test_vdso_clocks_agree},
        {"vdso_sigreturn", test_vdso_sigreturn},
    };
    return run_cases_apart(cases, sizeof cases / sizeof cases[0], argc, argv, 15);
}
