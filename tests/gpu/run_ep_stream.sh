#!/usr/bin/env bash
# run_ep_stream.sh [BUILD] - what bounds combine at few SMs, in one device call on 2 or 4
# GPUs: build (BUILD, default build-gpu, -DWS_WERROR=ON), then
#   1. the mix without the protocol: `warpspec bench combine-mix` (every GPU at once: the
#      reduce's reads and NVLink pushes, each alone and together, at 24 / 48 / 132 CTAs);
#   2. combine itself: `bench ep` at 4096 tokens per rank, 24 and 48 SMs (EP4 on 4 GPUs,
#      else EP2), and the role timelines of one dispatch + combine pair at 24 SMs;
#   3. NCU=1: ncu of the mix's register, cp.async-ring and bulk-ring kernels at 24 CTAs
#      (NCU_ONLY=1: that alone).
# Session 32 (EP2): the cp.async ring's bulk-copy form lost (combine 505 -> 581 us) and was
# removed; the mix's forms stay as the measurement. Everything goes to $OUT/ep_stream.txt.
set -u
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
b=${1:-build-gpu}
sum="$out/ep_stream.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
{ date -u; nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader; git log --oneline -1; } >"$sum"
cmake -S . -B "$b" -DWS_WERROR=ON >/dev/null 2>&1 &&
  cmake --build "$b" -j "$(nproc)" --target warpspec warpspec_cli >"$out/ep_stream_build.log" 2>&1 ||
  { grep -E "error|warning" "$out/ep_stream_build.log" | head -30 | tee -a "$sum"; exit 1; }
rc=0
if [ "${NCU_ONLY:-0}" != 1 ]; then
timeout 120 "$b/warpspec" bench combine-mix >>"$sum" 2>&1 || rc=1
# combine itself at the same SM counts, and its role timelines (rank 0: the reduce's and
# the gather's spans and waits), beside the mix's floors
ranks=$([ "$ngpu" -ge 4 ] && echo 4 || echo 2)
for sms in 24 48; do
  timeout 120 "$b/warpspec" bench ep --ranks "$ranks" --tokens 4096 --sms "$sms" --receive index 2>&1 | grep "rank 0" >>"$sum" || rc=1
done
tdir=$(mktemp -d)
timeout 300 "$b/warpspec" bench ep --ranks "$ranks" --tokens 4096 --sms 24 --receive index --trace "$tdir" >/dev/null 2>&1 || rc=1
echo "role timelines, EP$ranks, 24 SMs, rank 0:" >>"$sum"
python3 bench/trace_ep.py "$tdir"/ep_r0_T4096_s24_*.csv >>"$sum" 2>&1
rm -rf "$tdir"
fi # NCU_ONLY
# NCU=1: where the mix's warps wait at 24 CTAs (ncu, one launch each of the register form,
# the cp.async ring and the bulk ring; the kernels have no cross-GPU waits, so ncu can replay
# them), reports into $OUT/ep_stream_ncu.tgz
if [ "${NCU:-0}" = 1 ] || [ "${NCU_ONLY:-0}" = 1 ]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  nd=$(mktemp -d)
  # ncu's demangled names read mix_regs<(int)0>: the regex escapes the parentheses
  for k in 'mix_regs<\(int\)0>' 'mix_ring<\(int\)1>' 'mix_ring<\(int\)2>'; do
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
