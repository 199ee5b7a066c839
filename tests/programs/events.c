// events-test: the event loop of an unmodified static glibc program on Linux 6.1: epoll
// (level- and edge-triggered, EPOLLONESHOT, EPOLLEXCLUSIVE, nested epolls, epoll_pwait's signal
// mask, epoll_pwait2's timeout), eventfd (counter, semaphore mode, overflow), timerfd (the three
// clocks, relative, absolute and periodic; expirations counted as at least the expected number,
// never exactly), signalfd, readiness of pipes, FIFOs, files, eventfds, timerfds, signalfds and
// epolls in poll, select and epoll alike, pidfds (poll on exit, pidfd_send_signal, waitid
// P_PIDFD, process_madvise, process_mrelease), membarrier, the rseq area glibc registers at start,
// and capget/capset. Each case runs in a child process of its own (check.h's run_cases_apart),
// prints "ok - NAME" or "FAIL - NAME"; the last line is "N passed, N failed"; the output is
// Linux 6.1's (tests/linux-parity/events-test.out). Built by scripts/lib.sh (build_linux_programs).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/rseq.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>

#include "check.h"

static int64_t now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static int add(int ep, int fd, uint32_t events, uint64_t tag) {
    struct epoll_event e = {.events = events, .data.u64 = tag};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

// ready_now: the events poll(2) reports for FD at once.
static short ready_now(int fd, short want) {
    struct pollfd p = {.fd = fd, .events = want};
    return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

static volatile sig_atomic_t caught;
static void on_signal(int sig) { caught = sig; }

// ---- epoll -----------------------------------------------------------------------------------------

static void test_epoll_basics(void) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK_SYS(ep);
    CHECK(fcntl(ep, F_GETFD) == FD_CLOEXEC, "EPOLL_CLOEXEC");
    CHECK_ERR(epoll_create1(1), EINVAL);
    CHECK_ERR(epoll_create(0), EINVAL);
    CHECK_SYS(close(epoll_create(1)));
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK_SYS(add(ep, p[0], EPOLLIN, 42));
    struct epoll_event ev[4];
    CHECK(epoll_wait(ep, ev, 4, 0) == 0, "nothing ready");
    CHECK(write(p[1], "x", 1) == 1, "write");
    CHECK(epoll_wait(ep, ev, 4, 0) == 1 && ev[0].events == EPOLLIN && ev[0].data.u64 == 42, "EPOLLIN with its tag");
    CHECK_ERR(add(ep, p[0], EPOLLIN, 1), EEXIST);
    struct epoll_event e = {.events = EPOLLIN};
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, p[1], &e), ENOENT);
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL), ENOENT);
    CHECK_ERR(epoll_ctl(ep, 99, p[0], &e), EINVAL);
    CHECK_ERR(add(ep, ep, EPOLLIN, 0), EINVAL);
    CHECK_ERR(add(ep, 99, EPOLLIN, 0), EBADF);
    CHECK_ERR(add(p[0], p[1], EPOLLIN, 0), EINVAL);
    int file = open("/tmp/events-file", O_RDWR | O_CREAT, 0644);
    CHECK_ERR(add(ep, file, EPOLLIN, 0), EPERM);
    CHECK_ERR(epoll_wait(ep, ev, 0, 0), EINVAL);
    CHECK_ERR(epoll_wait(p[0], ev, 1, 0), EINVAL);
    // EPOLLOUT on the write end; hang-up and error when the other end closes.
    CHECK_SYS(add(ep, p[1], EPOLLOUT, 7));
    CHECK(epoll_wait(ep, ev, 4, 0) == 2, "both ends ready");
    struct epoll_event m = {.events = EPOLLIN, .data.u64 = 43};
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &m));
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL));
    CHECK_SYS(close(p[1]));
    CHECK(epoll_wait(ep, ev, 4, 0) == 1 && ev[0].events == (EPOLLIN | EPOLLHUP) && ev[0].data.u64 == 43, "data and hang-up: %#x", ev[0].events);
    char c;
    CHECK(read(p[0], &c, 1) == 1, "drain");
    CHECK(epoll_wait(ep, ev, 4, 0) == 1 && ev[0].events == EPOLLHUP, "hang-up alone, even unasked: %#x", ev[0].events);
    int q[2];
    CHECK_SYS(pipe(q));
    CHECK_SYS(add(ep, q[1], EPOLLOUT, 9));
    CHECK_SYS(close(q[0]));
    CHECK(epoll_wait(ep, ev, 4, 0) == 2, "two ready");
    CHECK((ev[0].data.u64 == 9 ? ev[0].events : ev[1].events) == (EPOLLOUT | EPOLLERR), "a write end without reader: OUT|ERR");
    // Closing the last descriptor of a file removes it from the set.
    CHECK_SYS(close(p[0]));
    CHECK(epoll_wait(ep, ev, 4, 0) == 1 && ev[0].data.u64 == 9, "the closed pipe is gone");
    // A timeout: 50 ms, nothing ready.
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_DEL, q[1], NULL));
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(epoll_wait(ep, ev, 4, 50) == 0, "timeout");
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 50000000, "waited %lld ns", (long long)(now_ns(CLOCK_MONOTONIC) - t0));
}

