/* sockets.c: AF_UNIX sockets as Linux 6.1 has them (net/unix/af_unix.c, man 7 unix):
 * socketpair of each type, message boundaries, descriptor passing (SCM_RIGHTS), path and
 * abstract names with bind/listen/connect/accept, shutdown, EPIPE and SIGPIPE, poll readiness,
 * socket options and the errno of the calls' error cases. Each case runs in a child process of
 * its own (check.h's run_cases_apart); the output is compared with Linux's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/syscall.h>

#include "check.h"

static int sigpipes;
static void on_sigpipe(int sig) {
    (void)sig;
    sigpipes++;
}

/* A sockaddr_un for `path` (a leading '@' makes it abstract), its length in *len. */
static struct sockaddr_un addr_of(const char *path, socklen_t *len) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strlen(path);
    memcpy(a.sun_path, path, n);
    if (path[0] == '@') {
        a.sun_path[0] = 0;
        *len = offsetof(struct sockaddr_un, sun_path) + n;
    } else {
        *len = offsetof(struct sockaddr_un, sun_path) + n + 1;
    }
    return a;
}

static short revents(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

static void test_socketpair_stream(void) {
    int sv[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    CHECK(fcntl(sv[0], F_GETFD) == FD_CLOEXEC, "cloexec");
    CHECK((fcntl(sv[0], F_GETFL) & O_NONBLOCK) == 0, "blocking");
    CHECK(write(sv[0], "hello ", 6) == 6, "write");
    CHECK(write(sv[0], "world", 5) == 5, "write");
    char buf[32] = {0};
    /* A stream joins the writes. */
    CHECK(read(sv[1], buf, sizeof buf) == 11, "read joined");
    CHECK(memcmp(buf, "hello world", 11) == 0, "bytes");
    struct stat st;
    CHECK_SYS(fstat(sv[0], &st));
    CHECK(S_ISSOCK(st.st_mode), "S_IFSOCK, mode %o", st.st_mode);
    char link[64], path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", sv[0]);
    ssize_t n = readlink(path, link, sizeof link - 1);
    CHECK(n > 0, "readlink");
    link[n] = 0;
    CHECK(strncmp(link, "socket:[", 8) == 0, "link %s", link);
    /* Both directions. */
    CHECK(send(sv[1], "back", 4, 0) == 4, "send");
    CHECK(recv(sv[0], buf, 2, 0) == 2 && memcmp(buf, "ba", 2) == 0, "part");
    CHECK(recv(sv[0], buf, 10, MSG_PEEK) == 2 && memcmp(buf, "ck", 2) == 0, "peek");
    CHECK(recv(sv[0], buf, 10, 0) == 2 && memcmp(buf, "ck", 2) == 0, "rest");
    CHECK_ERR(recv(sv[0], buf, 10, MSG_DONTWAIT), EAGAIN);
    /* Writes with writev, reads with readv. */
    struct iovec iov[2] = {{"ab", 2}, {"cde", 3}};
    CHECK(writev(sv[0], iov, 2) == 5, "writev");
    char x[2], y[8];
    struct iovec riov[2] = {{x, 2}, {y, 8}};
    CHECK(readv(sv[1], riov, 2) == 5 && memcmp(x, "ab", 2) == 0 && memcmp(y, "cde", 3) == 0, "readv");
    close(sv[0]);
    CHECK(read(sv[1], buf, sizeof buf) == 0, "end of file after the peer's close");
}

static void test_socketpair_dgram_and_seqpacket(void) {
    int types[2] = {SOCK_DGRAM, SOCK_SEQPACKET};
    for (int t = 0; t < 2; t++) {
        int sv[2];
        CHECK_SYS(socketpair(AF_UNIX, types[t] | SOCK_NONBLOCK, 0, sv));
        CHECK(fcntl(sv[1], F_GETFL) & O_NONBLOCK, "nonblock");
        CHECK(write(sv[0], "one", 3) == 3, "w1");
        CHECK(write(sv[0], "two!", 4) == 4, "w2");
        CHECK(write(sv[0], "", 0) == 0, "empty message");
        char buf[16];
        /* One message per read, boundaries kept. */
        CHECK(read(sv[1], buf, sizeof buf) == 3 && memcmp(buf, "one", 3) == 0, "r1");
        /* A read shorter than the message cuts it; MSG_TRUNC says the real length. */
        CHECK(recv(sv[1], buf, 2, MSG_PEEK | MSG_TRUNC) == 4, "peek trunc");
        struct iovec iov = {buf, 2};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        CHECK(recvmsg(sv[1], &m, 0) == 2, "cut");
        CHECK(m.msg_flags & MSG_TRUNC, "MSG_TRUNC flag %x", m.msg_flags);
        CHECK(read(sv[1], buf, sizeof buf) == 0, "the empty message");
        CHECK_ERR(read(sv[1], buf, sizeof buf), EAGAIN);
        int type = 0;
        socklen_t len = sizeof type;
        CHECK_SYS(getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &type, &len));
        CHECK(type == types[t] && len == 4, "SO_TYPE %d", type);
        close(sv[0]);
        if (types[t] == SOCK_SEQPACKET) {
            CHECK(read(sv[1], buf, sizeof buf) == 0, "seqpacket: end of file");
            CHECK_ERR(write(sv[1], "x", 1), EPIPE);
        } else {
            CHECK_ERR(read(sv[1], buf, sizeof buf), EAGAIN);
            CHECK_ERR(write(sv[1], "x", 1), ECONNREFUSED);
            CHECK_ERR(write(sv[1], "x", 1), ENOTCONN);
        }
        close(sv[1]);
        printf("type %d: ok\n", types[t]);
    }
}

/* Sends `n` descriptors with one byte; returns sendmsg's result. */
static ssize_t send_fds(int sock, const int *fds, int n) {
    char data = 'F';
    struct iovec iov = {&data, 1};
    char control[CMSG_SPACE(sizeof(int) * 8)];
    memset(control, 0, sizeof control);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    return sendmsg(sock, &m, 0);
}

/* Receives one byte and up to 8 descriptors into fds; returns how many came (-1: error). */
static int recv_fds(int sock, int *fds, int flags, int *msg_flags, size_t room) {
    char data;
    struct iovec iov = {&data, 1};
    char control[CMSG_SPACE(sizeof(int) * 8)];
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = room};
    if (recvmsg(sock, &m, flags) != 1) return -1;
    *msg_flags = m.msg_flags;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c) return 0;
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) return -1;
    int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
    return n;
}

