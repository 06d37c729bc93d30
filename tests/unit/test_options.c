/* Description: the options table: every type's accepted and rejected forms,
 * defaults, the environment source flag, and the one-line bad-value message. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "policy.h"
#include "predictor.h"

Test(parse, size_forms) {
  uint64_t v;
  cr_assert_eq(_mt_parse_size("0", &v), 0); cr_assert_eq(v, 0);
  cr_assert_eq(_mt_parse_size("123", &v), 0); cr_assert_eq(v, 123);
  cr_assert_eq(_mt_parse_size("64K", &v), 0); cr_assert_eq(v, 65536);
  cr_assert_eq(_mt_parse_size("64k", &v), 0); cr_assert_eq(v, 65536);
  cr_assert_eq(_mt_parse_size("2M", &v), 0); cr_assert_eq(v, 2u << 20);
  cr_assert_eq(_mt_parse_size("2MiB", &v), 0); cr_assert_eq(v, 2u << 20);
  cr_assert_eq(_mt_parse_size("2mb", &v), 0); cr_assert_eq(v, 2u << 20);
  cr_assert_eq(_mt_parse_size("24G", &v), 0); cr_assert_eq(v, 24ull << 30);
  cr_assert_eq(_mt_parse_size("3T", &v), 0); cr_assert_eq(v, 3ull << 40);
  cr_assert_eq(_mt_parse_size("512B", &v), 0); cr_assert_eq(v, 512);
}

Test(parse, size_rejects) {
  uint64_t v = 77;
  const char *bad[] = {"", "G", "-1", "1.5G", "12Q", "1GG", "1 G", " 1", "1Gx", "0x10", "1iB"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_eq(_mt_parse_size(bad[i], &v), -EINVAL, "accepted \"%s\"", bad[i]);
  cr_assert_eq(_mt_parse_size("99999999999999999999", &v), -ERANGE);
  cr_assert_eq(_mt_parse_size("16777216T", &v), -ERANGE);
  cr_assert_eq(v, 77, "a rejected value must not be stored");
}

Test(parse, bool_forms) {
  bool b;
  const char *yes[] = {"1", "on", "ON", "yes", "Yes", "true", "TRUE"};
  const char *no[] = {"0", "off", "Off", "no", "NO", "false", "False"};
  for (size_t i = 0; i < 7; i++) {
    b = false; cr_assert_eq(_mt_parse_bool(yes[i], &b), 0); cr_assert(b);
    b = true; cr_assert_eq(_mt_parse_bool(no[i], &b), 0); cr_assert(!b);
  }
  const char *bad[] = {"", "2", "y", "n", "onn", "truee", " 1"};
  for (size_t i = 0; i < 7; i++) cr_assert_eq(_mt_parse_bool(bad[i], &b), -EINVAL, "%s", bad[i]);
}

Test(parse, int_forms) {
  int64_t v;
  cr_assert_eq(_mt_parse_int("0", -5, 5, &v), 0); cr_assert_eq(v, 0);
  cr_assert_eq(_mt_parse_int("-5", -5, 5, &v), 0); cr_assert_eq(v, -5);
  cr_assert_eq(_mt_parse_int("+5", -5, 5, &v), 0); cr_assert_eq(v, 5);
  cr_assert_eq(_mt_parse_int("6", -5, 5, &v), -ERANGE);
  cr_assert_eq(_mt_parse_int("-6", -5, 5, &v), -ERANGE);
  cr_assert_eq(_mt_parse_int("", 0, 5, &v), -EINVAL);
  cr_assert_eq(_mt_parse_int("-", 0, 5, &v), -EINVAL);
  cr_assert_eq(_mt_parse_int("3x", 0, 5, &v), -EINVAL);
  cr_assert_eq(_mt_parse_int("1e3", 0, 5000, &v), -EINVAL);
  cr_assert_eq(_mt_parse_int("99999999999999999999", INT64_MIN, INT64_MAX, &v), -ERANGE);
  cr_assert_eq(_mt_parse_int("-9223372036854775808", INT64_MIN, INT64_MAX, &v), 0);
  cr_assert_eq(v, INT64_MIN);
}

Test(env, lookup_exact_name) {
  char *env[] = {"MT_MAX_VRAMX=1", "MT_MAX_VRAM=5G", "MT_MAX=2", NULL};
  cr_assert_str_eq(_mt_env_lookup(env, "MT_MAX_VRAM"), "5G");
  cr_assert_null(_mt_env_lookup(env, "MT_MAX_HOST"));
  cr_assert_null(_mt_env_lookup(NULL, "MT_MAX_HOST"));
}

/* Loads envp with the log captured in a pipe; returns what was logged. */
static int load_captured(char **envp, char *out, size_t len) {
  int p[2];
  cr_assert_eq(pipe(p), 0);
  _mt_log_configure(MT_LOG_WARN, p[1]);
  /* MT_VERBOSE/MT_LOG in envp reconfigure the level; keep the fd. */
  int bad = _mt_options_load(envp);
  _mt_log_configure(_mt_log_level(), -1);
  close(p[1]);
  ssize_t n = read(p[0], out, len - 1);
  out[n < 0 ? 0 : n] = '\0';
  close(p[0]);
  return bad;
}

