#!/usr/bin/env bash
# check_setmaxnreg_guard.sh NVCC INCLUDE - the build's compiler launcher must turn a
# dropped setmaxnreg (ptxas C7508: no entry register cap) into an error, and the
# WS_KERNEL form of the same kernel must build.
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
