/* pci.h — where devices sit on the PCI tree (sysfs), to pair a GPU with its nearest NIC.
 *
 * A device's place is its resolved sysfs path, e.g.
 *   /sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0
 * (root complex, then each bridge down to the device). Two devices under one PCIe switch
 * share all but the last components; devices on different root complexes (usually different
 * CPU sockets) share only "/sys/devices". GPUDirect traffic and the NIC's reads of the GPU's
 * staging want the closest pair. */
#ifndef MELD_HOST_PCI_H
#define MELD_HOST_PCI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Hops between two resolved sysfs paths: the components of a and of b below their deepest
 * common ancestor, summed (0: the same device; 2: siblings under one bridge). A path that is
 * NULL or empty is "unknown": returns a large value (1 << 20). */
int meld_pci_distance(const char *a, const char *b);

/* Among n NICs with resolved paths nic[i] (NULL: unknown), the one to use for the GPU at
 * gpu_path (NULL: unknown): the nearest ones, and among those the (local_index mod count)-th,
 * so ranks whose GPUs are equally near several NICs spread over them. With no GPU path every
 * NIC is equally near. Returns an index in [0, n), or -1 if n < 1. */
int meld_pci_pick_nic(const char *gpu_path, const char *const *nic, int n, int local_index);

/* The resolved sysfs path of the PCI device with bus id `bus_id` ("0000:18:00.0", any case)
 * under root (normally "/sys"): root/bus/pci/devices/<bus id> resolved. 0, or -1 (no such
 * device; out untouched). */
int meld_pci_path_of_bus_id(const char *root, const char *bus_id, char *out, size_t n);

/* The same for an RDMA device by name ("mlx5_0"): root/class/infiniband/<name>/device. */
int meld_pci_path_of_ibdev(const char *root, const char *name, char *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
