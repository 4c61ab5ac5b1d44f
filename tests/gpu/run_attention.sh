#!/usr/bin/env bash
# run_attention.sh [BUILD] - the flash attention forward on one GPU, in one call: build
# (unless NO_BUILD=1), test_attention (all cases against the float64 reference), the
# Python GPU tests, compute-sanitizer on the small cases, the kernel's own timing, and
# `warpspec bench attention` against PyTorch SDPA (cuDNN and flash backends). Logs go to
# $OUT (or ./results): attn_tests.log attn_sanitizer.log attn_bench.txt attn_sdpa.txt
# attn_sdpa.csv.
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
ws_build "$build" "$out/attn_build.log" || exit 1
t=$build/tests/gpu/test_attention
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  timeout 400 "$t" all; echo "test_attention all: rc=$?"
  PYTHONPATH=$PWD/python WARPSPEC_LIBRARY=$PWD/$build/libwarpspec.so timeout 300 \
    python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu_attention.py; echo "pytest attention: rc=$?"
} >"$out/attn_tests.log" 2>&1
grep -E "rc=|FAILED|passed|failed" "$out/attn_tests.log" | tail -20
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  timeout 300 "$san" --tool $tool --error-exitcode 9 "$t" quick >>"$out/attn_sanitizer.log" 2>&1
  echo "sanitizer $tool rc=$?" | tee -a "$out/attn_sanitizer.log"
done
timeout 200 "$t" bench >"$out/attn_bench.txt" 2>&1; echo "bench rc=$?"; cat "$out/attn_bench.txt"
PYTHONUNBUFFERED=1 WARPSPEC_LIBRARY=$PWD/$build/libwarpspec.so PYTHONPATH=$PWD/python \
  timeout 400 python3 -m warpspec bench attention ${QUICK:+--quick} --csv "$out/attn_sdpa.csv" >"$out/attn_sdpa.txt" 2>&1
echo "bench attention rc=$?"; tail -40 "$out/attn_sdpa.txt"
