/*
 * memabi: mremap, mincore, msync and the mlock family checked from EL0 against the Linux arm64
 * ABI (numbers, errno values), with the TLB and frame cost of moving 64 MiB read from
 * SYS_MM_STATS. Freestanding (no libc): raw system calls, so the program depends on nothing
 * but the calls it tests. Build: aarch64-linux-gnu-gcc -static -nostdlib -ffreestanding -O2.
 * Prints "memabi: N checks, 0 failed" and exits 0 when every check holds.
 */
typedef unsigned long u64;
typedef long i64;

static i64 sys6(u64 n, u64 a, u64 b, u64 c, u64 d, u64 e, u64 f) {
    register u64 x8 __asm__("x8") = n;
    register u64 x0 __asm__("x0") = a;
    register u64 x1 __asm__("x1") = b;
    register u64 x2 __asm__("x2") = c;
    register u64 x3 __asm__("x3") = d;
    register u64 x4 __asm__("x4") = e;
    register u64 x5 __asm__("x5") = f;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return (i64)x0;
}
#define S(n, a, b, c, d, e) sys6(n, (u64)(a), (u64)(b), (u64)(c), (u64)(d), (u64)(e), 0)

enum { WRITE = 64, EXIT_GROUP = 94, MUNMAP = 215, MREMAP = 216, MMAP = 222, MSYNC = 227, MLOCK = 228,
       MUNLOCK = 229, MLOCKALL = 230, MUNLOCKALL = 231, MINCORE = 232, MADVISE = 233, MLOCK2 = 284,
       MM_STATS = 1002 };
enum { EPERM = 1, EAGAIN = 11, ENOMEM = 12, EFAULT = 14, EBUSY = 16, EINVAL = 22 };
#define PAGE 4096UL
#define MIB (1UL << 20)

static u64 slen(const char *s) { u64 n = 0; while (s[n]) n++; return n; }
static void puts_(const char *s) { S(WRITE, 1, s, slen(s), 0, 0); }
static void putu(u64 v) {
    char b[24]; int i = 23; b[i] = 0;
    do { b[--i] = '0' + v % 10; v /= 10; } while (v);
    puts_(b + i);
}
static void puti(i64 v) { if (v < 0) { puts_("-"); putu((u64)-v); } else putu((u64)v); }

static u64 checks, failed;
static void check(int ok, const char *what, i64 got) {
    checks++;
    if (!ok) { failed++; puts_("memabi: FAIL "); puts_(what); puts_(" (got "); puti(got); puts_(")\n"); }
}
#define EQ(expr, want, what) do { i64 r_ = (expr); check(r_ == (i64)(want), what, r_); } while (0)

static u64 anon(u64 addr, u64 len, u64 flags) { return (u64)S(MMAP, addr, len, 3, 0x22 | flags, -1); }

struct stats { u64 tlbi[8], promotions, demotions, page_faults, folds, unfolds, data_frames, table_frames, free_frames; };
static u64 tlbis(const struct stats *s) { u64 n = 0; for (int i = 0; i < 8; i++) n += s->tlbi[i]; return n; }

