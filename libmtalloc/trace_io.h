/*
 * trace_io.h - the one reader and the one writer of trace files, shared by
 * the library's recorder and every mt-trace subcommand.
 *
 * The reader checks everything before it hands a record out: magic, version,
 * header size, each record's size against the type's fixed part, the bytes
 * left in the file and the limits in trace_format.h; a bad file gives one
 * message naming the byte offset, never a crash or a huge allocation.
 * Functions return 0 / 1 / -errno as noted; messages go into the reader.
 */
#ifndef MT_TRACE_IO_H
#define MT_TRACE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

typedef struct mt_trace_reader mt_trace_reader_t;

/* Opens path and checks its header. Returns 0, or -errno with the reason in
 * err ("trace.bin: byte 0: not an mtalloc trace (bad magic)"). */
int mt_trace_open(const char *path, mt_trace_reader_t **out, char *err, size_t errlen);
const mt_trace_header_t *mt_trace_header(const mt_trace_reader_t *r);
/* The options text of the header (may be empty), NUL-terminated. */
const char *mt_trace_options(const mt_trace_reader_t *r);
/* The next record, valid until the next call: 1, or 0 at the clean end of
 * the file, or -EINVAL / -EIO with "FILE: byte N: what" in the message
 * (mt_trace_error). A truncated last record is an error, not an end. */
int mt_trace_next(mt_trace_reader_t *r, const mt_trace_rec_t **rec);
/* Byte offset of the record last returned (or of the error). */
uint64_t mt_trace_offset(const mt_trace_reader_t *r);
/* Total file size, for progress bars. */
uint64_t mt_trace_size(const mt_trace_reader_t *r);
const char *mt_trace_error(const mt_trace_reader_t *r);
/* Rewinds to the first record. */
int mt_trace_rewind(mt_trace_reader_t *r);
void mt_trace_close(mt_trace_reader_t *r);

/* The same checks on a record in memory (for the fuzz target and tests),
 * as the current version's: 0 or -EINVAL with a message in err. */
int mt_trace_check_record(const void *rec, size_t avail, char *err, size_t errlen);
/* The same, for a record of a trace of the given version (a version 1
 * LAUNCH has no access kinds). */
int mt_trace_check_record_version(const void *rec, size_t avail, uint32_t version, char *err, size_t errlen);

typedef struct mt_trace_writer mt_trace_writer_t;

/* Creates path (truncating) and writes the header; options may be NULL.
 * Returns 0 or -errno. */
int mt_trace_writer_open(const char *path, const mt_trace_header_t *h, const char *options,
                         mt_trace_writer_t **out);
/* Appends one record; rec->size must be its full size (a multiple of 8).
 * Buffered. Returns 0 or -errno. */
int mt_trace_write(mt_trace_writer_t *w, const mt_trace_rec_t *rec);
/* Helpers that build and append the variable-size records. A launch's
 * size is computed here; kinds holds l->nfoot MT_ACC_* values, or is NULL
 * (every span MT_ACC_UNKNOWN); -EINVAL for a kind outside the enum. */
int mt_trace_write_launch(mt_trace_writer_t *w, const mt_trace_launch_t *l, const mt_trace_span_t *foot,
                          const uint8_t *kinds);
int mt_trace_write_name(mt_trace_writer_t *w, uint64_t t_ns, uint64_t id, const char *name);
/* Writes the buffered records to the file (the recorder calls it at least
 * once a second, so a crash loses little). Returns 0 or -errno. */
int mt_trace_writer_flush(mt_trace_writer_t *w);
/* Flushes and closes; returns 0 or -errno (a full disk shows here). */
int mt_trace_writer_close(mt_trace_writer_t *w);

/* Fills a header with magic, version, sizes and the given fields. */
void mt_trace_header_init(mt_trace_header_t *h, uint32_t clock, const char *source);

#endif
