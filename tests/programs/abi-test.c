// abi-test: checks the Linux system-call ABI the kernel offers to an unmodified static glibc
// program. Run with no argument for every case, or with case names. Each case prints
// "ok - NAME" or "FAIL - NAME: why"; the last line is "N passed, N failed" (scripts/test counts
// it). Built by scripts/test with aarch64-linux-gnu-gcc -static; runs unchanged on Linux too.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <assert.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static int64_t now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static long futex(uint32_t *uaddr, int op, uint32_t val, const void *timeout, uint32_t *uaddr2, uint32_t val3) {
    return syscall(SYS_futex, uaddr, op, val, timeout, uaddr2, val3);
}

// ---- stdout, printf, the console as a terminal -------------------------------------------------

static void test_stdout_is_a_line_buffered_tty(void) {
    struct stat st;
    CHECK(fstat(1, &st) == 0, "fstat(1): %s", strerror(errno));
    CHECK(S_ISCHR(st.st_mode), "mode %o", st.st_mode);
    CHECK(st.st_rdev == makedev(5, 1), "rdev %lx", (unsigned long)st.st_rdev);
    CHECK(isatty(0) && isatty(1) && isatty(2), "isatty");
    CHECK(__flbf(stdout), "stdout is not line buffered");
    printf("    printf: %d %s %.3f %c|%-5s|%05x\n", 42, "str", 3.14159, 'c', "ab", 0xbeef);
}

static void test_writev_gathers(void) {
    struct iovec v[3] = {{"    wri", 7}, {"tev ", 4}, {"works\n", 6}};
    CHECK(writev(1, v, 3) == 17, "writev: %s", strerror(errno));
    CHECK(syscall(SYS_writev, 1, v, -1) == -1 && errno == EINVAL, "iovcnt -1");
    CHECK(write(77, "x", 1) == -1 && errno == EBADF, "fd 77");
}

static void test_descriptors(void) {
    int fd = dup(1);
    CHECK(fd == 3, "dup(1) = %d", fd);
    CHECK(write(fd, "    via a dup\n", 14) == 14, "write to the dup");
    CHECK((fcntl(0, F_GETFL) & O_ACCMODE) == O_RDWR, "F_GETFL %x", fcntl(0, F_GETFL));
    CHECK(fcntl(0, F_SETFL, O_NONBLOCK) == 0, "F_SETFL");
    CHECK(fcntl(2, F_GETFL) & O_NONBLOCK, "0, 1 and 2 share one open file description");
    char c;
    CHECK(read(0, &c, 1) == -1 && errno == EAGAIN, "non-blocking read with no input: %s", strerror(errno));
    CHECK(fcntl(0, F_SETFL, 0) == 0, "F_SETFL 0");
    CHECK(dup3(1, 10, O_CLOEXEC) == 10, "dup3");
    CHECK(fcntl(10, F_GETFD) == FD_CLOEXEC, "cloexec");
    CHECK(fcntl(10, F_SETFD, 0) == 0 && fcntl(10, F_GETFD) == 0, "F_SETFD");
    CHECK(fcntl(1, F_DUPFD, 5) == 5, "F_DUPFD 5");
    CHECK(dup3(1, 1, 0) == -1 && errno == EINVAL, "dup3 to itself");
    CHECK(dup2(1, 1) == 1, "dup2 to itself (fcntl underneath)");
    CHECK(close(10) == 0 && close(10) == -1 && errno == EBADF, "close twice");
    CHECK(close(5) == 0 && close(3) == 0, "close");
    CHECK(lseek(1, 0, SEEK_CUR) == -1 && errno == ESPIPE, "lseek: %s", strerror(errno));
    CHECK(open("/etc/passwd", O_RDONLY) == -1 && errno == ENOENT, "open");
    char buf[64];
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/") == 0, "getcwd");
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    CHECK(n == 9 && memcmp(buf, "/abi-test", 9) == 0, "readlink /proc/self/exe: %zd", n);
}