static void test_scm_rights(void) {
    int sv[2], p[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_SYS(pipe(p));
    int two[2] = {p[0], p[1]};
    CHECK(send_fds(sv[0], two, 2) == 1, "sendmsg with two descriptors");
    close(p[0]);
    close(p[1]);
    int got[8], mf = 0;
    CHECK(recv_fds(sv[1], got, MSG_CMSG_CLOEXEC, &mf, sizeof(char[CMSG_SPACE(sizeof(int) * 8)])) == 2,
          "two received");
    CHECK(mf == MSG_CMSG_CLOEXEC, "flags %x: recvmsg keeps MSG_CMSG_CLOEXEC in msg_flags", mf);
    CHECK(fcntl(got[0], F_GETFD) == FD_CLOEXEC, "MSG_CMSG_CLOEXEC");
    /* The received pipe works: write into the received write end, read from the read end. */
    CHECK(write(got[1], "via", 3) == 3, "write");
    char buf[8];
    CHECK(read(got[0], buf, 8) == 3 && memcmp(buf, "via", 3) == 0, "read");
    /* Too little control room: the descriptors that do not fit are closed, MSG_CTRUNC. */
    CHECK(send_fds(sv[0], two + 0, 1) == 1, "resend");
    close(got[1]);
    CHECK(recv_fds(sv[1], got + 2, 0, &mf, 8) == 0, "no room");
    CHECK(mf & MSG_CTRUNC, "MSG_CTRUNC %x", mf);
    /* A bad descriptor in SCM_RIGHTS. */
    int bad = 999;
    CHECK_ERR(send_fds(sv[0], &bad, 1), EBADF);
    /* A stream read stops after the message that carried descriptions. */
    int one = got[0];
    CHECK(write(sv[0], "ab", 2) == 2, "w");
    CHECK(send_fds(sv[0], &one, 1) == 1, "s");
    CHECK(write(sv[0], "cd", 2) == 2, "w");
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {buf, 8};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    CHECK(recvmsg(sv[1], &m, 0) == 3 && memcmp(buf, "abF", 3) == 0, "stops after the descriptor's byte");
    CHECK(m.msg_controllen == CMSG_SPACE(sizeof(int)), "controllen %zu", (size_t)m.msg_controllen);
    CHECK(read(sv[1], buf, 8) == 2 && memcmp(buf, "cd", 2) == 0, "then the rest");
    /* The socket itself, sent over itself, then both ends closed (freed, not leaked). */
    CHECK(send_fds(sv[0], &sv[1], 1) == 1, "self");
    close(sv[0]);
    close(sv[1]);
    printf("scm_rights: ok\n");
}

static void test_path_names(void) {
    char dir[] = "/tmp/sockXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[64];
    snprintf(path, sizeof path, "%s/s", dir);
    socklen_t len;
    struct sockaddr_un a = addr_of(path, &len);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_SYS(l);
    /* Connecting to nothing; listening unbound. */
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, len), ENOENT);
    CHECK_SYS(bind(l, (struct sockaddr *)&a, len));
    struct stat st;
    CHECK_SYS(stat(path, &st));
    CHECK(S_ISSOCK(st.st_mode), "a socket node, mode %o", st.st_mode);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, len), ECONNREFUSED);
    int l2 = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_ERR(bind(l2, (struct sockaddr *)&a, len), EADDRINUSE);
    CHECK_ERR(bind(l, (struct sockaddr *)&a, len), EADDRINUSE);
    CHECK_SYS(listen(l, 4));
    int on = 0;
    socklen_t olen = sizeof on;
    CHECK_SYS(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen));
    CHECK(on == 1, "SO_ACCEPTCONN");
    CHECK(revents(l) == 0, "a listener with nothing to accept: %x", revents(l));
    CHECK_SYS(connect(c, (struct sockaddr *)&a, len));
    CHECK(revents(l) == POLLIN, "connection pending: %x", revents(l));
    CHECK_ERR(connect(c, (struct sockaddr *)&a, len), EISCONN);
    struct sockaddr_un peer;
    socklen_t plen = sizeof peer;
    int s = accept4(l, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
    CHECK_SYS(s);
    CHECK(plen == offsetof(struct sockaddr_un, sun_path), "unnamed client: %u", plen);
    CHECK(fcntl(s, F_GETFD) == FD_CLOEXEC, "accept4 cloexec");
    struct sockaddr_un name;
    socklen_t nlen = sizeof name;
    CHECK_SYS(getsockname(s, (struct sockaddr *)&name, &nlen));
    CHECK(nlen == len && strcmp(name.sun_path, path) == 0, "the server end has the listener's name");
    nlen = sizeof name;
    CHECK_SYS(getpeername(c, (struct sockaddr *)&name, &nlen));
    CHECK(nlen == len && strcmp(name.sun_path, path) == 0, "the client's peer");
    CHECK(write(c, "ping", 4) == 4, "w");
    char buf[8];
    CHECK(read(s, buf, 8) == 4, "r");
    struct ucred cred;
    socklen_t clen = sizeof cred;
    CHECK_SYS(getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen));
    CHECK(clen == sizeof cred && cred.pid == getpid() && cred.uid == getuid(), "SO_PEERCRED");
    /* Nothing more to accept. */
    fcntl(l, F_SETFL, O_NONBLOCK);
    CHECK_ERR(accept(l, NULL, NULL), EAGAIN);
    /* Not a socket; wrong type. */
    CHECK_ERR(accept(0 + open("/dev/null", O_RDONLY), NULL, NULL), ENOTSOCK);
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_ERR(connect(d, (struct sockaddr *)&a, len), EPROTOTYPE);
    unlink(path);
    rmdir(dir);
    printf("path_names: ok\n");
}

