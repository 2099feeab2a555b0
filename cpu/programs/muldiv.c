/* muldiv: the M extension's edge cases, executed with inline assembly (in C several of them are
 * undefined behaviour): division by zero (quotient -1 / 2^32-1, remainder = dividend), INT_MIN / -1
 * (quotient INT_MIN, remainder 0), and the high halves of products (mulh, mulhsu, mulhu), which are
 * also checked against long long products. Also Zba's sh1add/sh2add/sh3add. */
#include "runtime.h"

#define OP(name, a, b) ({ int32_t r_; __asm__(#name " %0, %1, %2" : "=r"(r_) : "r"(a), "r"(b)); r_; })

static const int32_t VALUES[][2] = {
    {7, 3}, {-7, 3}, {7, -3}, {-7, -3}, {INT_MIN, -1}, {INT_MIN, 1}, {INT_MAX, -1}, {5, 0}, {-5, 0},
    {0, 0}, {INT_MIN, 0}, {INT_MIN, INT_MIN}, {INT_MAX, INT_MAX}, {-1, -1}, {0x12345678, 0x9abcdef0},
    {0x10000, 0x10000}, {-1, INT_MIN},
};

#ifdef __riscv_zba
#define SH1ADD(a, b) OP(sh1add, a, b)
#define SH2ADD(a, b) OP(sh2add, a, b)
#define SH3ADD(a, b) OP(sh3add, a, b)
#else
#define SH1ADD(a, b) (int32_t)(((uint32_t)(a) << 1) + (uint32_t)(b))
#define SH2ADD(a, b) (int32_t)(((uint32_t)(a) << 2) + (uint32_t)(b))
#define SH3ADD(a, b) (int32_t)(((uint32_t)(a) << 3) + (uint32_t)(b))
#endif

int main(void)
{
    int mismatches = 0;
    int n = sizeof VALUES / sizeof VALUES[0];
    for (int i = 0; i < n; i++) {
        volatile int32_t va = VALUES[i][0], vb = VALUES[i][1];
        int32_t a = va, b = vb;
        int32_t mul = OP(mul, a, b), mulh = OP(mulh, a, b), mulhsu = OP(mulhsu, a, b), mulhu = OP(mulhu, a, b);
        int32_t div = OP(div, a, b), divu = OP(divu, a, b), rem = OP(rem, a, b), remu = OP(remu, a, b);
        printf("%08x %08x: mul %08x mulh %08x mulhsu %08x mulhu %08x div %08x divu %08x rem %08x remu %08x\n",
               a, b, mul, mulh, mulhsu, mulhu, div, divu, rem, remu);
        long long ss = (long long)a * b;
        long long su = (long long)a * (long long)(uint32_t)b;
        unsigned long long uu = (unsigned long long)(uint32_t)a * (uint32_t)b;
        if (mul != (int32_t)ss || mulh != (int32_t)(ss >> 32) || mulhsu != (int32_t)(su >> 32) ||
            mulhu != (int32_t)(uu >> 32))
            mismatches++;
        if (b != 0 && !(a == INT_MIN && b == -1) && (div != a / b || rem != a % b))
            mismatches++;
        if (b != 0 && ((uint32_t)divu != (uint32_t)a / (uint32_t)b || (uint32_t)remu != (uint32_t)a % (uint32_t)b))
            mismatches++;
    }
    printf("mismatches with C: %d\n", mismatches);
    for (int i = 0; i < 4; i++) {
        volatile int32_t va = VALUES[i * 4 + 2][0], vb = VALUES[i * 4 + 3][1];
        int32_t a = va, b = vb;
        printf("zba %08x %08x: sh1add %08x sh2add %08x sh3add %08x\n", a, b, SH1ADD(a, b), SH2ADD(a, b),
               SH3ADD(a, b));
    }
    return mismatches;
}
