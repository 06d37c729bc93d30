/*
 * predictor.h - the seam for access-order predictors (DESIGN.md, "The
 * predictor"). A predictor watches the stream of launch identities and
 * answers which footprints come next. Only the interface exists today: with
 * MT_PREDICTOR=none the pager fetches on demand. The correlation predictor
 * and the prefetcher arrive with their own issue.
 */
#ifndef MT_PREDICTOR_H
#define MT_PREDICTOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_predictor mt_predictor_t;

typedef struct mt_predictor_ops {
  const char *name;
  mt_predictor_t *(*create)(void);
  void (*destroy)(mt_predictor_t *p);
  /* Observe one launch: its identity (xxh3 of function, grid, footprint keys). */
  void (*observe)(mt_predictor_t *p, uint64_t launch_id);
  /* Up to max predicted next launch identities, most likely first; returns the count. */
  size_t (*predict)(mt_predictor_t *p, uint64_t *next, size_t max);
} mt_predictor_ops_t;

#endif
