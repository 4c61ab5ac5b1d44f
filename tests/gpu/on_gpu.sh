#!/usr/bin/env bash
# on_gpu.sh SLOT|all CMD... - run a GPU test on its own GPU, so that `ctest -j` runs the
# one-GPU tests side by side on a machine with several GPUs (each on its own device) while
# the multi-GPU tests still have every GPU to themselves.
#   SLOT  the test's slot (0-3, CTest's RESOURCE_LOCK gpu_slotN): device SLOT mod the
#         number of GPUs, the only one the test sees (CUDA_VISIBLE_DEVICES)
#   all   every GPU (the multi-rank tests: CTest holds all four slot locks for them)
# CTest's locks name the devices the configuring machine had (tests/gpu/CMakeLists.txt),
# so CTest starts a test only when its device is free; the device is locked here too
# (flock on a file per device, taken in device order: no deadlock between a one-GPU test
# and an all-GPU one), for a build configured on a machine with more GPUs than this one. Without a GPU the command
# just runs (and reports itself skipped, 77).
set -u
slot=$1; shift
n=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")
[ "$n" -ge 1 ] 2>/dev/null || exec "$@"
# devices as this process may already be restricted to (CUDA_VISIBLE_DEVICES as a list)
IFS=, read -r -a vis <<<"${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((n - 1)))}"
[ "${#vis[@]}" -ge 1 ] && [ "${#vis[@]}" -lt "$n" ] && n=${#vis[@]}
dir=${TMPDIR:-/tmp}
lock() { exec {fd}>"$dir/warpspec-ctest-gpu-$1.lock" && flock "$fd"; }
if [ "$slot" = all ]; then
  for ((i = 0; i < n; i++)); do lock "${vis[$i]:-$i}"; done
else
  d=${vis[$((slot % n))]:-$((slot % n))}
  lock "$d"
  export CUDA_VISIBLE_DEVICES=$d
fi
exec "$@"
