/* mte.c: arm64 memory tagging (MTE) for user space, as Linux 6.1 gives it on a CPU with tag
 * storage (QEMU's -M virt,mte=on -cpu max): HWCAP2_MTE, prctl(PR_SET_TAGGED_ADDR_CTRL) and its
 * errors, PROT_MTE memory whose tags start at zero, synchronous and asynchronous tag-check
 * faults (SIGSEGV with SEGV_MTESERR, SEGV_MTEAERR), tags kept across a fork's copy-on-write and
 * shared through a memfd, mprotect adding and removing PROT_MTE, system calls taking tagged
 * pointers, and glibc's tagged malloc (GLIBC_TUNABLES=glibc.mem.tagging=1) catching a
 * use-after-free and a buffer overflow. Each case runs in a child of its own (check.h's
 * run_cases_apart), so one's tag-check mode does not reach the next. Built with
 * -march=armv8.5-a+memtag for the IRG/STG/LDG instructions.
 *
 * On QEMU 7.2 granules i and i + 2 of a page share one tag (STG to one changes what LDG reads
 * from the other, on Linux 6.1 as here), which breaks glibc's granule-by-granule tagging: a
 * static glibc program started with glibc.mem.tagging=1 takes an asynchronous tag-check fault
 * during its start-up on Linux too (its mprotect then fails with errno 513). So
 * granules_keep_own_tags and the two malloc cases (which need the tunable in the environment,
 * and would change the control the others start from) form a parity case of their own, run on
 * QEMU 10 from Debian's bookworm-backports (scripts/lib.sh's ensure_qemu_backports). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "check.h"

#ifndef PROT_MTE
#define PROT_MTE 0x20
#endif
#ifndef SA_UNSUPPORTED
#define SA_UNSUPPORTED 0x400
#endif
#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x800
#endif
#ifndef HWCAP2_MTE
#define HWCAP2_MTE (1 << 18)
#endif
#ifndef SEGV_MTEAERR
#define SEGV_MTEAERR 8
#endif
#ifndef SEGV_MTESERR
#define SEGV_MTESERR 9
#endif

#define PAGE 4096
#define TAG_SHIFT 56
/* Tags 1 to 15 may be drawn by IRG (tag 0 excluded), as glibc asks. */
#define INCLUDE_NONZERO (0xfffeUL << PR_MTE_TAG_SHIFT)

static void *with_tag(void *p, unsigned tag) {
    return (void *)(((uintptr_t)p & ~(0xffUL << TAG_SHIFT)) | ((uintptr_t)tag << TAG_SHIFT));
}
static unsigned tag_of(const void *p) { return ((uintptr_t)p >> TAG_SHIFT) & 0xf; }
static void *untagged(const void *p) { return with_tag((void *)p, 0); }

/* The Allocation Tag of the granule at p. */
static unsigned load_tag(const void *p) {
    void *t = (void *)p;
    __asm__ volatile("ldg %0, [%0]" : "+r"(t) : : "memory");
    return tag_of(t);
}
/* Sets the granule's Allocation Tag to p's tag. */
static void store_tag(void *p) { __asm__ volatile("stg %0, [%0]" : : "r"(p) : "memory"); }
/* A random tag for p from the included ones (IRG). */
static void *random_tag(void *p) {
    void *t;
    __asm__ volatile("irg %0, %1" : "=r"(t) : "r"(p));
    return t;
}

static int set_ctrl(unsigned long ctrl) { return prctl(PR_SET_TAGGED_ADDR_CTRL, ctrl, 0, 0, 0); }

static void *map_tagged(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE | PROT_MTE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The fault a case expects: the handler records it and jumps back. */
static sigjmp_buf back;
static volatile int got_code;
static volatile uintptr_t got_addr;
static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    got_code = si->si_code;
    got_addr = (uintptr_t)si->si_addr;
    siglongjmp(back, 1);
}
static void catch_segv(void) {
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigaction(SIGSEGV, &sa, NULL);
    got_code = 0;
    got_addr = 1;
}

