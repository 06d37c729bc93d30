/*
 * mix.h - splitmix64's finaliser, the one 64-bit mixer the predictor's
 * tables and region keys share: a bijection on 64 bits in which every input
 * bit reaches every output bit, so distinct inputs never collide and hash
 * tables keyed by its output need no further scrambling.
 */
#ifndef MT_PREDICTOR_MIX_H
#define MT_PREDICTOR_MIX_H

#include <stdint.h>

static inline uint64_t _mt_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

#endif
