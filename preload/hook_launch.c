/*
 * hook_launch.c - kernel launches, streams and graphs. The pager scans each
 * launch's parameters, makes its footprint resident and calls back here to
 * forward the launch (pager.h).
 */
#include "hooks.h"
#include "internal.h"
#include "pager.h"

typedef struct launch_ctx {
  int h;
  int kind;
  CUfunction f;
  unsigned g[3], b[3], shm;
  CUstream s;
  void **params, **extra;
  const CUlaunchConfig *config;
  CUgraphExec exec;
} launch_ctx_t;

enum { L_KERNEL, L_EX, L_COOP, L_GRAPH };

static int forward(void *vctx) {
  launch_ctx_t *c = vctx;
  int h = c->h;
  switch (c->kind) {
    case L_KERNEL:
      return REAL(h, cuLaunchKernel)(c->f, c->g[0], c->g[1], c->g[2], c->b[0], c->b[1], c->b[2], c->shm, c->s,
                                     c->params, c->extra);
    case L_EX: return REAL(h, cuLaunchKernelEx)(c->config, c->f, c->params, c->extra);
    case L_COOP:
      return REAL(h, cuLaunchCooperativeKernel)(c->f, c->g[0], c->g[1], c->g[2], c->b[0], c->b[1], c->b[2],
                                                c->shm, c->s, c->params);
    case L_GRAPH: return REAL(h, cuGraphLaunch)(c->exec, c->s);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult launch(launch_ctx_t *c, int pt) {
  if (!_mt_hooks_init() || _mt_hook_real[c->h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  return _mt_cu_result(_mt_launch(c->f, c->params, c->extra, _mt_stream_of(c->s, pt), forward, c));
}

CUresult impl_launch(int h, int pt, CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                     void **extra) {
  launch_ctx_t c = {.h = h, .kind = L_KERNEL, .f = f, .g = {gridDimX, gridDimY, gridDimZ},
                    .b = {blockDimX, blockDimY, blockDimZ}, .shm = sharedMemBytes, .s = hStream,
                    .params = kernelParams, .extra = extra};
  return launch(&c, pt);
}

CUresult impl_launch_ex(int h, int pt, const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                        void **extra) {
  if (config == NULL) return _mt_hooks_init() && _mt_hook_real[h] ? REAL(h, cuLaunchKernelEx)(config, f, kernelParams, extra)
                                                                  : CUDA_ERROR_NOT_INITIALIZED;
  launch_ctx_t c = {.h = h, .kind = L_EX, .f = f, .s = config->hStream, .params = kernelParams,
                    .extra = extra, .config = config};
  return launch(&c, pt);
}

CUresult impl_launch_coop(int h, int pt, CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                          unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                          void **kernelParams) {
  launch_ctx_t c = {.h = h, .kind = L_COOP, .f = f, .g = {gridDimX, gridDimY, gridDimZ},
                    .b = {blockDimX, blockDimY, blockDimZ}, .shm = sharedMemBytes, .s = hStream,
                    .params = kernelParams};
  return launch(&c, pt);
}

CUresult impl_graph_launch(int h, int pt, CUgraphExec hGraphExec, CUstream hStream) {
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  launch_ctx_t c = {.h = h, .kind = L_GRAPH, .s = hStream, .exec = hGraphExec};
  return _mt_cu_result(_mt_graph_launch((mt_handle_t)(uintptr_t)hGraphExec, _mt_stream_of(hStream, pt), forward, &c));
}

CUresult impl_stream_destroy(int h, int pt, CUstream hStream) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  _mt_stream_destroyed((mt_handle_t)(uintptr_t)hStream);
  return REAL(h, cuStreamDestroy_v2)(hStream);
}

CUresult impl_begin_capture(int h, int pt, CUstream hStream, CUstreamCaptureMode mode) {
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  /* The pager must know of every capture (graph.c), and cannot start inside one. */
  _mt_pager_start();
  CUresult rc = REAL(h, cuStreamBeginCapture_v2)(hStream, mode);
  if (rc == CUDA_SUCCESS) _mt_capture_begin(_mt_stream_of(hStream, pt));
  return rc;
}

CUresult impl_end_capture(int h, int pt, CUstream hStream, CUgraph *phGraph) {
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuStreamEndCapture)(hStream, phGraph);
  _mt_capture_end(_mt_stream_of(hStream, pt),
                  rc == CUDA_SUCCESS && phGraph ? (mt_handle_t)(uintptr_t)*phGraph : 0);
  return rc;
}

CUresult impl_graph_inst(int h, int pt, CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuGraphInstantiateWithFlags)(phGraphExec, hGraph, flags);
  if (rc == CUDA_SUCCESS) _mt_graph_instantiated((mt_handle_t)(uintptr_t)hGraph, (mt_handle_t)(uintptr_t)*phGraphExec);
  return rc;
}

CUresult impl_graph_inst_params(int h, int pt, CUgraphExec *phGraphExec, CUgraph hGraph,
                                CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = REAL(h, cuGraphInstantiateWithParams)(phGraphExec, hGraph, instantiateParams);
  if (rc == CUDA_SUCCESS) _mt_graph_instantiated((mt_handle_t)(uintptr_t)hGraph, (mt_handle_t)(uintptr_t)*phGraphExec);
  return rc;
}

CUresult impl_graph_exec_destroy(int h, int pt, CUgraphExec hGraphExec) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  _mt_graph_destroyed((mt_handle_t)(uintptr_t)hGraphExec);
  return REAL(h, cuGraphExecDestroy)(hGraphExec);
}

CUresult impl_graph_destroy(int h, int pt, CUgraph hGraph) {
  (void)pt;
  if (!_mt_hooks_init() || _mt_hook_real[h] == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  _mt_graph_destroyed((mt_handle_t)(uintptr_t)hGraph);
  return REAL(h, cuGraphDestroy)(hGraph);
}
