/*
 * predictor.c - the table of predictors, looked up by MT_PREDICTOR's value.
 */
#include <string.h>

#include "predictor.h"

static const mt_predictor_ops_t *const predictors[] = {
  &_mt_predictor_none,
  &_mt_predictor_correlation,
  &_mt_predictor_context,
};

const mt_predictor_ops_t *_mt_predictor_find(const char *name) {
  for (size_t i = 0; i < sizeof(predictors) / sizeof(predictors[0]); i++)
    if (strcmp(predictors[i]->name, name) == 0) return predictors[i];
  return NULL;
}