static void test_epoll_triggers(void) {
    int ep = epoll_create1(0);
    int lt[2], et[2], os[2];
    CHECK_SYS(pipe(lt));
    CHECK_SYS(pipe(et));
    CHECK_SYS(pipe(os));
    CHECK_SYS(add(ep, lt[0], EPOLLIN, 1));
    CHECK_SYS(add(ep, et[0], EPOLLIN | EPOLLET, 2));
    CHECK_SYS(add(ep, os[0], EPOLLIN | EPOLLONESHOT, 3));
    CHECK(write(lt[1], "ab", 2) == 2 && write(et[1], "ab", 2) == 2 && write(os[1], "ab", 2) == 2, "write");
    struct epoll_event ev[4];
    CHECK(epoll_wait(ep, ev, 4, 0) == 3, "all three the first time");
    CHECK(epoll_wait(ep, ev, 4, 0) == 1 && ev[0].data.u64 == 1, "then only the level-triggered one");
    char c;
    CHECK(read(et[0], &c, 1) == 1, "read");
    CHECK(epoll_wait(ep, ev, 4, 0) == 1, "reading is no new edge");
    CHECK(write(et[1], "c", 1) == 1 && write(os[1], "c", 1) == 1, "write");
    CHECK(epoll_wait(ep, ev, 4, 0) == 2, "new data is a new edge; the one-shot stays disarmed");
    struct epoll_event re = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = 3};
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_MOD, os[0], &re));
    CHECK(epoll_wait(ep, ev, 4, 0) == 2, "re-armed, the one-shot reports once more");
    CHECK(epoll_wait(ep, ev, 4, 0) == 1, "and is disarmed again");
    // maxevents smaller than the ready list: the rest come next time (round robin).
    int ep2 = epoll_create1(0);
    for (int i = 0; i < 3; i++) CHECK_SYS(add(ep2, (int[]){lt[0], et[0], os[0]}[i], EPOLLIN, 10 + i));
    CHECK(epoll_wait(ep2, ev, 1, 0) == 1, "one");
    uint64_t first = ev[0].data.u64;
    CHECK(epoll_wait(ep2, ev, 1, 0) == 1 && ev[0].data.u64 != first, "another one next time");
}

struct waiter {
    int ep;
    int woke;
};
static void *wait_thread(void *arg) {
    struct waiter *w = arg;
    struct epoll_event ev;
    w->woke = epoll_wait(w->ep, &ev, 1, 500) == 1;
    return NULL;
}

static void test_epoll_exclusive(void) {
    int efd = eventfd(0, EFD_NONBLOCK);
    int ep = epoll_create1(0);
    CHECK_SYS(add(ep, efd, EPOLLIN | EPOLLEXCLUSIVE, 1));
    struct epoll_event e = {.events = EPOLLIN};
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, efd, &e), EINVAL);
    int other = eventfd(0, 0);
    CHECK_ERR(add(ep, other, EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, 2), EINVAL);
    int inner = epoll_create1(0);
    CHECK_ERR(add(ep, inner, EPOLLIN | EPOLLEXCLUSIVE, 3), EINVAL);
    // Two epolls, each waited on by a thread, both with EPOLLEXCLUSIVE on the eventfd: a write
    // wakes at least one of them.
    struct waiter w[2] = {{ep, 0}, {epoll_create1(0), 0}};
    CHECK_SYS(add(w[1].ep, efd, EPOLLIN | EPOLLEXCLUSIVE, 1));
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, wait_thread, &w[i]);
    sleep_ms(50);
    uint64_t one = 1;
    CHECK(write(efd, &one, 8) == 8, "write");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(w[0].woke + w[1].woke >= 1, "woken: %d and %d", w[0].woke, w[1].woke);
}

static void test_nested_epoll(void) {
    int inner = epoll_create1(0), outer = epoll_create1(0);
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK_SYS(add(inner, p[0], EPOLLIN, 1));
    CHECK_SYS(add(outer, inner, EPOLLIN, 2));
    struct epoll_event ev[2];
    CHECK(epoll_wait(outer, ev, 2, 0) == 0, "nothing yet");
    CHECK(ready_now(inner, POLLIN) == 0, "poll on the inner epoll: nothing");
    CHECK(write(p[1], "x", 1) == 1, "write");
    CHECK(epoll_wait(outer, ev, 2, 0) == 1 && ev[0].data.u64 == 2 && ev[0].events == EPOLLIN, "the inner epoll is readable");
    CHECK(ready_now(inner, POLLIN) == POLLIN, "and poll says so");
    CHECK(epoll_wait(inner, ev, 2, 0) == 1 && ev[0].data.u64 == 1, "the inner one names the pipe");
    CHECK_ERR(add(inner, outer, EPOLLIN, 3), ELOOP);
    // A blocking wait on the outer epoll wakes when a thread writes.
    char c;
    CHECK(read(p[0], &c, 1) == 1, "drain");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(50);
        _exit(write(p[1], "y", 1) == 1 ? 0 : 1);
    }
    CHECK(epoll_wait(outer, ev, 2, 2000) == 1, "woken through two levels");
    waitpid(pid, NULL, 0);
}