static void test_abstract_and_dgram_names(void) {
    socklen_t len;
    struct sockaddr_un a = addr_of("@sockets-test-abstract", &len);
    int r = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_SYS(bind(r, (struct sockaddr *)&a, len));
    int r2 = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_ERR(bind(r2, (struct sockaddr *)&a, len), EADDRINUSE);
    struct sockaddr_un name;
    socklen_t nlen = sizeof name;
    CHECK_SYS(getsockname(r, (struct sockaddr *)&name, &nlen));
    CHECK(nlen == len && name.sun_path[0] == 0 && memcmp(name.sun_path + 1, "sockets-test-abstract", 21) == 0,
          "abstract name, %u", nlen);
    /* An autobound sender: family only. */
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    sa_family_t fam = AF_UNIX;
    CHECK_SYS(bind(s, (struct sockaddr *)&fam, sizeof fam));
    nlen = sizeof name;
    CHECK_SYS(getsockname(s, (struct sockaddr *)&name, &nlen));
    CHECK(nlen == offsetof(struct sockaddr_un, sun_path) + 6 && name.sun_path[0] == 0, "autobind %u", nlen);
    CHECK(sendto(s, "to-r", 4, 0, (struct sockaddr *)&a, len) == 4, "sendto");
    char buf[8];
    struct sockaddr_un from;
    socklen_t flen = sizeof from;
    CHECK(recvfrom(r, buf, 8, 0, (struct sockaddr *)&from, &flen) == 4, "recvfrom");
    CHECK(flen == nlen && memcmp(&from, &name, nlen) == 0, "from the autobound name");
    /* Unbound sender: no address. */
    int u = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK(sendto(u, "x", 1, 0, (struct sockaddr *)&a, len) == 1, "sendto");
    flen = sizeof from;
    CHECK(recvfrom(r, buf, 8, 0, (struct sockaddr *)&from, &flen) == 1 && flen == 0, "flen %u", flen);
    struct sockaddr_un none = addr_of("@sockets-test-nobody", &len);
    CHECK_ERR(sendto(u, "x", 1, 0, (struct sockaddr *)&none, len), ECONNREFUSED);
    CHECK_ERR(send(u, "x", 1, 0), ENOTCONN);
    close(r);
    /* The name is free again once its socket is closed. */
    a = addr_of("@sockets-test-abstract", &len);
    CHECK_SYS(bind(r2, (struct sockaddr *)&a, len));
    printf("abstract: ok\n");
}

