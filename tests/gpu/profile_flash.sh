#!/usr/bin/env bash
# profile_flash.sh [BUILD] - where flash attention's time goes against cuDNN's on the shapes
# where we trail (issue 35), on one GPU: for each shape in SHAPES ("B S H D CAUSAL;...",
# default the short causal d 128 rows and one long row) Nsight Compute's full set on a few
# calls of our kernel and of what SDPA's cuDNN backend launches for it (bench/attn_once.py
# drives both and opens the profiler's range around those calls only; its output checked
# against ours). Then per report the details page (duration, SOL, tensor pipe, DRAM bytes,
# L2 hit rate, occupancy) and, for ours, the stall reasons per SASS line (bench/ncu_stalls.py;
# -lineinfo builds name the source lines). Everything is packed into $OUT/profile_flash.tgz,
# a summary printed (both kernels' SASS and stalls since session 30). First run in session 29 (one H200; docs/results/h200_s29_flash_ncu.txt).
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
tmp=$(mktemp -d)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
py=(env PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python" WARPSPEC_LIBRARY="$PWD/$build/libwarpspec.so" python3)
IFS=';' read -ra shapes <<<"${SHAPES:-32 512 16 128 1;16 1024 32 128 1;16 1024 32 128 0;2 8192 16 128 1}"
for sh in "${shapes[@]}"; do
  read -r b s h d c <<<"$sh"
  tag="B${b}_S${s}_H${h}_d${d}_c${c}"
  for be in warpspec cudnn; do
    timeout 240 "$ncu" --target-processes all --cache-control all --clock-control none --profile-from-start off \
      --launch-count 2 --set full --import-source yes -o "$tmp/${tag}_$be" \
      "${py[@]}" bench/attn_once.py "$be" $b $s $h $d $c 4 >"$tmp/${tag}_$be.log" 2>&1
    echo "$tag $be: ncu rc=$? $(grep -h 'relative error' "$tmp/${tag}_$be.log")"
    rep="$tmp/${tag}_$be.ncu-rep"
    [ -f "$rep" ] || continue
    "$ncu" -i "$rep" --page details >"$tmp/${tag}_${be}_details.txt" 2>&1
    grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|Achieved Occupancy|Registers Per Thread" \
      "$tmp/${tag}_${be}_details.txt" | head -24 | sed "s/^/  /"
    # SASS with per-line samples for both: ours by source line, cuDNN's for its tile shape
    # (HGMMA forms), its instruction mix and where its warps wait
    "$ncu" -i "$rep" --page source --print-source sass --csv >"$tmp/${tag}_${be}_source.csv" 2>&1
    "$ncu" -i "$rep" --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_ >"$tmp/${tag}_${be}_stalls.csv" 2>&1
    python3 bench/ncu_stalls.py "$tmp/${tag}_${be}_stalls.csv" 2>&1 | head -20 | sed "s/^/  /"
  done
done
tar czf "$out/profile_flash.tgz" -C "$tmp" .
rm -rf "$tmp"
