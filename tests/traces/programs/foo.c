// libfoo.so: the one shared library of hello-musl-lib (a musl program that loads a library).
int foo_add(int a, int b) { return a + b; }
