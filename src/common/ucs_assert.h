/*
 * UCX's ucs_assert / ucs_assertv for uct-tm's own code: checked in debug
 * builds (configure --enable-debug defines ENABLE_ASSERT), compiled out
 * otherwise, as in UCX. UCX does not install its ucs/debug/assert.h, so the
 * macros are defined here over the function every libucs release exports
 * for them (same signature 1.13 to 1.22): a failed assertion prints file,
 * line, function and message through UCX's fatal-error path (backtrace,
 * UCX_HANDLE_ERRORS) and aborts.
 */
#ifndef UCT_TM_COMMON_UCS_ASSERT_H_
#define UCT_TM_COMMON_UCS_ASSERT_H_

#include <ucs/sys/compiler_def.h>

extern "C" void ucs_fatal_error_format(const char *file, unsigned line, const char *function,
                                       const char *format, ...) UCS_F_NORETURN;

#ifndef ucs_assert
#if defined(ENABLE_ASSERT) && ENABLE_ASSERT
#define ucs_assert(_expression)                                                                    \
    do {                                                                                           \
        if (!ucs_likely(_expression)) {                                                            \
            ucs_fatal_error_format(__FILE__, __LINE__, __func__, "Assertion `%s' failed",          \
                                   #_expression);                                                  \
        }                                                                                          \
    } while (0)
#define ucs_assertv(_expression, _fmt, ...)                                                        \
    do {                                                                                           \
        if (!ucs_likely(_expression)) {                                                            \
            ucs_fatal_error_format(__FILE__, __LINE__, __func__, "Assertion `%s' failed: " _fmt,   \
                                   #_expression, ##__VA_ARGS__);                                   \
        }                                                                                          \
    } while (0)
#else
#define ucs_assert(_expression)             do { (void)sizeof(_expression); } while (0)
#define ucs_assertv(_expression, _fmt, ...) do { (void)sizeof(_expression); } while (0)
#endif
#endif

#endif
