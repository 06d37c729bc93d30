/*
 * options.c - every MT_* option, read once.
 *
 * The list lives in internal.h (MT_OPTION_LIST); from it come the enum, the
 * table below and the printout, so an option cannot be half-added. Values are
 * read once, at start, from the environment: a getenv per use cost HAMi-core
 * a quarter of its throughput. The environment is scanned through environ
 * directly, with no allocation, because the preload constructor runs before
 * the program's main and possibly before other libraries are initialised.
 *
 * A bad value never stops the program: it is reported with one line naming
 * the variable, the value and the accepted form, and the default is used.
 *
 * Threading: _mt_options_init runs under pthread_once; after it, the values
 * are read-only and readable from any thread without locks.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

extern char **environ;

typedef struct mt_opt_desc {
  const char *name;     /* without the MT_ prefix */
  const char *env;      /* MT_<name> */
  mt_opt_type_t type;
  const char *deflt;    /* default, written as a user would */
  int64_t min, max;     /* INT only */
  const char *choices;  /* CHOICE only, '|' separated */
  const char *unit;
  const char *help;
} mt_opt_desc_t;

static const mt_opt_desc_t opt_table[] = {
#define MT_OPT_DESC(id, type, deflt, min, max, choices, unit, help) \
  {#id, "MT_" #id, MT_OPT_##type, deflt, min, max, choices, unit, help},
    MT_OPTION_LIST(MT_OPT_DESC)
#undef MT_OPT_DESC
};
_Static_assert(sizeof(opt_table) / sizeof(opt_table[0]) == MT_OPT__COUNT,
               "every option in the enum has exactly one table entry");

#define MT_OPT_TEXT_MAX 1024

typedef struct mt_opt_value {
  int64_t num;                  /* INT, SIZE, BOOL, CHOICE */
  char text[MT_OPT_TEXT_MAX];   /* the value as given (or the default) */
  bool from_env;
  bool bad;                     /* the environment had a bad value */
  char bad_text[96];            /* start of the bad value, for the message */
} mt_opt_value_t;

static mt_opt_value_t opt_values[MT_OPT__COUNT];
static _Atomic bool options_loaded;

/* ---- parsers ---------------------------------------------------------------- */

int _mt_parse_int(const char *s, int64_t min, int64_t max, int64_t *out) {
  if (s == NULL || *s == '\0') return -EINVAL;
  const char *p = s;
  bool neg = false;
  if (*p == '-' || *p == '+') neg = (*p++ == '-');
  if (!isdigit((unsigned char)*p)) return -EINVAL;
  uint64_t v = 0;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -ERANGE;
    v = v * 10 + d;
  }
  if (*p != '\0') return -EINVAL;
  if (!neg && v > (uint64_t)INT64_MAX) return -ERANGE;
  if (neg && v > (uint64_t)INT64_MAX + 1) return -ERANGE;
  int64_t r = neg ? (int64_t)(0 - v) : (int64_t)v;
  if (r < min || r > max) return -ERANGE;
  *out = r;
  return 0;
}

/* Accepts "123", "64K", "2M", "1G", "3T", with an optional "B" or "iB" after
 * the suffix ("2MiB", "2MB"), any case. All suffixes are binary: memory is
 * sized in powers of two and "24G" on a 24 GiB card should mean the card. */
int _mt_parse_size(const char *s, uint64_t *out) {
  if (s == NULL || !isdigit((unsigned char)*s)) return -EINVAL;
  uint64_t v = 0;
  const char *p = s;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -ERANGE;
    v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; p++; break;
    case 'M': shift = 20; p++; break;
    case 'G': shift = 30; p++; break;
    case 'T': shift = 40; p++; break;
    default: break;
  }
  if (shift != 0) {
    if (strcasecmp(p, "ib") == 0 || strcasecmp(p, "b") == 0) p += strlen(p);
  } else if (strcasecmp(p, "b") == 0) {
    p++;
  }
  if (*p != '\0') return -EINVAL;
  if (shift != 0 && v > (UINT64_MAX >> shift)) return -ERANGE;
  *out = v << shift;
  return 0;
}

int _mt_parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"1", "on", "yes", "true"};
  static const char *const no[] = {"0", "off", "no", "false"};
  if (s == NULL) return -EINVAL;
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) { *out = true; return 0; }
    if (strcasecmp(s, no[i]) == 0) { *out = false; return 0; }
  }
  return -EINVAL;
}

/* Index of s in a '|'-separated list, or -EINVAL. */
static int parse_choice(const char *s, const char *choices, int64_t *out) {
  size_t n = strlen(s);
  int64_t idx = 0;
  for (const char *c = choices; *c != '\0'; idx++) {
    const char *bar = strchr(c, '|');
    size_t len = bar ? (size_t)(bar - c) : strlen(c);
    if (len == n && n > 0 && strncasecmp(c, s, n) == 0) {
      *out = idx;
      return 0;
    }
    if (bar == NULL) break;
    c = bar + 1;
  }
  return -EINVAL;
}

