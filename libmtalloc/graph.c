/*
 * graph.c - footprints of CUDA graphs, and what the pager does while a
 * stream capture is active.
 *
 * Work captured into a graph (launches, copies, sets) does not run when it
 * is issued, so it needs no residency then; what it needs is recorded, by
 * region address, against the capturing stream. At the end of capture the
 * list moves to the graph, at instantiation it is copied to the executable
 * graph, and before each cuGraphLaunch the regions still alive at those
 * addresses are made resident and held like one launch's footprint. Graphs
 * are few, so a list of records is enough.
 *
 * While any capture is active, on any thread (the default global capture
 * mode forbids other threads' unsafe calls too, and the pager cannot know
 * each thread's mode):
 *   - no event is queried or waited for (streams.c): holds not known to be
 *     complete count as in flight, so deferred frees stay deferred and
 *     eviction takes only chunks that need neither a copy nor a wait;
 *   - captured work changes no mapping: it joins the capture's footprint
 *     and is forwarded as it is, with nothing fetched or evicted for it;
 *   - allocations made on the capturing stream (cuMemAllocAsync and
 *     friends, as PyTorch's graph pools do) belong to the capture. The graph
 *     replays into them at their capture-time addresses, so when the
 *     program frees one, even inside the capture, it stays allocated (its
 *     address is not handed out again) until the graph and every
 *     executable graph made from it are destroyed; only then is it freed,
 *     after the replays in flight.
 * The capture-time allocations are shared by the graph and its executable
 * graphs through one reference-counted `mt_graph_own_t`.
 *
 * Threading: under the pager lock; the final frees are made after it is
 * released (they take it again).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pager.h"
#include "pager_internal.h"

enum { FP_CAPTURE, FP_GRAPH, FP_EXEC };

typedef struct addr_list {
  uintptr_t *a;
  size_t n, cap;
} addr_list_t;

/* Allocations made on a capturing stream: shared by the capture record, then
 * by its graph and every exec made from it (refs counts them). */
typedef struct mt_graph_own {
  unsigned refs;
  addr_list_t born;        /* allocated during the capture, still the program's */
  addr_list_t kept;        /* freed by the program, kept for the graph's replays */
} mt_graph_own_t;

typedef struct mt_graph_fp {
  struct mt_graph_fp *next;
  int kind;
  mt_handle_t h;           /* stream (capture), graph or exec */
  uintptr_t *addr;
  size_t n, cap;
  mt_graph_own_t *own;     /* NULL until something is allocated in the capture */
} mt_graph_fp_t;

static bool list_add(addr_list_t *l, uintptr_t a) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    uintptr_t *na = realloc(l->a, cap * sizeof(*na));
    if (na == NULL) return false;
    l->a = na;
    l->cap = cap;
  }
  l->a[l->n++] = a;
  return true;
}

/* Removes a from l; false when it is not there. */
static bool list_del(addr_list_t *l, uintptr_t a) {
  for (size_t i = 0; i < l->n; i++) {
    if (l->a[i] == a) {
      l->a[i] = l->a[--l->n];
      return true;
    }
  }
  return false;
}

/* Drops one reference; at the last, hands the kept addresses to the caller
 * (*out, to free once the lock is released). */
static void own_put(mt_graph_own_t *o, addr_list_t *out) {
  if (o == NULL || --o->refs > 0) return;
  for (size_t i = 0; i < o->kept.n; i++)
    if (!list_add(out, o->kept.a[i]))
      mt_warn("out of memory freeing a destroyed graph's allocation at %#lx; it stays allocated",
              (unsigned long)o->kept.a[i]);
  free(o->born.a);
  free(o->kept.a);
  free(o);
}

/* Frees what own_put handed back; called without the lock. */
static void free_kept(addr_list_t *l) {
  for (size_t i = 0; i < l->n; i++) _mt_free(l->a[i], 0, true);
  free(l->a);
}

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
  p->ncaptures += kind == FP_CAPTURE;
  g->next = p->graphs;
  p->graphs = g;
  return g;
}

static void drop(mt_pager_t *p, mt_graph_fp_t *g, addr_list_t *tofree) {
  for (mt_graph_fp_t **pp = &p->graphs; *pp; pp = &(*pp)->next) {
    if (*pp == g) {
      *pp = g->next;
      p->ncaptures -= g->kind == FP_CAPTURE;
      own_put(g->own, tofree);
      free(g->addr);
      free(g);
      return;
    }
  }
}