static void hwcap(void) {
    CHECK(getauxval(AT_HWCAP2) & HWCAP2_MTE, "no HWCAP2_MTE: AT_HWCAP2 %#lx", getauxval(AT_HWCAP2));
    printf("    HWCAP2_MTE set\n");
}

static void prctl_controls(void) {
    CHECK(prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0) == 0, "initial control not 0");
    unsigned long ctrl = PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO;
    CHECK_SYS(set_ctrl(ctrl));
    long got = prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0);
    CHECK(got == (long)ctrl, "read back %#lx, set %#lx", got, ctrl);
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_ASYNC));
    CHECK(prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0) == (long)(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_ASYNC), "async");
    /* Linux's rules: unknown bits, and any other argument not 0, are EINVAL. */
    CHECK_ERR(set_ctrl(1UL << 19), EINVAL);
    CHECK_ERR(set_ctrl(1UL << 63), EINVAL);
    CHECK_ERR(prctl(PR_SET_TAGGED_ADDR_CTRL, PR_TAGGED_ADDR_ENABLE, 1, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_GET_TAGGED_ADDR_CTRL, 1, 0, 0, 0), EINVAL);
    CHECK_SYS(set_ctrl(0));
    CHECK(prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0) == 0, "cleared");
}

static void fresh_pages_have_zero_tags(void) {
    unsigned char *p = map_tagged(4 * PAGE);
    CHECK(p != NULL, "mmap(PROT_MTE): %s", strerror(errno));
    int nonzero = 0;
    for (size_t off = 0; off < 4 * PAGE; off += 16) nonzero += load_tag(p + off) != 0 || p[off] != 0;
    CHECK(nonzero == 0, "%d granules with a tag or data", nonzero);
    printf("    every granule of 4 fresh pages: tag 0, data 0\n");
}

/* Every 16-byte granule of a page holds a tag of its own: a distinct tag in each neighbour and
 * in granules i and i + 2 (the pair QEMU 7.2 keeps together), each read back, and each
 * granule written through its own tag with synchronous checking on. */
static void granules_keep_own_tags(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *p = map_tagged(PAGE);
    CHECK(p != NULL, "mmap: %s", strerror(errno));
    const unsigned granules = PAGE / 16;
    for (unsigned i = 0; i < granules; i++) store_tag(with_tag(p + 16 * i, 1 + i % 15));
    unsigned wrong = 0, first_wrong = granules;
    for (unsigned i = 0; i < granules; i++) {
        if (load_tag(p + 16 * i) != 1 + i % 15) {
            wrong++;
            if (first_wrong == granules) first_wrong = i;
        }
    }
    CHECK(wrong == 0, "%u of %u granules read back another tag (first: granule %u, tag %u)", wrong, granules,
          first_wrong, first_wrong < granules ? load_tag(p + 16 * first_wrong) : 0);
    for (unsigned i = 0; i < granules; i++) ((unsigned char *)with_tag(p + 16 * i, 1 + i % 15))[0] = (unsigned char)i;
    printf("    %u granules, tags 1 to 15 in turn: each read back and written through its own tag\n", granules);
}

