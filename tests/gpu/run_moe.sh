#!/usr/bin/env bash
# run_moe.sh [BUILD] - the MoE dispatch/combine work on a machine with 2+ GPUs, in one
# call: build (unless NO_BUILD=1), test_moe on 1 and 2 ranks (all cases, the
# dispatch -> ws_gemm -> combine pipeline, a missing rank), the Python multi-GPU tests,
# compute-sanitizer on a small case, Nsight Compute on each kernel at 128 tokens (what
# the fixed cost is; `warpspec bench ep --profile`), `warpspec bench ep` (dispatch and
# combine alone) and `warpspec bench moe-a2a` against the NCCL composite and PyTorch
# (2+ GPUs), `warpspec bench moe` (the whole layer). Logs go to $OUT
# (or ./results); at most 8 files come back: moe_tests.log moe_sanitizer.log moe_ncu.txt
# moe_bench.txt moe_layer.txt moe_layer.csv (+ moe_a2a.txt moe_a2a.csv with 2 GPUs)
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
ws_build "$build" "$out/moe_build.log" || exit 1
ws=$build/warpspec
t=$build/tests/gpu/test_moe
# on a one-GPU machine everything runs on one rank (EP1); the 2-rank parts need 2 GPUs
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
nr=2; [ "$ngpu" -lt 2 ] && nr=1
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  for n in $(seq 1 $nr); do
    timeout 300 "$ws" run -n $n --timeout 280 -- "$t" all; echo "test_moe all, $n rank(s): rc=$?"
  done
  [ $nr -ge 2 ] && { timeout 120 "$ws" run -n 2 --timeout 100 -- "$t" missing; echo "test_moe missing: rc=$?"; }
  (cd "$build" && ctest --output-on-failure -R "py_") ; echo "python tests: rc=$?"
} >"$out/moe_tests.log" 2>&1
grep -E "rc=|FAILED|failure|passed" "$out/moe_tests.log" | tail -20
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  WARPSPEC_TIMEOUT_MS=120000 timeout 400 "$ws" run -n $nr --timeout 380 -- "$san" --tool $tool --error-exitcode 9 \
    --report-api-errors no "$t" quick >>"$out/moe_sanitizer.log" 2>&1
  echo "sanitizer $tool rc=$?" | tee -a "$out/moe_sanitizer.log"
done
# each kernel's own duration at 128 and 4096 tokens (rank 0 under Nsight Compute, one
# metric: no kernel replay, which communication kernels could not survive)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
WARPSPEC_TIMEOUT_MS=60000 timeout 300 "$ws" run -n $nr --timeout 280 -- sh -c \
  'if [ "$WS_RANK" = 0 ]; then exec '"$ncu"' --clock-control none -k regex:ep_ --metrics gpu__time_duration.sum '"$ws"' bench ep --profile; else exec '"$ws"' bench ep --profile; fi' \
  >"$out/moe_ncu.txt" 2>&1
echo "ncu rc=$?"; grep -E "ep_[a-z]+_kernel|gpu__time_duration" "$out/moe_ncu.txt" | head -30
timeout 200 "$ws" bench ep --ranks $nr >"$out/moe_bench.txt" 2>&1
echo "bench ep rc=$?"; grep "rank 0 " "$out/moe_bench.txt"
# the whole layer (unfused path) and its time split, on every rank the machine has
timeout 500 "$ws" bench moe --ranks $nr ${QUICK:+--quick} --csv "$out/moe_layer.csv" >"$out/moe_layer.txt" 2>&1
echo "bench moe rc=$?"; grep "rank 0" "$out/moe_layer.txt"
if [ $nr -ge 2 ]; then
  PYTHONUNBUFFERED=1 WARPSPEC_LIBRARY=$PWD/$build/libwarpspec.so WARPSPEC_CLI=$PWD/$build/warpspec PYTHONPATH=$PWD/python \
    timeout 500 python3 -m warpspec bench moe-a2a --csv "$out/moe_a2a.csv" >"$out/moe_a2a.txt" 2>&1
  echo "bench moe-a2a rc=$?"; tail -30 "$out/moe_a2a.txt"
fi
