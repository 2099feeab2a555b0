/* <assert.h> of the machine's small libc: a failed assert(expr) prints
 * "assertion failed: <expr> (<file>:<line>)" and a newline on the console and exits with code 134
 * (SIGABRT's exit status in a shell). With NDEBUG defined, assert does nothing. No include guard:
 * each inclusion redefines assert according to NDEBUG, as the C standard requires. */
#undef assert
#ifdef NDEBUG
#define assert(expr) ((void)0)
#else
#define assert(expr) ((expr) ? (void)0 : __rt_assert_fail(#expr, __FILE__, __LINE__))
#endif

#ifndef RV32_ASSERT_H
#define RV32_ASSERT_H
void __rt_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#if !defined(__cplusplus) && (!defined(__STDC_VERSION__) || __STDC_VERSION__ < 202311L) && !defined(static_assert)
#define static_assert _Static_assert
#endif
#endif
