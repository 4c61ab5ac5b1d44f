# env.sh - sourced by the GPU scripts: NVLink multicast off (the machines' rule), and
# NVSHMEM's host library from the Python wheel on the loader path, so that a build
# configured on another machine (carried here) finds it.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
_ws_nvshmem=$(python3 -c 'import nvidia.nvshmem as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$_ws_nvshmem" ] && export LD_LIBRARY_PATH="$_ws_nvshmem${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _ws_nvshmem

# ws_build BUILD LOG: configure and build into BUILD, output appended to LOG; on failure
# the log's tail and status 1. NO_BUILD=1 skips it (a build carried from elsewhere).
ws_build() {
  [ "${NO_BUILD:-0}" = 1 ] && return 0
  cmake -S . -B "$1" >>"$2" 2>&1 && cmake --build "$1" -j "$(nproc)" >>"$2" 2>&1 || { tail -30 "$2"; return 1; }
}
