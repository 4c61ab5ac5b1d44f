#!/usr/bin/env bash
# run_gemm.sh [BUILD] - the GEMM on one GPU: correctness test, `warpspec bench gemm`
# against cuBLASLt (CSV), PyTorch's grouped GEMMs as an extra column, and with
# PROFILE=1 an Nsight Compute report of one FP8 and one BF16 case. Builds first unless
# NO_BUILD=1 (a build carried from elsewhere). Logs go to $OUT (or ./results).
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gemm.log"
ws_build "$build" "$out/gemm_build.log" || exit 1
timeout 300 "$build/tests/gpu/test_gemm_gpu" >>"$out/gemm.log" 2>&1
echo "test_gemm_gpu rc=$?" | tee -a "$out/gemm.log"
grep -E "rel err|FAIL|passed|failed" "$out/gemm.log" | tail -25
if [ "${SANITIZE:-0}" = 1 ]; then
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    timeout 300 "$san" --tool "$tool" --error-exitcode 9 "$build/tests/gpu/test_gemm_gpu" quick >>"$out/gemm_sanitizer.log" 2>&1
    echo "sanitizer $tool on test_gemm_gpu quick rc=$?" | tee -a "$out/gemm_sanitizer.log"
  done
fi
timeout 300 "$build/warpspec" bench gemm --csv "$out/bench_gemm.csv" 2>&1 | tee "$out/bench_gemm.txt"
python3 bench/plot_gemm.py "$out/bench_gemm.csv" "$out/bench_gemm.png" || echo "plot failed (matplotlib?)"
[ "${TORCH:-1}" = 1 ] && PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_grouped_mm.py 2>&1 | tee -a "$out/bench_gemm.txt"
if [ "${PROFILE:-0}" = 1 ]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for c in ${PROFILE_CASES:-fp8,1,4096,4096,7168 bf16,1,2048,7168,2048}; do
    timeout 200 "$ncu" --kernel-name regex:gemm_ --launch-count 1 --set full --import-source no \
      "$build/warpspec" bench gemm --only "$c" >"$out/ncu_${c//,/_}.txt" 2>&1
    echo "ncu $c rc=$?"
  done
fi