static void test_shutdown(void) {
    int sv[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK(revents(sv[0]) == POLLOUT, "idle %x", revents(sv[0]));
    CHECK_SYS(shutdown(sv[0], SHUT_WR));
    char buf[4];
    CHECK(read(sv[1], buf, 4) == 0, "the peer sees end of file");
    CHECK(revents(sv[1]) == (POLLIN | POLLOUT | POLLRDHUP), "peer %x", revents(sv[1]));
    signal(SIGPIPE, SIG_IGN);
    CHECK_ERR(write(sv[0], "x", 1), EPIPE);
    CHECK(write(sv[1], "y", 1) == 1, "the other way still works");
    CHECK(read(sv[0], buf, 4) == 1, "read");
    CHECK_SYS(shutdown(sv[1], SHUT_WR));
    CHECK(revents(sv[0]) == (POLLIN | POLLOUT | POLLRDHUP | POLLHUP), "both %x", revents(sv[0]));
    CHECK_ERR(shutdown(sv[0], 7), EINVAL);
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(revents(u) == (POLLOUT | POLLHUP), "unconnected %x", revents(u));
    /* An unconnected socket shuts down too (no ENOTCONN for AF_UNIX). */
    CHECK_SYS(shutdown(u, SHUT_RD));
    CHECK(revents(u) == (POLLIN | POLLOUT | POLLHUP | POLLRDHUP), "shut unconnected %x", revents(u));
    int f = open("/dev/null", O_RDONLY);
    CHECK_ERR(shutdown(f, SHUT_RD), ENOTSOCK);
    CHECK_ERR(shutdown(99, SHUT_RD), EBADF);
    printf("shutdown: ok\n");
}

static void test_epipe_sigpipe(void) {
    int sv[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    signal(SIGPIPE, on_sigpipe);
    close(sv[1]);
    CHECK(revents(sv[0]) == (POLLIN | POLLOUT | POLLRDHUP | POLLHUP), "peer gone %x", revents(sv[0]));
    CHECK_ERR(write(sv[0], "x", 1), EPIPE);
    CHECK(sigpipes == 1, "SIGPIPE %d", sigpipes);
    CHECK_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK(sigpipes == 1, "no SIGPIPE with MSG_NOSIGNAL: %d", sigpipes);
    /* Closing with unread data resets the peer. */
    int sp[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
    CHECK(write(sp[0], "unread", 6) == 6, "w");
    close(sp[1]);
    CHECK(write(sp[0], "z", 1) == -1, "broken");
    char b;
    CHECK_ERR(read(sp[0], &b, 1), ECONNRESET);
    CHECK(read(sp[0], &b, 1) == 0, "then end of file");
    printf("epipe: ok\n");
}

static void test_readiness_and_limits(void) {
    int sv[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = 7};
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev));
    struct epoll_event out;
    CHECK(epoll_wait(ep, &out, 1, 0) == 0, "nothing yet");
    CHECK(write(sv[0], "a", 1) == 1, "w");
    CHECK(epoll_wait(ep, &out, 1, 0) == 1 && out.events == EPOLLIN && out.data.u32 == 7, "EPOLLIN");
    int avail = 0;
    CHECK_SYS(ioctl(sv[1], FIONREAD, &avail));
    CHECK(avail == 1, "FIONREAD %d", avail);
    /* Fill it: non-blocking writes stop with EAGAIN, and it is not writable then. */
    static char big[65536];
    long total = 0;
    for (;;) {
        ssize_t n = write(sv[0], big, sizeof big);
        if (n < 0) break;
        total += n;
    }
    CHECK(errno == EAGAIN, "EAGAIN when full, %s", strerrorname_np(errno));
    /* Linux counts each buffer's overhead against the 212992-byte send buffer and lets the last
     * write pass it: more than 64 KiB, less than twice the buffer. */
    CHECK(total > 65536 && total < 2 * 212992, "buffered %ld", total);
    CHECK(!(revents(sv[0]) & POLLOUT), "full: not writable");
    /* A blocked writer finishes once the reader drains. */
    pid_t pid = fork();
    if (pid == 0) {
        char sink[65536];
        usleep(50000);
        long got = 0;
        while (got < total + 1 + 300000) {
            ssize_t n = read(sv[1], sink, sizeof sink);
            if (n > 0) got += n;
            else usleep(1000);
        }
        _exit(got == total + 1 + 300000 ? 0 : 1);
    }
    int fl = fcntl(sv[0], F_GETFL);
    fcntl(sv[0], F_SETFL, fl & ~O_NONBLOCK);
    static char more[300000];
    CHECK(write(sv[0], more, sizeof more) == sizeof more, "a blocking write of 300000 completes");
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader");
    int sndbuf = 0;
    socklen_t len = sizeof sndbuf;
    CHECK_SYS(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &len));
    CHECK(sndbuf == 212992, "SO_SNDBUF %d", sndbuf);
    int want = 10000;
    CHECK_SYS(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &want, sizeof want));
    CHECK_SYS(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &len));
    CHECK(sndbuf == 20000, "doubled: %d", sndbuf);
    int err = -1;
    CHECK_SYS(getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK(err == 0, "SO_ERROR %d", err);
    CHECK_ERR(getsockopt(sv[0], SOL_SOCKET, 12345, &err, &len), ENOPROTOOPT);
    /* The peer goes: EPOLLRDHUP and EPOLLHUP. */
    close(sv[1]);
    ev.events = EPOLLIN | EPOLLRDHUP;
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev));
    CHECK(epoll_wait(ep, &out, 1, 0) == 1 && out.events == (EPOLLIN | EPOLLRDHUP | EPOLLHUP), "hup %x",
          out.events);
    printf("readiness: ok\n");
}

