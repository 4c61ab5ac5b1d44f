#!/usr/bin/env bash
# run_ep_stream.sh [BUILD] - combine's row loads by bulk copies (WARPSPEC_EP_STREAM_LOAD=bulk,
# opt-in since session 31) in one device call on 2 or 4 GPUs: build (BUILD, default
# build-gpu, -DWS_WERROR=ON), then
#   1. correctness: test_moe all with bulk loads on 2 and 4 ranks (as many as there are);
#   2. the mix without the protocol: `warpspec bench combine-mix` (every GPU at once);
#   3. speed: `bench ep` at 4096 tokens per rank, cp against bulk alternating (run_ab.sh),
#      EP4 at 24 and 64 SMs and EP2 at 24 (EP2 only on 2 GPUs), then the EP4 layer once
#      each way (`bench moe --ranks 4 --tokens 4096`, its combine on 128 SMs);
#   4. role timelines of one dispatch + combine pair per form (bench/trace_ep.py, rank 0);
#   5. NCU=1: ncu of the mix's register, cp.async-ring and bulk-ring kernels at 24 CTAs
#      (NCU_ONLY=1: that alone; parts 1-4 take most of a 600 s device call).
# Everything goes to $OUT/ep_stream.txt.
set -u
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
b=${1:-build-gpu}
sum="$out/ep_stream.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
{ date -u; nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader; git log --oneline -1; } >"$sum"
cmake -S . -B "$b" -DWS_WERROR=ON >/dev/null 2>&1 &&
  cmake --build "$b" -j "$(nproc)" --target warpspec warpspec_cli test_moe >"$out/ep_stream_build.log" 2>&1 ||
  { grep -E "error|warning" "$out/ep_stream_build.log" | head -30 | tee -a "$sum"; exit 1; }
rc=0
if [ "${NCU_ONLY:-0}" != 1 ]; then
for n in 2 4; do
  [ "$ngpu" -ge "$n" ] || continue
  log=$(mktemp)
  WARPSPEC_EP_STREAM_LOAD=bulk timeout 300 "$b/warpspec" run -n "$n" --timeout 280 -- "$b/tests/gpu/test_moe" all >"$log" 2>&1
  r=$?
  [ $r -ne 0 ] && rc=1
  echo "test_moe all, bulk loads, $n ranks: rc=$r, $(tail -1 "$log")" >>"$sum"
  grep -E "FAIL|CHECK failed|stream" "$log" | head -12 >>"$sum"
  rm -f "$log"
done
timeout 120 "$b/warpspec" bench combine-mix >>"$sum" 2>&1 || rc=1
ab() { timeout 300 bash tests/gpu/run_ab.sh WARPSPEC_EP_STREAM_LOAD=cp,bulk "$@" >>"$sum" 2>&1 || rc=1; }
if [ "$ngpu" -ge 4 ]; then
  ab 2 -- "$b/warpspec" bench ep --ranks 4 --tokens 4096 --sms 24
  ab 2 -- "$b/warpspec" bench ep --ranks 4 --tokens 4096 --sms 64
  ab 1 -- "$b/warpspec" bench moe --ranks 4 --tokens 4096 --shape DeepSeekV3
else
  ab 2 -- "$b/warpspec" bench ep --ranks 2 --tokens 4096 --sms 24
fi
# role timelines of one pair per form (rank 0: the reduce's and the gather's spans and
# waits), so that a difference, or none, is seen inside combine's two kernels
ranks=$([ "$ngpu" -ge 4 ] && echo 4 || echo 2)
for form in cp bulk; do
  tdir=$(mktemp -d)
  WARPSPEC_EP_STREAM_LOAD=$form timeout 300 "$b/warpspec" bench ep --ranks "$ranks" --tokens 4096 --sms 24 \
    --receive index --trace "$tdir" >/dev/null 2>&1 || rc=1
  echo "role timelines, $form, EP$ranks, 24 SMs, rank 0:" >>"$sum"
  python3 bench/trace_ep.py "$tdir"/ep_r0_T4096_s24_*.csv >>"$sum" 2>&1
  rm -rf "$tdir"
done
fi # NCU_ONLY
# NCU=1: where the mix's warps wait at 24 CTAs (ncu, one launch each of the register form,
# the cp.async ring and the bulk ring; the kernels have no cross-GPU waits, so ncu can replay
# them), reports into $OUT/ep_stream_ncu.tgz
if [ "${NCU:-0}" = 1 ] || [ "${NCU_ONLY:-0}" = 1 ]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  nd=$(mktemp -d)
  for k in "mix_regs<0>" "mix_ring<1>" "mix_ring<2>"; do
    tag=$(tr -c 'a-z0-9\n' '_' <<<"$k")
    timeout 300 "$ncu" --kernel-name-base demangled -k "regex:$k" --launch-skip 1 --launch-count 1 --set full \
      -o "$nd/$tag" "$b/warpspec" bench combine-mix >"$nd/$tag.log" 2>&1
    echo "ncu $k: rc=$?" >>"$sum"
    [ -f "$nd/$tag.ncu-rep" ] || continue
    "$ncu" -i "$nd/$tag.ncu-rep" --page details >"$nd/${tag}_details.txt" 2>&1
    grep -E "Duration|Memory Throughput|L1/TEX Cache Throughput|Issue Slots Busy|Registers Per Thread" \
      "$nd/${tag}_details.txt" | head -8 | sed "s/^/  /" >>"$sum"
    "$ncu" -i "$nd/$tag.ncu-rep" --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_ \
      >"$nd/${tag}_stalls.csv" 2>&1
    python3 bench/ncu_stalls.py "$nd/${tag}_stalls.csv" 2>&1 | head -16 | sed "s/^/  /" >>"$sum"
  done
  tar czf "$out/ep_stream_ncu.tgz" -C "$nd" .
  rm -rf "$nd"
fi
echo "rc=$rc" >>"$sum"
exit $rc