Test(options, defaults_without_env) {
  char *env[] = {"PATH=/bin", NULL};
  char log[4096];
  cr_assert_eq(load_captured(env, log, sizeof(log)), 0);
  cr_assert_str_empty(log);
  cr_assert_eq(_mt_opt_int(MT_OPT_MAX_VRAM), 0);
  cr_assert_eq(_mt_opt_int(MT_OPT_CHUNK), 2 << 20);
  cr_assert_eq(_mt_opt_int(MT_OPT_SMALL_REGION), 1 << 20);
  cr_assert_eq(_mt_opt_int(MT_OPT_PREDICTOR_MEM), MT_PREDICTOR_MEM_DEFAULT, "the table's \"32M\" is predictor.h's");
  cr_assert_eq(_mt_opt_int(MT_OPT_VERBOSE), 1);
  cr_assert_eq(_mt_opt_int(MT_OPT_NUMA_NODE), -1);
  cr_assert_eq(_mt_opt_int(MT_OPT_STATS), 0);
  cr_assert_str_eq(_mt_opt_str(MT_OPT_OFFLOAD_DIR), "");
  for (int i = 0; i < MT_OPT__COUNT; i++) cr_assert(!_mt_opt_from_env((mt_opt_t)i));
}

Test(options, values_from_env) {
  char *env[] = {"MT_MAX_VRAM=10G", "MT_MAX_HOST=512M", "MT_OFFLOAD_DIR=/tmp/x",
                 "MT_STATS=yes", "MT_PREFETCH_DEPTH=3", "MT_NUMA_NODE=-1",
                 "MT_POLICY=LRU", "MT_THREADS=4", NULL};
  char log[4096];
  cr_assert_eq(load_captured(env, log, sizeof(log)), 0);
  /* good values, each configuring a part that is built: no warning */
  cr_assert(strstr(log, "MT_OFFLOAD_DIR") == NULL, "%s", log); /* the NVMe tier is built */
  cr_assert(strstr(log, "MT_PREFETCH_DEPTH") == NULL, "%s", log); /* prefetch.c uses it */
  cr_assert(strstr(log, "MT_THREADS") == NULL, "%s", log); /* the host optimizer's pool */
  cr_assert(strstr(log, "MT_MAX_VRAM") == NULL, "%s", log);
  cr_assert_eq(_mt_opt_int(MT_OPT_MAX_VRAM), 10ll << 30);
  cr_assert_eq(_mt_opt_int(MT_OPT_MAX_HOST), 512ll << 20);
  cr_assert_str_eq(_mt_opt_str(MT_OPT_OFFLOAD_DIR), "/tmp/x");
  cr_assert_eq(_mt_opt_int(MT_OPT_STATS), 1);
  cr_assert_eq(_mt_opt_int(MT_OPT_PREFETCH_DEPTH), 3);
  cr_assert_eq(_mt_opt_int(MT_OPT_POLICY), 1); /* nextuse|lru: case-insensitive */
  cr_assert_not_null(_mt_policy_find(_mt_opt_str(MT_OPT_POLICY)), "the pager finds \"LRU\" too");
  cr_assert_eq(_mt_opt_int(MT_OPT_THREADS), 4);
  cr_assert(_mt_opt_from_env(MT_OPT_MAX_VRAM));
  cr_assert(!_mt_opt_from_env(MT_OPT_CHUNK));
}