static void sync_fault(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *p = map_tagged(PAGE);
    CHECK(p != NULL, "mmap: %s", strerror(errno));
    unsigned char *t = random_tag(p);
    CHECK(tag_of(t) != 0, "IRG gave tag 0 with 0 excluded");
    for (int i = 0; i < 64; i += 16) store_tag(t + i);
    t[0] = 1, t[63] = 2; /* the right tag: fine */
    CHECK(load_tag(p + 16) == tag_of(t), "tag read back %u, set %u", load_tag(p + 16), tag_of(t));
    unsigned char *wrong = with_tag(t, tag_of(t) == 15 ? 1 : tag_of(t) + 1);
    catch_segv();
    if (sigsetjmp(back, 1) == 0) {
        wrong[8] = 3;
        CHECK(0, "a store with the wrong tag went through");
    }
    CHECK(got_code == SEGV_MTESERR, "si_code %d, want SEGV_MTESERR", got_code);
    /* Without SA_EXPOSE_TAGBITS Linux gives the address without its tag. */
    CHECK(got_addr == (uintptr_t)untagged(wrong + 8), "si_addr %#lx, want %p", (unsigned long)got_addr, untagged(wrong + 8));
    CHECK(t[8] == 0, "the faulting store changed memory");
    printf("    SIGSEGV SEGV_MTESERR at the untagged address; memory unchanged\n");
    /* With checks off the same access goes through. */
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | INCLUDE_NONZERO));
    wrong[8] = 4;
    CHECK(t[8] == 4, "unchecked store lost");
    /* Untagged memory is never checked. */
    unsigned char *plain = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *tagged_plain = with_tag(plain, 5);
    tagged_plain[0] = 7;
    CHECK(plain[0] == 7 && load_tag(plain) == 0, "untagged memory");
}

static void async_fault(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_ASYNC | INCLUDE_NONZERO));
    unsigned char *p = map_tagged(PAGE);
    CHECK(p != NULL, "mmap: %s", strerror(errno));
    unsigned char *t = with_tag(p, 3);
    store_tag(t);
    volatile unsigned char *wrong = with_tag(p, 9);
    catch_segv();
    if (sigsetjmp(back, 1) == 0) {
        wrong[0] = 5;
        /* The fault is recorded and reported at the next entry into the kernel. */
        syscall(SYS_getpid);
        CHECK(0, "no asynchronous fault reported after a system call");
    }
    CHECK(got_code == SEGV_MTEAERR, "si_code %d, want SEGV_MTEAERR", got_code);
    CHECK(got_addr == 0, "si_addr %#lx, want 0", (unsigned long)got_addr);
    CHECK(t[0] == 5, "an asynchronous fault does not stop the store");
    printf("    SIGSEGV SEGV_MTEAERR, si_addr 0, after the store\n");
}

/* One tag per page here: QEMU 7.2 keeps one tag per 32 bytes' half of a page-wide pair (granule
 * i and i + 2 share their tag; Linux 6.1 reads the same there), so a pattern finer than a page
 * would test QEMU, not the kernel. */
static void tags_survive_fork(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *p = map_tagged(2 * PAGE);
    CHECK(p != NULL, "mmap: %s", strerror(errno));
    static const unsigned page_tag[2] = {3, 12};
    for (unsigned i = 0; i < 2 * PAGE / 16; i++) {
        unsigned char *t = with_tag(p + 16 * i, page_tag[i / (PAGE / 16)]);
        store_tag(t);
        t[0] = (unsigned char)i;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        /* The first write copies each page (copy-on-write): its tags come along. */
        for (int pg = 0; pg < 2; pg++) ((unsigned char *)with_tag(p + pg * PAGE, page_tag[pg]))[1] = 0xaa;
        int bad = 0;
        for (unsigned i = 0; i < 2 * PAGE / 16; i++) {
            unsigned tag = page_tag[i / (PAGE / 16)];
            bad += load_tag(p + 16 * i) != tag || ((unsigned char *)with_tag(p + 16 * i, tag))[0] != (unsigned char)i;
        }
        /* The copy still checks: a wrong tag faults in the child. */
        catch_segv();
        if (sigsetjmp(back, 1) == 0) ((volatile unsigned char *)with_tag(p, 2))[0] = 1;
        _exit(bad == 0 && got_code == SEGV_MTESERR ? 0 : 1);
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x", status);
    CHECK(((unsigned char *)with_tag(p, 3))[1] == 0, "the child's write reached the parent");
    printf("    the child's copied pages kept every granule's tag\n");
}

static void memfd_shares_tags(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    int fd = memfd_create("mte", 0);
    CHECK_SYS(fd);
    CHECK_SYS(ftruncate(fd, PAGE));
    unsigned char *a = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_MTE, MAP_SHARED, fd, 0);
    unsigned char *b = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_MTE, MAP_SHARED, fd, 0);
    CHECK(a != MAP_FAILED && b != MAP_FAILED, "mmap(memfd, PROT_MTE): %s", strerror(errno));
    unsigned char *t = with_tag(a + 32, 6);
    store_tag(t);
    t[0] = 42;
    CHECK(load_tag(b + 32) == 6, "the other mapping sees tag %u", load_tag(b + 32));
    CHECK(((unsigned char *)with_tag(b + 32, 6))[0] == 42, "data");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        /* A shared page is never copied: the child's tag change is the parent's. */
        store_tag(with_tag(b + 48, 11));
        _exit(0);
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child && status == 0, "child");
    CHECK(load_tag(a + 48) == 11, "tag after the child's STG: %u", load_tag(a + 48));
    printf("    both mappings and a child share the page's tags\n");
}

