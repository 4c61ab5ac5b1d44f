#!/usr/bin/env bash
# share_gpu.sh N CMD... - run CMD as N ranks on the GPUs present, several ranks per GPU,
# under CUDA MPS: for the multi-rank tests on a machine with fewer GPUs than ranks
# (correctness only: ranks on one GPU talk through its memory, not NVLink, and each gets
# 100 / N % of the SMs). Starts an MPS daemon of its own and stops it again.
#   tests/gpu/share_gpu.sh 2 build/tests/gpu/test_moe all
# SHARE_SM_PERCENT: each rank's cap on the SMs (default 100 / N). Reliable for 2 ranks; 4
# ranks time out now and then in the 24-CTA EP cases (25%: 4 of 5 runs; uncapped: in
# the first call; session 42): the protocol's kernels need every rank's CTAs resident.
# Needs nvidia-cuda-mps-control and a build (warpspec run, WARPSPEC_SHARE_GPU=1: see
# ws_comm_init_from_env). Exit status: the command's.
set -u
n=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
ws=${WS_BIN:-build/warpspec}
command -v nvidia-cuda-mps-control >/dev/null || { echo "share_gpu: nvidia-cuda-mps-control not found" >&2; exit 77; }
export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
nvidia-cuda-mps-control -d || { echo "share_gpu: MPS did not start" >&2; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"' EXIT
export WARPSPEC_SHARE_GPU=1 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=${SHARE_SM_PERCENT:-$((100 / n))}
"$ws" run -n "$n" --timeout "${SHARE_TIMEOUT:-600}" -- "$@"
