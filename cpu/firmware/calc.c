/* calc: exact integer arithmetic for the RV32IM+Zba machine, the firmware behind the `calc` tool
 * (cpu/tools.py, `netlist2tf chat`).
 *
 * Reads one integer expression from the program's input (stdin: `cpu run calc.c --input FILE`) and
 * prints its exact value and a newline; exit code 0. On an error it prints "error: " and what is
 * wrong, and exits with 1.
 *
 * The language is Python's integer arithmetic, so that Python is the oracle:
 *     expr  := term (('+' | '-') term)*
 *     term  := unary (('*' | '/' | '%') unary)*
 *     unary := ('+' | '-') unary | power
 *     power := atom ('^' unary)?              right-associative, binds tighter than a unary minus on
 *     atom  := DIGITS | '(' expr ')'          its left: -2^2 = -4, 2^-1 is an error, 2^3^2 = 512
 * (leading zeros are allowed: 007 is 7).
 * '/' is floor division (Python's //), '%' its remainder (Python's %: the sign of the divisor), '^'
 * the power (Python's **; 0^0 = 1). Spaces, tabs and newlines between tokens are ignored. Numbers
 * have any length; a result longer than MAX_DIGITS digits, a negative exponent, division by zero,
 * nesting deeper than the stack allows and anything that is not the grammar are errors.
 *
 * Numbers are sign and magnitude, little-endian limbs of base 10^4 (a limb product fits 32 bits and
 * decimal input and output need no division by a variable), allocated from the heap: the RAM left
 * beside the program is the only limit on an operand's length. */
#include <stdint.h>
#include <stdio.h> /* putchar, and stdin: input_data, input_size */
#include <stdlib.h>
#include <string.h>

#define BASE 10000u
#define MAX_DIGITS 1200 /* the longest result of any operator (so of any sub-expression); a multiple of 4 */
#define MAX_LIMBS (MAX_DIGITS / 4)
#define STR_(x) #x
#define STR(x) STR_(x)
#define TOO_LARGE "result too large (more than " STR(MAX_DIGITS) " digits)"

typedef struct {
    int neg;     /* 1: negative (never for zero) */
    int n;       /* limbs in use; 0 for zero; d[n - 1] != 0 */
    uint16_t d[]; /* base-10^4 digits, least significant first */
} num;

static const char *src, *end, *start;
static uintptr_t heap_high; /* the highest address the numbers reach: the stack must stay above it */

/* Console output by stores to the console (runtime.h), without printf: its formatter would take a
 * third of 16 KiB of RAM (the model's RAM when calc was written), and a call per character costs a dozen instructions. */
#define OUT(c) (*(volatile uint8_t *)CONSOLE_ADDR = (uint8_t)(c))

static void say(const char *s)
{
    while (*s)
        OUT(*s++);
}