static void mprotect_adds_mte_for_good(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    p[0] = 9;
    CHECK(load_tag(p) == 0, "untagged memory reads tag 0");
    CHECK_SYS(mprotect(p, PAGE, PROT_READ | PROT_WRITE | PROT_MTE));
    CHECK(p[0] == 9 && load_tag(p) == 0, "data kept, tags 0");
    unsigned char *t = with_tag(p, 4);
    store_tag(t);
    catch_segv();
    if (sigsetjmp(back, 1) == 0) {
        p[0] = 1; /* tag 0 against 4 */
        CHECK(0, "no fault after mprotect(PROT_MTE)");
    }
    CHECK(got_code == SEGV_MTESERR, "si_code %d", got_code);
    /* Linux never takes PROT_MTE away (VM_MTE stays): the page is still checked. */
    CHECK_SYS(mprotect(p, PAGE, PROT_READ | PROT_WRITE));
    catch_segv();
    if (sigsetjmp(back, 1) == 0) {
        p[0] = 2;
        CHECK(0, "no fault after mprotect without PROT_MTE");
    }
    CHECK(got_code == SEGV_MTESERR, "si_code %d", got_code);
    CHECK(load_tag(p) == 4 && ((unsigned char *)t)[0] == 9, "tag and data kept");
    printf("    PROT_MTE added by mprotect, and kept by an mprotect without it\n");
}

static void prot_mte_where_refused(void) {
    /* PROT_GROWSUP does not exist on arm64; PROT_MTE with an unknown bit is refused too. */
    unsigned char *p = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    CHECK_ERR(mprotect(p, PAGE, PROT_READ | PROT_MTE | 0x40), EINVAL);
    /* A file of the initramfs: refused or not as its file system allows (printed). */
    int fd = open("/proc/self/exe", O_RDONLY);
    CHECK_SYS(fd);
    void *m = mmap(NULL, PAGE, PROT_READ | PROT_MTE, MAP_PRIVATE, fd, 0);
    printf("    mmap(the program's file, PROT_MTE): %s\n", m == MAP_FAILED ? strerrorname_np(errno) : "mapped");
    void *plain = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(plain != MAP_FAILED, "mmap(file)");
    errno = 0;
    int r = mprotect(plain, PAGE, PROT_READ | PROT_MTE);
    printf("    mprotect(file mapping, PROT_MTE): %s\n", r ? strerrorname_np(errno) : "ok");
}

static void syscalls_take_tagged_pointers(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *p = map_tagged(PAGE);
    CHECK(p != NULL, "mmap");
    char *t = with_tag(p, 7);
    for (int i = 0; i < 64; i += 16) store_tag(t + i);
    int fds[2];
    CHECK_SYS(pipe(fds));
    CHECK(write(fds[1], "tagged", 7) == 7, "write");
    CHECK(read(fds[0], t, 7) == 7, "read into a tagged buffer: %s", strerror(errno));
    CHECK(strcmp(t, "tagged") == 0, "read gave %s", t);
    CHECK(write(fds[1], t, 7) == 7, "write from a tagged buffer: %s", strerror(errno));
    /* Without the tagged-address ABI a tagged pointer is not a user address. */
    CHECK_SYS(set_ctrl(0));
    CHECK_ERR(write(fds[1], t, 7), EFAULT);
    printf("    read and write through a tagged pointer; EFAULT without the ABI\n");
}

