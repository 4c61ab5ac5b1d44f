#!/usr/bin/env bash
# run_moe_layer.sh [BUILD] - the whole MoE layer, all three paths (unfused, fused experts,
# fused layer), on the GPUs of this machine in one call (RANKS=2 for EP2 on two GPUs;
# tests/gpu/share_gpu.sh runs two ranks on one): build (unless NO_BUILD=1); test_moe gemm
# (the parts against the float64 reference, every layer path bit for bit against them, the
# seeds' toy shapes, graph replay, 1000 calls); compute-sanitizer on the same (SANITIZE=0
# skips it); `warpspec bench moe` (QUICK=1: 1, 8, 128 tokens; SHAPE=DeepSeekV3|Flash).
# Logs in $OUT (or ./results): layer_build.log layer_test.log layer_sanitizer.log
# layer_bench.txt layer_bench.csv
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
ws_build "$build" "$out/layer_build.log" || exit 1
ws=$build/warpspec
t=$build/tests/gpu/test_moe
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
nr=${RANKS:-1}
[ "$ngpu" -lt "$nr" ] && nr=$ngpu
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  timeout 300 "$ws" run -n "$nr" --timeout 280 -- "$t" gemm; echo "test_moe gemm, $nr rank(s): rc=$?"
} >"$out/layer_test.log" 2>&1
grep -E "rc=|DIFFER|FAIL" "$out/layer_test.log"
if [ "${SANITIZE:-1}" = 1 ]; then
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck synccheck racecheck; do
    WARPSPEC_TIMEOUT_MS=120000 timeout 300 "$ws" run -n "$nr" --timeout 280 -- "$san" --tool $tool --error-exitcode 9 \
      --report-api-errors no "$t" layer >>"$out/layer_sanitizer.log" 2>&1
    echo "sanitizer $tool rc=$?" | tee -a "$out/layer_sanitizer.log"
  done
fi
args=()
[ "${QUICK:-0}" = 1 ] && args+=(--quick)
[ -n "${SHAPE:-}" ] && args+=(--shape "$SHAPE")
timeout 500 "$ws" bench moe --ranks "$nr" "${args[@]}" --csv "$out/layer_bench.csv" >"$out/layer_bench.txt" 2>&1
echo "bench moe rc=$?"
grep -E "fused|unfused" "$out/layer_bench.txt"