const char *_mt_env_lookup(char *const *envp, const char *name) {
  if (envp == NULL) return NULL;
  size_t n = strlen(name);
  for (char *const *e = envp; *e != NULL; e++) {
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return NULL;
}

/* ---- table ------------------------------------------------------------------ */

static int parse_value(const mt_opt_desc_t *d, const char *s, int64_t *num) {
  switch (d->type) {
    case MT_OPT_BOOL: {
      bool b;
      int rc = _mt_parse_bool(s, &b);
      if (rc == 0) *num = b;
      return rc;
    }
    case MT_OPT_INT:
      return _mt_parse_int(s, d->min, d->max, num);
    case MT_OPT_SIZE: {
      uint64_t v;
      int rc = _mt_parse_size(s, &v);
      if (rc == 0 && v > (uint64_t)INT64_MAX) rc = -ERANGE;
      if (rc == 0) *num = (int64_t)v;
      return rc;
    }
    case MT_OPT_CHOICE:
      return parse_choice(s, d->choices, num);
    case MT_OPT_STRING:
      *num = 0;
      return strlen(s) < MT_OPT_TEXT_MAX ? 0 : -ENAMETOOLONG;
  }
  return -EINVAL;
}

/* The accepted form, for the bad-value message. Writes into buf. */
static const char *accepted_form(const mt_opt_desc_t *d, char *buf, size_t len) {
  switch (d->type) {
    case MT_OPT_BOOL:
      return "1/0, on/off, yes/no or true/false";
    case MT_OPT_INT:
      snprintf(buf, len, "a whole number from %" PRId64 " to %" PRId64, d->min, d->max);
      return buf;
    case MT_OPT_SIZE:
      return "a number of bytes with an optional K, M, G or T suffix (binary), e.g. 24G";
    case MT_OPT_CHOICE:
      snprintf(buf, len, "one of: %s", d->choices);
      for (char *p = buf; *p; p++)
        if (*p == '|') *p = ',';
      return buf;
    case MT_OPT_STRING:
      snprintf(buf, len, "a path shorter than %d bytes", MT_OPT_TEXT_MAX);
      return buf;
  }
  return "?";
}

static void set_text(mt_opt_value_t *v, const char *s) {
  size_t n = strlen(s);
  if (n >= sizeof(v->text)) n = sizeof(v->text) - 1;
  memcpy(v->text, s, n);
  v->text[n] = '\0';
}

int _mt_options_load(char *const *envp) {
  int bad = 0;
  options_loaded = true;
  for (int i = 0; i < MT_OPT__COUNT; i++) {
    const mt_opt_desc_t *d = &opt_table[i];
    mt_opt_value_t *v = &opt_values[i];
    int64_t num = 0;
    int rc = parse_value(d, d->deflt, &num);
    mt_assert(rc == 0); /* a default that does not parse is a table bug */
    (void)rc;
    v->num = num;
    set_text(v, d->deflt);
    v->from_env = false;
    v->bad = false;
    const char *s = _mt_env_lookup(envp, d->env);
    if (s == NULL) continue;
    if (parse_value(d, s, &num) == 0) {
      v->num = num;
      set_text(v, s);
      v->from_env = true;
    } else {
      v->bad = true;
      snprintf(v->bad_text, sizeof(v->bad_text), "%s", s);
      bad++;
    }
  }
  /* The log's own options first, so the bad-value lines go where the user
   * asked for them. */
  const char *log_path = _mt_opt_str(MT_OPT_LOG);
  _mt_log_configure((int)_mt_opt_int(MT_OPT_VERBOSE), -2);
  if (log_path[0] != '\0') {
    int rc = _mt_log_open(log_path);
    if (rc < 0) mt_error("cannot open MT_LOG=\"%s\" (%s); logging to stderr", log_path, strerror(-rc));
  }
  static const mt_opt_t unused[] = MT_OPTIONS_NOT_USED_YET;
  for (size_t k = 0; k < sizeof(unused) / sizeof(unused[0]) && unused[k] != MT_OPT__COUNT; k++)
    if (opt_values[unused[k]].from_env)
      mt_warn("%s is set but has no effect in this version: the part it configures is not built yet",
              opt_table[unused[k]].env);
  for (int i = 0; i < MT_OPT__COUNT; i++) {
    if (!opt_values[i].bad) continue;
    char form[160];
    const mt_opt_desc_t *d = &opt_table[i];
    mt_warn("%s=\"%s\" is not valid: use %s; using the default %s", d->env,
            opt_values[i].bad_text, accepted_form(d, form, sizeof(form)),
            d->deflt[0] ? d->deflt : "\"\"");
  }
  return bad;
}

static pthread_once_t options_once = PTHREAD_ONCE_INIT;

/* A test that loaded its own environment keeps it. */
static void options_init_once(void) {
  if (!options_loaded) _mt_options_load(environ);
}

void _mt_options_init(void) {
  pthread_once(&options_once, options_init_once);
}

int64_t _mt_opt_int(mt_opt_t o) {
  mt_assert(o >= 0 && o < MT_OPT__COUNT);
  return opt_values[o].num;
}

const char *_mt_opt_str(mt_opt_t o) {
  mt_assert(o >= 0 && o < MT_OPT__COUNT);
  return opt_values[o].text;
}

bool _mt_opt_from_env(mt_opt_t o) {
  mt_assert(o >= 0 && o < MT_OPT__COUNT);
  return opt_values[o].from_env;
}

const char *_mt_opt_name(mt_opt_t o) {
  mt_assert(o >= 0 && o < MT_OPT__COUNT);
  return opt_table[o].env;
}

/* ---- public ------------------------------------------------------------------ */

static void value_text(int i, char *buf, size_t len) {
  const mt_opt_desc_t *d = &opt_table[i];
  const mt_opt_value_t *v = &opt_values[i];
  switch (d->type) {
    case MT_OPT_BOOL:
      snprintf(buf, len, "%s", v->num ? "on" : "off");
      break;
    case MT_OPT_INT:
    case MT_OPT_SIZE:
      snprintf(buf, len, "%" PRId64, v->num);
      break;
    case MT_OPT_CHOICE:
    case MT_OPT_STRING:
      snprintf(buf, len, "%s", v->text);
      break;
  }
}

MT_API int mt_option_text(const char *name, char *buf, size_t len) {
  _mt_options_init();
  if (name == NULL || buf == NULL) return -EINVAL;
  if (strncasecmp(name, "MT_", 3) == 0) name += 3;
  for (int i = 0; i < MT_OPT__COUNT; i++) {
    if (strcasecmp(name, opt_table[i].name) != 0) continue;
    char tmp[MT_OPT_TEXT_MAX + 32];
    value_text(i, tmp, sizeof(tmp));
    size_t n = strlen(tmp);
    if (n + 1 > len) return -ENOSPC;
    memcpy(buf, tmp, n + 1);
    return (int)n;
  }
  return -ENOENT;
}

MT_API void mt_show_config(void) {
  _mt_options_init();
  /* Forced out regardless of MT_VERBOSE: the user asked for it. */
  int level = _mt_log_level();
  if (level < MT_LOG_INFO) _mt_log_configure(MT_LOG_INFO, -2);
  mt_info("%-26s %-20s %-10s %-6s %s", "option", "value", "default", "from", "unit");
  for (int i = 0; i < MT_OPT__COUNT; i++) {
    char val[64];
    value_text(i, val, sizeof(val));
    const mt_opt_desc_t *d = &opt_table[i];
    mt_info("%-26s %-20s %-10s %-6s %s", d->env, val[0] ? val : "\"\"",
            d->deflt[0] ? d->deflt : "\"\"", opt_values[i].from_env ? "env" : "default", d->unit);
  }
  if (level < MT_LOG_INFO) _mt_log_configure(level, -2);
}

int _mt_options_text(char *buf, size_t len) {
  size_t off = 0;
  for (int i = 0; i < MT_OPT__COUNT; i++) {
    char val[MT_OPT_TEXT_MAX + 32];
    value_text(i, val, sizeof(val));
    int n = snprintf(buf + off, off < len ? len - off : 0, "%s=%s\n", opt_table[i].env, val);
    if (n < 0 || off + (size_t)n >= len) return -ENOSPC;
    off += (size_t)n;
  }
  return (int)off;
}

/* tools/mt-options prints this and a test checks the README against it. */
void _mt_options_markdown(int fd) {
  dprintf(fd, "| variable | type | default | unit | meaning |\n|---|---|---|---|---|\n");
  static const char *const tname[] = {"bool", "int", "size", "string", "choice"};
  for (int i = 0; i < MT_OPT__COUNT; i++) {
    const mt_opt_desc_t *d = &opt_table[i];
    char type[96];
    if (d->type == MT_OPT_INT)
      snprintf(type, sizeof(type), "int %" PRId64 "..%" PRId64, d->min, d->max);
    else if (d->type == MT_OPT_CHOICE)
      snprintf(type, sizeof(type), "%s", d->choices);
    else
      snprintf(type, sizeof(type), "%s", tname[d->type]);
    for (char *p = type; *p; p++)
      if (*p == '|') *p = '/';
    dprintf(fd, "| `%s` | %s | `%s` | %s | %s |\n", d->env, type, d->deflt[0] ? d->deflt : "\"\"",
            d->unit, d->help);
  }
}
