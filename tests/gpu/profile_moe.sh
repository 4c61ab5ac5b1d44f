#!/usr/bin/env bash
# profile_moe.sh [BUILD] - where the MoE layer's time goes at few tokens, on one GPU:
# role timelines of block 0 (TOKENS, default "1 128"; CSV + PNG), Nsight Compute kernel
# times of every kernel of one layer call (caches not flushed: the layer runs warm in a
# model), and for the kernels in KERNELS (regex, default the transfer kernels) the stall
# reasons per SASS line (needs a -lineinfo build). Everything is packed into
# $OUT/profile_moe.tgz (the device returns a few files only).
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
ws=$build/warpspec
tmp=$(mktemp -d)
shape=${SHAPE:-DeepSeekV3}
for t in ${TOKENS:-1 128}; do
  timeout 120 "$ws" bench moe --ranks 1 --shape "$shape" --tokens "$t" --trace "$tmp/tl" --trace-block 0 >"$tmp/trace_$t.txt" 2>&1
  echo "trace $t tokens rc=$?"
done
for f in "$tmp"/tl*.csv; do python3 bench/plot_trace.py "$f" "${f%.csv}.png" >/dev/null 2>&1; done
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 200 "$ncu" --target-processes all --cache-control none --clock-control none \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__cycles_active.avg \
  "$ws" bench moe --ranks 1 --shape "$shape" --tokens "${NCU_TOKENS:-1}" >"$tmp/ncu_times.txt" 2>&1
echo "ncu times rc=$?"
timeout 200 "$ncu" --target-processes all --cache-control none --clock-control none -k "regex:${KERNELS:-ep_}" \
  --launch-skip 10 --launch-count ${NCU_COUNT:-5} --set full --import-source yes -o "$tmp/detail" \
  "$ws" bench moe --ranks 1 --shape "$shape" --tokens "${NCU_TOKENS:-1}" >"$tmp/ncu_detail.log" 2>&1
echo "ncu detail rc=$?"
if [ -f "$tmp/detail.ncu-rep" ]; then
  "$ncu" -i "$tmp/detail.ncu-rep" --page details >"$tmp/ncu_details.txt" 2>&1
  "$ncu" -i "$tmp/detail.ncu-rep" --page source --print-source sass --csv >"$tmp/ncu_source.csv" 2>&1
fi
tar czf "$out/profile_moe.tgz" -C "$tmp" .
rm -rf "$tmp"