bool _mt_capturing(mt_pager_t *p, mt_handle_t s) {
  return p->ncaptures > 0 && find(p, FP_CAPTURE, s) != NULL;
}

/* Asked on every allocation, free and eviction: a count, not a walk of the
 * graph list (which also holds every live graph and executable graph). */
bool _mt_capture_active(mt_pager_t *p) {
  return p->ncaptures > 0;
}

void _mt_capture_alloc(mt_handle_t s, uintptr_t addr) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g = p->graphs ? find(p, FP_CAPTURE, s) : NULL;
  if (g != NULL && g->own == NULL && (g->own = calloc(1, sizeof(*g->own))) != NULL) g->own->refs = 1;
  if (g != NULL && (g->own == NULL || !list_add(&g->own->born, addr)))
    mt_warn("out of memory recording an allocation made during stream capture (%#lx); a graph "
            "replay may write into its next owner", (unsigned long)addr);
  pthread_mutex_unlock(&p->lock);
}

int _mt_graph_keep(mt_pager_t *p, uintptr_t addr) {
  for (mt_graph_fp_t *g = p->graphs; g; g = g->next) {
    mt_graph_own_t *o = g->own;
    if (o == NULL) continue;
    if (list_del(&o->born, addr)) {
      if (list_add(&o->kept, addr)) return 1;
      mt_warn("out of memory keeping %#lx for the graph that allocated it; freed now",
              (unsigned long)addr);
      return 0;
    }
    for (size_t i = 0; i < o->kept.n; i++)
      if (o->kept.a[i] == addr) return -EINVAL; /* freed twice */
  }
  return 0;
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

void _mt_capture_range(mt_pager_t *p, mt_handle_t s, uintptr_t a, size_t n) {
  while (n > 0) {
    mt_region_t *r = _mt_region_of(p, a);
    if (r == NULL) return; /* not ours, or a gap: the driver judges the rest */
    _mt_capture_add(p, s, r->addr);
    size_t left = r->addr + r->size > a ? r->addr + r->size - a : 0;
    if (left == 0 || left >= n) return;
    a += left;
    n -= left;
  }
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
  addr_list_t tofree = {0};
  mt_graph_fp_t *g = find(p, FP_CAPTURE, s);
  if (g != NULL) {
    if (graph != 0) {
      g->kind = FP_GRAPH;
      g->h = graph;
      p->ncaptures--;
    } else {
      drop(p, g, &tofree); /* the capture failed: nothing will replay into them */
    }
  }
  pthread_mutex_unlock(&p->lock);
  free_kept(&tofree);
}

void _mt_graph_instantiated(mt_handle_t graph, mt_handle_t exec) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g = find(p, FP_GRAPH, graph);
  if (g != NULL) {
    mt_graph_fp_t *e = add(p, FP_EXEC, exec);
    if (e != NULL && g->own != NULL) {
      e->own = g->own;
      e->own->refs++;
    }
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
  addr_list_t tofree = {0};
  mt_graph_fp_t *g;
  while ((g = find(p, FP_GRAPH, h)) != NULL || (g = find(p, FP_EXEC, h)) != NULL) drop(p, g, &tofree);
  pthread_mutex_unlock(&p->lock);
  free_kept(&tofree);
}

int _mt_graph_launch(mt_handle_t exec, mt_handle_t s, mt_forward_fn fwd, void *ctx) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return fwd(ctx);
  mt_stat_add(launches, 1);
  pthread_mutex_lock(&p->lock);
  mt_graph_fp_t *g = find(p, FP_EXEC, exec);
  int rc;
  if (_mt_capturing(p, s)) { /* a graph launched inside a capture: a child graph */
    for (size_t i = 0; g != NULL && i < g->n; i++) _mt_capture_add(p, s, g->addr[i]);
    rc = fwd(ctx);
  } else {
    rc = _mt_launch_regions(p, g ? g->addr : NULL, NULL, g ? g->n : 0, s, exec, fwd, ctx, "graph launch");
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

void _mt_stream_destroyed(mt_handle_t s) {
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  _mt_stream_retire(p, s);
  addr_list_t tofree = {0};
  mt_graph_fp_t *g = find(p, FP_CAPTURE, s);
  if (g) drop(p, g, &tofree);
  pthread_mutex_unlock(&p->lock);
  free_kept(&tofree);
}
