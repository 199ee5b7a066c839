// hello-musl-lib: a musl program that calls into libfoo.so (found through LD_LIBRARY_PATH=/t).
#include <stdio.h>
int foo_add(int, int);
int main(void) { printf("foo_add(2, 3) = %d\n", foo_add(2, 3)); return 0; }
