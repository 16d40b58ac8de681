// The public header must compile alone as C++.
#include "meld.h"

int main() {
  meld_config_t cfg = MELD_CONFIG_INIT;
  meld_comm_t comm = nullptr;
  (void)comm;
  return cfg.version == MELD_CONFIG_VERSION ? 0 : 1;
}
