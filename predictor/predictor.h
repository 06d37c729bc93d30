/*
 * predictor.h - the seam for access-order predictors (DESIGN.md, "The
 * predictor, in one paragraph").
 *
 * A predictor watches the stream of launch identities, each with the region
 * keys of its footprint, and answers which launches come next, with their
 * footprints and a confidence. It is pure logic: no CUDA, no pager, no
 * clock, so `mt-trace replay` and the library can drive the same code.
 *
 * Launch identity: xxh3 of function, grid/block and the footprint's region
 * *keys* (not addresses), computed by the caller.
 *
 * Region keys: a key must name "the same region" in every iteration —
 * allocation order for long-lived regions, (first-touching launch, argument
 * slot) for per-iteration ones; regionkey.h states the contract and
 * computes them. The predictor only compares keys; any 64-bit value is a
 * valid key.
 *
 * Threading: none of its own; one caller at a time (the pager's lock).
 */
#ifndef MT_PREDICTOR_H
#define MT_PREDICTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_predictor mt_predictor_t;

/* One predicted launch. A footprint is the keys of the regions a launch
   used, in slot order; sizes belong to the regions, which the caller
   knows (a predictor that stored them would spend on every reference what
   one number per region says: docs/predictor.md, "A million
   launches in 64 MiB"). */
typedef struct mt_pred_launch {
  uint64_t id;        /* launch identity */
  double confidence;  /* probability estimate in [0, 1] that the stream
                         reaches this launch as predicted; non-increasing
                         along one prediction; 0 only where the product of
                         a deep walk's steps underflowed */
  const uint64_t *keys; /* its last observed footprint's region keys, owned
                         by the predictor, valid until the next observe()
                         or destroy(); NULL when unknown */
  uint32_t nkeys;     /* entries in keys (0 when unknown) */
} mt_pred_launch_t;

/* predict()'s answer without the copy (view()): the launches in at most
   two runs of the predictor's own array, run[0] first, nearest first;
   each launch's confidence is its .confidence divided by scale. */
typedef struct mt_pred_view {
  const mt_pred_launch_t *run[2];
  size_t n[2];
  double scale;
} mt_pred_view_t;

typedef struct mt_predictor_config {
  size_t capacity;          /* table entries; 0 = 65536. Each launch
                               identity takes one entry, and so does each
                               (previous, current) pair whose current
                               launch was seen with more than one
                               successor; cold entries are evicted. */
  size_t footprint_regions; /* region keys kept across all footprints;
                               0 = 4 * capacity */
  size_t max_bytes;         /* nonzero: a bound on the predictor's memory
                               (tables and footprints) instead; it sizes
                               them itself to fit (MT_PREDICTOR_MEM; at
                               least MT_PREDICTOR_MEM_MIN) */
  size_t walk_max;          /* the deepest prediction the predictor keeps
                               and extends from launch to launch (0 =
                               4096; at least 64); deeper ones are walked
                               anew each time */
} mt_predictor_config_t;

/* MT_PREDICTOR_MEM's default (the options table says "32M") and least value. */
#define MT_PREDICTOR_MEM_DEFAULT ((size_t)32 << 20)
#define MT_PREDICTOR_MEM_MIN ((size_t)64 << 10)

typedef struct mt_predictor_stats {
  uint64_t observed;   /* launches observed */
  uint64_t predicted;  /* launches that were the predicted next one */
  uint64_t evictions;  /* table entries replaced by a newer key */
  uint64_t refused;    /* keys given no entry: the table overflowed (a loop
                          longer than it holds keeps the entries it has) */
  uint64_t fp_dropped; /* footprints not kept: the footprints of a loop take
                          more room than the ring has (a share is kept) */
  size_t table_bytes;  /* memory held by tables and footprints */
} mt_predictor_stats_t;

typedef struct mt_predictor_ops {
  const char *name;
  /* Returns a new predictor, or NULL when out of memory. cfg may be NULL
     (defaults). The caller frees it with destroy(). */
  mt_predictor_t *(*create)(const mt_predictor_config_t *cfg);
  void (*destroy)(mt_predictor_t *p);
  /* Observe one launch and its footprint's region keys (copied; keys may
     be NULL when nkeys is 0). Returns true when it was the launch the predictor
     expected next (what predict() would have put first), false on a
     divergence or when there was no prediction. After a divergence the next
     predict() walks from the observed launch: nothing else to do. */
  bool (*observe)(mt_predictor_t *p, uint64_t launch_id, const uint64_t *keys, size_t nkeys);
  /* Fills out[0..max) with the expected next launches, nearest first;
     returns the count (0 when it knows nothing). */
  size_t (*predict)(mt_predictor_t *p, mt_pred_launch_t *out, size_t max);
  /* The same launches predict() would give, up to max (and at most the
     config's walk_max), without copying them: for deep walks asked at every
     launch (the NVMe read-ahead's 1,024), where handing them out cost more
     than finding them. Valid until the next call on p (a deeper predict()
     or view() may move the walk) or destroy(). Returns the count. */
  size_t (*view)(mt_predictor_t *p, size_t max, mt_pred_view_t *v);
  void (*stats)(const mt_predictor_t *p, mt_predictor_stats_t *out);
} mt_predictor_ops_t;

/* The predictor named name ("none", "correlation"), or NULL. */
const mt_predictor_ops_t *_mt_predictor_find(const char *name);

extern const mt_predictor_ops_t _mt_predictor_none;
extern const mt_predictor_ops_t _mt_predictor_correlation;
extern const mt_predictor_ops_t _mt_predictor_context;

#endif