static void test_tty_ioctls(void) {
    struct termios t;
    CHECK(tcgetattr(0, &t) == 0, "tcgetattr: %s", strerror(errno));
    CHECK((t.c_lflag & (ICANON | ECHO)) == (ICANON | ECHO), "lflag %o", t.c_lflag);
    CHECK(t.c_cc[VERASE] == 0177 && t.c_cc[VEOF] == 4, "cc");
    t.c_lflag &= ~ECHO;
    CHECK(tcsetattr(0, TCSANOW, &t) == 0, "tcsetattr");
    struct termios u;
    CHECK(tcgetattr(1, &u) == 0 && !(u.c_lflag & ECHO), "the setting holds");
    u.c_lflag |= ECHO;
    CHECK(tcsetattr(0, TCSAFLUSH, &u) == 0, "tcsetattr back");
    struct winsize w = {.ws_row = 30, .ws_col = 100};
    CHECK(ioctl(1, TIOCSWINSZ, &w) == 0, "TIOCSWINSZ");
    memset(&w, 0, sizeof w);
    CHECK(ioctl(1, TIOCGWINSZ, &w) == 0 && w.ws_row == 30 && w.ws_col == 100, "TIOCGWINSZ");
    CHECK(tcgetpgrp(0) == -1 && errno == ENOTTY, "no controlling terminal yet");
    CHECK(ioctl(1, 0x1234) == -1 && errno == ENOTTY, "unknown ioctl");
}

static void test_poll_and_select(void) {
    struct pollfd p[3] = {{.fd = 1, .events = POLLOUT}, {.fd = 99, .events = POLLIN}, {.fd = -1}};
    CHECK(poll(p, 3, 0) == 2, "poll");
    CHECK(p[0].revents == POLLOUT && p[1].revents == POLLNVAL && p[2].revents == 0, "revents %x %x", p[0].revents, p[1].revents);
    struct pollfd in = {.fd = 0, .events = POLLIN};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(poll(&in, 1, 100) == 0, "poll with no input returns 0");
    int64_t waited = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(waited >= 100000000 && waited < 1000000000, "waited %lld ns", (long long)waited);
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(0, &r);
    FD_SET(1, &w);
    struct timeval tv = {0, 50000};
    CHECK(select(2, &r, &w, NULL, &tv) == 1, "select");
    CHECK(!FD_ISSET(0, &r) && FD_ISSET(1, &w), "sets");
    FD_SET(50, &r);
    CHECK(select(51, &r, NULL, NULL, &tv) == -1 && errno == EBADF, "select on a closed fd");
}

// ---- memory -------------------------------------------------------------------------------------

static void test_malloc_of_many_sizes(void) {
    enum { N = 200 };
    unsigned char *blocks[N];
    size_t sizes[N];
    for (int i = 0; i < N; i++) {
        sizes[i] = (i % 40 == 39) ? (size_t)(1 << 20) * (1 + i % 3) : (size_t)(1 + i * 37 * (i % 7 + 1));
        blocks[i] = malloc(sizes[i]);
        CHECK(blocks[i], "malloc(%zu)", sizes[i]);
        memset(blocks[i], i & 0xff, sizes[i]);
    }
    for (int i = 0; i < N; i += 2) {
        blocks[i] = realloc(blocks[i], sizes[i] * 2);
        CHECK(blocks[i], "realloc");
        for (size_t j = 0; j < sizes[i]; j += 97) CHECK(blocks[i][j] == (i & 0xff), "kept at %zu", j);
    }
    for (int i = 0; i < N; i++) {
        for (size_t j = 0; j < sizes[i]; j += 101) CHECK(blocks[i][j] == (i & 0xff), "block %d", i);
        free(blocks[i]);
    }
    char *big = calloc(64, 1 << 20);
    CHECK(big && big[12345678] == 0, "calloc 64 MiB");
    free(big);
}

// ---- threads, mutexes, condition variables -------------------------------------------------------

static pthread_barrier_t sleepers_ready;
static int64_t sleep_start[8], sleep_end[8];

