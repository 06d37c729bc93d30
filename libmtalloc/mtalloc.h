/*
 * mtalloc.h - the public API of mtalloc.
 *
 * mtalloc is normally used without any code change (LD_PRELOAD=libmtalloc.so);
 * this header is for programs and framework glue that want to talk to it:
 * read its configuration, mark iterations, read statistics.
 *
 * Conventions: functions return 0 (or a count) on success and -errno on
 * failure, and never set errno. Handles are opaque.
 */
#ifndef MTALLOC_H
#define MTALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_VERSION_MAJOR 0
#define MT_VERSION_MINOR 1
#define MT_VERSION ((MT_VERSION_MAJOR << 16) | MT_VERSION_MINOR)

#if defined(__GNUC__)
#define MT_API __attribute__((visibility("default")))
#else
#define MT_API
#endif

/* An allocation that mtalloc manages (one framework tensor, usually). */
typedef struct mt_region mt_region_t;

/* The library's version, MT_VERSION of the build that is running. Compare it
 * with MT_VERSION of the header a program was built with. */
MT_API int mt_version(void);

/* Copies the effective value of option name (without the MT_ prefix, any
 * case: "max_vram" or "MAX_VRAM") into buf as text, NUL-terminated.
 * Returns the length written, -ENOENT for an unknown name, -ENOSPC when buf
 * is too small. */
MT_API int mt_option_text(const char *name, char *buf, size_t len);

/* Prints the effective options table to mtalloc's log (what MT_SHOW_CONFIG=1
 * prints at start). */
MT_API void mt_show_config(void);

#ifdef __cplusplus
}
#endif
#endif