/* What one call said, as a word: "ok" or its errno's name. */
static const char *said(long r) { return r == -1 ? strerrorname_np(errno) : "ok"; }

/* The tagged-address ABI's first stage (Linux's tagged-address-abi.rst): the calls that manage
 * mappings without touching the memory take a tagged start as the same address untagged,
 * whether or not the thread enabled the ABI; a vector the kernel writes (mincore's) is a
 * second-stage pointer, tagged only with the ABI. A full tag byte (0x3c) is used: all of it
 * goes, not only the MTE nibble. */
static void memory_calls_take_tagged_ranges(void) {
    for (volatile int abi = 0; abi < 2; abi++) {
        CHECK_SYS(set_ctrl(abi ? PR_TAGGED_ADDR_ENABLE : 0));
        unsigned char *p = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED, "mmap");
        p[0] = 1;
        unsigned char *t = with_tag(p, 0x3c);
        unsigned char vec[1] = {0};
        printf("    ABI %s: mprotect %s", abi ? "on" : "off", said(mprotect(t, PAGE, PROT_READ)));
        printf(", madvise %s", said(madvise(t + PAGE, PAGE, MADV_DONTNEED)));
        printf(", msync %s", said(msync(t, PAGE, MS_SYNC)));
        printf(", mlock %s", said(mlock(t, PAGE)));
        printf(", munlock %s", said(munlock(t, PAGE)));
        printf(", mincore %s", said(mincore(t, PAGE, vec)));
        printf(", mincore into a tagged vector %s\n", said(mincore(p, PAGE, with_tag(vec, 0x3c))));
        /* mprotect took effect on the page itself: a write now faults. */
        catch_segv();
        if (sigsetjmp(back, 1) == 0) p[0] = 2;
        printf("    ABI %s: write after mprotect(tagged, PROT_READ): %s\n", abi ? "on" : "off",
               got_code == SEGV_ACCERR ? "SEGV_ACCERR" : "went through");
        void *moved = mremap(with_tag(p + 2 * PAGE, 0x3c), PAGE, 2 * PAGE, MREMAP_MAYMOVE);
        CHECK(moved != MAP_FAILED, "mremap(tagged old address): %s", strerrorname_np(errno));
        printf("    ABI %s: mremap(tagged old address) ok, result's top byte %#lx\n", abi ? "on" : "off",
               (unsigned long)((uintptr_t)moved >> TAG_SHIFT));
        CHECK_SYS(munmap(with_tag(moved, 0x3c), 2 * PAGE));
        CHECK_SYS(munmap(t, 4 * PAGE));
        CHECK_ERR(mincore(p, PAGE, vec), ENOMEM);
        printf("    ABI %s: munmap(tagged) unmapped both ranges\n", abi ? "on" : "off");
    }
}

/* The calls whose address could alias an existing mapping take no tag, with the ABI on or off
 * (the document's section 3): mmap's hint and fixed address, brk, mremap's new address, shmat
 * and shmdt. What each does with one is printed: Linux 6.1's answer is the recorded truth. */
