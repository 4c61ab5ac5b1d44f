#!/usr/bin/env bash
# run_ep_fused.sh [BUILD] - the fused combine (WARPSPEC_EP_COMBINE=fused,
# combine.cu) against the two kernels, in one device call on 4 GPUs (2 work too): build
# (BUILD, default build-gpu, -DWS_WERROR=ON), then
#   1. correctness: test_moe all on 4 ranks and on 2 under the fused form, test_moe_idle
#      all on 4 under both (FORMS: the forms besides kernels, default fused);
#   2. speed: `bench ep` at 4096 tokens per rank, 24 and 48 SMs (EP4 on 4 GPUs, else EP2), at
#      128 tokens with the decode default, and EP2 at 24 SMs, every form alternating
#      (ROUNDS, default 1);
#   3. the role timelines of one fused pair at 24 SMs (rank 0).
# Everything goes to $OUT/ep_fused.txt (logs: $OUT/ep_fused/).
set -u
out=${OUT:-results}
logs="$out/ep_fused"
mkdir -p "$logs"
. "$(dirname "$0")/env.sh"
b=${1:-build-gpu}
sum="$out/ep_fused.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
forms=${FORMS:-fused}
{ date -u; nvidia-smi --query-gpu=index,name --format=csv,noheader; git log --oneline -1; } >"$sum"
cmake -S . -B "$b" -DWS_WERROR=ON >/dev/null 2>&1 &&
  cmake --build "$b" -j "$(nproc)" --target warpspec warpspec_cli test_moe test_moe_idle >"$logs/build.log" 2>&1 ||
  { grep -E "error|warning" "$logs/build.log" | head -30 | tee -a "$sum"; exit 1; }
rc=0
ranks=$([ "$ngpu" -ge 4 ] && echo 4 || echo 2)
if [ "${TESTS:-1}" = 1 ]; then
  for f in $forms; do
    step "test_moe all, $ranks ranks, $f" "moe_${f}_$ranks.log" env WARPSPEC_EP_COMBINE=$f timeout 150 \
      "$b/warpspec" run -n "$ranks" --timeout 140 -- "$b/tests/gpu/test_moe" all
  done
  f=$(echo $forms | cut -d' ' -f1)
  step "test_moe all, 2 ranks, $f" "moe_${f}_2.log" env WARPSPEC_EP_COMBINE=$f timeout 150 \
    "$b/warpspec" run -n 2 --timeout 140 -- "$b/tests/gpu/test_moe" all
  for f in kernels $f; do # idle ranks: a busy rank's standalone combine beside the idle ones' layer kernel
    step "test_moe_idle all, $ranks ranks, $f" "idle_${f}_$ranks.log" env WARPSPEC_EP_COMBINE=$f timeout 150 \
      "$b/warpspec" run -n "$ranks" --timeout 140 -- "$b/tests/gpu/test_moe_idle" all
  done
fi
values=kernels,$(echo $forms | tr ' ' ',')
for args in "--ranks $ranks --tokens 4096 --sms 24" "--ranks $ranks --tokens 4096 --sms 48" \
            "--ranks $ranks --tokens 128" "--ranks 2 --tokens 4096 --sms 24"; do
  echo "bench ep $args --receive index:" >>"$sum"
  timeout 300 bash tests/gpu/run_ab.sh WARPSPEC_EP_COMBINE=$values "${ROUNDS:-1}" -- \
    "$b/warpspec" bench ep $args --receive index >>"$sum" 2>&1 || rc=1
done
tdir=$(mktemp -d)
WARPSPEC_EP_COMBINE=fused timeout 300 "$b/warpspec" bench ep --ranks "$ranks" --tokens 4096 --sms 24 --receive index \
  --trace "$tdir" >"$logs/trace.log" 2>&1 || rc=1
echo "role timelines, fused, EP$ranks, 24 SMs, rank 0:" >>"$sum"
python3 bench/trace_ep.py "$tdir"/ep_r0_T4096_s24_*.csv >>"$sum" 2>&1
rm -rf "$tdir"
echo "rc=$rc" >>"$sum"
exit $rc
