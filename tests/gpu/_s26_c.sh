#!/usr/bin/env bash
# session 26, call C (one GPU; bash .scratch/export_branches.sh s25-ep-row-align s25-bf16-pair; copy to
# tests/gpu/_s26_c.sh; carry [".scratch/br"]): the BF16 tile in CTA pairs. test_gemm_gpu (BF16 single vs pairs bit for bit, and the pair kernel asserted to have run;
# a wrong barrier count hangs until the pipe's bound), then the whole bench gemm with WARPSPEC_GEMM_PAIR=0|1,
# alternating, two rounds (the BF16 rows are the A/B; the FP8 rows repeat session 25's). Merge if bit-equal and faster
# where BF16 trails (1 x 64-2048 rows). ~4 min.
set -u
. tests/gpu/env.sh
S=$OUT/summary.txt; s=$SECONDS
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader > $S
B=/tmp/bbp
( cmake -S .scratch/br/s25-bf16-pair -B $B -DWS_WERROR=ON && cmake --build $B -j 16 --target warpspec warpspec_cli test_gemm_gpu ) > /tmp/bbp.log 2>&1
echo "build rc=$? warnings $(grep -ci warning /tmp/bbp.log) at $((SECONDS-s)) s" >> $S
WARPSPEC_TIMEOUT_MS=5000 timeout 280 $B/tests/gpu/test_gemm_gpu > $OUT/t_gemm.txt 2>&1; echo "test_gemm_gpu rc=$? $(tail -1 $OUT/t_gemm.txt) at $((SECONDS-s)) s" >> $S
grep -E "CTA pairs|FAIL|DIFFERENT|timeout|error" $OUT/t_gemm.txt | sort | uniq -c | head >> $S
for r in 1 2; do for p in 0 1; do
  WARPSPEC_GEMM_PAIR=$p timeout 100 $B/warpspec bench gemm 2>&1 | grep -E "^  (fp8|bf16) " | sed "s/^/pair$p r$r /" >> $OUT/gemm_ab.txt
done; done
grep bf16 $OUT/gemm_ab.txt >> $S
echo "done at $((SECONDS-s)) s" >> $S
cat $S