static void test_epoll_pwait_and_pwait2(void) {
    int ep = epoll_create1(0);
    int efd = eventfd(0, 0);
    CHECK_SYS(add(ep, efd, EPOLLIN, 1));
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t block, empty;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigemptyset(&empty);
    sigprocmask(SIG_BLOCK, &block, NULL);
    raise(SIGUSR1);
    CHECK(caught == 0, "blocked");
    struct epoll_event ev;
    CHECK_ERR(epoll_pwait(ep, &ev, 1, 1000, &empty), EINTR);
    CHECK(caught == SIGUSR1, "the handler ran inside epoll_pwait");
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(sigismember(&now, SIGUSR1), "the old mask is back");
    struct timespec ts = {0, 50000000};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(syscall(SYS_epoll_pwait2, ep, &ev, 1, &ts, NULL, 8) == 0, "epoll_pwait2 times out");
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 50000000, "after 50 ms: %lld", (long long)(now_ns(CLOCK_MONOTONIC) - t0));
    struct timespec zero = {0, 0};
    CHECK(syscall(SYS_epoll_pwait2, ep, &ev, 1, &zero, NULL, 8) == 0, "a zero timeout polls");
    uint64_t one = 1;
    CHECK(write(efd, &one, 8) == 8, "write");
    CHECK(syscall(SYS_epoll_pwait2, ep, &ev, 1, NULL, NULL, 8) == 1, "no timeout, something ready");
    struct timespec bad = {0, 1000000000};
    CHECK_ERR(syscall(SYS_epoll_pwait2, ep, &ev, 1, &bad, NULL, 8), EINVAL);
    CHECK_ERR(syscall(SYS_epoll_pwait2, ep, &ev, 1, &zero, &empty, 4), EINVAL);
}

// ---- eventfd, timerfd, signalfd --------------------------------------------------------------------

static void *write_later(void *arg) {
    sleep_ms(50);
    uint64_t v = 5;
    if (write(*(int *)arg, &v, 8) != 8) abort();
    return NULL;
}

static void test_eventfd(void) {
    int fd = eventfd(3, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK_SYS(fd);
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC && (fcntl(fd, F_GETFL) & O_NONBLOCK), "flags");
    uint64_t v = 0;
    CHECK(read(fd, &v, 8) == 8 && v == 3, "read the initial count: %llu", (unsigned long long)v);
    CHECK_ERR(read(fd, &v, 8), EAGAIN);
    v = 5;
    CHECK(write(fd, &v, 8) == 8, "write 5");
    v = 7;
    CHECK(write(fd, &v, 8) == 8, "write 7");
    CHECK(read(fd, &v, 8) == 8 && v == 12, "the sum: %llu", (unsigned long long)v);
    CHECK_ERR(read(fd, &v, 4), EINVAL);
    CHECK_ERR(write(fd, &v, 4), EINVAL);
    v = UINT64_MAX;
    CHECK_ERR(write(fd, &v, 8), EINVAL);
    v = UINT64_MAX - 1;
    CHECK(write(fd, &v, 8) == 8, "the largest count");
    CHECK(ready_now(fd, POLLIN | POLLOUT) == POLLIN, "full: readable, not writable");
    v = 1;
    CHECK_ERR(write(fd, &v, 8), EAGAIN);
    CHECK(read(fd, &v, 8) == 8 && v == UINT64_MAX - 1, "read it back");
    CHECK(ready_now(fd, POLLIN | POLLOUT) == POLLOUT, "empty: writable");
    v = 0;
    CHECK(write(fd, &v, 8) == 8 && ready_now(fd, POLLIN) == 0, "writing 0 changes nothing");
    int sem = eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
    CHECK(read(sem, &v, 8) == 8 && v == 1 && read(sem, &v, 8) == 8 && v == 1, "semaphore: one at a time");
    CHECK_ERR(read(sem, &v, 8), EAGAIN);
    CHECK_ERR(eventfd(0, 0x2), EINVAL);
    // A blocking read waits for a write.
    int blocking = eventfd(0, 0);
    pthread_t t;
    pthread_create(&t, NULL, write_later, &blocking);
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(read(blocking, &v, 8) == 8 && v == 5, "woken with %llu", (unsigned long long)v);
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 40000000, "after the writer's sleep");
    pthread_join(t, NULL);
    char link[64], path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    CHECK(n == 20 && memcmp(link, "anon_inode:[eventfd]", 20) == 0, "the fd link: %.*s", (int)(n > 0 ? n : 0), link);
}