static void *sleeper(void *arg) {
    intptr_t i = (intptr_t)arg;
    struct timespec t = {0, 150 * 1000000};
    pthread_barrier_wait(&sleepers_ready);
    sleep_start[i] = now_ns(CLOCK_MONOTONIC);
    nanosleep(&t, NULL);
    sleep_end[i] = now_ns(CLOCK_MONOTONIC);
    return (void *)((sleep_end[i] - sleep_start[i] >= 150000000) ? i : -1);
}

static void test_eight_threads_sleep_and_join(void) {
    pthread_t t[8];
    pthread_barrier_init(&sleepers_ready, NULL, 8);
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    for (intptr_t i = 0; i < 8; i++) CHECK(pthread_create(&t[i], NULL, sleeper, (void *)i) == 0, "create");
    for (intptr_t i = 0; i < 8; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0, "join");
        CHECK((intptr_t)r == i, "thread %ld returned %ld (slept too little?)", (long)i, (long)(intptr_t)r);
    }
    int64_t took = now_ns(CLOCK_MONOTONIC) - t0, last_start = 0, first_end = INT64_MAX;
    for (int i = 0; i < 8; i++) {
        last_start = sleep_start[i] > last_start ? sleep_start[i] : last_start;
        first_end = sleep_end[i] < first_end ? sleep_end[i] : first_end;
    }
    // The sleeps overlap (a sleeping thread holds no CPU): at one moment all eight were asleep,
    // however slowly the machine runs.
    CHECK(last_start < first_end, "the last sleep began %lld us after the first ended",
          (long long)((last_start - first_end) / 1000));
    printf("    8 threads slept 150 ms each in %lld ms\n", (long long)(took / 1000000));
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long counter, queue[16], head, tail;

static void *adder(void *arg) {
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void *consumer(void *arg) {
    long sum = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (head == tail) pthread_cond_wait(&cond, &lock);
        long v = queue[head++ % 16];
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        if (v < 0) break;
        sum += v;
    }
    *(long *)arg = sum;
    return NULL;
}

static void test_mutex_and_condition_variable(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, adder, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(counter == 80000, "counter %ld", counter);
    long sum = 0;
    pthread_t c;
    pthread_create(&c, NULL, consumer, &sum);
    for (long v = 1; v <= 1001; v++) {
        pthread_mutex_lock(&lock);
        while (tail - head == 16) pthread_cond_wait(&cond, &lock);
        queue[tail++ % 16] = v <= 1000 ? v : -1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
    }
    pthread_join(c, NULL);
    CHECK(sum == 500500, "sum %ld", sum);
    // A timed wait that times out: FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME underneath.
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    pthread_mutex_lock(&lock);
    int r = pthread_cond_timedwait(&cond, &lock, &until);
    pthread_mutex_unlock(&lock);
    int64_t waited = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(r == ETIMEDOUT, "timedwait returned %d", r);
    CHECK(waited >= 90000000 && waited < 1000000000, "waited %lld ns", (long long)waited);
}

static pthread_mutex_t robust;
static void *die_holding(void *arg) {
    (void)arg;
    pthread_mutex_lock(&robust);
    return NULL; // exits with the lock held
}

static void test_robust_mutex_of_a_dead_thread(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust, &a);
    pthread_t t;
    pthread_create(&t, NULL, die_holding, NULL);
    pthread_join(t, NULL);
    int r = pthread_mutex_lock(&robust);
    CHECK(r == EOWNERDEAD, "lock returned %d (%s)", r, strerror(r));
    CHECK(pthread_mutex_consistent(&robust) == 0, "consistent");
    CHECK(pthread_mutex_unlock(&robust) == 0, "unlock");
}

// ---- futex, directly ---------------------------------------------------------------------------