Test(options, bad_values_one_line_each_and_default_kept) {
  char *env[] = {"MT_MAX_VRAM=12Q", "MT_STATS=maybe", "MT_PREFETCH_DEPTH=5000",
                 "MT_POLICY=fifo", "MT_CHUNK=2M", NULL};
  char log[8192];
  cr_assert_eq(load_captured(env, log, sizeof(log)), 4);
  cr_assert_eq(_mt_opt_int(MT_OPT_MAX_VRAM), 0);
  cr_assert_eq(_mt_opt_int(MT_OPT_STATS), 0);
  cr_assert_eq(_mt_opt_int(MT_OPT_PREFETCH_DEPTH), 8);
  cr_assert_eq(_mt_opt_int(MT_OPT_POLICY), 0); /* the default, nextuse */
  cr_assert(!_mt_opt_from_env(MT_OPT_MAX_VRAM));
  int lines = 0;
  for (char *p = log; *p; p++) lines += *p == '\n';
  cr_assert_eq(lines, 4, "log was:\n%s", log);
  cr_assert(strstr(log, "mtalloc: warning: MT_MAX_VRAM=\"12Q\" is not valid: use a number of bytes") != NULL, "%s", log);
  cr_assert(strstr(log, "using the default 0") != NULL);
  cr_assert(strstr(log, "MT_STATS=\"maybe\" is not valid: use 1/0, on/off") != NULL);
  cr_assert(strstr(log, "MT_PREFETCH_DEPTH=\"5000\" is not valid: use a whole number from 0 to 1024") != NULL);
  cr_assert(strstr(log, "MT_POLICY=\"fifo\" is not valid: use one of: nextuse,lru") != NULL);
}

Test(options, long_string_rejected) {
  static char big[2100];
  memcpy(big, "MT_OFFLOAD_DIR=", 15);
  memset(big + 15, 'a', sizeof(big) - 16);
  char *env[] = {big, NULL};
  char log[4096];
  cr_assert_eq(load_captured(env, log, sizeof(log)), 1);
  cr_assert_str_eq(_mt_opt_str(MT_OPT_OFFLOAD_DIR), "");
  cr_assert(strstr(log, "MT_OFFLOAD_DIR=") != NULL);
}

Test(options, public_text_lookup) {
  char *env[] = {"MT_MAX_VRAM=1K", "MT_STATS=true", NULL};
  char log[1024];
  load_captured(env, log, sizeof(log));
  char buf[64];
  cr_assert_eq(mt_option_text("max_vram", buf, sizeof(buf)), 4);
  cr_assert_str_eq(buf, "1024");
  cr_assert_eq(mt_option_text("MT_STATS", buf, sizeof(buf)), 2);
  cr_assert_str_eq(buf, "on");
  cr_assert_eq(mt_option_text("nope", buf, sizeof(buf)), -ENOENT);
  cr_assert_eq(mt_option_text("max_vram", buf, 2), -ENOSPC);
}

Test(options, show_config_prints_every_option) {
  char *env[] = {"MT_MAX_VRAM=3G", "MT_VERBOSE=0", NULL};
  char log[1024];
  load_captured(env, log, sizeof(log));
  int p[2];
  cr_assert_eq(pipe(p), 0);
  _mt_log_configure(0, p[1]);
  mt_show_config();
  _mt_log_configure(1, -1);
  close(p[1]);
  static char out[65536];
  ssize_t n = read(p[0], out, sizeof(out) - 1);
  out[n < 0 ? 0 : n] = '\0';
  close(p[0]);
  for (int i = 0; i < MT_OPT__COUNT; i++)
    cr_assert(strstr(out, _mt_opt_name((mt_opt_t)i)) != NULL, "missing %s", _mt_opt_name((mt_opt_t)i));
  cr_assert(strstr(out, "3221225472") != NULL);
  cr_assert(strstr(out, "env") != NULL);
}