static void test_timerfd(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    CHECK_SYS(fd);
    uint64_t n = 0;
    CHECK_ERR(read(fd, &n, 8), EAGAIN);
    struct itimerspec cur;
    CHECK(timerfd_gettime(fd, &cur) == 0 && cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0, "disarmed");
    // Relative, 50 ms.
    struct itimerspec its = {.it_value = {0, 50000000}};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_SYS(timerfd_settime(fd, 0, &its, NULL));
    CHECK(timerfd_gettime(fd, &cur) == 0 && cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 0 && cur.it_value.tv_nsec <= 50000000, "remaining %ld", cur.it_value.tv_nsec);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 2000) == 1 && p.revents == POLLIN, "poll wakes on expiry");
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 50000000, "not before 50 ms");
    CHECK(read(fd, &n, 8) == 8 && n == 1, "one expiration: %llu", (unsigned long long)n);
    CHECK_ERR(read(fd, &n, 8), EAGAIN);
    CHECK_ERR(read(fd, &n, 4), EINVAL);
    // Periodic: 20 ms, read after 110 ms: at least 5 expirations.
    its = (struct itimerspec){.it_value = {0, 20000000}, .it_interval = {0, 20000000}};
    struct itimerspec old;
    CHECK_SYS(timerfd_settime(fd, 0, &its, &old));
    CHECK(old.it_value.tv_sec == 0 && old.it_value.tv_nsec == 0, "the old setting was disarmed");
    sleep_ms(110);
    CHECK(read(fd, &n, 8) == 8 && n >= 5, "periodic: %llu expirations", (unsigned long long)n);
    CHECK(timerfd_gettime(fd, &cur) == 0 && cur.it_interval.tv_nsec == 20000000, "interval kept");
    its = (struct itimerspec){0};
    CHECK_SYS(timerfd_settime(fd, 0, &its, &old));
    CHECK(old.it_interval.tv_nsec == 20000000, "old interval");
    CHECK(timerfd_gettime(fd, &cur) == 0 && cur.it_value.tv_nsec == 0 && cur.it_value.tv_sec == 0, "disarmed again");
    // Absolute, on each clock; a blocking read waits.
    clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME};
    for (int i = 0; i < 3; i++) {
        int t = timerfd_create(clocks[i], 0);
        CHECK(t >= 0, "clock %d: %s", clocks[i], strerrorname_np(errno));
        int64_t start = now_ns(clocks[i]), at = start + 30000000;
        its = (struct itimerspec){.it_value = {at / 1000000000, at % 1000000000}};
        CHECK_SYS(timerfd_settime(t, TFD_TIMER_ABSTIME, &its, NULL));
        CHECK(read(t, &n, 8) == 8 && n == 1, "clock %d: %llu", clocks[i], (unsigned long long)n);
        CHECK(now_ns(clocks[i]) >= at, "clock %d: not before the time", clocks[i]);
        // A time already past expires at once.
        its.it_value = (struct timespec){0, 1};
        CHECK_SYS(timerfd_settime(t, TFD_TIMER_ABSTIME, &its, NULL));
        CHECK(read(t, &n, 8) == 8 && n == 1, "a past time: %llu", (unsigned long long)n);
        close(t);
    }
    CHECK_ERR(timerfd_create(CLOCK_PROCESS_CPUTIME_ID, 0), EINVAL);
    CHECK_ERR(timerfd_create(CLOCK_MONOTONIC, 0x1), EINVAL);
    its = (struct itimerspec){.it_value = {0, 1000000000}};
    CHECK_ERR(timerfd_settime(fd, 0, &its, NULL), EINVAL);
    its = (struct itimerspec){.it_value = {0, 1}};
    CHECK_ERR(timerfd_settime(fd, 0x10, &its, NULL), EINVAL);
    int notimer = eventfd(0, 0);
    CHECK_ERR(timerfd_gettime(notimer, &cur), EINVAL);
}

static void test_signalfd(void) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    CHECK_SYS(fd);
    struct signalfd_siginfo si;
    CHECK_ERR(read(fd, &si, sizeof si), EAGAIN);
    CHECK(ready_now(fd, POLLIN) == 0, "nothing pending");
    raise(SIGUSR1);
    CHECK(ready_now(fd, POLLIN) == POLLIN, "pending: readable");
    CHECK(read(fd, &si, sizeof si) == sizeof si, "read");
    CHECK(si.ssi_signo == SIGUSR1 && si.ssi_code == SI_TKILL && si.ssi_pid == (uint32_t)getpid() && si.ssi_uid == 0, "raise: signo %u code %d", si.ssi_signo, si.ssi_code);
    CHECK(sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 77}) == 0, "sigqueue");
    CHECK(read(fd, &si, sizeof si) == sizeof si && si.ssi_code == SI_QUEUE && si.ssi_int == 77, "sigqueue: code %d int %d", si.ssi_code, si.ssi_int);
    CHECK_ERR(read(fd, &si, sizeof si - 1), EINVAL);
    // Two signals in one read.
    raise(SIGUSR1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(9);
    struct signalfd_siginfo two[2];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    (void)p;
    for (int i = 0; i < 500; i++) {
        sigset_t pend;
        sigpending(&pend);
        if (sigismember(&pend, SIGCHLD)) break;
        sleep_ms(10);
    }
    CHECK(read(fd, two, sizeof two) == sizeof two, "two at once");
    CHECK(two[0].ssi_signo == SIGUSR1 && two[1].ssi_signo == SIGCHLD, "lowest number first: %u then %u", two[0].ssi_signo, two[1].ssi_signo);
    CHECK(two[1].ssi_code == CLD_EXITED && two[1].ssi_status == 9 && two[1].ssi_pid == (uint32_t)pid, "SIGCHLD: code %d status %d", two[1].ssi_code, two[1].ssi_status);
    waitpid(pid, NULL, 0);
    // The mask of an existing signalfd can change.
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, NULL);
    CHECK(signalfd(fd, &usr2, 0) == fd, "new mask");
    raise(SIGUSR1);
    CHECK(ready_now(fd, POLLIN) == 0, "SIGUSR1 no longer in the mask");
    raise(SIGUSR2);
    CHECK(read(fd, &si, sizeof si) == sizeof si && si.ssi_signo == SIGUSR2, "SIGUSR2");
    CHECK_ERR(signalfd(fd, &usr2, 0x1), EINVAL);
    int efd = eventfd(0, 0);
    CHECK_ERR(signalfd(efd, &usr2, 0), EINVAL);
    CHECK_ERR(syscall(SYS_signalfd4, -1, &usr2, 4, 0), EINVAL);
    char link[64], path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    CHECK(n == 21 && memcmp(link, "anon_inode:[signalfd]", 21) == 0, "the fd link");
}

// ---- readiness everywhere --------------------------------------------------------------------------

// The descriptors of every kind, each made ready to read; `names` for messages.
struct kinds {
    int fd[8];
    int n;
    const char *name[8];
    int keep[8]; // other ends, kept open
};

