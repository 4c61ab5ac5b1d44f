#!/usr/bin/env bash
# profile_mla.sh [BUILD] - where the MLA kernel's time goes now (issue 35; the last full
# profile, design_mla.md 6.1, is of session 22's kernel), on one GPU: for each shape in
# SHAPES (mla_once.py's arguments, ';'-separated; default sparse prefill at s_kv 8192, paged
# decode B128 x 4096 with the BF16 and the FP8 cache, the memory-bound decode B64 x 8192 at
# 16 heads with either cache, sparse decode B128 BF16), Nsight Compute's full set on one call of
# mla_sparse_kernel (bench/mla_once.py opens the profiler's range around its calls only),
# then the details (duration, tensor pipe, L1 / shared memory and L2 throughput, DRAM
# bytes, occupancy) and the stall reasons, overall (raw page) and per SASS line
# (bench/ncu_stalls.py). A -lineinfo build (BUILD, default build-li) names source
# lines; CUDA_FLAGS adds to its flags (a branch's experiment switch; the regex takes
# mla_sparse_kernel and the 16-head decode's mla_fewheads_kernel). Reports and text into
# $OUT/profile_mla.tgz, a summary printed.
set -u
build=${1:-build-li}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$build" "-DCMAKE_CUDA_FLAGS=-lineinfo ${CUDA_FLAGS:-}" >/dev/null 2>&1 &&
    cmake --build "$build" -j "$(nproc)" --target warpspec >"$out/profile_mla_build.log" 2>&1 ||
    { tail -20 "$out/profile_mla_build.log"; exit 1; }
fi
tmp=$(mktemp -d)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
py=(env PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python" WARPSPEC_LIBRARY="$PWD/$build/libwarpspec.so" python3)
IFS=';' read -ra shapes <<<"${SHAPES:-prefill 8192;decode 128 4096 0;decode 128 4096 1;decode 64 8192 0 16;decode 64 8192 1 16;sparse-decode 128 0}"
for sh in "${shapes[@]}"; do
  tag="$(tr ' ' '_' <<<"$sh")"
  timeout 300 "$ncu" --target-processes all --clock-control none --profile-from-start off \
    -k regex:'mla_(sparse|fewheads)_kernel' --launch-count 1 --set full --import-source yes -o "$tmp/$tag" \
    "${py[@]}" bench/mla_once.py $sh --calls 2 >"$tmp/$tag.log" 2>&1
  echo "$sh: ncu rc=$? $(grep -h 'mla_once' "$tmp/$tag.log")"
  rep="$tmp/$tag.ncu-rep"
  [ -f "$rep" ] || { tail -5 "$tmp/$tag.log"; continue; }
  "$ncu" -i "$rep" --page details >"$tmp/${tag}_details.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy" \
    "$tmp/${tag}_details.txt" | head -12 | sed "s/^/  /"
  "$ncu" -i "$rep" --page raw --csv --metrics \
    sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum \
    >"$tmp/${tag}_pipes.csv" 2>&1
  tail -1 "$tmp/${tag}_pipes.csv" | sed "s/^/  tensor %, smem reads %, smem writes %, L2 %, DRAM read: /"
  # each pipe's share of its peak issue rate (the FP8 forms' unpacks and byte permutes: which
  # pipe they load, and whether it is full); a regex, so that no unknown name fails the query
  "$ncu" -i "$rep" --page raw --csv --metrics 'regex:sm__inst_executed_pipe_[a-z0-9_]*\.avg\.pct_of_peak_sustained_active$' \
    >"$tmp/${tag}_issue.csv" 2>&1
  python3 - "$tmp/${tag}_issue.csv" <<'PY' | sed "s/^/  /"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) >= 3:
    vals = sorted(((float(v.replace(",", "")), k.split("pipe_")[1].split(".")[0]) for k, v in zip(rows[0], rows[-1])
                   if "pipe_" in k and v.replace(",", "").replace(".", "").isdigit()), reverse=True)
    print("issue % of peak by pipe: " + ", ".join(f"{n} {v:.0f}" for v, n in vals[:8]))
PY
  "$ncu" -i "$rep" --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_ >"$tmp/${tag}_stalls.csv" 2>&1
  python3 bench/ncu_stalls.py "$tmp/${tag}_stalls.csv" 2>&1 | head -14 | sed "s/^/  /"
  "$ncu" -i "$rep" --page source --print-source sass --csv >"$tmp/${tag}_source.csv" 2>&1
  python3 bench/ncu_stalls.py "$tmp/${tag}_source.csv" 12 2>&1 | head -16 | sed "s/^/  /"
done
tar czf "$out/profile_mla.tgz" -C "$tmp" .
rm -rf "$tmp"
