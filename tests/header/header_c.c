/* The public header must compile alone as strict C11. */
#include "meld.h"

int main(void) {
  meld_config_t cfg = MELD_CONFIG_INIT;
  meld_comm_info_t info;
  (void)info;
  return cfg.version == MELD_CONFIG_VERSION ? 0 : 1;
}
