#!/usr/bin/env bash
# session 26, call A (x4; copy to tests/gpu/_s26_a.sh): the DeepSeek-V3 MoE layer's token sweep on 4, 2 and 1 ranks
# (bench moe --csv, tokens 1..8192) with the HBM floor and the tensor-core bound (the grouped FP8 GEMM's rate measured
# first in this call) -> plots for issue 37 (the MoE layer on 4 GPUs) and issue 38 (EP1/EP2/EP4). ~5-7 min.
set -u
. tests/gpu/env.sh
S=$OUT/summary.txt; s=$SECONDS
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader > $S
B=/tmp/b26
( cmake -S . -B $B -DWS_WERROR=ON && cmake --build $B -j 64 --target warpspec warpspec_cli ) > /tmp/b26.log 2>&1
echo "build rc=$? warnings $(grep -ci warning /tmp/b26.log) at $((SECONDS-s)) s" >> $S
timeout 60 $B/warpspec bench gemm --only fp8,8,8192,4096,7168 > $OUT/tc.txt 2>&1
TC=$(awk '$1=="fp8" {print $10}' $OUT/tc.txt | head -1); echo "grouped FP8 GEMM 8 x 8192 x 4096 x 7168: $TC TFLOPS" >> $S
for n in 4 2 1; do
  timeout 240 $B/warpspec bench moe --ranks $n --shape DeepSeekV3 --csv $OUT/moe_ep$n.csv > $OUT/moe_ep$n.txt 2>&1
  echo "bench moe ranks $n rc=$? at $((SECONDS-s)) s" >> $S
  python3 bench/plot_moe.py $OUT/moe_ep$n.csv $OUT/moe_ep$n.png "DeepSeek-V3 MoE layer, EP$n, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" ${TC:-} >> $S 2>&1
done
(cd $OUT && tar czf moe_sweep.tgz moe_ep* tc.txt && rm -f moe_ep* tc.txt)
echo "done at $((SECONDS-s)) s" >> $S
cat $S
