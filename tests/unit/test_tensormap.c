/* Description: the tensor-map registry (libmtalloc/tensormap.c): a
 * descriptor is found by its bytes wherever they were copied, a byte that
 * differs is another descriptor, a re-encoding of the same bytes takes the
 * new address, and beyond its capacity the oldest descriptors are forgotten
 * while the newest stay. Each test runs in its own process (criterion), so
 * each starts with an empty registry. */
#include <criterion/criterion.h>
#include <string.h>

#include "tensormap.h"

#define CAP 8192 /* MT_TMAP_CAP in tensormap.c */

static void desc_of(unsigned char *d, uint64_t seed) {
  for (int i = 0; i < MT_TMAP_BYTES; i++) d[i] = (unsigned char)(seed * 131 + (uint64_t)i * 7 + (seed >> 8));
  memcpy(d, &seed, sizeof seed);
}

Test(tensormap, empty_finds_nothing) {
  unsigned char d[MT_TMAP_BYTES];
  uintptr_t a = 0;
  desc_of(d, 1);
  cr_expect(!_mt_tmap_any());
  cr_expect(!_mt_tmap_find(d, &a));
}

Test(tensormap, found_by_bytes_anywhere) {
  unsigned char d[MT_TMAP_BYTES], copy[MT_TMAP_BYTES + 8];
  uintptr_t a = 0;
  desc_of(d, 42);
  _mt_tmap_note(d, 0x7000001000);
  cr_expect(_mt_tmap_any());
  memcpy(copy + 8, d, sizeof d); /* copied by value, elsewhere, unaligned */
  cr_assert(_mt_tmap_find(copy + 8, &a));
  cr_expect_eq(a, 0x7000001000);
  copy[8 + 77] ^= 1;
  cr_expect(!_mt_tmap_find(copy + 8, &a), "one differing byte is another descriptor");
}

Test(tensormap, same_bytes_new_address) {
  unsigned char d[MT_TMAP_BYTES];
  uintptr_t a = 0;
  desc_of(d, 7);
  _mt_tmap_note(d, 0x1000);
  _mt_tmap_note(d, 0x2000);
  cr_assert(_mt_tmap_find(d, &a));
  cr_expect_eq(a, 0x2000);
}

Test(tensormap, oldest_forgotten_beyond_capacity) {
  unsigned char d[MT_TMAP_BYTES];
  uintptr_t a = 0;
  for (uint64_t i = 0; i < CAP + 10; i++) {
    desc_of(d, i + 1);
    _mt_tmap_note(d, 0x100000 + i * 16);
  }
  for (uint64_t i = 0; i < 10; i++) {
    desc_of(d, i + 1);
    cr_expect(!_mt_tmap_find(d, &a), "descriptor %llu should have been forgotten", (unsigned long long)i);
  }
  for (uint64_t i = 10; i < CAP + 10; i += 97) {
    desc_of(d, i + 1);
    cr_assert(_mt_tmap_find(d, &a), "descriptor %llu lost", (unsigned long long)i);
    cr_expect_eq(a, 0x100000 + i * 16);
  }
}
