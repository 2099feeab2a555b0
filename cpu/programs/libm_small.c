/* A small <math.h> program for the compiled CPU with 64 KiB of RAM (docs/CPU-MODEL.md 5): not in the
   program table (it needs the 64 KiB model); tests/cpu/test_cpu_libm.py checks it on unicorn. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* a few <math.h> calls, their results printed as the bits of the doubles (exact to compare) */
static void out(const char *name, double x) {
    union { double f; uint64_t i; } u = {x};
    printf("%s %08lx%08lx\n", name, (unsigned long)(u.i >> 32), (unsigned long)(u.i & 0xffffffffu));
}

int main(void) {
    volatile double two = 2.0, one = 1.0, ten = 10.0, half = 0.5;
    out("sqrt(2)", sqrt(two));
    out("sin(1)", sin(one));
    out("exp(1)", exp(one));
    out("log(10)", log(ten));
    out("atan(0.5)", atan(half));
    out("pow(2,0.5)", pow(two, half));
    return 0;
}