static int make_ready_kinds(struct kinds *k) {
    k->n = 0;
    int p[2];
    if (pipe(p) || write(p[1], "x", 1) != 1) return -1;
    k->fd[k->n] = p[0], k->keep[k->n] = p[1], k->name[k->n++] = "pipe";
    unlink("/tmp/events-fifo");
    if (mkfifo("/tmp/events-fifo", 0600)) return -1;
    int r = open("/tmp/events-fifo", O_RDONLY | O_NONBLOCK), w = open("/tmp/events-fifo", O_WRONLY);
    if (r < 0 || w < 0 || write(w, "x", 1) != 1) return -1;
    k->fd[k->n] = r, k->keep[k->n] = w, k->name[k->n++] = "fifo";
    int f = open("/tmp/events-file", O_RDWR | O_CREAT, 0644);
    k->fd[k->n] = f, k->keep[k->n] = -1, k->name[k->n++] = "file";
    int e = eventfd(1, 0);
    k->fd[k->n] = e, k->keep[k->n] = -1, k->name[k->n++] = "eventfd";
    int t = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec its = {.it_value = {0, 1}};
    timerfd_settime(t, 0, &its, NULL);
    k->fd[k->n] = t, k->keep[k->n] = -1, k->name[k->n++] = "timerfd";
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigprocmask(SIG_BLOCK, &m, NULL);
    int s = signalfd(-1, &m, 0);
    raise(SIGUSR1);
    k->fd[k->n] = s, k->keep[k->n] = -1, k->name[k->n++] = "signalfd";
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, e, &ev);
    k->fd[k->n] = ep, k->keep[k->n] = -1, k->name[k->n++] = "epoll";
    sleep_ms(5); // the timer's 1 ns has passed
    return 0;
}

static void test_readiness_poll_and_select(void) {
    struct kinds k;
    CHECK(make_ready_kinds(&k) == 0, "setting up: %s", strerrorname_np(errno));
    struct pollfd p[8];
    for (int i = 0; i < k.n; i++) p[i] = (struct pollfd){.fd = k.fd[i], .events = POLLIN | POLLOUT};
    CHECK(poll(p, k.n, 1000) == k.n, "all ready");
    short want[] = {POLLIN, POLLIN, POLLIN | POLLOUT, POLLIN | POLLOUT, POLLIN, POLLIN, POLLIN};
    for (int i = 0; i < k.n; i++) CHECK(p[i].revents == want[i], "%s: revents %#x, want %#x", k.name[i], p[i].revents, want[i]);
    // select over the same descriptors.
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    int maxfd = 0;
    for (int i = 0; i < k.n; i++) {
        FD_SET(k.fd[i], &rd);
        FD_SET(k.fd[i], &wr);
        if (k.fd[i] > maxfd) maxfd = k.fd[i];
    }
    struct timeval tv = {1, 0};
    int n = select(maxfd + 1, &rd, &wr, NULL, &tv);
    CHECK(n == k.n + 2, "select counts each set: %d", n);
    for (int i = 0; i < k.n; i++) {
        CHECK(FD_ISSET(k.fd[i], &rd), "%s readable in select", k.name[i]);
        CHECK(!!FD_ISSET(k.fd[i], &wr) == !!(want[i] & POLLOUT), "%s writable in select: %d", k.name[i], !!FD_ISSET(k.fd[i], &wr));
    }
    // Once drained, nothing is readable but the file.
    char buf[128];
    uint64_t v;
    CHECK(read(k.fd[0], buf, 1) == 1 && read(k.fd[1], buf, 1) == 1 && read(k.fd[3], &v, 8) == 8 && read(k.fd[4], &v, 8) == 8, "drain");
    CHECK(read(k.fd[5], buf, sizeof(struct signalfd_siginfo)) == sizeof(struct signalfd_siginfo), "drain the signalfd");
    for (int i = 0; i < k.n; i++) p[i] = (struct pollfd){.fd = k.fd[i], .events = POLLIN};
    CHECK(poll(p, k.n, 0) == 1 && p[2].revents == POLLIN, "only the file stays readable");
    // ppoll and pselect: timeouts and signal masks.
    struct timespec ts = {0, 30000000};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(ppoll(p, 2, &ts, NULL) == 0 && now_ns(CLOCK_MONOTONIC) - t0 >= 30000000, "ppoll timeout");
    FD_ZERO(&rd);
    FD_SET(k.fd[0], &rd);
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(pselect(k.fd[0] + 1, &rd, NULL, NULL, &ts, NULL) == 0 && now_ns(CLOCK_MONOTONIC) - t0 >= 30000000, "pselect timeout");
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR2, &sa, NULL);
    sigset_t usr2, empty;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, NULL);
    sigemptyset(&empty);
    raise(SIGUSR2);
    CHECK_ERR(ppoll(p, 1, NULL, &empty), EINTR);
    CHECK(caught == SIGUSR2, "ppoll's mask let the signal in");
    // Invalid descriptors: POLLNVAL in poll, EBADF in select.
    struct pollfd bad = {.fd = 99, .events = POLLIN};
    CHECK(poll(&bad, 1, 0) == 1 && bad.revents == POLLNVAL, "POLLNVAL");
    struct pollfd neg = {.fd = -1, .events = POLLIN, .revents = 7};
    CHECK(poll(&neg, 1, 0) == 0 && neg.revents == 0, "a negative fd is skipped");
    FD_ZERO(&rd);
    FD_SET(30, &rd);
    tv = (struct timeval){0, 0};
    CHECK_ERR(select(31, &rd, NULL, NULL, &tv), EBADF);
    tv = (struct timeval){0, 20000};
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK(select(0, NULL, NULL, NULL, &tv) == 0 && now_ns(CLOCK_MONOTONIC) - t0 >= 20000000, "select as a sleep");
    CHECK(tv.tv_sec == 0 && tv.tv_usec == 0, "Linux updates select's timeout: %ld us left", (long)tv.tv_usec);
}

