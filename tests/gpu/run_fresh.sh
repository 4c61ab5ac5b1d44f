#!/usr/bin/env bash
# run_fresh.sh [TYPES] - what a new user does on the GPU machine, with its own compiler:
# `make test` from a clean tree for each build type in TYPES (default: "default Release
# Debug RelWithDebInfo"; "default" passes no CMAKE_BUILD_TYPE), then, once per type, a
# build with WS_WERROR=ON and `-k` that lists every warning this compiler gives (CI's
# compiler is older: the warnings a newer one adds show up here first). With PIP=1 it
# also runs `pip install .` and the Python tests against the installed package. Every
# GPU test must run: a "Not Run" or a skipped GPU test on a machine that has the GPUs
# fails the script. Logs go to $OUT (or ./results): fresh_<type>.log, fresh_pip.log.
set -u
out=${OUT:-results}
mkdir -p "$out"
. "$(dirname "$0")/env.sh"
types=${1:-default Release Debug RelWithDebInfo}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
summary="$out/fresh_summary.txt"
{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  echo "host compiler: $(gcc --version | head -1)"
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "cmake: $(cmake --version | head -1)"
  echo "python: $(python3 --version) $(python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1)"
} >"$summary"
rc_all=0
for t in $types; do
  b="build-fresh-$t"
  log="$out/fresh_$t.log"
  rm -rf "$b"
  args=""
  [ "$t" != default ] && args="-DCMAKE_BUILD_TYPE=$t"
  t0=$(date +%s)
  # exactly the README's command, with a build folder of its own
  make test BUILD="$b" CMAKE_ARGS="$args" >"$log" 2>&1
  rc=$?
  notrun=$(grep -c "Not Run" "$log")
  # a skipped GPU test is a failure here unless it needs more GPUs than the machine has
  skipped=$(grep -E "\(Skipped\)" "$log" | grep -E "gpu_|py_gpu" | grep -vE "[24]ranks|missing_peer|missing_rank|mismatch|zc_forms" || true)
  if [ "$ngpu" -ge 2 ]; then skipped=$(grep -E "\(Skipped\)" "$log" | grep -E "gpu_|py_" | grep -v "4ranks" || true); fi
  if [ "$ngpu" -ge 4 ]; then skipped=$(grep -E "\(Skipped\)" "$log" | grep -E "gpu_|py_" || true); fi
  passed=$(grep -E "tests passed" "$log")
  echo "make test [$t]: rc=$rc, $passed, not run: $notrun, $(( $(date +%s) - t0 )) s" | tee -a "$summary"
  # every test's own output (CTest keeps it), and pytest's slowest tests from it: what to
  # shorten when a session's device time runs short
  cp "$b/Testing/Temporary/LastTest.log" "$out/fresh_${t}_tests.log" 2>/dev/null &&
    grep -A14 "slowest .* durations" "$out/fresh_${t}_tests.log" | grep -E "s (call|setup|teardown)" |
    sort -rn | head -12 | sed "s/^/  pytest: /" | tee -a "$summary"
  [ -n "$skipped" ] && { echo "  skipped GPU tests on a GPU machine: $skipped" | tee -a "$summary"; rc=1; }
  [ $rc -ne 0 ] || [ "$notrun" -ne 0 ] && rc_all=1
  # the same tree with warnings as errors: every warning of this compiler
  wb="build-werror-$t"
  rm -rf "$wb"
  cmake -S . -B "$wb" -DWS_WERROR=ON $args >"$out/werror_$t.log" 2>&1 &&
    cmake --build "$wb" -j "$(nproc)" -- -k >>"$out/werror_$t.log" 2>&1
  wrc=$?
  nw=$(grep -cE "warning|error:" "$out/werror_$t.log")
  echo "  WS_WERROR=ON build [$t]: rc=$wrc, $nw warning/error lines" | tee -a "$summary"
  grep -E "warning|error:" "$out/werror_$t.log" | sort -u | head -20 | tee -a "$summary"
  [ $wrc -ne 0 ] && rc_all=1
  rm -rf "$wb"
done
if [ "${MPI:-0}" = 1 ] && [ "$ngpu" -ge 2 ]; then
  # the communicator under Open MPI's launcher: the id through the default rendezvous
  # folder (${TMPDIR:-/tmp}/warpspec-rdv-<uid>-<job id>), which rank 0 must remove again
  t=$(echo $types | cut -d' ' -f1)
  log="$out/fresh_mpirun.log"
  before=$(ls -d /tmp/warpspec-rdv-* 2>/dev/null | wc -l)
  timeout 300 mpirun --allow-run-as-root --oversubscribe -n 2 -x NCCL_NVLS_ENABLE -x NVSHMEM_DISABLE_NVLS \
    -x LD_LIBRARY_PATH "build-fresh-$t/tests/gpu/test_sendrecv" quick >"$log" 2>&1
  rc=$?
  after=$(ls -d /tmp/warpspec-rdv-* 2>/dev/null | wc -l)
  echo "mpirun -n 2 test_sendrecv quick [$t]: rc=$rc, $(grep -c 'all checks passed' "$log") rank(s) passed, rendezvous folders in /tmp before $before, after $after" | tee -a "$summary"
  [ $rc -ne 0 ] || [ "$after" -gt "$before" ] && { tail -20 "$log"; rc_all=1; }
fi
if [ "${PIP:-0}" = 1 ]; then
  log="$out/fresh_pip.log"
  # no network on the GPU machine: the build backend (scikit-build-core), CMake and
  # NVSHMEM come from the image, so no build isolation
  t0=$(date +%s)
  python3 -m pip install --no-build-isolation -v . >"$log" 2>&1
  rc=$?
  echo "pip install .: rc=$rc, $(( $(date +%s) - t0 )) s" | tee -a "$summary"
  [ $rc -ne 0 ] && { tail -30 "$log"; rc_all=1; }
  if [ $rc -eq 0 ]; then
    # the installed package, not the source tree: run from another folder
    (cd /tmp && python3 -c 'import warpspec, sys; print("warpspec", warpspec.__version__, "from", warpspec.__file__); print(warpspec.info())') >>"$log" 2>&1
    (cd /tmp && PYTHONUNBUFFERED=1 timeout 900 python3 -m pytest -v -rs "$OLDPWD/python/tests" -p no:cacheprovider) >>"$log" 2>&1
    rc=$?
    grep -E "^=+ .*(passed|failed)" "$log" | tail -1 | tee -a "$summary"
    echo "pytest (installed package): rc=$rc" | tee -a "$summary"
    [ $rc -ne 0 ] && rc_all=1
    (cd /tmp && python3 -m warpspec info && python3 -m warpspec plan dispatch:4:rest receiver:4:80 compute:4:184 && command -v warpspec) >>"$log" 2>&1
    echo "python -m warpspec info/plan: rc=$?" | tee -a "$summary"
  fi
fi
cat "$summary"
exit $rc_all