static uint32_t f1, f2;
static void *futex_waiter(void *arg) {
    long r = futex(&f1, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    *(long *)arg = r;
    return NULL;
}

static int waiters_on(uint32_t *word, int want) {
    // Wait until `want` threads block (they cannot be seen; give them time).
    (void)word;
    (void)want;
    struct timespec t = {0, 50000000};
    nanosleep(&t, NULL);
    return 1;
}

static void test_futex_operations(void) {
    uint32_t w = 5;
    CHECK(futex(&w, FUTEX_WAIT, 4, NULL, NULL, 0) == -1 && errno == EAGAIN, "value differs: %s", strerror(errno));
    struct timespec rel = {0, 50000000};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(futex(&w, FUTEX_WAIT, 5, &rel, NULL, 0) == -1 && errno == ETIMEDOUT, "relative timeout");
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 50000000, "woke early");
    struct timespec abs;
    clock_gettime(CLOCK_MONOTONIC, &abs);
    abs.tv_nsec += 30000000;
    if (abs.tv_nsec >= 1000000000) abs.tv_sec++, abs.tv_nsec -= 1000000000;
    CHECK(futex(&w, FUTEX_WAIT_BITSET, 5, &abs, NULL, FUTEX_BITSET_MATCH_ANY) == -1 && errno == ETIMEDOUT, "absolute monotonic");
    CHECK(now_ns(CLOCK_MONOTONIC) >= abs.tv_sec * 1000000000LL + abs.tv_nsec, "woke before the deadline");
    clock_gettime(CLOCK_REALTIME, &abs);
    abs.tv_nsec += 30000000;
    if (abs.tv_nsec >= 1000000000) abs.tv_sec++, abs.tv_nsec -= 1000000000;
    CHECK(futex(&w, FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME, 5, &abs, NULL, ~0u) == -1 && errno == ETIMEDOUT, "absolute realtime");
    CHECK(now_ns(CLOCK_REALTIME) >= abs.tv_sec * 1000000000LL + abs.tv_nsec, "woke before the realtime deadline");
    CHECK(futex(&w, FUTEX_WAIT | FUTEX_CLOCK_REALTIME, 5, &rel, NULL, 0) == -1 && errno == ENOSYS, "CLOCK_REALTIME with FUTEX_WAIT");
    CHECK(futex(&w, FUTEX_WAIT_BITSET, 5, NULL, NULL, 0) == -1 && errno == EINVAL, "bitset 0");
    CHECK(futex((uint32_t *)((char *)&w + 1), FUTEX_WAKE, 1, NULL, NULL, 0) == -1 && errno == EINVAL, "misaligned");
    struct timespec bad = {0, 1000000000};
    CHECK(futex(&w, FUTEX_WAIT, 5, &bad, NULL, 0) == -1 && errno == EINVAL, "bad timeout");
    CHECK(futex(&w, FUTEX_WAKE, 10, NULL, NULL, 0) == 0, "nobody to wake");

    // Three waiters on f1: CMP_REQUEUE wakes one and moves two to f2.
    long r[3] = {-7, -7, -7};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, futex_waiter, &r[i]);
    waiters_on(&f1, 3);
    CHECK(futex(&f1, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)2, &f2, 1) == -1 && errno == EAGAIN, "val3 differs");
    CHECK(futex(&f1, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)2, &f2, 0) == 3, "woken + requeued");
    CHECK(futex(&f1, FUTEX_WAKE_PRIVATE, 10, NULL, NULL, 0) == 0, "nobody left on f1");
    // WAKE_OP: f2 += 1, wake 0 on f1, and (old == 0) wake 2 on f2.
    int op = FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0);
    CHECK(futex(&f1, FUTEX_WAKE_OP_PRIVATE, 0, (void *)2, &f2, op) == 2, "wake_op woke the requeued two");
    CHECK(f2 == 1, "f2 = %u", f2);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(r[0] == 0 && r[1] == 0 && r[2] == 0, "waiters returned %ld %ld %ld", r[0], r[1], r[2]);
    // WAKE_BITSET reaches only waiters whose bitset meets it.
    CHECK(futex(&w, FUTEX_WAKE_BITSET, 1, NULL, NULL, 0) == -1 && errno == EINVAL, "wake bitset 0");
}

// ---- time ---------------------------------------------------------------------------------------