static void test_readiness_in_epoll(void) {
    struct kinds k;
    CHECK(make_ready_kinds(&k) == 0, "setting up");
    int ep = epoll_create1(0);
    for (int i = 0; i < k.n; i++) {
        if (i == 2) {
            CHECK_ERR(add(ep, k.fd[i], EPOLLIN | EPOLLOUT, i), EPERM); // regular files are always ready
            continue;
        }
        CHECK(add(ep, k.fd[i], EPOLLIN | EPOLLOUT, i) == 0, "%s: %s", k.name[i], strerrorname_np(errno));
    }
    struct epoll_event ev[8];
    int n = epoll_wait(ep, ev, 8, 1000);
    CHECK(n == k.n - 1, "%d ready", n);
    uint32_t want[] = {EPOLLIN, EPOLLIN, 0, EPOLLIN | EPOLLOUT, EPOLLIN, EPOLLIN, EPOLLIN};
    for (int i = 0; i < n; i++) CHECK(ev[i].events == want[ev[i].data.u64], "%s: %#x", k.name[ev[i].data.u64], ev[i].events);
    // Edge-triggered on a timerfd: each expiry is one edge.
    int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    int ep2 = epoll_create1(0);
    CHECK_SYS(add(ep2, t, EPOLLIN | EPOLLET, 1));
    struct itimerspec its = {.it_value = {0, 10000000}, .it_interval = {0, 10000000}};
    timerfd_settime(t, 0, &its, NULL);
    int edges = 0;
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    uint64_t ticks;
    while (edges < 3 && now_ns(CLOCK_MONOTONIC) - t0 < 2000000000) {
        if (epoll_wait(ep2, ev, 1, 100) != 1) continue;
        edges++;
        // Linux rearms a periodic timerfd only when it is read: without the read, one edge.
        CHECK(read(t, &ticks, 8) == 8 && ticks >= 1, "read");
    }
    CHECK(edges >= 3, "a 10 ms periodic timer, read at each edge, gave %d edges in 2 s", edges);
}

// ---- pidfd -----------------------------------------------------------------------------------------

static void test_pidfd(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(300);
        _exit(7);
    }
    int pfd = pidfd_open(pid, 0);
    CHECK_SYS(pfd);
    CHECK(fcntl(pfd, F_GETFD) == FD_CLOEXEC, "a pidfd is close-on-exec");
    CHECK(ready_now(pfd, POLLIN) == 0, "running: not readable");
    siginfo_t si = {0};
    CHECK(waitid(P_PIDFD, pfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0, "WNOHANG while running");
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    CHECK(poll(&p, 1, 5000) == 1 && p.revents == POLLIN, "readable once it exited: %#x", p.revents);
    CHECK(waitid(P_PIDFD, pfd, &si, WEXITED) == 0, "waitid P_PIDFD: %s", strerrorname_np(errno));
    CHECK(si.si_pid == pid && si.si_code == CLD_EXITED && si.si_status == 7 && si.si_signo == SIGCHLD, "code %d status %d", si.si_code, si.si_status);
    CHECK(ready_now(pfd, POLLIN) & (POLLIN | POLLHUP), "reaped: still readable");
    CHECK_ERR(waitid(P_PIDFD, pfd, &si, WEXITED), ECHILD);
    CHECK_ERR(pidfd_send_signal(pfd, SIGTERM, NULL, 0), ESRCH);
    char link[64], path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", pfd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    CHECK(n == 18 && memcmp(link, "anon_inode:[pidfd]", 18) == 0, "the fd link: %.*s", (int)(n > 0 ? n : 0), link);
    // pidfd_send_signal ends a child; PIDFD_NONBLOCK makes waitid EAGAIN.
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    pfd = pidfd_open(pid, PIDFD_NONBLOCK);
    CHECK_SYS(pfd);
    CHECK(fcntl(pfd, F_GETFL) & O_NONBLOCK, "PIDFD_NONBLOCK");
    CHECK_ERR(waitid(P_PIDFD, pfd, &si, WEXITED), EAGAIN);
    CHECK_SYS(pidfd_send_signal(pfd, SIGTERM, NULL, 0));
    p.fd = pfd;
    CHECK(poll(&p, 1, 5000) == 1, "exit seen");
    CHECK(waitid(P_PIDFD, pfd, &si, WEXITED) == 0 && si.si_code == CLD_KILLED && si.si_status == SIGTERM, "killed: code %d status %d", si.si_code, si.si_status);
    CHECK_ERR(pidfd_open(pid, 0), ESRCH);
    CHECK_ERR(pidfd_open(getpid(), 0x1), EINVAL);
    CHECK_ERR(pidfd_open(-1, 0), EINVAL);
    int self = pidfd_open(getpid(), 0);
    CHECK_SYS(self);
    CHECK_ERR(pidfd_send_signal(self, SIGUSR1, NULL, 1), EINVAL);
    CHECK_ERR(pidfd_send_signal(0, SIGUSR1, NULL, 0), EBADF);
    int notpid = eventfd(0, 0);
    CHECK_ERR(pidfd_send_signal(notpid, SIGUSR1, NULL, 0), EBADF);
    // A signal with siginfo to oneself through the pidfd.
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigprocmask(SIG_BLOCK, &m, NULL);
    siginfo_t info = {.si_signo = SIGUSR1, .si_code = SI_QUEUE, .si_pid = getpid(), .si_uid = 0};
    info.si_value.sival_int = 31;
    CHECK_SYS(pidfd_send_signal(self, SIGUSR1, &info, 0));
    siginfo_t got;
    struct timespec ts = {1, 0};
    CHECK(sigtimedwait(&m, &got, &ts) == SIGUSR1 && got.si_code == SI_QUEUE && got.si_value.sival_int == 31, "code %d value %d", got.si_code, got.si_value.sival_int);
    info.si_signo = SIGUSR2;
    CHECK_ERR(pidfd_send_signal(self, SIGUSR1, &info, 0), EINVAL);
    // pidfd_getfd: a copy of another process's descriptor (here, our own).
    int efd = eventfd(4, 0);
    int copy = pidfd_getfd(self, efd, 0);
    uint64_t v;
    CHECK(copy >= 0 && read(copy, &v, 8) == 8 && v == 4, "pidfd_getfd: %s", strerrorname_np(errno));
}