static void say_int(unsigned v)
{
    char buf[12];
    int k = 0;
    do {
        buf[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        OUT(buf[--k]);
}

static void fail(const char *what)
{
    say("error: ");
    say(what);
    OUT('\n');
    exit(1);
}

static void fail_at(const char *what)
{
    say("error: ");
    say(what);
    if (src < end) {
        say(" at position ");
        say_int((unsigned)(src - start) + 1);
        if (*src > ' ' && *src < 127) {
            say(" ('");
            OUT(*src);
            say("')");
        }
    } else {
        say(" at the end of the expression");
    }
    OUT('\n');
    exit(1);
}

/* One level deeper in the parser: fails before the stack would run into the numbers. */
static void deeper(void)
{
    uintptr_t sp;
    __asm__ volatile("mv %0, sp" : "=r"(sp));
    if (sp < heap_high + 1024)
        fail("expression nested too deeply for the machine's RAM");
}

/* A number with room for `limbs` limbs. No size limit here: a buffer is sized from operands that are
 * results (at most MAX_LIMBS), and the limit is on results (trim, and mul's and power's checks before
 * they compute): a working buffer of the division may be a limb longer than its dividend. The RAM is
 * the only limit of a buffer. */
static num *alloc(int limbs)
{
    size_t size = sizeof(num) + (size_t)(limbs ? limbs : 1) * sizeof(uint16_t);
    num *x = malloc(size);
    if (!x)
        fail("out of memory (the operands are too long for the machine's RAM)");
    if ((uintptr_t)x + size > heap_high)
        heap_high = (uintptr_t)x + size;
    x->neg = 0;
    x->n = 0;
    return x;
}

static num *trim(num *x)
{
    while (x->n && !x->d[x->n - 1])
        x->n--;
    if (!x->n)
        x->neg = 0;
    if (x->n > MAX_LIMBS)
        fail(TOO_LARGE);
    return x;
}

static num *small(uint32_t v)
{
    num *x = alloc(3);
    while (v) {
        x->d[x->n++] = (uint16_t)(v % BASE);
        v /= BASE;
    }
    return x;
}

/* |a| vs |b|: -1, 0, 1 */
static int cmp_mag(const num *a, const num *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->d[i] != b->d[i])
            return a->d[i] < b->d[i] ? -1 : 1;
    return 0;
}

/* |a| + |b| */
static num *add_mag(const num *a, const num *b)
{
    if (a->n < b->n) {
        const num *t = a;
        a = b;
        b = t;
    }
    num *r = alloc(a->n + 1);
    uint32_t carry = 0;
    for (int i = 0; i < a->n; i++) {
        uint32_t t = a->d[i] + (i < b->n ? b->d[i] : 0) + carry;
        carry = t >= BASE;
        r->d[i] = (uint16_t)(carry ? t - BASE : t);
    }
    r->d[a->n] = (uint16_t)carry;
    r->n = a->n + 1;
    return r;
}

/* |a| - |b|, for |a| >= |b| */
static num *sub_mag(const num *a, const num *b)
{
    num *r = alloc(a->n);
    int borrow = 0;
    for (int i = 0; i < a->n; i++) {
        int t = (int)a->d[i] - (i < b->n ? b->d[i] : 0) - borrow;
        borrow = t < 0;
        r->d[i] = (uint16_t)(borrow ? t + (int)BASE : t);
    }
    r->n = a->n;
    return r;
}

/* a + b, or a - b with `minus` */
static num *add(const num *a, const num *b, int minus)
{
    int bneg = b->n ? b->neg ^ minus : 0;
    num *r;
    if (a->neg == bneg) {
        r = add_mag(a, b);
        r->neg = a->neg;
    } else if (cmp_mag(a, b) >= 0) {
        r = sub_mag(a, b);
        r->neg = a->neg;
    } else {
        r = sub_mag(b, a);
        r->neg = bneg;
    }
    return trim(r);
}

/* Carries of a column-sum product: acc[k] -> base-10^4 limbs (from acc[from] up), acc[k] < 10^4 after. */
static void carry_columns(uint32_t *acc, int from, int n)
{
    uint32_t carry = 0;
    for (int k = from; k < n; k++) {
        uint32_t t = acc[k] + carry; /* no overflow: acc[k] <= ROWS * 9999^2 + 9999, carry < 2^32 / 10^4 */
        carry = t / BASE;
        acc[k] = t - carry * BASE;
    }
}

/* Products are summed per column in 32 bits without a carry each (one multiply and add per limb pair);
 * a column holds at most ROWS products of 9999^2 before the carries must be taken out. */
#define ROWS 42 /* 42 * 9999^2 + 2 * 9999 < 2^32 */

static num *mul(const num *a, const num *b)
{
    if (!a->n || !b->n)
        return small(0);
    if (a->n + b->n > MAX_LIMBS + 1)
        fail(TOO_LARGE);
    if (a->n < b->n) { /* fewer, longer rows */
        const num *t = a;
        a = b;
        b = t;
    }
    int n = a->n + b->n;
    num *r = alloc(n);
    uint32_t *acc = malloc((size_t)n * sizeof(uint32_t));
    if (!acc)
        fail("out of memory (the operands are too long for the machine's RAM)");
    if ((uintptr_t)(acc + n) > heap_high)
        heap_high = (uintptr_t)(acc + n);
    memset(acc, 0, (size_t)n * sizeof(uint32_t));
    const uint16_t *ad = a->d, *aend = a->d + a->n;
    for (int i = 0, rows = 0, bn = b->n; i < bn; i++) {
        uint32_t bi = b->d[i];
        uint32_t *out = acc + i;
        for (const uint16_t *p = ad; p < aend; p++)
            *out++ += bi * *p;
        if (++rows == ROWS) {
            carry_columns(acc, i, n);
            rows = 0;
        }
    }
    carry_columns(acc, 0, n);
    for (int k = 0; k < n; k++)
        r->d[k] = (uint16_t)acc[k];
    free(acc);
    r->n = n;
    r->neg = a->neg ^ b->neg;
    return trim(r);
}

/* |b| * q into t (b->n + 1 limbs), for a quotient digit q < BASE */
static void mul_small(num *t, const num *b, uint32_t q)
{
    uint32_t carry = 0;
    for (int i = 0; i < b->n; i++) {
        uint32_t v = b->d[i] * q + carry;
        carry = v / BASE;
        t->d[i] = (uint16_t)(v - carry * BASE);
    }
    t->d[b->n] = (uint16_t)carry;
    t->n = b->n + 1;
    while (t->n && !t->d[t->n - 1])
        t->n--;
}

/* r -= t in place, for |r| >= |t| */
static void sub_in_place(num *r, const num *t)
{
    int borrow = 0;
    for (int i = 0; i < r->n; i++) {
        int v = (int)r->d[i] - (i < t->n ? t->d[i] : 0) - borrow;
        borrow = v < 0;
        r->d[i] = (uint16_t)(borrow ? v + (int)BASE : v);
    }
    while (r->n && !r->d[r->n - 1])
        r->n--;
}

/* |x| * f in place (f < BASE); x has room for one more limb */
static void scale(num *x, uint32_t f)
{
    uint32_t carry = 0;
    for (int i = 0; i < x->n; i++) {
        uint32_t v = x->d[i] * f + carry;
        carry = v / BASE;
        x->d[i] = (uint16_t)(v - carry * BASE);
    }
    if (carry)
        x->d[x->n++] = (uint16_t)carry;
}

/* |x| / f in place, exact (f divides x) */
static void unscale(num *x, uint32_t f)
{
    uint32_t rest = 0;
    for (int i = x->n - 1; i >= 0; i--) {
        uint32_t v = rest * BASE + x->d[i];
        x->d[i] = (uint16_t)(v / f);
        rest = v - x->d[i] * f;
    }
    while (x->n && !x->d[x->n - 1])
        x->n--;
}

static num *copy(const num *a, int room)
{
    num *x = alloc(a->n + room);
    memcpy(x, a, sizeof(num) + (size_t)a->n * sizeof(uint16_t));
    return x;
}

/* Floor division and remainder (Python's // and %): *q = a // b, *m = a % b. Schoolbook long division
 * in base 10^4 (Knuth's algorithm D): both operands scaled so that the divisor's top limb is at least
 * BASE / 2, each quotient digit estimated from the remainder's top two limbs (at most 2 too large)
 * and corrected down. The scaled dividend may have a limb more than MAX_LIMBS: only the results are
 * limited (trim), and they are never longer than the operands. */
static void divmod(const num *a, const num *b, num **q, num **m)
{
    if (!b->n)
        fail("division by zero");
    uint32_t f = BASE / (b->d[b->n - 1] + 1u);
    num *u = copy(a, 1), *v = copy(b, 1);
    scale(u, f);
    scale(v, f);
    int n = v->n;
    uint32_t top = v->d[n - 1];
    /* The quotient's digit i replaces u's limb i, which step i reads last: u becomes the quotient (a
     * buffer less in a small RAM). rem < v before each step, so rem * BASE + u->d[i] has at most
     * n + 1 limbs. */
    num *quo = u, *rem = alloc(n + 1), *t = alloc(n + 1);
    for (int i = u->n - 1; i >= 0; i--) {
        if (rem->n || u->d[i]) { /* rem = rem * BASE + u->d[i] */
            memmove(rem->d + 1, rem->d, (size_t)rem->n * sizeof(uint16_t));
            rem->d[0] = u->d[i];
            rem->n++;
        }
        uint32_t qd = 0;
        if (cmp_mag(rem, v) >= 0) {
            /* rem < v * BASE: it has n or n + 1 limbs */
            uint32_t head = rem->n > n ? (uint32_t)rem->d[n] * BASE + rem->d[n - 1] : rem->d[n - 1];
            qd = head / top;
            if (qd >= BASE)
                qd = BASE - 1;
            mul_small(t, v, qd);
            while (cmp_mag(t, rem) > 0) {
                qd--;
                mul_small(t, v, qd);
            }
            sub_in_place(rem, t);
        }
        quo->d[i] = (uint16_t)qd;
    }
    unscale(rem, f);
    free(t);
    free(v);
    quo->neg = a->neg ^ b->neg;
    rem->neg = a->neg;
    trim(quo);
    trim(rem);
    if (rem->n && a->neg != b->neg) { /* floor: q - 1, r + b */
        num *one = small(1), *q1 = add(quo, one, 1), *r1 = add(rem, b, 0);
        free(one);
        free(quo);
        free(rem);
        quo = q1;
        rem = r1;
    }
    *q = quo;
    *m = rem;
}

static num *power(const num *a, const num *e)
{
    if (e->neg)
        fail("negative exponent (the result is not an integer)");
    if (!e->n)
        return small(1);
    if (!a->n)
        return small(0);
    if (a->n == 1 && a->d[0] == 1) { /* 1 or -1 */
        num *r = small(1);
        r->neg = a->neg && (e->d[0] & 1);
        return r;
    }
    /* |a| >= 2: the exponent must be small enough for MAX_DIGITS */
    if (e->n > 1 || e->d[0] > MAX_DIGITS * 4)
        fail(TOO_LARGE);
    uint32_t k = e->d[0];
    num *r = small(1), *sq = copy(a, 0);
    for (;;) {
        if (k & 1) {
            num *t = mul(r, sq);
            free(r);
            r = t;
        }
        k >>= 1;
        if (!k)
            break;
        num *t = mul(sq, sq);
        free(sq);
        sq = t;
    }
    free(sq);
    return r;
}

static void skip_space(void)
{
    const char *p = src; /* a local: the global would be stored at every step */
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    src = p;
}

static num *expr(void);

static num *atom(void)
{
    skip_space();
    if (src < end && *src == '(') {
        deeper();
        src++;
        num *x = expr();
        skip_space();
        if (src >= end || *src != ')')
            fail_at("expected ')'");
        src++;
        return x;
    }
    if (src >= end || (unsigned)(*src - '0') > 9)
        fail_at("expected a number or '('");
    const char *first = src, *p = src;
    while (p < end && (unsigned)(*p - '0') <= 9)
        p++;
    src = p;
    while (first < src - 1 && *first == '0') /* leading zeros */
        first++;
    int digits = (int)(src - first);
    if (digits > MAX_DIGITS)
        fail("number too long (more than " STR(MAX_DIGITS) " digits)");
    int limbs = (digits + 3) / 4;
    num *x = alloc(limbs);
    x->n = limbs;
    uint32_t v = 0; /* the top limb: the first 1-4 digits */
    for (const char *stop = first + (digits - 4 * (limbs - 1)); first < stop; first++)
        v = v * 10 + (uint32_t)(*first - '0');
    x->d[limbs - 1] = (uint16_t)v;
    for (int i = limbs - 2; i >= 0; i--, first += 4) /* the rest four at a time */
        x->d[i] = (uint16_t)((((uint32_t)first[0] * 10 + first[1]) * 10 + first[2]) * 10 + first[3] - '0' * 1111u);
    return trim(x);
}

static num *unary(void);

static num *pow_expr(void)
{
    num *x = atom();
    skip_space();
    if (src < end && *src == '^') {
        src++;
        deeper();
        num *e = unary();
        num *r = power(x, e);
        free(x);
        free(e);
        return r;
    }
    return x;
}

static num *unary(void)
{
    skip_space();
    if (src < end && (*src == '-' || *src == '+')) {
        int minus = *src++ == '-';
        deeper();
        num *x = unary();
        if (minus && x->n)
            x->neg ^= 1;
        return x;
    }
    return pow_expr();
}

static num *term(void)
{
    num *x = unary();
    for (;;) {
        skip_space();
        if (src >= end || (*src != '*' && *src != '/' && *src != '%'))
            return x;
        char op = *src++;
        num *y = unary(), *r;
        if (op == '*') {
            r = mul(x, y);
        } else {
            num *q, *m;
            divmod(x, y, &q, &m);
            if (op == '/') {
                free(m);
                r = q;
            } else {
                free(q);
                r = m;
            }
        }
        free(x);
        free(y);
        x = r;
    }
}

static num *expr(void)
{
    num *x = term();
    for (;;) {
        skip_space();
        if (src >= end || (*src != '+' && *src != '-'))
            return x;
        int minus = *src++ == '-';
        num *y = term(), *r = add(x, y, minus);
        free(x);
        free(y);
        x = r;
    }
}

/* The four decimal digits of a limb v < 10^4, most significant first: f = v * ceil(2^28 / 10^4) is
 * v / 10^4 as a 28-bit fraction (too large by less than 2^28 / 10^4 * 2e-5, never a whole digit),
 * and each digit is the integer part of ten times the rest: shifts and adds, no division. */
static void four_digits(uint32_t v, int skip_zeros)
{
    uint32_t f = v * 26844u;
    for (int k = 0; k < 4; k++) {
        f = (f << 3) + (f << 1);
        uint32_t digit = f >> 28;
        f &= (1u << 28) - 1;
        if (digit || !skip_zeros || k == 3) {
            OUT('0' + digit);
            skip_zeros = 0;
        }
    }
}

static void print(const num *x)
{
    if (!x->n) {
        OUT('0');
    } else {
        if (x->neg)
            OUT('-');
        four_digits(x->d[x->n - 1], 1);
        for (int i = x->n - 2; i >= 0; i--)
            four_digits(x->d[i], 0);
    }
    OUT('\n');
}

int main(void)
{
    start = src = input_data();
    end = src + input_size();
    heap_high = (uintptr_t)end;
    skip_space();
    if (src >= end)
        fail("empty expression");
    num *x = expr();
    skip_space();
    if (src < end)
        fail_at("unexpected character");
    print(x);
    return 0;
}
