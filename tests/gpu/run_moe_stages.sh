#!/usr/bin/env bash
# run_moe_stages.sh [STAGES] - is the decode weight stream bound by the bytes in flight?
# Builds the library with each pipe depth of the fused experts kernel's 64-row tile
# (MX_STAGES, default "2 3 4"; 4 is the shipped one) into build-stages-N, then times the
# whole layer at few tokens per rank (TOKENS, default "1 8"; SHAPE, default DeepSeekV3)
# with `warpspec bench moe` on one GPU. If the layer's time grows about as 1 / stages, the
# stream is bound by bytes in flight (docs/design.md, MoE layer: the swap-AB decode tile).
# Logs in $OUT (or ./results): stages_N.txt, one per depth.
set -u
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
for s in ${1:-2 3 4}; do
  b="build-stages-$s"
  cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="-DMX_STAGES=$s" >"$out/stages_${s}_build.log" 2>&1 &&
    cmake --build "$b" -j "$(nproc)" --target warpspec_cli >>"$out/stages_${s}_build.log" 2>&1 ||
    { echo "stages $s: build failed"; tail -20 "$out/stages_${s}_build.log"; continue; }
  : >"$out/stages_$s.txt"
  for t in ${TOKENS:-1 8}; do
    timeout 120 "$b/warpspec" bench moe --ranks 1 --shape "${SHAPE:-DeepSeekV3}" --tokens "$t" >>"$out/stages_$s.txt" 2>&1
  done
  echo "MX_STAGES=$s:"
  grep -E "layer  :" "$out/stages_$s.txt" | sed -E 's/bench moe rank 0: //; s/\| alone.*\|/|/'
done