static void test_process_madvise(void) {
    int self = pidfd_open(getpid(), 0);
    CHECK_SYS(self);
    char *m = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 4; i++) m[i * 4096] = (char)('a' + i);
    struct iovec iov = {m, 4 * 4096};
    CHECK(process_madvise(self, &iov, 1, MADV_COLD, 0) == 4 * 4096, "MADV_COLD: %s", strerrorname_np(errno));
    CHECK(process_madvise(self, &iov, 1, MADV_PAGEOUT, 0) == 4 * 4096, "MADV_PAGEOUT: %s", strerrorname_np(errno));
    CHECK(process_madvise(self, &iov, 1, MADV_WILLNEED, 0) == 4 * 4096, "MADV_WILLNEED: %s", strerrorname_np(errno));
    for (int i = 0; i < 4; i++) CHECK(m[i * 4096] == 'a' + i, "the data stays (no swap: nothing is paged out)");
    CHECK_ERR(process_madvise(self, &iov, 1, MADV_DONTNEED, 0), EINVAL);
    CHECK_ERR(process_madvise(self, &iov, 1, MADV_COLD, 1), EINVAL);
    struct iovec two[2] = {{m, 4096}, {m + 2 * 4096, 4096}};
    CHECK(process_madvise(self, two, 2, MADV_COLD, 0) == 2 * 4096, "two ranges");
    struct iovec unmapped = {(void *)0x1000, 4096};
    CHECK_ERR(process_madvise(self, &unmapped, 1, MADV_COLD, 0), ENOMEM);
    CHECK_ERR(process_madvise(-1, &iov, 1, MADV_COLD, 0), EBADF);
    CHECK_ERR(process_madvise(self, &iov, 1025, MADV_COLD, 0), EINVAL);
}

static void test_process_mrelease(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *big = malloc(8 << 20);
        memset(big, 1, 8 << 20);
        for (;;) pause();
    }
    int pfd = pidfd_open(pid, 0);
    CHECK_SYS(pfd);
    CHECK_ERR(syscall(SYS_process_mrelease, pfd, 0), EINVAL); // alive, not dying
    CHECK_ERR(syscall(SYS_process_mrelease, pfd, 1), EINVAL);
    CHECK_SYS(kill(pid, SIGKILL));
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    CHECK(poll(&p, 1, 5000) == 1, "dead");
    siginfo_t si;
    CHECK_SYS(waitid(P_PIDFD, pfd, &si, WEXITED | WNOWAIT));
    // A zombie has no memory left to release: ESRCH, as for a reaped one.
    CHECK_ERR(syscall(SYS_process_mrelease, pfd, 0), ESRCH);
    CHECK_SYS(waitid(P_PIDFD, pfd, &si, WEXITED));
    CHECK_ERR(syscall(SYS_process_mrelease, pfd, 0), ESRCH);
    int efd = eventfd(0, 0);
    CHECK_ERR(syscall(SYS_process_mrelease, efd, 0), EBADF);
}

// ---- membarrier, rseq, capabilities ----------------------------------------------------------------

static void *sleep_50ms(void *arg) {
    sleep_ms(50);
    return arg;
}

static long membarrier(int cmd, unsigned flags) { return syscall(SYS_membarrier, cmd, flags, 0); }

static void test_membarrier(void) {
    long q = membarrier(MEMBARRIER_CMD_QUERY, 0);
    long want = MEMBARRIER_CMD_GLOBAL | MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED |
                MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED |
                MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE |
                MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ;
    CHECK(q == want, "QUERY %#lx, want %#lx", q, want);
    CHECK_ERR(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0), EPERM);
    CHECK_ERR(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0), EPERM);
    CHECK_ERR(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0), EPERM);
    CHECK_SYS(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_GLOBAL, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0));
    CHECK_SYS(membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0));
    CHECK_ERR(membarrier(MEMBARRIER_CMD_QUERY, 1), EINVAL);
    CHECK_ERR(membarrier(1 << 12, 0), EINVAL);
    CHECK_ERR(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 2), EINVAL);
    // Registered in a process with threads: the barrier still returns.
    pthread_t t;
    pthread_create(&t, NULL, sleep_50ms, NULL);
    CHECK_SYS(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0));
    pthread_join(t, NULL);
}

static struct rseq *rseq_area(void) { return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset); }

static void *rseq_thread(void *arg) {
    (void)arg;
    struct rseq *r = rseq_area();
    return (void *)(intptr_t)((int)r->cpu_id >= 0 && r->cpu_id == r->cpu_id_start);
}

