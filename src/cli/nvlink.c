/* nvlink.c - count active NVLinks between two GPUs through NVML, loaded at run time
 * (the CLI must run where NVML is absent, e.g. on CPU-only build machines). */
#include "cli.h"

#include "../core/knobs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

typedef int (*nvml_init_t)(void);
typedef int (*nvml_by_bus_t)(const char *, void **);
typedef int (*nvml_link_state_t)(void *, unsigned, int *);
typedef int (*nvml_remote_pci_t)(void *, unsigned, void *);

/* nvmlPciInfo_t, as NVML lays it out (v3). */
typedef struct {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvml_pci;

#define NVML_MAX_LINKS 18

static void *nvml;
static nvml_by_bus_t by_bus;
static nvml_link_state_t link_state;
static nvml_remote_pci_t remote_pci;

static int nvml_open(void) {
  if (nvml) return 1;
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  nvml_init_t init = (nvml_init_t)dlsym(h, "nvmlInit_v2");
  by_bus = (nvml_by_bus_t)dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
  link_state = (nvml_link_state_t)dlsym(h, "nvmlDeviceGetNvLinkState");
  remote_pci = (nvml_remote_pci_t)dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (!init || !by_bus || !link_state || !remote_pci || init() != 0) { dlclose(h); return 0; }
  nvml = h;
  return 1;
}

/* Bus ids compare case-insensitively and NVML pads the domain to 8 digits. */
static int same_bus(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t n = la < lb ? la : lb;
  for (size_t i = 0; i < n; i++) {
    char x = a[la - 1 - i], y = b[lb - 1 - i];
    if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
    if (x != y) return 0;
    if (x == ':' && i > 8) break;
  }
  return 1;
}

int cli_nvlinks(int dev_a, int dev_b, int *unknown) {
  const int debug = ws_knobs_get()->debug_nvml; /* WARPSPEC_DEBUG_NVML */
  if (!nvml_open()) return -1;
  char bus_a[32], bus_b[32];
  if (cudaDeviceGetPCIBusId(bus_a, sizeof bus_a, dev_a) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus_b, sizeof bus_b, dev_b) != cudaSuccess)
    return -1;
  void *h = NULL;
  if (by_bus(bus_a, &h) != 0) return -1;
  int links = 0;
  *unknown = 0;
  for (unsigned l = 0; l < NVML_MAX_LINKS; l++) {
    int active = 0;
    nvml_pci pci;
    if (link_state(h, l, &active) != 0 || !active) continue;
    const int rc = remote_pci(h, l, &pci);
    if (debug) fprintf(stderr, "nvml: %s link %u active, remote rc %d bus '%s' / '%s', want '%s'\n", bus_a, l, rc, pci.bus_id,
                       pci.bus_id_legacy, bus_b);
    if (rc == 0 && (same_bus(pci.bus_id, bus_b) || same_bus(pci.bus_id_legacy, bus_b))) links++;
    /* some virtual machines hide the remote end (bus FFFFFFFF:FF:FF.0) */
    else if (rc != 0 || strncmp(pci.bus_id, "FFFFFFFF", 8) == 0 || strncmp(pci.bus_id, "ffffffff", 8) == 0) (*unknown)++;
  }
  return links;
}
