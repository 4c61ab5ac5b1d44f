#!/usr/bin/env bash
# run_ep.sh [BUILD] - the expert-parallel transfers in one device call, for the one-copy
# protocol (issue 34): build what it runs (BUILD, default build-ep, -DWS_WERROR=ON), then
#   1. correctness: test_moe all and test_moe_idle all on 1, 2 and 4 ranks (as many as
#      the machine has), the gathered GEMM alone (test_gemm_gpu gather), the Python
#      multi-GPU round trip (test_gpu_comm.py: both receives, expert_gemm);
#   2. speed: `warpspec bench ep` on 2 and 4 ranks with role timelines of every CTA
#      (--trace DIR, summarised by bench/trace_ep.py), and the MoE layer at 4096 tokens
#      on 2 ranks with the L1 GEMM over copied rows and over the rows gathered in place
#      (WARPSPEC_MOE_GATHER=0 / 1).
# EP_TESTS=0 skips part 1 (when `make test` already ran it on this tree).
# At most 8 files come back from a device call: everything is summarised into
# $OUT/ep_summary.txt, the logs go to $OUT/ep_logs.tar.gz.
set -u
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
b=${1:-build-ep}
logs=$(mktemp -d)
sum="$out/ep_summary.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
{ date -u; nvidia-smi --query-gpu=index,name --format=csv,noheader; } >"$sum"
cmake -S . -B "$b" -DWS_WERROR=ON >"$logs/cmake.log" 2>&1 &&
  cmake --build "$b" -j "$(nproc)" --target warpspec warpspec_cli test_moe test_moe_idle test_gemm_gpu \
    >"$logs/build.log" 2>&1 || { grep -E "error|warning" "$logs/build.log" | head -30 | tee -a "$sum"; exit 1; }
rc=0
for n in 1 2 4; do
  [ "$ngpu" -ge "$n" ] && [ "${EP_TESTS:-1}" = 1 ] || continue
  step "test_moe all, $n rank(s)" "moe_all_$n.log" timeout 300 "$b/warpspec" run -n "$n" --timeout 280 -- "$b/tests/gpu/test_moe" all
  step "test_moe_idle all, $n rank(s)" "idle_$n.log" timeout 300 "$b/warpspec" run -n "$n" --timeout 280 -- "$b/tests/gpu/test_moe_idle" all
done
[ "${EP_TESTS:-1}" = 1 ] && step "test_gemm_gpu gather" gemm_gather.log timeout 300 "$b/tests/gpu/test_gemm_gpu" gather
if [ "$ngpu" -ge 2 ] && [ "${EP_TESTS:-1}" = 1 ]; then
  ab=$(cd "$b" && pwd)
  step "python test_gpu_comm.py" py_comm.log env WARPSPEC_LIBRARY="$ab/libwarpspec.so" WARPSPEC_CLI="$ab/warpspec" \
    PYTHONPATH="$PWD/python" timeout 400 python3 -m pytest -q -x -p no:cacheprovider python/tests/test_gpu_comm.py
fi
for n in 2 4; do # dispatch and combine alone (bench_ep.cu), FP8, 24 SMs, both receives
  [ "$ngpu" -ge "$n" ] || continue
  mkdir -p "$logs/trace$n" # one more pair per case under a role timeline: ep_r<rank>_T<tokens>_s24_<receive>.csv
  step "warpspec bench ep, $n ranks" bench_ep_$n.log timeout 400 "$b/warpspec" bench ep --ranks $n \
    --csv "$logs/bench_ep_$n.csv" --trace "$logs/trace$n"
  grep -E "rank 0 .*T +(128|4096) " "$logs/bench_ep_$n.log" >>"$sum"
  python3 bench/trace_ep.py "$logs"/trace$n/ep_r0_T4096_s24_*.csv "$logs"/trace$n/ep_r0_T128_s24_*.csv \
    >>"$sum" 2>&1
  for r in $(seq 1 $((n - 1))); do # the other ranks' combine, where rank 0 waits for them
    python3 bench/trace_ep.py "$logs"/trace$n/ep_r${r}_T4096_s24_index.csv 2>&1 | grep -E "REDUCER|GATHERER" |
      sed "s/^/  rank $r /" >>"$sum"
  done
  rm -f "$logs"/trace$n/ep_r[1-9]_*.csv
done
for n in 2 4; do
  [ "$ngpu" -ge "$n" ] || continue
  for g in 0 1; do
    step "layer, $n ranks, gathered L1 = $g" "layer_${n}_g$g.log" env WARPSPEC_MOE_GATHER=$g timeout 300 "$b/warpspec" \
      bench moe --ranks $n --tokens 4096 --shape DeepSeekV3
    grep -E "rank 0.*(unfused|fused  )" "$logs/layer_${n}_g$g.log" >>"$sum"
  done
done
tar -czf "$out/ep_logs.tar.gz" -C "$logs" .
cat "$sum"
exit $rc
