#!/usr/bin/env bash
# run_moe_stages.sh [BUILD] - is the fused experts kernel's weight stream bound by the
# bytes in flight? Rebuilds only src/moe/layer/layer_kernel.cu in BUILD (default build, already
# configured and built) at each pipe depth in STAGES (default "2 3 4"; 4 is the shipped
# one) through the WS_MOE_EXPERTS_FLAGS cache variable, and times the layer with
# `warpspec bench moe` on one GPU at each of TOKENS (default "1 8"; SHAPE, default
# DeepSeekV3). TILE=128 varies the 128-row tile's depth (MX_WIDE_STAGES) and runs with
# WARPSPEC_MOE_TILE=128. BUILD is rebuilt with the shipped depths at the end.
# If the time grows about as 1 / stages, the stream is bound by bytes in flight
# (docs/design.md, MoE layer: the swap-AB decode tile).
# Logs in $OUT (or ./results): stages_<tile>_N.txt, one per depth.
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
tile=${TILE:-64}
macro=MX_STAGES
[ "$tile" = 128 ] && macro=MX_WIDE_STAGES
rebuild() { # rebuild() OPTIONS LOG
  cmake -S . -B "$build" "-DWS_MOE_EXPERTS_FLAGS=$1" >>"$2" 2>&1 &&
    cmake --build "$build" -j "$(nproc)" --target warpspec_cli >>"$2" 2>&1
}
for s in ${STAGES:-2 3 4}; do
  log="$out/stages_${tile}_${s}.txt"
  : >"$log"
  rebuild "-D$macro=$s" "$out/stages_${tile}_${s}_build.log" || { echo "$macro=$s: build failed"; tail -20 "$out/stages_${tile}_${s}_build.log"; continue; }
  for t in ${TOKENS:-1 8}; do
    WARPSPEC_MOE_TILE=$tile timeout 180 "$build/warpspec" bench moe --ranks 1 --shape "${SHAPE:-DeepSeekV3}" --tokens "$t" >>"$log" 2>&1
  done
  echo "$macro=$s (tile $tile):"
  grep -E "(fused|layer)  :" "$log" | sed -E 's/bench moe rank 0: //; s/ \| alone [0-9.]+: dispatch +[0-9.]+ / | /; s/ combine .*\| / | /'
done
rebuild "" "$out/stages_restore_build.log" || echo "restoring $build failed"