static void test_sleeping_and_clocks(void) {
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    struct timespec d = {0, 200000000};
    CHECK(nanosleep(&d, NULL) == 0, "nanosleep");
    int64_t slept = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(slept >= 200000000 && slept < 400000000, "slept %lld ns for 200 ms", (long long)slept);
    printf("    nanosleep(200 ms) took %lld us\n", (long long)(slept / 1000));
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 0;
    until.tv_nsec += 50000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == 0, "absolute");
    CHECK(now_ns(CLOCK_MONOTONIC) >= until.tv_sec * 1000000000LL + until.tv_nsec, "woke early");
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 50000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    CHECK(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL) == 0, "absolute realtime");
    CHECK(now_ns(CLOCK_REALTIME) >= until.tv_sec * 1000000000LL + until.tv_nsec, "woke early (realtime)");
    struct timespec past = {1, 0};
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL) == 0, "a deadline in the past");
    CHECK(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &d, NULL) == EINVAL, "thread CPU clock");
    struct timespec bad = {-1, 0};
    CHECK(nanosleep(&bad, NULL) == -1 && errno == EINVAL, "negative");

    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    CHECK(tm.tm_year + 1900 >= 2024, "the wall clock says %d (no RTC read?)", tm.tm_year + 1900);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    CHECK(tv.tv_sec - now <= 1 && tv.tv_sec >= now, "gettimeofday %ld vs time %ld", (long)tv.tv_sec, (long)now);
    struct timespec res;
    clockid_t clocks[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_REALTIME_COARSE,
                          CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_RAW, CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID};
    for (unsigned i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
        /* The COARSE clocks step once a scheduler tick and say so (Linux: one jiffy, 1-10 ms
         * for HZ 1000-100); the others have the counter's resolution. */
        int coarse = clocks[i] == CLOCK_REALTIME_COARSE || clocks[i] == CLOCK_MONOTONIC_COARSE;
        long lo = coarse ? 1000000 : 1, hi = coarse ? 10000000 : 1000;
        CHECK(clock_getres(clocks[i], &res) == 0 && res.tv_sec == 0 && res.tv_nsec >= lo && res.tv_nsec <= hi,
              "getres %d: %ld ns", clocks[i], res.tv_nsec);
        CHECK(clock_gettime(clocks[i], &res) == 0, "gettime %d", clocks[i]);
    }
    CHECK(clock_gettime(99, &res) == -1 && errno == EINVAL, "clock 99");
    int64_t c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), th0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    volatile uint64_t x = 0;
    int64_t spin0 = now_ns(CLOCK_MONOTONIC);
    while (now_ns(CLOCK_MONOTONIC) - spin0 < 30000000) x++;
    int64_t c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID), th1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    CHECK(c1 - c0 >= 20000000, "process CPU time grew %lld ns in a 30 ms spin", (long long)(c1 - c0));
    CHECK(th1 - th0 >= 20000000, "thread CPU time grew %lld ns", (long long)(th1 - th0));
    CHECK(clock() > 0, "clock()");
    struct timespec zero = {0, 0};
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(nanosleep(&zero, NULL) == 0 && now_ns(CLOCK_MONOTONIC) - t0 < 50000000, "zero sleep");
}

// ---- identity -----------------------------------------------------------------------------------

