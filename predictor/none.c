/*
 * none.c - the predictor that predicts nothing: the pager fetches on demand.
 * The baseline every other predictor is measured against (MT_PREDICTOR=none).
 * It still counts what it observes, so stats read the same for every
 * predictor.
 */
#include <stdlib.h>

#include "predictor.h"

struct mt_predictor {
  uint64_t observed;
};

static mt_predictor_t *none_create(const mt_predictor_config_t *cfg) {
  (void)cfg;
  return calloc(1, sizeof(mt_predictor_t));
}

static void none_destroy(mt_predictor_t *p) {
  free(p);
}

static bool none_observe(mt_predictor_t *p, uint64_t id, const uint64_t *keys, size_t n) {
  (void)id, (void)keys, (void)n;
  p->observed++;
  return false;
}

static size_t none_predict(mt_predictor_t *p, mt_pred_launch_t *out, size_t max) {
  (void)p, (void)out, (void)max;
  return 0;
}

static size_t none_view(mt_predictor_t *p, size_t max, mt_pred_view_t *v) {
  (void)p, (void)max;
  *v = (mt_pred_view_t){.scale = 1.0};
  return 0;
}

static void none_stats(const mt_predictor_t *p, mt_predictor_stats_t *out) {
  *out = (mt_predictor_stats_t){.observed = p->observed, .table_bytes = sizeof(*p)};
}

const mt_predictor_ops_t _mt_predictor_none = {
  .name = "none",
  .create = none_create,
  .destroy = none_destroy,
  .observe = none_observe,
  .predict = none_predict,
  .view = none_view,
  .stats = none_stats,
};
