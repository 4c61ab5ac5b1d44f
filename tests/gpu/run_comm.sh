#!/usr/bin/env bash
# run_comm.sh [BUILD] - on a machine with 2+ GPUs: build (unless NO_BUILD=1, a build
# carried from elsewhere), the communication tests (built-in launcher and mpirun),
# compute-sanitizer, NCCL's grid per size and the sendrecv benchmark against NCCL.
# Logs go to $OUT (or ./results).
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv; nvidia-smi topo -m; } >"$out/comm_tests.log" 2>&1
ws_build "$build" "$out/comm_build.log" || exit 1
{ WARPSPEC_DEBUG_NVML=1 "$build/warpspec" info; (cd "$build" && ctest --output-on-failure -R "sendrecv|gpu_"); } >>"$out/comm_tests.log" 2>&1
echo "tests rc=$?"; grep -E "tests passed|Failed|Skipped|Passed|NVLink|nvlink" "$out/comm_tests.log" | head -30
# the same test under Open MPI's launcher: rank and size from OMPI_COMM_WORLD_*, the
# unique id through the file rendezvous keyed by the job id
{ echo "== mpirun"; timeout 300 mpirun --allow-run-as-root --oversubscribe -n 2 -x NCCL_NVLS_ENABLE -x NVSHMEM_DISABLE_NVLS \
    -x LD_LIBRARY_PATH "$build/tests/gpu/test_sendrecv" quick; echo "mpirun rc=$?"; } >>"$out/comm_tests.log" 2>&1
grep -E "mpirun rc|checks passed|FAIL" "$out/comm_tests.log" | tail -4
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  # API errors are reported by NCCL's own initialisation inside NVSHMEM (not ours): memcheck
  # judges device accesses only.
  WARPSPEC_TIMEOUT_MS=120000 timeout 300 "$build/warpspec" run -n 2 -- "$san" --tool $tool --error-exitcode 9 \
    --report-api-errors no \
    "$build/tests/gpu/test_sendrecv" quick \
    >>"$out/comm_sanitizer.log" 2>&1
  echo "sanitizer $tool rc=$?" | tee -a "$out/comm_sanitizer.log"
done
[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
# NCCL's grid per size (from a captured exchange's kernel node), to compare ours at the
# same CTA count (the bench CSV has ours at 1..64 CTAs)
timeout 120 "$build/warpspec" run -n 2 -- "$build/warpspec" bench sendrecv --nccl-probe --max-bytes 1073741824 \
  >"$out/nccl_grid.csv" 2>&1; echo "nccl grid rc=$?"; cat "$out/nccl_grid.csv"
"$build/warpspec" bench sendrecv --csv "$out/bench_sendrecv.csv" 2>&1 | tee "$out/bench_sendrecv.txt"
python3 bench/plot_sendrecv.py "$out/bench_sendrecv.csv" "$out/bench_sendrecv.png" || echo "plot failed"