static void aliasing_calls_refuse_tags(void) {
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE));
    unsigned char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    /* Free, and far from where either kernel places a mapping without a hint. */
    unsigned char *want = (unsigned char *)0x1000000000UL, *hole = with_tag(want, 0x3c);
    void *m = mmap(want, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m == want, "mmap(untagged hint) at %p, not at the hint %p", m, want);
    CHECK_SYS(munmap(m, PAGE));
    m = mmap(hole, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap(tagged hint): %s", strerrorname_np(errno));
    printf("    mmap(tagged hint): top byte %#lx, %s\n", (unsigned long)((uintptr_t)m >> TAG_SHIFT),
           m == want ? "at the hint's untagged address" : "the hint ignored");
    CHECK_SYS(munmap(m, PAGE));
    m = mmap(hole, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    printf("    mmap(tagged, MAP_FIXED): %s\n", m == MAP_FAILED ? strerrorname_np(errno) : "mapped");
    m = mmap(hole, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    printf("    mmap(tagged, MAP_FIXED_NOREPLACE): %s\n", m == MAP_FAILED ? strerrorname_np(errno) : "mapped");
    unsigned long brk0 = syscall(SYS_brk, 0);
    unsigned long brk1 = syscall(SYS_brk, (unsigned long)with_tag((void *)(brk0 + PAGE), 0x3c));
    printf("    brk(tagged): the break %s\n", brk1 == brk0 ? "unchanged" : "moved");
    m = mremap(p, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
    printf("    mremap(new address tagged): %s\n", m == MAP_FAILED ? strerrorname_np(errno) : "moved");
    int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    CHECK_SYS(id);
    void *a = shmat(id, hole, 0);
    printf("    shmat(tagged address): %s\n", a == (void *)-1 ? strerrorname_np(errno) : "attached");
    a = shmat(id, NULL, 0);
    CHECK(a != (void *)-1, "shmat: %s", strerrorname_np(errno));
    printf("    shmdt(tagged attachment): %s\n", said(shmdt(with_tag(a, 0x3c))));
    CHECK_SYS(shmdt(a));
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
}

/* SA_EXPOSE_TAGBITS (Linux 5.11): a fault's si_addr keeps its tag byte only for a handler
 * installed with the flag; sigaction keeps the flag (and clears SA_UNSUPPORTED), which is how a
 * program learns the kernel supports it. The sigcontext's fault_address is untagged either way. */
static volatile uintptr_t got_fault_address;
static void on_segv_context(int sig, siginfo_t *si, void *uc) {
    got_fault_address = ((ucontext_t *)uc)->uc_mcontext.fault_address;
    on_segv(sig, si, uc);
}
static void catch_segv_flags(int flags) {
    struct sigaction sa = {.sa_sigaction = on_segv_context, .sa_flags = SA_SIGINFO | SA_NODEFER | flags};
    CHECK_SYS(sigaction(SIGSEGV, &sa, NULL));
    got_code = 0;
    got_addr = 1;
    got_fault_address = 1;
}
static void expose_tagbits(void) {
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_UNSUPPORTED | SA_EXPOSE_TAGBITS}, old;
    CHECK_SYS(sigaction(SIGSEGV, &sa, NULL));
    CHECK_SYS(sigaction(SIGSEGV, NULL, &old));
    printf("    sa_flags read back: SA_UNSUPPORTED %s, SA_EXPOSE_TAGBITS %s\n",
           old.sa_flags & SA_UNSUPPORTED ? "kept" : "cleared", old.sa_flags & SA_EXPOSE_TAGBITS ? "kept" : "cleared");
    /* A translation fault through a tagged pointer (TBI0: the top byte is not translated). */
    unsigned char *gone = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(gone != MAP_FAILED, "mmap");
    CHECK_SYS(munmap(gone, PAGE));
    volatile unsigned char *bad = with_tag(gone + 8, 0xa5);
    for (volatile int expose = 0; expose < 2; expose++) {
        catch_segv_flags(expose ? SA_EXPOSE_TAGBITS : 0);
        if (sigsetjmp(back, 1) == 0) (void)bad[0];
        CHECK(got_code == SEGV_MAPERR, "si_code %d", got_code);
        CHECK(untagged((void *)got_addr) == gone + 8, "si_addr %#lx", (unsigned long)got_addr);
        printf("    SEGV_MAPERR, %s: si_addr top byte %#lx, fault_address top byte %#lx\n",
               expose ? "SA_EXPOSE_TAGBITS" : "no flag", (unsigned long)(got_addr >> TAG_SHIFT),
               (unsigned long)(got_fault_address >> TAG_SHIFT));
    }
    /* A synchronous tag-check fault: the tag (bits 59:56) is kept with the flag, bits 63:60 are
     * UNKNOWN in FAR_EL1 and come back 0. */
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | INCLUDE_NONZERO));
    unsigned char *p = map_tagged(PAGE);
    CHECK(p != NULL, "mmap: %s", strerror(errno));
    store_tag(with_tag(p, 3));
    volatile unsigned char *wrong = with_tag(p, 0xa9);
    for (volatile int expose = 0; expose < 2; expose++) {
        catch_segv_flags(expose ? SA_EXPOSE_TAGBITS : 0);
        if (sigsetjmp(back, 1) == 0) wrong[4] = 1;
        CHECK(got_code == SEGV_MTESERR, "si_code %d", got_code);
        CHECK(untagged((void *)got_addr) == p + 4, "si_addr %#lx", (unsigned long)got_addr);
        printf("    SEGV_MTESERR, %s: si_addr top byte %#lx, fault_address top byte %#lx\n",
               expose ? "SA_EXPOSE_TAGBITS" : "no flag", (unsigned long)(got_addr >> TAG_SHIFT),
               (unsigned long)(got_fault_address >> TAG_SHIFT));
    }
}

