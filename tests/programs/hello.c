/* hello: the smallest dynamically linked glibc program, built without -static (its interpreter
 * /lib/ld-linux-aarch64.so.1 maps libc.so.6), whose exec to exit scripts/bench times on this
 * kernel and on Linux (tests/programs/dyncost.c `measure`). */
#include <stdio.h>

int main(void) {
    puts("hello, world");
    return 0;
}
