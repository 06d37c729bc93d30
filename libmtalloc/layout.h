/*
 * layout.h - what the core knows about each kernel handle: where its
 * parameters lie, its name, where it came from. See layout.c.
 */
#ifndef MT_LAYOUT_H
#define MT_LAYOUT_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

/* What a handle is, as the hook that saw it made says. */
enum {
  MT_FN_FUNCTION = 0, /* a CUfunction (or a handle first seen at a launch) */
  MT_FN_KERNEL = 1,   /* a CUkernel (cuLibraryGetKernel, cuLibraryEnumerateKernels) */
};

typedef struct mt_layout {
  uintptr_t handle;          /* the CUfunction or CUkernel, as launched */
  struct mt_layout *next;    /* hash chain */
  uint8_t kind;              /* MT_FN_* */
  bool vouched;              /* a hook saw it made, so kind and owner are sure */
  bool built;                /* the driver has been asked (layout_build) */
  bool known;                /* a parameter query answered; n may be 0 */
  uintptr_t owner;           /* CUlibrary or CUmodule it belongs to; 0 = unknown */
  uintptr_t kernel;          /* a function from cuKernelGetFunction: its CUkernel */
  const char *name;          /* the driver's name, or anon */
  char anon[40];             /* "(unnamed kernel 0x...)" */
  uint32_t n;                /* parameters */
  uint32_t *off, *size;      /* bytes: offset in the parameter buffer, size */
} mt_layout_t;

/* A hook saw handle made: kind MT_FN_*, owner the library or module (0 when
 * not known; a function from cuKernelGetFunction passes its kernel and
 * inherits the kernel's owner). A handle already known with another kind
 * or owner is a new object at a reused address: its old layout is dropped. */
void _mt_layout_note(uintptr_t handle, int kind, uintptr_t owner, uintptr_t kernel);
/* The library or module owner is being (or was) unloaded: forget every
 * handle it owns, and every handle whose owner is unknown (it may be one of
 * them), so a new kernel at a reused address is asked afresh. */
void _mt_layout_unload(uintptr_t owner);

/* The layout of f, built on first use, with the layout lock held until
 * _mt_layout_release (an unload on another thread must not free it while
 * the launch scans). Counts launches_unknown_layout. NULL only when out of
 * memory (also released by _mt_layout_release). Lock order: the pager lock,
 * then this one. */
mt_layout_t *_mt_layout_acquire(CUfunction f);
void _mt_layout_release(void);
/* f's name for messages: the driver's, or "(unnamed kernel 0x...)". The
 * string lives until f's library or module is unloaded. */
const char *_mt_layout_name(CUfunction f);

#endif
