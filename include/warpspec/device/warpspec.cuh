/* warpspec/device/warpspec.cuh - everything a kernel author includes. */
#ifndef WARPSPEC_DEVICE_WARPSPEC_CUH
#define WARPSPEC_DEVICE_WARPSPEC_CUH
#include "ptx.cuh"
#include "role.cuh"
#include "wait.cuh"
#include "pipe.cuh"
#include "tma.cuh"
#include "trace.cuh"
#endif