static void test_identity(void) {
    CHECK(getuid() == 0 && geteuid() == 0 && getgid() == 0 && getegid() == 0, "root");
    CHECK(getgroups(0, NULL) == 0, "groups");
    /* As init (pid 1) its parent is the kernel (ppid 0); started by another process (the Linux
     * reference runs start it from parity-init, pid 1), it has that parent. Either way the
     * process group and session are init's: 0, as Linux starts init. */
    pid_t pid = getpid();
    CHECK(pid == 1 || getppid() == 1, "pid %d ppid %d", pid, getppid());
    CHECK(pid != 1 || getppid() == 0, "ppid %d (init's parent is the kernel: 0)", getppid());
    CHECK(getpgid(0) == 0 && getsid(0) == 0, "pgid %d sid %d", getpgid(0), getsid(0));
    CHECK(getpgid(12345) == -1 && errno == ESRCH, "another pid");
    CHECK(setsid() == pid && getsid(0) == pid && getpgrp() == pid, "setsid");
    CHECK(setsid() == -1 && errno == EPERM, "setsid as a group leader");
    CHECK(setpgid(0, 0) == -1 && errno == EPERM, "setpgid of a session leader");
    char name[16];
    CHECK(prctl(PR_SET_NAME, "renamed-thread-name") == 0, "PR_SET_NAME");
    CHECK(prctl(PR_GET_NAME, name) == 0 && strcmp(name, "renamed-thread-") == 0, "name '%s'", name);
    CHECK(prctl(12345, 0) == -1 && errno == EINVAL, "unknown prctl");
    CHECK(personality(0xffffffff) == 0, "personality");
    CHECK(sched_getscheduler(0) == SCHED_OTHER, "scheduler");
    struct sched_param sp = {.sched_priority = 7};
    CHECK(sched_getparam(0, &sp) == 0 && sp.sched_priority == 0, "param");
    CHECK(sched_get_priority_max(SCHED_FIFO) == 99 && sched_get_priority_min(SCHED_OTHER) == 0, "priorities");
    struct sysinfo si;
    CHECK(sysinfo(&si) == 0 && si.totalram > (16 << 20) / si.mem_unit && si.freeram <= si.totalram, "sysinfo");
    struct utsname u;
    CHECK(uname(&u) == 0 && strcmp(u.sysname, "Linux") == 0 && strcmp(u.machine, "aarch64") == 0, "uname");
}

// ---- the FP/SIMD registers across the kernel ---------------------------------------------------

// The program's FP/SIMD registers as one block: v0-v31, then FPCR and FPSR.
struct fp_regs {
    uint8_t v[32][16];
    uint64_t fpcr, fpsr;
};

// Loads every FP/SIMD register and FPCR/FPSR from `in`, makes system call `nr` (x0-x2 = a0-a2),
// then stores them all to `out`: nothing compiled runs between the load and the store.
static long fp_syscall(const struct fp_regs *in, struct fp_regs *out, long nr, long a0, long a1, long a2) {
    register long x0 __asm__("x0") = a0;
    register long x1 __asm__("x1") = a1;
    register long x2 __asm__("x2") = a2;
    register long x8 __asm__("x8") = nr;
    __asm__ volatile(
        "ldp q0, q1, [%[in], #0]\n"
        "ldp q2, q3, [%[in], #32]\n"
        "ldp q4, q5, [%[in], #64]\n"
        "ldp q6, q7, [%[in], #96]\n"
        "ldp q8, q9, [%[in], #128]\n"
        "ldp q10, q11, [%[in], #160]\n"
        "ldp q12, q13, [%[in], #192]\n"
        "ldp q14, q15, [%[in], #224]\n"
        "ldp q16, q17, [%[in], #256]\n"
        "ldp q18, q19, [%[in], #288]\n"
        "ldp q20, q21, [%[in], #320]\n"
        "ldp q22, q23, [%[in], #352]\n"
        "ldp q24, q25, [%[in], #384]\n"
        "ldp q26, q27, [%[in], #416]\n"
        "ldp q28, q29, [%[in], #448]\n"
        "ldp q30, q31, [%[in], #480]\n"
        "ldr x9, [%[in], #512]\n"
        "msr fpcr, x9\n"
        "ldr x9, [%[in], #520]\n"
        "msr fpsr, x9\n"
        "svc #0\n"
        "stp q0, q1, [%[out], #0]\n"
        "stp q2, q3, [%[out], #32]\n"
        "stp q4, q5, [%[out], #64]\n"
        "stp q6, q7, [%[out], #96]\n"
        "stp q8, q9, [%[out], #128]\n"
        "stp q10, q11, [%[out], #160]\n"
        "stp q12, q13, [%[out], #192]\n"
        "stp q14, q15, [%[out], #224]\n"
        "stp q16, q17, [%[out], #256]\n"
        "stp q18, q19, [%[out], #288]\n"
        "stp q20, q21, [%[out], #320]\n"
        "stp q22, q23, [%[out], #352]\n"
        "stp q24, q25, [%[out], #384]\n"
        "stp q26, q27, [%[out], #416]\n"
        "stp q28, q29, [%[out], #448]\n"
        "stp q30, q31, [%[out], #480]\n"
        "mrs x9, fpcr\n"
        "str x9, [%[out], #512]\n"
        "mrs x9, fpsr\n"
        "str x9, [%[out], #520]\n"
        "msr fpcr, xzr\n"
        "msr fpsr, xzr\n"
        : "+r"(x0), "+r"(x1), "+r"(x2)
        : [in] "r"(in), [out] "r"(out), "r"(x8)
        : "x9", "memory", "v0","v1","v2","v3","v4","v5","v6","v7","v8","v9","v10","v11","v12","v13","v14","v15","v16","v17","v18","v19","v20","v21","v22","v23","v24","v25","v26","v27","v28","v29","v30","v31");
    return x0;
}