static void test_mremap_64m(void) {
    u64 len = 64 * MIB;
    u64 a = anon(0, len, 0x8000 /* MAP_POPULATE */);
    check(a < (1UL << 48), "mmap 64 MiB", (i64)a);
    for (u64 i = 0; i < 64; i++) *(volatile u64 *)(a + i * MIB + 8) = i * 7 + 1;
    EQ(anon(a + len, PAGE, 0x10 /* MAP_FIXED */), a + len, "blocker after the area");
    struct stats s0, s1;
    EQ(S(MM_STATS, &s0, sizeof s0, 0, 0, 0), sizeof s0, "SYS_MM_STATS before");
    u64 b = (u64)S(MREMAP, a, len, len + 2 * MIB, 1 /* MAYMOVE */, 0);
    EQ(S(MM_STATS, &s1, sizeof s1, 0, 0, 0), sizeof s1, "SYS_MM_STATS after");
    check(b != a && b < (1UL << 48), "mremap MAYMOVE moved", (i64)b);
    puts_("memabi: 64 MiB mremap: TLBIs "); putu(tlbis(&s1) - tlbis(&s0));
    puts_(", data frames "); putu(s0.data_frames); puts_(" -> "); putu(s1.data_frames);
    puts_(", page faults "); putu(s1.page_faults - s0.page_faults); puts_("\n");
    check(s1.data_frames == s0.data_frames, "no data frame allocated by the move", (i64)(s1.data_frames - s0.data_frames));
    int same = 1;
    for (u64 i = 0; i < 64; i++) same &= *(volatile u64 *)(b + i * MIB + 8) == i * 7 + 1;
    check(same, "data preserved at the new address", 0);
    unsigned char v[4];
    EQ(S(MINCORE, a, PAGE, v, 0, 0), -ENOMEM, "old address unmapped after the move");
    EQ(*(volatile u64 *)(b + len), 0, "grown part reads zero");
    EQ(S(MUNMAP, b, len + 2 * MIB, 0, 0, 0), 0, "munmap moved area");
    EQ(S(MUNMAP, a + len, PAGE, 0, 0, 0), 0, "munmap blocker");
}

static void test_mremap_errno(void) {
    u64 a = anon(0, 8 * PAGE, 0);
    EQ(S(MREMAP, a, PAGE, PAGE, 8, 0), -EINVAL, "mremap unknown flag");
    EQ(S(MREMAP, a, PAGE, PAGE, 2, 0x500000000000UL), -EINVAL, "mremap FIXED without MAYMOVE");
    EQ(S(MREMAP, a, PAGE, 2 * PAGE, 5, 0), -EINVAL, "mremap DONTUNMAP resizing");
    EQ(S(MREMAP, a + 1, PAGE, PAGE, 0, 0), -EINVAL, "mremap unaligned");
    EQ(S(MREMAP, a, PAGE, 0, 0, 0), -EINVAL, "mremap new_len 0");
    EQ(S(MREMAP, 0x500000000000UL, PAGE, 2 * PAGE, 1, 0), -EFAULT, "mremap nothing mapped");
    EQ(S(MREMAP, a, 16 * PAGE, 32 * PAGE, 1, 0), -EFAULT, "mremap past the mapping");
    EQ(S(MREMAP, a, 4 * PAGE, 4 * PAGE, 3, a + 2 * PAGE), -EINVAL, "mremap FIXED overlapping");
    EQ(S(MREMAP, a, 8 * PAGE, 4 * PAGE, 0, 0), a, "mremap shrink");
    /* DONTUNMAP: the source stays mapped and reads zero. */
    *(volatile u64 *)a = 42;
    u64 b = (u64)S(MREMAP, a, 4 * PAGE, 4 * PAGE, 5, 0);
    check(b != a && b < (1UL << 48), "mremap DONTUNMAP", (i64)b);
    EQ(*(volatile u64 *)b, 42, "DONTUNMAP: data moved");
    EQ(*(volatile u64 *)a, 0, "DONTUNMAP: source reads zero");
    S(MUNMAP, a, 4 * PAGE, 0, 0, 0);
    S(MUNMAP, b, 4 * PAGE, 0, 0, 0);
}

