#!/usr/bin/env bash
# nvcc_guard.sh COMPILER ARGS... - the CUDA compiler launcher of the build.
# ptxas reports a dropped setmaxnreg (C7508: no entry register cap; C7504: -rdc) only
# as an "info" line under -v, which --warning-as-error does not catch; so does a wgmma
# pipeline that ptxas serializes (C7510-C7520: every wgmma waits for the previous one,
# a silent 2-3x slowdown of a GEMM). This runs the compile with ptxas -v, fails it on
# those codes, and hides the routine info lines.
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" -Xptxas=-v 2>"$log"
rc=$?
if grep -qE '\((C7508|C7504)\)' "$log"; then
  grep -E '\((C7508|C7504)\)' "$log" | sed 's/^ptxas info *:/error: ptxas:/' >&2
  echo "error: setmaxnreg would be dropped: give the kernel __launch_bounds__(threads, 1) (WS_KERNEL does) and build without -rdc" >&2
  rc=1
fi
if grep -qE '\((C751[0-9]|C7520)\)' "$log"; then
  grep -E '\((C751[0-9]|C7520)\)' "$log" | sed 's/^ptxas info *:/error: ptxas:/' >&2
  echo "error: ptxas serialized the wgmmas (the line above says why: an accumulator read while its wgmma is in flight, a wgmma under a condition, a call between issue and wait_group, ...)" >&2
  rc=1
fi
grep -vE '^ptxas info *: (Compiling|Function properties|Used|Compile time|[0-9]+ bytes gmem)|^ *[0-9]+ bytes stack frame' "$log" >&2
exit $rc
