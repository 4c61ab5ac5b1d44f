/* device.c - what the device offers, read once per query. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

ws_status ws_device_sms(int *sms) {
  int dev = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_CUDA_TRY(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
  return WS_OK;
}

ws_status ws_device_l2_bytes(size_t *bytes) {
  int dev = 0, l2 = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  *bytes = (size_t)l2;
  return WS_OK;
}

ws_status ws_device_limits_query(int device, ws_device_limits *lim) {
  WS_REQUIRE(lim != NULL, "ws_device_limits_query: lim is NULL");
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return ws_fail(WS_ERR_NO_DEVICE, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "count 0");
  }
  WS_REQUIRE(device >= 0 && device < n, "ws_device_limits_query: device %d out of range, %d present", device, n);
  struct cudaDeviceProp p;
  WS_CUDA_TRY(cudaGetDeviceProperties(&p, device));
  memset(lim, 0, sizeof *lim);
  lim->device = device;
  snprintf(lim->name, sizeof lim->name, "%s", p.name);
  lim->cc_major = p.major;
  lim->cc_minor = p.minor;
  lim->sm_count = p.multiProcessorCount;
  lim->smem_optin = p.sharedMemPerBlockOptin;
  lim->regs_per_block = p.regsPerBlock;
  lim->max_threads = p.maxThreadsPerBlock;
  lim->l2_bytes = (size_t)p.l2CacheSize;
  lim->global_mem = p.totalGlobalMem;
  return WS_OK;
}
