/* A dynamically linked musl program: the kernel loads it and musl's dynamic loader, which is
 * musl's libc.so itself (PT_INTERP /lib/ld-musl-aarch64.so.1); it relocates the program and
 * itself, and the program prints what it got. Each line is what Linux 6.1 prints. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

int main(int argc, char **argv) {
    (void)argc;
    printf("hello from a dynamically linked musl program (%s)\n", argv[0]);
    printf("AT_BASE %s, AT_ENTRY %s\n", getauxval(AT_BASE) ? "set" : "0", getauxval(AT_ENTRY) ? "set" : "0");
    Dl_info info;
    if (dladdr((void *)printf, &info) && info.dli_fname)
        printf("printf is in %s\n", strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname);
    char *p = malloc(1 << 20);
    printf("malloc of 1 MiB: %s\n", p ? "ok" : "failed");
    free(p);
    return 0;
}
