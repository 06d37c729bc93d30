/*
 * common.h - what summary, timeline and plot share: a time-ordered record
 * stream over the trace reader, the per-chunk residency bookkeeping, a u64
 * hash map, and small output helpers.
 *
 * Record order. The recorder writes records from per-thread buffers, so the
 * file is only roughly in time order: a record can follow records up to about
 * a flush interval (1 s) newer than itself. mtt_next() therefore hands records
 * out through a min-heap on (t_ns, file order) that holds a window of
 * MTT_SORT_WINDOW_NS of trace time (at most MTT_SORT_MAX records), which puts
 * every record of a recorded trace back in time order while still streaming a
 * file of any size in bounded memory. A record later than the window is
 * handed out late, not dropped.
 *
 * Residency bookkeeping (mtt_book_*). The trace says where chunks move, not
 * where they are, so the tools replay the moves, per (region, chunk):
 *   - a FETCH or EVICT puts the chunk in its destination tier (to = NONE:
 *     nowhere); the chunk's size is the record's bytes;
 *   - a launch that touches a chunk never seen before (or dropped to NONE)
 *     puts it on the GPU (first use allocates it there); a span of 0 bytes
 *     means the whole region;
 *   - a small region (ALLOC flag MT_TRF_SMALL) counts its bytes on the GPU
 *     from ALLOC to FREE and has no chunks (it is packed and never moves);
 *   - FREE drops every chunk of the region.
 * GPU residency is then the bytes of chunks in the GPU tier, host residency
 * those in the host tier, NVMe those in the NVMe tier. Records that disagree
 * with the bookkeeping (a chunk beyond its region, an unknown tier or
 * direction) are counted and reported once as a warning, never fatal.
 *
 * Prefetch outcomes. A FETCH to the GPU flagged MT_TRF_PREFETCH leaves the
 * chunk "pending" with the fetch time and the caller's tag (mtt_book.tag at
 * that moment). The first launch that touches a pending chunk makes it
 * "used", and "timely" when the fetch time <= the launch time; an eviction,
 * another fetch or a FREE first makes it unused. A launch that touches a
 * chunk still off the GPU marks it awaited, so a prefetch that lands after
 * the launch that needed it is counted as used but late.
 *
 * Not thread-safe; one stream and one book per command.
 */
#ifndef MTT_COMMON_H
#define MTT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace_io.h"

#define MTT_SORT_WINDOW_NS 2000000000ull /* 2 s of trace time: twice the recorder's flush interval */
#define MTT_SORT_MAX (1u << 20)          /* records held for sorting at most */

/* ---- time-ordered record stream ---- */
typedef struct mtt_stream mtt_stream_t;

/* Opens path for subcommand cmd (for messages and the progress bar). Returns
 * 0, or prints one message ("mt-trace CMD: FILE: byte N: ...") and returns
 * the exit code (2). The caller closes the stream. */
int mtt_open(const char *cmd, const char *path, mtt_stream_t **out);
const mt_trace_header_t *mtt_header(const mtt_stream_t *s);
/* The next record in time order: 1 (rec valid until the next call, off its
 * byte offset in the file), 0 at the end, or -1 after printing the reader's
 * message (bad trace: exit 2). */
int mtt_next(mtt_stream_t *s, const mt_trace_rec_t **rec, uint64_t *off);
/* Records read so far. */
uint64_t mtt_count(const mtt_stream_t *s);
void mtt_close(mtt_stream_t *s);

/* When a record ends: t_ns + dur for launches, end_ns for spans (never before
 * t_ns), t_ns for the rest. */
uint64_t mtt_rec_end(const mt_trace_rec_t *rec);

/* ---- u64 -> pointer hash map (values never NULL) ---- */
typedef struct mtt_map {
  uint64_t *keys;
  void **vals;
  size_t cap, n;                 /* cap: power of two; n: live entries */
} mtt_map_t;

void *mtt_map_get(const mtt_map_t *m, uint64_t key);
/* Returns 0 or -ENOMEM. Replaces an existing value. */
int mtt_map_put(mtt_map_t *m, uint64_t key, void *val);
/* Removes key and returns its value (NULL when absent). */
void *mtt_map_del(mtt_map_t *m, uint64_t key);
/* Calls fn on every value; then frees the table (not the values). */
void mtt_map_free(mtt_map_t *m, void (*fn)(void *));

/* ---- residency bookkeeping ---- */
enum { MTT_NTIERS = 4 };         /* indexed by MT_TIER_*; [MT_TIER_NONE] unused */

typedef struct mtt_book mtt_book_t;
/* Called when a pending prefetch is resolved by a launch (used) - with the
 * tag it was fetched under and whether it arrived in time. */
typedef void (*mtt_prefetch_fn)(void *ctx, uint32_t tag, bool timely);

/* chunk_bytes: the header's (0: 2 MiB). Returns NULL on ENOMEM. */
mtt_book_t *mtt_book_new(uint64_t chunk_bytes, mtt_prefetch_fn fn, void *ctx);
/* Applies one record. Returns 0, or -ENOMEM. */
int mtt_book_apply(mtt_book_t *b, const mt_trace_rec_t *rec, uint64_t off);
/* Current bytes per tier, indexed by MT_TIER_*. */
const uint64_t *mtt_book_levels(const mtt_book_t *b);
/* Bytes allocated and not freed (ALLOC sizes). */
uint64_t mtt_book_allocated(const mtt_book_t *b);
/* Sets the tag stored with prefetches from now on (summary: the row index). */
void mtt_book_set_tag(mtt_book_t *b, uint32_t tag);
/* Prints one warning when records disagreed with the bookkeeping. */
void mtt_book_warn(const mtt_book_t *b, const char *cmd);
void mtt_book_free(mtt_book_t *b);

/* ---- output helpers ---- */
/* Writes s[0..len) as a JSON string (quoted); invalid UTF-8 becomes U+FFFD. */
void mtt_json_str(FILE *f, const char *s, size_t len);
/* Writes s[0..len) as XML text; invalid UTF-8 and control characters become '?'. */
void mtt_xml_text(FILE *f, const char *s, size_t len);
/* "1.50 GiB", "512 B" into buf; returns buf. */
char *mtt_fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* "1.234 s", "12.500 ms", "3.300 us", "800 ns" into buf; returns buf. */
char *mtt_fmt_ns(char *buf, size_t len, uint64_t ns);
/* Length of a fixed-size NUL-padded header string. */
size_t mtt_strnlen(const char *s, size_t max);

/* Parses a subcommand's arguments with getopt_long's rules. Prints the
 * message for an unknown option or a missing argument. Returns the option
 * character, -1 at the end, or '?' for an error. */
struct option;
int mtt_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts);
/* Writes "mt-trace CMD: msg" and the --help hint to stderr; returns 2. */
int mtt_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The arguments of a "TRACE -o OUT" command (timeline, plot): -1 to go on
 * with *trace and *out set, or the exit code (0 after --help, 2 on a usage
 * error, already reported). example names the output in messages. */
int mtt_trace_to_file_args(const char *cmd, int argc, char **argv, void (*help)(FILE *), const char *example,
                           const char **trace, const char **out);
/* "WHO: FILE:LINE: what" (no LINE when 0) on stderr, for bad input files;
 * returns 2. */
int mtt_input_error(const char *who, const char *path, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
