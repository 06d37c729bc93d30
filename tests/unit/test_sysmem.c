/*
 * Description: sysmem.c - the cgroup memory limit behind the default
 * MT_MAX_HOST: limit files, /proc/self/cgroup lines, and whole v1/v2 trees
 * built under a temporary root.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define GiB ((size_t)1 << 30)

Test(sysmem, limit_values) {
  uint64_t v = 0;
  cr_assert_eq(_mt_cgroup_value("max\n", &v), 0);
  cr_assert_eq(v, UINT64_MAX);
  cr_assert_eq(_mt_cgroup_value("8589934592\n", &v), 0);
  cr_assert_eq(v, 8589934592ull);
  cr_assert_eq(_mt_cgroup_value("9223372036854771712", &v), 0); /* v1 "unlimited" */
  cr_assert_eq(v, 9223372036854771712ull);
  cr_assert_eq(_mt_cgroup_value("", &v), -EINVAL);
  cr_assert_eq(_mt_cgroup_value("maximum", &v), -EINVAL);
  cr_assert_eq(_mt_cgroup_value("12k", &v), -EINVAL);
  cr_assert_eq(_mt_cgroup_value("-1", &v), -EINVAL);
}

Test(sysmem, proc_self_cgroup_lines) {
  char out[256];
  const char *v2 = "0::/user.slice/job.scope\n";
  cr_assert_eq(_mt_cgroup_path(v2, 2, out, sizeof(out)), 0);
  cr_assert_str_eq(out, "/user.slice/job.scope");
  cr_assert_eq(_mt_cgroup_path(v2, 1, out, sizeof(out)), -ENOENT);
  const char *v1 = "12:pids:/a\n7:cpu,cpuacct:/b\n4:blkio,memory:/docker/abc\n0::/\n";
  cr_assert_eq(_mt_cgroup_path(v1, 1, out, sizeof(out)), 0);
  cr_assert_str_eq(out, "/docker/abc");
  cr_assert_eq(_mt_cgroup_path(v1, 2, out, sizeof(out)), 0); /* hybrid: the unified line */
  cr_assert_str_eq(out, "/");
  cr_assert_eq(_mt_cgroup_path("3:memoryx:/no\n", 1, out, sizeof(out)), -ENOENT);
  cr_assert_eq(_mt_cgroup_path("", 2, out, sizeof(out)), -ENOENT);
  cr_assert_eq(_mt_cgroup_path(v2, 2, out, 4), -ENAMETOOLONG);
}

static char root[64];

static void put(const char *rel, const char *text) {
  char path[512], cmd[600];
  snprintf(path, sizeof(path), "%s%s", root, rel);
  snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
  cr_assert_eq(system(cmd), 0);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static void fresh_root(void) {
  snprintf(root, sizeof(root), "/tmp/mt-sysmem.XXXXXX");
  cr_assert_not_null(mkdtemp(root));
}

static void drop_root(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  if (system(cmd) != 0) {
  }
}

Test(sysmem, v2_tree, .init = fresh_root, .fini = drop_root) {
  put("/proc/self/cgroup", "0::/job\n");
  put("/sys/fs/cgroup/job/memory.max", "4294967296\n");
  cr_assert_eq(_mt_sysmem_limit_at(root, 64 * GiB), 4 * GiB);
  cr_assert_eq(_mt_sysmem_limit_at(root, 2 * GiB), 2 * GiB, "RAM below the limit wins");
  put("/sys/fs/cgroup/job/memory.max", "max\n");
  cr_assert_eq(_mt_sysmem_limit_at(root, 64 * GiB), 64 * GiB, "max is no limit");
}

Test(sysmem, v2_container_root, .init = fresh_root, .fini = drop_root) {
  /* inside a container /proc/self/cgroup names a path that is not mounted */
  put("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  put("/sys/fs/cgroup/memory.max", "1073741824\n");
  cr_assert_eq(_mt_sysmem_limit_at(root, 64 * GiB), 1 * GiB);
}

Test(sysmem, v1_tree, .init = fresh_root, .fini = drop_root) {
  put("/proc/self/cgroup", "5:memory:/docker/abc\n0::/\n");
  put("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "3221225472\n");
  cr_assert_eq(_mt_sysmem_limit_at(root, 64 * GiB), 3 * GiB);
  put("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
  cr_assert_eq(_mt_sysmem_limit_at(root, 64 * GiB), 64 * GiB, "v1 unlimited");
}

Test(sysmem, no_cgroup_at_all, .init = fresh_root, .fini = drop_root) {
  cr_assert_eq(_mt_sysmem_limit_at(root, 12 * GiB), 12 * GiB);
  cr_assert_gt(_mt_sysmem_limit(), 0);
}
