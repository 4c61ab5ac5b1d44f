#!/usr/bin/env bash
# run_edges.sh [BUILD] - the edge cases of the reliability issue on the GPU machine: idle
# ranks (0 tokens, NULL tensors) on every MoE path and the low-latency FP8 bytes on 1, 2
# and (where present) 4 GPUs, the validation mode, and the Python idle-rank test.
# Builds only what it runs, in BUILD (default build-edges). Logs to $OUT (or ./results).
set -u
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
b=${1:-build-edges}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
cmake -S . -B "$b" -DWS_WERROR=ON >"$out/edges_cmake.log" 2>&1 || { tail -20 "$out/edges_cmake.log"; exit 1; }
cmake --build "$b" -j "$(nproc)" --target warpspec warpspec_cli test_moe_idle test_check >"$out/edges_build.log" 2>&1 ||
  { grep -E "error|warning" "$out/edges_build.log" | head -30; exit 1; }
rc=0
for n in 1 2 4; do
  [ "$ngpu" -ge "$n" ] || continue
  timeout 300 "$b/warpspec" run -n "$n" --timeout 280 -- "$b/tests/gpu/test_moe_idle" all >"$out/edges_idle_${n}.log" 2>&1 || rc=1
  echo "== test_moe_idle on $n ranks: $(tail -1 "$out/edges_idle_${n}.log")"
  grep -E "FAIL|DIFFERS|differ from|error|ERR" "$out/edges_idle_${n}.log" | head -20
done
timeout 120 "$b/tests/gpu/test_check" >"$out/edges_check.log" 2>&1 || rc=1
echo "== test_check: $(tail -1 "$out/edges_check.log")"; grep -E "^(flash|MLA|grouped|masked)|FAIL|fail" "$out/edges_check.log"
if [ "$ngpu" -ge 2 ]; then
  ab=$(cd "$b" && pwd)
  WARPSPEC_LIBRARY="$ab/libwarpspec.so" WARPSPEC_CLI="$ab/warpspec" PYTHONPATH="$PWD/python" \
    timeout 400 python3 -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_moe_idle.py >"$out/edges_py.log" 2>&1 || rc=1
  echo "== python idle ranks: $(tail -1 "$out/edges_py.log")"
fi
exit $rc
