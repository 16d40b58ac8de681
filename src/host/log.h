/* log.h — MELD_DEBUG=WARN|INFO|TRACE logging with subsystem masks (MELD_DEBUG_SUBSYS). */
#ifndef MELD_HOST_LOG_H
#define MELD_HOST_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MELD_LOG_NONE = 0, MELD_LOG_WARN = 1, MELD_LOG_INFO = 2, MELD_LOG_TRACE = 3 } meld_log_level_t;

/* Subsystems: MELD_DEBUG_SUBSYS=INIT,BOOT,MEM,PROTO,OPS,PROXY,TRACE,ALL (default ALL). */
enum {
  MELD_SUB_INIT = 1u << 0,
  MELD_SUB_BOOT = 1u << 1,
  MELD_SUB_MEM = 1u << 2,
  MELD_SUB_PROTO = 1u << 3,
  MELD_SUB_OPS = 1u << 4,
  MELD_SUB_PROXY = 1u << 5,
  MELD_SUB_TRACE = 1u << 6,
  MELD_SUB_ALL = 0xffffffffu
};

/* Parses MELD_DEBUG / MELD_DEBUG_SUBSYS once (thread-safe); returns the current level. */
meld_log_level_t meld_log_level(void);
unsigned meld_log_mask(void);
/* Parses a level name ("WARN", "info", ...) into *out; returns 0 on success, -1 if unknown. */
int meld_log_parse_level(const char *s, meld_log_level_t *out);
/* Parses a comma list of subsystem names into *out; returns 0, or -1 on an unknown name. */
int meld_log_parse_subsys(const char *s, unsigned *out);
/* Sets this process's rank shown in every line ("meld[rank 3]"); -1 = unknown. */
void meld_log_set_rank(int rank);

void meld_log_write(meld_log_level_t level, unsigned subsys, const char *file, int line,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define MELD_LOG(level, subsys, ...)                                                    \
  do {                                                                                  \
    if (meld_log_level() >= (level) && (meld_log_mask() & (subsys)))                    \
      meld_log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);               \
  } while (0)

#define MELD_WARN(subsys, ...) MELD_LOG(MELD_LOG_WARN, subsys, __VA_ARGS__)
#define MELD_INFO(subsys, ...) MELD_LOG(MELD_LOG_INFO, subsys, __VA_ARGS__)
#define MELD_TRACE(subsys, ...) MELD_LOG(MELD_LOG_TRACE, subsys, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