static void malloc_case(int overflow) {
    long ctrl = prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0);
    char *p = malloc(32);
    CHECK(p != NULL, "malloc");
    printf("    glibc's control %#lx, pointer tagged: %s\n", ctrl, tag_of(p) ? "yes" : "no");
    CHECK(tag_of(p) != 0, "malloc gave an untagged pointer (is GLIBC_TUNABLES=glibc.mem.tagging=1 set?)");
    /* Checks synchronous, whatever glibc chose. */
    CHECK_SYS(set_ctrl(PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | (ctrl & PR_MTE_TAG_MASK)));
    memset(p, 1, 32);
    char *q = malloc(32);
    if (!overflow) free(p);
    catch_segv();
    if (sigsetjmp(back, 1) == 0) {
        volatile char *v = p;
        __asm__("" : "+r"(v)); /* the compiler must not see the bug it would warn about */
        v[overflow ? 32 : 0] = 2;
        CHECK(0, "the %s went through", overflow ? "overflow" : "use after free");
    }
    CHECK(got_code == SEGV_MTESERR, "si_code %d", got_code);
    printf("    %s caught: SEGV_MTESERR\n", overflow ? "buffer overflow" : "use after free");
    (void)q;
}
static void malloc_use_after_free(void) { malloc_case(0); }
static void malloc_overflow(void) { malloc_case(1); }

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case tests[] = {
        {"hwcap", hwcap},
        {"prctl_controls", prctl_controls},
        {"fresh_pages_have_zero_tags", fresh_pages_have_zero_tags},
        {"granules_keep_own_tags", granules_keep_own_tags},
        {"sync_fault", sync_fault},
        {"async_fault", async_fault},
        {"tags_survive_fork", tags_survive_fork},
        {"memfd_shares_tags", memfd_shares_tags},
        {"mprotect_adds_mte_for_good", mprotect_adds_mte_for_good},
        {"prot_mte_where_refused", prot_mte_where_refused},
        {"syscalls_take_tagged_pointers", syscalls_take_tagged_pointers},
        {"memory_calls_take_tagged_ranges", memory_calls_take_tagged_ranges},
        {"aliasing_calls_refuse_tags", aliasing_calls_refuse_tags},
        {"expose_tagbits", expose_tagbits},
        {"malloc_use_after_free", malloc_use_after_free},
        {"malloc_overflow", malloc_overflow},
    };
    return run_cases_apart(tests, sizeof tests / sizeof tests[0], argc, argv, 20);
}
