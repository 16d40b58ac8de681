/* log.c — leveled logging to stderr, parsed once from MELD_DEBUG and MELD_DEBUG_SUBSYS. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static meld_log_level_t g_level = MELD_LOG_WARN;
static unsigned g_mask = MELD_SUB_ALL;
static _Thread_local int g_rank = -1; /* per thread: ranks may be threads of one process */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const struct {
  const char *name;
  unsigned bit;
} g_subsys[] = {{"INIT", MELD_SUB_INIT},   {"BOOT", MELD_SUB_BOOT},   {"MEM", MELD_SUB_MEM},
                {"PROTO", MELD_SUB_PROTO}, {"OPS", MELD_SUB_OPS},     {"PROXY", MELD_SUB_PROXY},
                {"TRACE", MELD_SUB_TRACE}, {"ALL", MELD_SUB_ALL}};

int meld_log_parse_level(const char *s, meld_log_level_t *out) {
  static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
  for (int i = 0; i < 4; i++)
    if (strcasecmp(s, names[i]) == 0) {
      *out = (meld_log_level_t)i;
      return 0;
    }
  return -1;
}

int meld_log_parse_subsys(const char *s, unsigned *out) {
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (size_t i = 0; i < sizeof g_subsys / sizeof g_subsys[0]; i++)
      if (strcasecmp(tok, g_subsys[i].name) == 0) {
        mask |= g_subsys[i].bit;
        found = 1;
      }
    if (!found) return -1;
  }
  *out = mask;
  return 0;
}

static void parse_env(void) {
  const char *lvl = getenv("MELD_DEBUG");
  if (lvl && *lvl && meld_log_parse_level(lvl, &g_level) != 0)
    fprintf(stderr, "meld WARN: MELD_DEBUG=%s is not one of NONE, WARN, INFO, TRACE; using WARN\n", lvl);
  const char *sub = getenv("MELD_DEBUG_SUBSYS");
  if (sub && *sub && meld_log_parse_subsys(sub, &g_mask) != 0) {
    fprintf(stderr, "meld WARN: MELD_DEBUG_SUBSYS=%s has an unknown subsystem; using ALL\n", sub);
    g_mask = MELD_SUB_ALL;
  }
}

meld_log_level_t meld_log_level(void) {
  pthread_once(&g_once, parse_env);
  return g_level;
}

unsigned meld_log_mask(void) {
  pthread_once(&g_once, parse_env);
  return g_mask;
}

void meld_log_set_rank(int rank) { g_rank = rank; }

void meld_log_write(meld_log_level_t level, unsigned subsys, const char *file, int line,
                    const char *fmt, ...) {
  static const char *lv[] = {"NONE", "WARN", "INFO", "TRACE"};
  (void)subsys;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(stderr, "meld[pid %d rank %d] %s %ld.%03ld %s:%d %s\n", (int)getpid(), g_rank, lv[level],
          (long)ts.tv_sec % 100000, ts.tv_nsec / 1000000L, base ? base + 1 : file, line, msg);
}
