#!/usr/bin/env bash
# run_probes.sh [BUILD] - where the fused experts kernel's tiles spend their time, without
# the trace marks' own round trips: a WS_PROBES build (default build-probes; its warpspec
# CLI only), then for each shape in SHAPES (default "DeepSeekV3 Flash") and TOKENS
# (default 8192) one traced `warpspec bench moe` call of block 0, and bench/trace_probes.py
# on the fused path's timeline (PROBE_PATH=layer: the one-kernel layer's; per role and
# tile kind: the wait for the first stage, the K loop, the epilogue; the loader's wait for
# its item, first slot, act rows, stages; the scheduler's decode of its first tile).
# PROBE_CMAKE_ARGS adds to the build's cmake line, e.g. -DCMAKE_CUDA_FLAGS=-DWS_PROBES_STAGES=1
# (the loader's census of what holds each slot it refills) or -DWS_PROBES_MATH=1 likewise.
# Logs in $OUT (or ./results): probes_build.log, probes_<shape>_<tokens>.txt, probes.tgz.
set -u
build=${1:-build-probes}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
{ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DWS_PROBES=ON ${PROBE_CMAKE_ARGS:-} &&
  cmake --build "$build" -j "$(nproc)" --target warpspec_cli; } >"$out/probes_build.log" 2>&1 ||
  { tail -30 "$out/probes_build.log"; exit 1; }
tmp=$(mktemp -d)
for sh in ${SHAPES:-DeepSeekV3 Flash}; do
  for t in ${TOKENS:-8192}; do
    timeout 120 "$build/warpspec" bench moe --ranks 1 --shape "$sh" --tokens "$t" --trace "$tmp/p_${sh}_$t" \
      --trace-block 0 >"$tmp/bench_${sh}_$t.txt" 2>&1 || echo "bench $sh $t failed: $(tail -2 "$tmp/bench_${sh}_$t.txt")"
    for f in "$tmp"/p_${sh}_$t.*.${PROBE_PATH:-fused}.csv; do
      [ -f "$f" ] && python3 "$(dirname "$0")/../../bench/trace_probes.py" "$f" | tee "$out/probes_${sh}_$t.txt"
    done
  done
done
tar czf "$out/probes.tgz" -C "$tmp" .
rm -rf "$tmp"
