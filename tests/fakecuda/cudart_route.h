/*
 * cudart_route.h - how the test programs reach the driver: exactly as
 * libcudart does. dlopen("libcuda.so.1"), dlsym of cuGetProcAddress_v2
 * only, cuGetProcAddress looked up once more through itself, then every
 * entry point by base name at CUDA 13.0. Under LD_PRELOAD=libmtalloc.so
 * this is the route the interposer must see. The fake's test API
 * (fakecuda_register_kernel, fakecuda_device_peak) comes from dlsym on the
 * same handle, NULL when libcuda.so.1 is not the fake.
 *
 * Header-only (static functions) so that each program stays one file that
 * links nothing but -ldl. Every failure prints "WHO: ..." and exits 1.
 */
#ifndef CUDART_ROUTE_H
#define CUDART_ROUTE_H

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakecuda.h"

#define CUDART_ROUTE_VERSION 13000

typedef CUfunction (*cudart_register_fn)(const char *, fakecuda_kernel_fn, size_t, const size_t *);

typedef struct cudart_route {
  void *handle;
  PFN_cuGetProcAddress_v12000 get_proc;
  cudart_register_fn register_kernel;  /* NULL: not the fake driver */
  size_t (*device_peak)(void);         /* NULL: not the fake driver */
} cudart_route_t;

/* Resolves base name into *slot; exits 1 when the driver lacks it. */
static inline void cudart_route_get(const cudart_route_t *r, const char *who, const char *name, void **slot) {
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult rc = r->get_proc(name, slot, CUDART_ROUTE_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st);
  if (rc != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !*slot) {
    fprintf(stderr, "%s: cuGetProcAddress(\"%s\", %d) failed: result %d, status %d\n", who, name,
            CUDART_ROUTE_VERSION, (int)rc, (int)st);
    exit(1);
  }
}

static inline void cudart_route_open(cudart_route_t *r, const char *who) {
  r->handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!r->handle) {
    fprintf(stderr, "%s: dlopen(libcuda.so.1): %s\n", who, dlerror());
    exit(1);
  }
  r->get_proc = (PFN_cuGetProcAddress_v12000)dlsym(r->handle, "cuGetProcAddress_v2");
  if (!r->get_proc) {
    fprintf(stderr, "%s: libcuda.so.1 has no cuGetProcAddress_v2\n", who);
    exit(1);
  }
  void *self = NULL; /* libcudart re-resolves cuGetProcAddress through itself */
  cudart_route_get(r, who, "cuGetProcAddress", &self);
  r->get_proc = (PFN_cuGetProcAddress_v12000)self;
  r->register_kernel = (cudart_register_fn)dlsym(r->handle, "fakecuda_register_kernel");
  r->device_peak = (size_t (*)(void))dlsym(r->handle, "fakecuda_device_peak");
}

#endif