static volatile int fp_handler_ran;

// Changes every FP/SIMD register and FPCR: the interrupted code must get its own back.
static void fp_scribbler(int sig) {
    (void)sig;
    __asm__ volatile(
        "movi v0.16b, #0xee\n"
        "movi v1.16b, #0xee\n"
        "movi v2.16b, #0xee\n"
        "movi v3.16b, #0xee\n"
        "movi v4.16b, #0xee\n"
        "movi v5.16b, #0xee\n"
        "movi v6.16b, #0xee\n"
        "movi v7.16b, #0xee\n"
        "movi v8.16b, #0xee\n"
        "movi v9.16b, #0xee\n"
        "movi v10.16b, #0xee\n"
        "movi v11.16b, #0xee\n"
        "movi v12.16b, #0xee\n"
        "movi v13.16b, #0xee\n"
        "movi v14.16b, #0xee\n"
        "movi v15.16b, #0xee\n"
        "movi v16.16b, #0xee\n"
        "movi v17.16b, #0xee\n"
        "movi v18.16b, #0xee\n"
        "movi v19.16b, #0xee\n"
        "movi v20.16b, #0xee\n"
        "movi v21.16b, #0xee\n"
        "movi v22.16b, #0xee\n"
        "movi v23.16b, #0xee\n"
        "movi v24.16b, #0xee\n"
        "movi v25.16b, #0xee\n"
        "movi v26.16b, #0xee\n"
        "movi v27.16b, #0xee\n"
        "movi v28.16b, #0xee\n"
        "movi v29.16b, #0xee\n"
        "movi v30.16b, #0xee\n"
        "movi v31.16b, #0xee\n"
        "mov x9, #(3 << 22)\n"
        "msr fpcr, x9\n" ::: "x9", "v0","v1","v2","v3","v4","v5","v6","v7","v8","v9","v10","v11","v12","v13","v14","v15","v16","v17","v18","v19","v20","v21","v22","v23","v24","v25","v26","v27","v28","v29","v30","v31");
    fp_handler_ran = 1;
}

static volatile int fp_spinning;

// Another thread on the same CPUs, with FP/SIMD values of its own, yielding all the time.
static void *fp_spinner(void *arg) {
    (void)arg;
    struct fp_regs mine, seen;
    memset(&mine, 0x5a, sizeof mine);
    mine.fpcr = 1 << 24, mine.fpsr = 0;
    while (fp_spinning) fp_syscall(&mine, &seen, SYS_sched_yield, 0, 0, 0);
    return NULL;
}