static void test_rseq(void) {
    CHECK(__rseq_size >= 20, "glibc registered rseq: __rseq_size %u", __rseq_size);
    struct rseq *r = rseq_area();
    CHECK((int)r->cpu_id >= 0, "cpu_id %d (-1 unregistered, -2 registration failed)", (int)r->cpu_id);
    CHECK(r->cpu_id == (uint32_t)sched_getcpu(), "cpu_id %u, sched_getcpu %d", r->cpu_id, sched_getcpu());
    // Registering the same area again is EBUSY; another area EINVAL; a wrong signature on
    // unregistering EPERM.
    CHECK_ERR(syscall(SYS_rseq, r, __rseq_size, 0, RSEQ_SIG), EBUSY);
    static struct rseq other __attribute__((aligned(32)));
    CHECK_ERR(syscall(SYS_rseq, &other, 32, 0, RSEQ_SIG), EINVAL);
    CHECK_ERR(syscall(SYS_rseq, r, __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG + 1), EPERM);
    CHECK_ERR(syscall(SYS_rseq, r, __rseq_size, 2, RSEQ_SIG), EINVAL);
    pthread_t t;
    void *ok;
    pthread_create(&t, NULL, rseq_thread, NULL);
    pthread_join(t, &ok);
    CHECK(ok, "a new thread is registered too");
    // Moving to each CPU the area follows.
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < cpus; c++) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c, &set);
        CHECK_SYS(sched_setaffinity(0, sizeof set, &set));
        CHECK(r->cpu_id == (uint32_t)c, "on CPU %d the area says %u", c, r->cpu_id);
    }
    // Unregister, then register our own area.
    CHECK_SYS(syscall(SYS_rseq, r, __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG));
    CHECK_SYS(syscall(SYS_rseq, &other, 32, 0, RSEQ_SIG));
    CHECK((int)other.cpu_id >= 0, "our own area: cpu_id %d", (int)other.cpu_id);
    CHECK_ERR(syscall(SYS_rseq, (char *)&other + 1, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG), EINVAL);
}

static void test_capabilities(void) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    CHECK_SYS(syscall(SYS_capget, &h, d));
    CHECK(d[0].effective == 0xffffffff && d[1].effective == 0x1ff && d[0].permitted == 0xffffffff && d[1].permitted == 0x1ff, "root: %#x %#x", d[0].effective, d[1].effective);
    CHECK(d[0].inheritable == 0 && d[1].inheritable == 0, "inheritable %#x", d[0].inheritable);
    struct __user_cap_header_struct q = {.version = 0x12345678};
    CHECK(syscall(SYS_capget, &q, NULL) == 0, "asking for the version (no data) succeeds");
    CHECK(q.version == _LINUX_CAPABILITY_VERSION_3, "the kernel says its version: %#x", q.version);
    q.version = 0x12345678;
    CHECK_ERR(syscall(SYS_capget, &q, d), EINVAL);
    CHECK(q.version == _LINUX_CAPABILITY_VERSION_3, "and on EINVAL too: %#x", q.version);
    q.version = 0;
    CHECK_ERR(syscall(SYS_capget, &q, d), EINVAL);
    q = (struct __user_cap_header_struct){.version = _LINUX_CAPABILITY_VERSION_3, .pid = 999999};
    CHECK_ERR(syscall(SYS_capget, &q, d), ESRCH);
    // Drop CAP_CHOWN from the effective set: chown of a file to another owner fails.
    int fd = open("/tmp/events-cap", O_RDWR | O_CREAT, 0644);
    d[0].effective &= ~(1u << CAP_CHOWN);
    CHECK_SYS(syscall(SYS_capset, &h, d));
    CHECK_ERR(fchown(fd, 1000, 1000), EPERM);
    char status[4096];
    int sfd = open("/proc/self/status", O_RDONLY);
    ssize_t n = read(sfd, status, sizeof status - 1);
    status[n > 0 ? n : 0] = 0;
    CHECK(strstr(status, "\nCapEff:\t000001fffffffffe\n"), "CapEff without CAP_CHOWN");
    d[0].effective |= 1u << CAP_CHOWN;
    CHECK_SYS(syscall(SYS_capset, &h, d));
    CHECK_SYS(fchown(fd, 1000, 1000));
    // Dropped from the permitted set it cannot come back.
    d[0].effective &= ~(1u << CAP_CHOWN);
    d[0].permitted &= ~(1u << CAP_CHOWN);
    CHECK_SYS(syscall(SYS_capset, &h, d));
    d[0].effective |= 1u << CAP_CHOWN;
    CHECK_ERR(syscall(SYS_capset, &h, d), EPERM);
    d[0].permitted |= 1u << CAP_CHOWN;
    CHECK_ERR(syscall(SYS_capset, &h, d), EPERM);
    struct __user_cap_header_struct other = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = getppid()};
    CHECK_ERR(syscall(SYS_capset, &other, d), EPERM);
    CHECK_SYS(syscall(SYS_capget, &h, d));
    CHECK(!(d[0].permitted & (1u << CAP_CHOWN)) && !(d[0].effective & (1u << CAP_CHOWN)), "gone");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"epoll_basics", test_epoll_basics},
        {"epoll_triggers", test_epoll_triggers},
        {"epoll_exclusive", test_epoll_exclusive},
        {"nested_epoll", test_nested_epoll},
        {"epoll_pwait_and_pwait2", test_epoll_pwait_and_pwait2},
        {"eventfd", test_eventfd},
        {"timerfd", test_timerfd},
        {"signalfd", test_signalfd},
        {"readiness_poll_and_select", test_readiness_poll_and_select},
        {"readiness_in_epoll", test_readiness_in_epoll},
        {"pidfd", test_pidfd},
        {"process_madvise", test_process_madvise},
        {"process_mrelease", test_process_mrelease},
        {"membarrier", test_membarrier},
        {"rseq", test_rseq},
        {"capabilities", test_capabilities},
    };
    return run_cases_apart(cases, sizeof cases / sizeof cases[0], argc, argv, 15);
}