/* A socket held only by its own queue (sent over its pair, then both ends closed) is collected
 * after the next socket is released, as Linux's unix_gc does, and so is what its queue holds: a
 * stream end sent along with it closes, and its peer sees end of file. */
static void test_cycles_collected(void) {
    int xy[2], ab[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, xy));
    CHECK_SYS(socketpair(AF_UNIX, SOCK_DGRAM, 0, ab));
    int two[2] = {ab[1], xy[0]};
    CHECK(send_fds(ab[0], two, 2) == 1, "b and x into b's own queue");
    close(xy[0]);
    close(ab[0]);
    close(ab[1]);
    CHECK(!(revents(xy[1]) & POLLHUP), "x is still held: %x", revents(xy[1]));
    close(socket(AF_UNIX, SOCK_STREAM, 0));
    /* Linux 6.1 collects in a worker after the release: wait for the hang-up (up to 2 s). */
    struct pollfd p = {.fd = xy[1], .events = POLLIN};
    CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLHUP), "x collected with the cycle: %x", p.revents);
    char c;
    CHECK(read(xy[1], &c, 1) == 0, "end of file");
    printf("cycles: ok\n");
}

static void test_errors(void) {
    int sv[2];
    CHECK_ERR(socket(AF_INET6 + 100, SOCK_STREAM, 0), EAFNOSUPPORT);
    CHECK_ERR(socket(AF_UNIX, 0, 0), ESOCKTNOSUPPORT);
    CHECK_ERR(socket(AF_UNIX, 11, 0), EINVAL);
    CHECK_ERR(socket(AF_UNIX, SOCK_STREAM | 0x10000, 0), EINVAL);
    CHECK_ERR(socket(AF_UNIX, SOCK_STREAM, 6), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_UNIX, SOCK_RDM, 0), ESOCKTNOSUPPORT);
    CHECK_ERR(syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, 8L), EFAULT);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_SYS(s);
    char buf[4];
    CHECK_ERR(read(s, buf, 4), EINVAL);
    CHECK_ERR(write(s, "x", 1), ENOTCONN);
    CHECK_ERR(listen(s, 1), EINVAL);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    CHECK_ERR(connect(s, (struct sockaddr *)&a, 1), EINVAL);
    a.sun_family = 2;
    CHECK_ERR(connect(s, (struct sockaddr *)&a, sizeof a), EINVAL);
    CHECK_ERR(bind(s, (struct sockaddr *)&a, sizeof a + 100), EINVAL);
    CHECK_ERR(getpeername(s, (struct sockaddr *)&a, &(socklen_t){sizeof a}), ENOTCONN);
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_ERR(listen(d, 1), EOPNOTSUPP);
    CHECK_ERR(accept(d, NULL, NULL), EOPNOTSUPP);
    CHECK_SYS(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    static char huge[300000];
    CHECK_ERR(send(sv[0], huge, sizeof huge, 0), EMSGSIZE);
    printf("errors: ok\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"socketpair_stream", test_socketpair_stream},
        {"socketpair_dgram_and_seqpacket", test_socketpair_dgram_and_seqpacket},
        {"scm_rights", test_scm_rights},
        {"path_names", test_path_names},
        {"abstract_and_dgram_names", test_abstract_and_dgram_names},
        {"shutdown", test_shutdown},
        {"epipe_sigpipe", test_epipe_sigpipe},
        {"readiness_and_limits", test_readiness_and_limits},
        {"cycles_collected", test_cycles_collected},
        {"errors", test_errors},
    };
    return run_cases_apart(cases, sizeof cases / sizeof cases[0], argc, argv, 15);
}
