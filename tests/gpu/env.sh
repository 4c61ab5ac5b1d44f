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

# step NAME LOG COMMAND...: run COMMAND with its output in $logs/LOG, then one line of
# outcome (status, seconds into the script, the log's last line) and any failure lines
# into $sum; a failure sets rc=1. The caller sets logs, sum and rc.
step() {
  local name=$1 log=$2; shift 2
  "$@" >"$logs/$log" 2>&1
  local r=$?
  [ $r -ne 0 ] && rc=1
  echo "$name: rc=$r at ${SECONDS} s, $(tail -1 "$logs/$log")" >>"$sum"
  grep -E "FAIL|differ|CHECK failed|timed out|TIMEOUT" "$logs/$log" | grep -v " 0 outputs differ" | head -5 >>"$sum"
}
