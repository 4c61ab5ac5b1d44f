/* warpspec/warpspec.h - the host API in one include. Plain C11. */
#ifndef WARPSPEC_WARPSPEC_H
#define WARPSPEC_WARPSPEC_H
#include "config.h"
#include "status.h"
#include "layout.h"
#include "diag.h"
#include "trace.h"
#include "plan.h"
#include "tma.h"
#include "stream.h"
#include "comm.h"
#include "fp8.h"
#include "gemm.h"
#include "moe.h"
#include "moe_layer.h"
#include "attention.h"
#include "check.h"
#include "knobs.h"
#endif
