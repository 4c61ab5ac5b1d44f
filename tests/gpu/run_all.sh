#!/usr/bin/env bash
# run_all.sh [BUILD] - everything that needs one GPU, in one go: build, all tests,
# compute-sanitizer on the pipe test, the pipe and GEMM benchmarks (with PyTorch's
# grouped GEMM as an extra column). Logs go to $OUT (or ./results).
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -1
} >"$out/tests.log" 2>&1
cat "$out/tests.log"

t0=$(date +%s)
cmake -S . -B "$build" >"$out/build.log" 2>&1 && cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { tail -40 "$out/build.log"; exit 1; }

{ "$build/warpspec" info; (cd "$build" && ctest --output-on-failure --timeout 300); } >>"$out/tests.log" 2>&1
echo "tests rc=$?"; grep -E "tests passed|Failed|\*\*\*|Skipped" "$out/tests.log" | head -30

san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  echo "== $tool" >>"$out/sanitizer.log"
  timeout 600 "$san" --tool "$tool" --error-exitcode 9 "$build/tests/gpu/test_pipe" --quick >>"$out/sanitizer.log" 2>&1
  echo "sanitizer $tool rc=$?" | tee -a "$out/sanitizer.log"
done
grep -E "ERROR SUMMARY|Error|RACECHECK SUMMARY" "$out/sanitizer.log" | head -10

"$build/warpspec" bench pipe --sweep --csv "$out/bench_pipe.csv" 2>&1 | tee "$out/bench_pipe.txt"
python3 bench/plot_pipe.py "$out/bench_pipe.csv" "$out/bench_pipe.png" || echo "plot failed (matplotlib?)"
"$build/warpspec" bench gemm --csv "$out/bench_gemm.csv" 2>&1 | tee "$out/bench_gemm.txt"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/torch_grouped_mm.py 2>&1 | tee -a "$out/bench_gemm.txt"
# at most 8 files come back from the GPU machine: build.log tests.log sanitizer.log
# bench_pipe.{csv,txt,png} bench_gemm.{csv,txt}
