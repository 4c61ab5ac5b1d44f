#!/usr/bin/env bash
# session 26, call B (x4; bash .scratch/export_branches.sh s25-ep-row-align s25-bf16-pair; copy to tests/gpu/_s26_b.sh; carry
# [".scratch/br"]): inbox rows on 128-byte lines (EP_ROW_ALIGN) against main. Correctness: test_moe all on 1, 2 and 4
# ranks and test_moe_idle on 4 (the branch). Speed, alternating, two rounds: bench ep --ranks 4 --tokens 4096 (dispatch
# and combine GB/s), bench moe --ranks 1 --tokens 4096 with WARPSPEC_MOE_GATHER=1 (the gathered L1) and its DRAM bytes
# (ncu, one launch). Merge if correct and not slower. ~5 min.
set -u
. tests/gpu/env.sh
S=$OUT/summary.txt; s=$SECONDS
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader > $S
for v in main al; do
  src=.; [ $v = al ] && src=.scratch/br/s25-ep-row-align
  ( cmake -S $src -B /tmp/b_$v -DWS_WERROR=ON && cmake --build /tmp/b_$v -j 32 --target warpspec warpspec_cli test_moe test_moe_idle ) > /tmp/b_$v.log 2>&1 &
done; wait
echo "builds at $((SECONDS-s)) s: $(grep -ci warning /tmp/b_al.log) warnings (branch)" >> $S
B=/tmp/b_al
for n in 1 2 4; do timeout 200 $B/warpspec run -n $n --timeout 190 -- $B/tests/gpu/test_moe all > $OUT/t_moe_$n.txt 2>&1; echo "test_moe all $n ranks rc=$? $(tail -1 $OUT/t_moe_$n.txt)" >> $S; done
timeout 200 $B/warpspec run -n 4 --timeout 190 -- $B/tests/gpu/test_moe_idle all > $OUT/t_idle_4.txt 2>&1; echo "test_moe_idle 4 ranks rc=$?" >> $S
for r in 1 2; do for v in main al; do
  timeout 120 /tmp/b_$v/warpspec bench ep --ranks 4 --tokens 4096 2>&1 | grep -E "rank 0 " | sed "s/^/$v r$r ep4: /" >> $OUT/ab.txt
  WARPSPEC_MOE_GATHER=1 timeout 60 /tmp/b_$v/warpspec bench moe --ranks 1 --shape DeepSeekV3 --tokens 4096 2>&1 | grep unfused | sed "s/^/$v r$r gathered: /" >> $OUT/ab.txt
done; done
for v in main al; do
  WARPSPEC_MOE_GATHER=1 timeout 60 ncu --clock-control none -k regex:gemm_fp8_gather --launch-count 1 --metrics dram__bytes_read.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum /tmp/b_$v/warpspec bench moe --ranks 1 --shape DeepSeekV3 --tokens 4096 2>&1 | grep -E "dram__|gpu__time|lts__" | sed "s/^/$v ncu: /" >> $S
done
cat $OUT/ab.txt >> $S
echo "done at $((SECONDS-s)) s" >> $S
cat $S
