# env.sh - sourced by the GPU scripts: NVLink multicast off (the machines' rule), and
# NVSHMEM's host library from the Python wheel on the loader path, so that a build
# configured on another machine (carried here) finds it.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
_ws_nvshmem=$(python3 -c 'import nvidia.nvshmem as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$_ws_nvshmem" ] && export LD_LIBRARY_PATH="$_ws_nvshmem${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _ws_nvshmem
