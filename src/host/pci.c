/* pci.c — PCI distances from sysfs paths (pci.h). */
#include "pci.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAR (1 << 20)

/* Components of p from character offset `from` on ("/a/b" from 0: 2). */
static int components(const char *p, size_t from) {
  int k = 0;
  for (size_t i = from; p[i]; i++)
    if (p[i] != '/' && (i == 0 || p[i - 1] == '/')) k++;
  return k;
}

int meld_pci_distance(const char *a, const char *b) {
  if (!a || !b || !*a || !*b) return FAR;
  /* The common prefix, cut back to a component boundary. */
  size_t i = 0, cut = 0;
  while (a[i] && a[i] == b[i]) {
    i++;
    if (a[i] == '/' || (a[i] == 0 && b[i] == 0) || (a[i] == 0 && b[i] == '/') ||
        (b[i] == 0 && a[i] == '/'))
      cut = i;
  }
  if (a[i] == 0 && b[i] == 0) return 0;
  return components(a, cut) + components(b, cut);
}

int meld_pci_pick_nic(const char *gpu_path, const char *const *nic, int n, int local_index) {
  if (n < 1) return -1;
  int best = INT_MAX, count = 0;
  for (int i = 0; i < n; i++) {
    const int d = gpu_path && *gpu_path ? meld_pci_distance(gpu_path, nic[i]) : 0;
    if (d < best) best = d, count = 0;
    if (d == best) count++;
  }
  int want = (local_index > 0 ? local_index : 0) % count;
  for (int i = 0; i < n; i++) {
    const int d = gpu_path && *gpu_path ? meld_pci_distance(gpu_path, nic[i]) : 0;
    if (d == best && want-- == 0) return i;
  }
  return -1; /* (unreachable) */
}

static int resolve(const char *link, char *out, size_t n) {
  char buf[PATH_MAX];
  if (!realpath(link, buf) || strlen(buf) >= n) return -1;
  snprintf(out, n, "%s", buf);
  return 0;
}

int meld_pci_path_of_bus_id(const char *root, const char *bus_id, char *out, size_t n) {
  if (!root || !bus_id || !out || strlen(bus_id) > 63) return -1;
  char id[64], link[PATH_MAX];
  size_t k = 0;
  for (; bus_id[k]; k++) id[k] = (char)tolower((unsigned char)bus_id[k]);
  id[k] = 0;
  snprintf(link, sizeof link, "%s/bus/pci/devices/%s", root, id);
  return resolve(link, out, n);
}

int meld_pci_path_of_ibdev(const char *root, const char *name, char *out, size_t n) {
  if (!root || !name || !out) return -1;
  char link[PATH_MAX];
  snprintf(link, sizeof link, "%s/class/infiniband/%s/device", root, name);
  return resolve(link, out, n);
}