static void test_mincore_msync(void) {
    u64 a = anon(0, 4 * PAGE, 0);
    unsigned char v[4] = { 9, 9, 9, 9 };
    *(volatile char *)(a + PAGE) = 1;
    EQ(S(MINCORE, a, 4 * PAGE, v, 0, 0), 0, "mincore");
    check(v[0] == 0 && v[1] == 1 && v[2] == 0 && v[3] == 0, "mincore: only the touched page", v[1]);
    EQ(S(MADVISE, a, 4 * PAGE, 4, 0, 0), 0, "madvise DONTNEED");
    EQ(S(MINCORE, a, 4 * PAGE, v, 0, 0), 0, "mincore after DONTNEED");
    check(v[1] == 0, "mincore: 0 after DONTNEED", v[1]);
    EQ(S(MINCORE, a + 1, PAGE, v, 0, 0), -EINVAL, "mincore unaligned");
    EQ(S(MINCORE, a, 8 * PAGE, v, 0, 0), -ENOMEM, "mincore hole");
    EQ(S(MINCORE, a, PAGE, 0xffff000000000000UL, 0, 0), -EFAULT, "mincore kernel vec");
    EQ(S(MINCORE, a, PAGE, 0x10, 0, 0), -EFAULT, "mincore unmapped vec");
    EQ(S(MSYNC, a, PAGE, 8, 0, 0), -EINVAL, "msync unknown flag");
    EQ(S(MSYNC, a, PAGE, 5, 0, 0), -EINVAL, "msync ASYNC|SYNC");
    EQ(S(MSYNC, a + 1, PAGE, 4, 0, 0), -EINVAL, "msync unaligned");
    EQ(S(MSYNC, a, 4 * PAGE, 4, 0, 0), 0, "msync");
    EQ(S(MSYNC, a, 8 * PAGE, 4, 0, 0), -ENOMEM, "msync hole");
    S(MUNMAP, a, 4 * PAGE, 0, 0, 0);
}

static void test_mlock(void) {
    u64 a = anon(0, 4 * PAGE, 0);
    unsigned char v[4];
    EQ(S(MLOCK, a, 4 * PAGE, 0, 0, 0), 0, "mlock");
    EQ(S(MINCORE, a, 4 * PAGE, v, 0, 0), 0, "mincore locked");
    check(v[0] && v[1] && v[2] && v[3], "mlock populates", v[0]);
    EQ(S(MADVISE, a, 4 * PAGE, 4, 0, 0), -EINVAL, "DONTNEED on locked memory");
    EQ(S(MSYNC, a, 4 * PAGE, 2, 0, 0), -EBUSY, "MS_INVALIDATE on locked memory");
    EQ(S(MUNLOCK, a, 4 * PAGE, 0, 0, 0), 0, "munlock");
    EQ(S(MADVISE, a, 4 * PAGE, 4, 0, 0), 0, "DONTNEED after munlock");
    EQ(S(MLOCK2, a, 4 * PAGE, 2, 0, 0), -EINVAL, "mlock2 unknown flag");
    EQ(S(MLOCK2, a, 4 * PAGE, 1, 0, 0), 0, "mlock2 ONFAULT");
    EQ(S(MINCORE, a, 4 * PAGE, v, 0, 0), 0, "mincore onfault");
    check(!v[0] && !v[3], "ONFAULT populates nothing", v[0]);
    EQ(S(MLOCK, a - 0x100000000UL, PAGE, 0, 0, 0), -ENOMEM, "mlock unmapped");
    EQ(S(MLOCKALL, 0, 0, 0, 0, 0), -EINVAL, "mlockall 0");
    EQ(S(MLOCKALL, 4, 0, 0, 0, 0), -EINVAL, "mlockall ONFAULT alone");
    EQ(S(MLOCKALL, 1, 0, 0, 0, 0), 0, "mlockall CURRENT");
    EQ(S(MUNLOCKALL, 0, 0, 0, 0, 0), 0, "munlockall");
    S(MUNMAP, a, 4 * PAGE, 0, 0, 0);
}

void _start(void) {
    test_mremap_errno();
    test_mincore_msync();
    test_mlock();
    test_mremap_64m();
    puts_("memabi: "); putu(checks); puts_(" checks, "); putu(failed); puts_(" failed\n");
    S(EXIT_GROUP, failed != 0, 0, 0, 0, 0);
    for (;;) {}
}