static void test_fp_registers_survive_calls_signals_and_switches(void) {
    struct fp_regs in, out;
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16; j++) in.v[i][j] = (uint8_t)(i * 16 + j + 1);
    in.fpcr = 1u << 22 | 1u << 24;  // round towards +infinity, flush to zero
    in.fpsr = 1u << 27 | 1u << 0;   // QC and IOC, cumulative flags the kernel must keep
    struct sigaction sa = {.sa_handler = fp_scribbler};
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    fp_spinning = 1;
    pthread_t spinner;
    CHECK(pthread_create(&spinner, NULL, fp_spinner, NULL) == 0, "pthread_create");
    struct timespec ms = {0, 2000000};
    struct {
        const char *what;
        long nr, a0, a1, a2;
    } calls[] = {
        {"getpid", SYS_getpid, 0, 0, 0},
        {"sched_yield", SYS_sched_yield, 0, 0, 0},
        {"nanosleep 2 ms", SYS_nanosleep, (long)&ms, 0, 0},
        {"kill (a handler that changes them runs)", SYS_tgkill, getpid(), gettid(), SIGUSR1},
        {"an unknown call", 4000, 0, 0, 0},
    };
    for (unsigned c = 0; c < sizeof calls / sizeof calls[0]; c++)
        for (int round = 0; round < 20; round++) {
            memset(&out, 0, sizeof out);
            fp_handler_ran = 0;
            fp_syscall(&in, &out, calls[c].nr, calls[c].a0, calls[c].a1, calls[c].a2);
            int differ = -1;
            for (int i = 0; i < 32 && differ < 0; i++)
                if (memcmp(in.v[i], out.v[i], 16) != 0) differ = i;
            if (differ >= 0 || out.fpcr != in.fpcr || out.fpsr != in.fpsr) fp_spinning = 0;
            CHECK(differ < 0, "%s: v%d changed (byte 0: %#x, expected %#x)", calls[c].what, differ,
                  out.v[differ < 0 ? 0 : differ][0], in.v[differ < 0 ? 0 : differ][0]);
            CHECK(out.fpcr == in.fpcr, "%s: FPCR %#llx, expected %#llx", calls[c].what,
                  (unsigned long long)out.fpcr, (unsigned long long)in.fpcr);
            CHECK(out.fpsr == in.fpsr, "%s: FPSR %#llx, expected %#llx", calls[c].what,
                  (unsigned long long)out.fpsr, (unsigned long long)in.fpsr);
            CHECK(calls[c].nr != SYS_tgkill || fp_handler_ran, "the handler did not run");
        }
    fp_spinning = 0;
    pthread_join(spinner, NULL);
    signal(SIGUSR1, SIG_DFL);
}

static void test_arguments_and_environment(int argc, char **argv) {
    (void)argc;
    const char *slash = strrchr(argv[0], '/');
    CHECK(strcmp(slash ? slash + 1 : argv[0], "abi-test") == 0, "argv[0] is '%s'", argv[0]);
    CHECK(getenv("HOME") && strcmp(getenv("HOME"), "/") == 0, "HOME");
}

static const struct test_case tests[] = {
    {"stdout_is_a_line_buffered_tty", test_stdout_is_a_line_buffered_tty},
    {"writev_gathers", test_writev_gathers},
    {"descriptors", test_descriptors},
    {"tty_ioctls", test_tty_ioctls},
    {"poll_and_select", test_poll_and_select},
    {"malloc_of_many_sizes", test_malloc_of_many_sizes},
    {"eight_threads_sleep_and_join", test_eight_threads_sleep_and_join},
    {"mutex_and_condition_variable", test_mutex_and_condition_variable},
    {"robust_mutex_of_a_dead_thread", test_robust_mutex_of_a_dead_thread},
    {"futex_operations", test_futex_operations},
    {"sleeping_and_clocks", test_sleeping_and_clocks},
    {"identity", test_identity},
    {"fp_registers_survive_calls_signals_and_switches", test_fp_registers_survive_calls_signals_and_switches},
};

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    if (argc > 1 && strcmp(argv[1], "args") == 0) {
        // abi-test args A B ...: prints its arguments and the variables named like NAME= words.
        for (int i = 0; i < argc; i++) printf("argv[%d]=<%s>\n", i, argv[i]);
        for (char **e = __environ; *e; e++) printf("env <%s>\n", *e);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "assert") == 0) {
        fflush(stdout);
        // glibc's assertion message goes out through writev before abort().
        __assert_fail("1 + 1 == 3", "abi-test.c", 1, "main");
    }
    failed_here = 0;
    test_arguments_and_environment(argc, argv);
    case_done("arguments_and_environment", &passed, &failed);
    return run_cases(tests, sizeof tests / sizeof tests[0], argc, argv, passed, failed);
}
