#!/usr/bin/env bash
# check_setmaxnreg_guard.sh NVCC INCLUDE - the build's compiler launcher must turn a
# dropped setmaxnreg (ptxas C7508: no entry register cap) and a serialized wgmma
# (C751x: here an accumulator read before its wait_group) into errors, and the
# WS_KERNEL form of the first kernel must build.
set -u
nvcc=$1 inc=$2
guard="$(cd "$(dirname "$0")/../.." && pwd)/cmake/nvcc_guard.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-gencode=arch=compute_90a,code=sm_90a -Xptxas=--warning-as-error -I"$inc" -c)
cat >"$tmp/bad.cu" <<'K'
#include "warpspec/device/ptx.cuh"
__global__ void bad(int *o) { if (threadIdx.x < 128) { WS_SETMAXNREG_DEC(40); } else { WS_SETMAXNREG_INC(232); o[threadIdx.x] = 1; } }
K
cat >"$tmp/good.cu" <<'K'
#include "warpspec/device/warpspec.cuh"
#define R(ROLE) ROLE(P, 1, 40, 1) ROLE(C, 4, 232, 2)
WS_DECLARE_ROLES(g, R);
WS_KERNEL(g) good(int *o, ws_diag d) {
  ws_ctx c = WS_SELF(g, d);
  if (c.role == P) { WS_ENTER_ROLE(g, P); } else { WS_ENTER_ROLE(g, C); o[threadIdx.x] = 1; }
}
K
if out=$("$guard" "$nvcc" "${flags[@]}" "$tmp/bad.cu" -o "$tmp/bad.o" 2>&1); then
  echo "FAIL: setmaxnreg without __launch_bounds__ compiled; the guard is off"; exit 1
fi
grep -q "C7508\|setmaxnreg" <<<"$out" || { echo "FAIL: unexpected error: $out"; exit 1; }
echo "ok: dropped setmaxnreg is an error: $(grep -m1 -o 'C7508.*' <<<"$out")"
out=$("$guard" "$nvcc" "${flags[@]}" "$tmp/good.cu" -o "$tmp/good.o" 2>&1) || { echo "FAIL: WS_KERNEL form: $out"; exit 1; }
echo "ok: WS_KERNEL form builds"
cat >"$tmp/serial.cu" <<'K'
#include "warpspec/device/wgmma.cuh"
__global__ void __launch_bounds__(128, 1) serial(float *o, const uint8_t *p) {
  __shared__ __align__(1024) uint8_t a[64 * 128], b[128 * 128];
  a[threadIdx.x] = p[threadIdx.x];
  b[threadIdx.x] = p[threadIdx.x + 128];
  __syncthreads();
  float acc[64];
  ws_wgmma_fence();
  ws_wgmma_m64n128k32_e4m3(acc, ws_wgmma_desc_k128b(a), ws_wgmma_desc_k128b(b), 0);
  ws_wgmma_commit_group();
  o[threadIdx.x] = acc[0]; /* read while the wgmma is in flight */
  WS_WGMMA_WAIT_GROUP(0);
  o[threadIdx.x + 128] = acc[1];
}
K
if out=$("$guard" "$nvcc" "${flags[@]}" "$tmp/serial.cu" -o "$tmp/serial.o" 2>&1); then
  echo "FAIL: a serialized wgmma compiled; the guard is off"; exit 1
fi
grep -qE "C751[0-9]" <<<"$out" || { echo "FAIL: unexpected error: $out"; exit 1; }
echo "ok: serialized wgmma is an error: $(grep -m1 -oE 'C751[0-9].*' <<<"$out")"
