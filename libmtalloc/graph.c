/*
 * graph.c - footprints of CUDA graphs.
 *
 * A launch captured into a graph does not run when it is issued, so it
 * needs no residency then; what it needs is recorded, by region address,
 * against the capturing stream. At the end of capture the list moves to the
 * graph, at instantiation it is copied to the executable graph, and before
 * each cuGraphLaunch the regions still alive at those addresses are made
 * resident and held like one launch's footprint. Graphs are few, so a list
 * of records is enough.
 *
 * Threading: under the pager lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager.h"
#include "pager_internal.h"

enum { FP_CAPTURE, FP_GRAPH, FP_EXEC };

typedef struct mt_graph_fp {
  struct mt_graph_fp *next;
  int kind;
  mt_handle_t h;           /* stream (capture), graph or exec */
  uintptr_t *addr;
  size_t n, cap;
} mt_graph_fp_t;

static mt_graph_fp_t *find(mt_pager_t *p, int kind, mt_handle_t h) {
  for (mt_graph_fp_t *g = p->graphs; g; g = g->next)
    if (g->kind == kind && g->h == h) return g;
  return NULL;
}

static mt_graph_fp_t *add(mt_pager_t *p, int kind, mt_handle_t h) {
  mt_graph_fp_t *g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->kind = kind;
  g->h = h;
  g->next = p->graphs;
  p->graphs = g;
  return g;
}

static void drop(mt_pager_t *p, mt_graph_fp_t *g) {
  for (mt_graph_fp_t **pp = &p->graphs; *pp; pp = &(*pp)->next) {
    if (*pp == g) {
      *pp = g->next;
      free(g->addr);
      free(g);
      return;
    }
  }
}

bool _mt_capturing(mt_pager_t *p, mt_handle_t s) {
  return p->graphs != NULL && find(p, FP_CAPTURE, s) != NULL;
}

void _mt_capture_add(mt_pager_t *p, mt_handle_t s, uintptr_t a) {
  mt_graph_fp_t *g = find(p, FP_CAPTURE, s);
  if (g == NULL) return;
  for (size_t i = 0; i < g->n; i++)
    if (g->addr[i] == a) return;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    uintptr_t *na = realloc(g->addr, cap * sizeof(*na));
    if (na == NULL) {
      mt_error("out of memory recording a graph's footprint; its launch may fault");
      return;
    }
    g->addr = na;
    g->cap = cap;
  }
  g->addr[g->n++] = a;
}

void _mt_capture_begin(mt_handle_t s) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  if (find(p, FP_CAPTURE, s) == NULL) add(p, FP_CAPTURE, s);
  pthread_mutex_unlock(&p->lock);
}

void _mt_capture_end(mt_handle_t s, mt_handle_t graph) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g = find(p, FP_CAPTURE, s);
  if (g != NULL) {
    if (graph != 0) {
      g->kind = FP_GRAPH;
      g->h = graph;
    } else {
      drop(p, g);
    }
  }
  pthread_mutex_unlock(&p->lock);
}

void _mt_graph_instantiated(mt_handle_t graph, mt_handle_t exec) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g = find(p, FP_GRAPH, graph);
  if (g != NULL) {
    mt_graph_fp_t *e = add(p, FP_EXEC, exec);
    if (e != NULL && g->n > 0) {
      e->addr = malloc(g->n * sizeof(uintptr_t));
      if (e->addr) {
        memcpy(e->addr, g->addr, g->n * sizeof(uintptr_t));
        e->n = e->cap = g->n;
      }
    }
  }
  pthread_mutex_unlock(&p->lock);
}

void _mt_graph_destroyed(mt_handle_t h) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g;
  while ((g = find(p, FP_GRAPH, h)) != NULL || (g = find(p, FP_EXEC, h)) != NULL) drop(p, g);
  pthread_mutex_unlock(&p->lock);
}

int _mt_graph_launch(mt_handle_t exec, mt_handle_t s, mt_forward_fn fwd, void *ctx) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return fwd(ctx);
  mt_stat_add(launches, 1);
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g = find(p, FP_EXEC, exec);
  int rc = _mt_launch_regions(p, g ? g->addr : NULL, g ? g->n : 0, s, fwd, ctx, "graph launch");
  pthread_mutex_unlock(&p->lock);
  return rc;
}

void _mt_stream_destroyed(mt_handle_t s) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  _mt_stream_retire(p, s);
  mt_graph_fp_t *g = find(p, FP_CAPTURE, s);
  if (g) drop(p, g);
  pthread_mutex_unlock(&p->lock);
}
