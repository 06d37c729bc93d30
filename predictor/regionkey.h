/*
 * regionkey.h - stable region keys, the names a launch footprint uses so the
 * same region is recognised in every iteration although its address may
 * change (DESIGN.md, "The predictor, in one paragraph").
 *
 * Two kinds of region, two rules:
 *  - Long-lived (weights, optimizer state): allocated once, in the same
 *    order on every run. Key = f(allocation ordinal), the ordinal counted
 *    by the caller from process start (0 for the first mt region).
 *  - Per-iteration (activations, gradients, workspace freed and reallocated
 *    every step): their allocation order shifts with the allocator's reuse,
 *    but the launch that first writes them does not. Key = f(identity of
 *    the first launch that touched the region since it was allocated, the
 *    argument slot through which it did). That launch's own identity is
 *    built from keys of regions born before, so the definition is well
 *    founded, and it needs no mt_mark_iteration(): "this iteration" is
 *    "since the region's allocation".
 * The caller decides which rule applies; a reasonable split (the
 * integration's to measure) is: a region allocated before the first
 * launch, or never freed across two launches of the same identity, is
 * long-lived. Until its first touch a per-iteration region has no key; the
 * launch that touches it first computes its identity with the slot's
 * provisional key _mt_regionkey_unborn(slot).
 *
 * Both functions mix their input so keys spread over 64 bits, and tag the
 * kind, so a long-lived key never equals a per-iteration key by
 * construction of small inputs. Two per-iteration regions first touched by
 * the same launch identity through the same slot (two launches of one
 * identity in an iteration, each making a new tensor) would share a key;
 * the caller gives the second one, while the first is alive, the next
 * alternative key (_mt_regionkey_alternative), and so on, in birth order.
 * Births and frees come in the same order every iteration, so each
 * region gets the same key in every iteration. (Before this, the one key
 * named the latest region, and when that died the first one, still alive,
 * had no name the predictor could find: G10's ResNet152 read it on demand
 * from NVMe, 9.6 GB in one launch.)
 *
 * Pure functions; no state, no threading concerns.
 */
#ifndef MT_REGIONKEY_H
#define MT_REGIONKEY_H

#include <stdint.h>

/* The key of the long-lived region allocated ordinal-th (from 0). */
uint64_t _mt_regionkey_long_lived(uint64_t ordinal);

/* The key of a per-iteration region first touched by launch first_launch
   (its identity) through argument slot slot. */
uint64_t _mt_regionkey_per_iteration(uint64_t first_launch, uint32_t slot);

/* The n-th (n >= 1) alternative of per-iteration key key, for a region
   born while another live region holds key: distinct from key and from
   the other alternatives, never 0. */
uint64_t _mt_regionkey_alternative(uint64_t key, uint32_t n);

/* The provisional key of a not-yet-touched per-iteration region passed in
   argument slot slot, used inside the first toucher's identity. */
uint64_t _mt_regionkey_unborn(uint32_t slot);

#endif
