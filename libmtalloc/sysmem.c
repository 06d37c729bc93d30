/*
 * sysmem.c - how much memory this process may really use.
 *
 * The default host budget (MT_MAX_HOST=0) is three quarters of the memory
 * the process may use. Physical RAM is the wrong answer inside a container:
 * a cgroup memory limit (cgroup v2 memory.max, v1 memory.limit_in_bytes)
 * kills the process long before RAM runs out, and pinned host copies count
 * against it. So the answer is the smaller of RAM and the limit of the
 * process's own cgroup, found through /proc/self/cgroup ("0::/path" for
 * v2, "N:...memory...:/path" for v1) under /sys/fs/cgroup, falling back to
 * the cgroup root's files (what a container usually sees of its own
 * limit). "max" (v2) or a value at least RAM (v1's "unlimited" is a huge
 * number) means no limit.
 *
 * Everything takes a root folder ("/" in use, a temporary tree in the unit
 * tests), so the parsing is tested without a cgroup.
 *
 * Threading: pure functions and file reads; no state.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

int _mt_cgroup_value(const char *text, uint64_t *out) {
  while (*text == ' ' || *text == '\t') text++;
  if (strncmp(text, "max", 3) == 0 && (text[3] == '\0' || text[3] == '\n')) {
    *out = UINT64_MAX;
    return 0;
  }
  if (*text < '0' || *text > '9') return -EINVAL;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || (*end != '\0' && *end != '\n')) return -EINVAL;
  *out = (uint64_t)v;
  return 0;
}

int _mt_cgroup_path(const char *proc_cgroup, int version, char *out, size_t n) {
  const char *line = proc_cgroup;
  while (line != NULL && *line != '\0') {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    const char *c1 = memchr(line, ':', len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (c2 != NULL) {
      size_t ctl_len = (size_t)(c2 - c1 - 1);
      bool match = false;
      if (version == 2) {
        match = strncmp(line, "0:", 2) == 0 && ctl_len == 0;
      } else { /* v1: "memory" among the comma-separated controllers */
        const char *c = c1 + 1;
        while (c < c2 && !match) {
          const char *comma = memchr(c, ',', (size_t)(c2 - c));
          const char *e = comma ? comma : c2;
          match = (size_t)(e - c) == 6 && strncmp(c, "memory", 6) == 0;
          c = e + 1;
        }
      }
      if (match) {
        size_t plen = len - (size_t)(c2 + 1 - line);
        if (plen + 1 > n) return -ENAMETOOLONG;
        memcpy(out, c2 + 1, plen);
        out[plen] = '\0';
        return 0;
      }
    }
    line = eol ? eol + 1 : NULL;
  }
  return -ENOENT;
}

/* Reads a whole small file into buf; 0 or -errno. */
static int read_small(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return -errno;
  size_t got = fread(buf, 1, n - 1, f);
  fclose(f);
  buf[got] = '\0';
  return 0;
}

/* The limit in file `name` of the cgroup at `cg` under `base`, or of the
 * root; UINT64_MAX when there is none. */
static uint64_t limit_in(const char *root, const char *base, const char *cg, const char *name) {
  char path[4096], text[64];
  uint64_t v;
  if (cg != NULL) {
    snprintf(path, sizeof(path), "%s%s%s/%s", root, base, strcmp(cg, "/") == 0 ? "" : cg, name);
    if (read_small(path, text, sizeof(text)) == 0 && _mt_cgroup_value(text, &v) == 0) return v;
  }
  snprintf(path, sizeof(path), "%s%s/%s", root, base, name);
  if (read_small(path, text, sizeof(text)) == 0 && _mt_cgroup_value(text, &v) == 0) return v;
  return UINT64_MAX;
}

size_t _mt_sysmem_limit_at(const char *root, size_t phys) {
  char path[4096], self[8192], cg[4096];
  snprintf(path, sizeof(path), "%s/proc/self/cgroup", root);
  if (read_small(path, self, sizeof(self)) < 0) self[0] = '\0';
  uint64_t lim = limit_in(root, "/sys/fs/cgroup", _mt_cgroup_path(self, 2, cg, sizeof(cg)) == 0 ? cg : NULL,
                          "memory.max");
  if (lim == UINT64_MAX)
    lim = limit_in(root, "/sys/fs/cgroup/memory", _mt_cgroup_path(self, 1, cg, sizeof(cg)) == 0 ? cg : NULL,
                   "memory.limit_in_bytes");
  return lim < (uint64_t)phys ? (size_t)lim : phys;
}

size_t _mt_sysmem_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  size_t phys = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)64 << 30;
  return _mt_sysmem_limit_at("", phys);
}

/* ---- NUMA placement without libnuma ----------------------------------------
 * mbind(2) through syscall(2): the GPU build links libnuma's headers only
 * (meson.build, static_deps), so mtalloc calls the kernel directly. */
int _mt_mem_place_on_node(void *p, size_t len, int node) {
  if (node < 0) return 0;
  unsigned long mask[16] = {0};
  if (node >= (int)(sizeof(mask) * 8)) return -EINVAL;
  mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
  if (syscall(SYS_mbind, p, len, MPOL_PREFERRED, mask, sizeof(mask) * 8 + 1, 0) != 0)
    return -errno;
  return 0;
}
