/*
 * regionkey.c - stable region keys (the contract is in regionkey.h).
 * A splitmix64 finaliser over (kind tag, inputs): cheap, and a bijection
 * on 64 bits, so distinct long-lived ordinals never collide.
 */
#include "regionkey.h"
#include "mix.h"

enum { KIND_LONG = 1, KIND_ITER = 2, KIND_UNBORN = 3 };

uint64_t _mt_regionkey_long_lived(uint64_t ordinal) {
  /* ordinals below 2^62 keep their kind in the top two bits before mixing */
  return _mt_mix64(ordinal ^ ((uint64_t)KIND_LONG << 62));
}

uint64_t _mt_regionkey_per_iteration(uint64_t first_launch, uint32_t slot) {
  return _mt_mix64(_mt_mix64(first_launch) ^ ((uint64_t)KIND_ITER << 62) ^ slot);
}

uint64_t _mt_regionkey_alternative(uint64_t key, uint32_t n) {
  uint64_t k = _mt_mix64(key + (uint64_t)n * 0x9e3779b97f4a7c15ull);
  return k != 0 ? k : 1;
}

uint64_t _mt_regionkey_unborn(uint32_t slot) {
  return _mt_mix64(((uint64_t)KIND_UNBORN << 62) ^ slot);
}
