#!/usr/bin/env bash
# run_pytest.sh PYTHON SOURCE_DIR MODE - the Python tests as CTest runs them, against the
# build tree (WARPSPEC_LIBRARY / WARPSPEC_CLI set by CTest, the package from python/).
#   cpu   the tests that need no GPU (CI runs these)
#   gpu   one-GPU tests; exit 77 (CTest: skipped) without PyTorch or an sm_90 GPU
#   2gpu  two-process tests; exit 77 with fewer than 2 sm_90 GPUs
# Without pytest: exit 77, unless WS_REQUIRE_PYTEST=1 (CI), which makes it a failure.
set -u
py=$1 src=$2 mode=$3
if ! "$py" -c "import pytest" 2>/dev/null; then
  echo "pytest is not installed for $py"
  [ "${WS_REQUIRE_PYTEST:-0}" = 1 ] && exit 1
  echo "skipped (pip install pytest)"; exit 77
fi
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
gpus() { "$py" -c "import torch; print(sum(torch.cuda.get_device_capability(d)[0] == 9 for d in range(torch.cuda.device_count())) if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0; }
case $mode in
  cpu) sel="not gpu and not multi_gpu" ;;
  gpu) [ "$(gpus)" -ge 1 ] || { echo "no sm_90 GPU (or no PyTorch): skipped"; exit 77; }; sel="gpu and not multi_gpu" ;;
  2gpu) [ "$(gpus)" -ge 2 ] || { echo "fewer than 2 sm_90 GPUs (or no PyTorch): skipped"; exit 77; }; sel="multi_gpu" ;;
  *) echo "mode: cpu, gpu or 2gpu"; exit 2 ;;
esac
# on the GPU machine the slowest tests are named (device time is what a session runs short of)
dur=""
[ "$mode" = cpu ] || dur="--durations=12"
cd "$src/python/tests" && exec "$py" -m pytest -q -rs -p no:cacheprovider $dur -m "$sel" .
