/*
 * policy.c - the policies by name (MT_POLICY, mt-trace replay --policy).
 */
#include <stddef.h>
#include <strings.h>

#include "policy.h"

const mt_policy_ops_t *_mt_policy_find(const char *name) {
  static const mt_policy_ops_t *const all[] = {&_mt_policy_lru, &_mt_policy_nextuse};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    if (strcasecmp(name, all[i]->name) == 0) return all[i]; /* as MT_POLICY accepts it */
  return NULL;
}
