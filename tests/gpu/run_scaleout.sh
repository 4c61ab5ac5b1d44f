#!/usr/bin/env bash
# run_scaleout.sh [BUILD] - issue 5's one call per machine size: with N = every GPU of
# the machine (4 or 8), one process per GPU: the sendrecv tests as a ring (send to
# rank+1, receive from rank-1), the sendrecv benchmark and the ring all-gather against
# NCCL (ncclSend/ncclRecv in a group, ncclAllGather), correctness on random data at every
# size. Logs under $OUT (or ./results). NO_BUILD=1: use a build carried from elsewhere;
# MAX_BYTES caps the benchmark sizes (a smoke test; the full run goes to 1 GiB).
set -u
build=${1:-build}
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
max=${MAX_BYTES:-1073741824}
n=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$n" -ge 2 ] || { echo "needs 2+ GPUs, found $n"; exit 77; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv; nvidia-smi topo -m; } >"$out/scale_build.log" 2>&1
ws_build "$build" "$out/scale_build.log" || exit 1
echo "== $n ranks"
timeout 900 "$build/warpspec" run -n "$n" --timeout 880 -- "$build/tests/gpu/test_sendrecv" all >"$out/scale_tests_$n.log" 2>&1
echo "test_sendrecv on $n ranks rc=$?"; grep -E "ok$|FAIL|wrong|WS_ERR" "$out/scale_tests_$n.log" | sort | uniq -c | head -20
"$build/warpspec" bench sendrecv --ranks "$n" --max-bytes "$max" --csv "$out/scale_sendrecv_$n.csv" 2>&1 | tee "$out/scale_sendrecv_$n.txt"
"$build/warpspec" bench allgather --ranks "$n" --max-bytes "$max" --csv "$out/scale_allgather_$n.csv" 2>&1 | tee "$out/scale_allgather_$n.txt"
python3 bench/plot_sendrecv.py "$out/scale_sendrecv_$n.csv" "$out/scale_sendrecv_$n.png" || echo "plot failed"
