/*
 * ucs_assert() and ucs_assertv() as UCX defines them in its
 * <ucs/debug/assert.h>, which no UCX release installs. They test what UCX's
 * do: live when ENABLE_ASSERT is defined (configure --enable-debug defines it
 * for uct-tm's code), nothing at all otherwise -- the expression is not even
 * evaluated. A failed assertion is UCX's fatal error: the message, a
 * backtrace as UCX_HANDLE_ERRORS says, abort.
 */
#ifndef UCT_TM_COMMON_UCS_ASSERT_H_
#define UCT_TM_COMMON_UCS_ASSERT_H_

#include <ucs/sys/compiler_def.h>

#ifndef ucs_assert

BEGIN_C_DECLS
/* libucs exports it in every release (1.13 to 1.22) */
void ucs_fatal_error_format(const char *file, unsigned line, const char *function,
                            const char *format, ...) UCS_F_NORETURN UCS_F_PRINTF(4, 5);
END_C_DECLS

#define ucs_assert_always(_expression) \
    do { \
        if (!ucs_likely(_expression)) { \
            ucs_fatal_error_format(__FILE__, __LINE__, __FUNCTION__, "Assertion `%s' failed", \
                                   #_expression); \
        } \
    } while (0)

#define ucs_assertv_always(_expression, _fmt, ...) \
    do { \
        if (!ucs_likely(_expression)) { \
            ucs_fatal_error_format(__FILE__, __LINE__, __FUNCTION__, \
                                   "Assertion `%s' failed: " _fmt, #_expression, ##__VA_ARGS__); \
        } \
    } while (0)

#if defined(ENABLE_ASSERT)
#define ucs_assert(...)  ucs_assert_always(__VA_ARGS__)
#define ucs_assertv(...) ucs_assertv_always(__VA_ARGS__)
#else
#define ucs_assert(...)
#define ucs_assertv(...)
#endif

#endif /* ucs_assert */

#endif
