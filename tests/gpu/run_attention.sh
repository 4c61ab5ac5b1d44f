#!/usr/bin/env bash
# run_attention.sh [BUILD] - the attention kernels on one GPU (flash forward, sparse MLA
# prefill, MLA decode with the BF16 and the FP8 cache, NSA): build (unless NO_BUILD=1),
# then the stages named in STAGES (default: all four, which take longer than one 10-minute
# device call; name fewer to split them):
#   tests     test_attention all (every case against the float64 reference, the MLA cases
#             under both schedules) and the Python GPU tests
#   sanitize  compute-sanitizer memcheck, racecheck and synccheck on the small cases
#             (SAN_MODES, default "fp8 nsa-quick"; "quick" adds every quick case)
#   bench     the kernels' own timing (`warpspec bench attn-kernels`: decode, MLA under
#             both schedules, flash under every schedule and grid, NSA against the dense
#             flash kernel)
#   sdpa      `warpspec bench attention` against PyTorch (SDPA cuDNN / flash, the MLA, decode
#             and NSA composites); SDPA_ONLY=flash|mla|decode|nsa runs one part, QUICK=1
#             the short list
#   optin     flash's opt-in forms not yet in the ctest mode: `test_attention flash-tall`,
#             the three sanitizers on `flash-tall-quick`, then bench/flash_sweep.py for each
#             sweep in SWEEPS (default "wg-blocks"; SWEEP_ARGS, e.g. --quick)
#   mla       `test_attention mla-quick` (the quick MLA cases), compute-sanitizer on it
#             (MLA_SAN, default "memcheck racecheck"), then `bench attn-kernels --only mla`
# Logs go to $OUT (or ./results): attn_tests.log attn_sanitizer.log attn_bench.txt
# attn_sdpa.txt attn_sdpa*.csv attn_optin.log flash_sweep_<sweep>.txt attn_mla.log.
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
ws_build "$build" "$out/attn_build.log" || exit 1
t=$build/tests/gpu/test_attention
stages=${STAGES:-tests sanitize bench sdpa}
pyenv=(env PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python" WARPSPEC_LIBRARY="$PWD/$build/libwarpspec.so")
for stage in $stages; do
  case $stage in
    tests)
      {
        date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
        timeout 580 "$t" all; echo "test_attention all: rc=$?" # 498 s on an H200 (session 7)
        timeout 300 "${pyenv[@]}" python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu_attention.py
        echo "pytest attention: rc=$?"
      } >"$out/attn_tests.log" 2>&1
      grep -E "rc=|FAILED|passed|failed" "$out/attn_tests.log" | tail -20 ;;
    sanitize)
      san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      for mode in ${SAN_MODES:-fp8 nsa-quick}; do
        for tool in memcheck racecheck synccheck; do
          WARPSPEC_TIMEOUT_MS=120000 timeout 300 "$san" --tool $tool --error-exitcode 9 --report-api-errors no \
            "$t" "$mode" >>"$out/attn_sanitizer.log" 2>&1
          echo "sanitizer $tool on $mode: rc=$?" | tee -a "$out/attn_sanitizer.log"
        done
      done ;;
    bench)
      timeout 300 "$build/warpspec" bench attn-kernels >"$out/attn_bench.txt" 2>&1; echo "bench rc=$?"
      cat "$out/attn_bench.txt" ;;
    sdpa)
      args=(--csv "$out/attn_sdpa.csv")
      [ "${QUICK:-0}" = 1 ] && args+=(--quick)
      [ -n "${SDPA_ONLY:-}" ] && args+=(--only "$SDPA_ONLY")
      timeout 500 "${pyenv[@]}" python3 -m warpspec bench attention "${args[@]}" >"$out/attn_sdpa.txt" 2>&1
      echo "bench attention rc=$?"; tail -40 "$out/attn_sdpa.txt" ;;
    optin)
      san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      {
        timeout 300 "$t" flash-tall; echo "test_attention flash-tall: rc=$?"
        for tool in memcheck racecheck synccheck; do
          WARPSPEC_TIMEOUT_MS=120000 timeout 200 "$san" --tool $tool --error-exitcode 9 --report-api-errors no \
            "$t" flash-tall-quick | tail -3
          echo "sanitizer $tool on flash-tall-quick: rc=${PIPESTATUS[0]}"
        done
      } >"$out/attn_optin.log" 2>&1
      grep -E "rc=|FAILED|SUMMARY" "$out/attn_optin.log"
      for sw in ${SWEEPS:-wg-blocks}; do
        timeout 400 "${pyenv[@]}" python3 bench/flash_sweep.py "$sw" ${SWEEP_ARGS:-} >"$out/flash_sweep_$sw.txt" 2>&1
        echo "flash_sweep $sw: rc=$?"; cat "$out/flash_sweep_$sw.txt"
      done ;;
    mla)
      san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      {
        timeout 300 "$t" mla-quick; echo "test_attention mla-quick: rc=$? at ${SECONDS} s"
        for tool in ${MLA_SAN-memcheck racecheck}; do
          WARPSPEC_TIMEOUT_MS=120000 timeout 300 "$san" --tool $tool --error-exitcode 9 --report-api-errors no \
            "$t" mla-quick | tail -12
          echo "sanitizer $tool on mla-quick: rc=${PIPESTATUS[0]} at ${SECONDS} s"
        done
        timeout 200 "$build/warpspec" bench attn-kernels --only mla
        echo "bench attn-kernels --only mla: rc=$? at ${SECONDS} s"
      } >"$out/attn_mla.log" 2>&1
      grep -E "rc=|FAILED|SUMMARY" "$out/attn_mla.log" ;;
    *) echo "run_attention.sh: unknown stage '$stage' (tests sanitize bench sdpa optin mla)"; exit 2 ;;
  esac
done
