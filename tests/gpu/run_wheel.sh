#!/usr/bin/env bash
# run_wheel.sh - the wheel as a user installs it, on the GPU machine (issue 37): build it
# from this tree with `pip wheel` (offline: --no-build-isolation, with the image's
# scikit-build-core and NVSHMEM wheel), install it into a fresh virtual environment, and
# run the package's tests there with no nvcc, cmake or source tree on hand.
#
# The fresh environment (python3 -m venv --without-pip, in a temporary folder):
#  - warpspec comes from the wheel only: pip install --no-index WHEEL.
#  - PyTorch, pytest, pip and what they require, and the wheel's declared nvidia-*
#    dependencies, are copies (hard links where the file system allows) of the
#    distributions pip installed in this machine's python3, file by file from their
#    RECORDs, dist-info included. There is no network here, hence no index to install
#    them from; the copies make the environment's site-packages what
#    `pip install torch pytest warpspec-*.whl` would have made it, so pip checks the
#    wheel's declared dependencies against them (a range they miss fails the install) and
#    the library finds the CUDA libraries through its own RPATH
#    ($ORIGIN/../../nvidia/.../lib). Not --system-site-packages: this machine's python3 is
#    itself a virtual environment (/opt/torch/.venv), whose packages that flag would not
#    show (the base interpreter's would); nor a .pth file to its site-packages, which
#    would bring scikit-build-core, cmake and the rest of the build environment along.
#  - the tests: python/tests copied to the temporary folder; the two CPU tests that read
#    files of the source tree use the installed version or skip.
# The checks and tests run from the temporary folder with LD_LIBRARY_PATH, PYTHONPATH,
# WARPSPEC_LIBRARY/_CLI and CUDA_HOME unset (tests/gpu/env.sh is not sourced: its
# LD_LIBRARY_PATH would hide a loader problem), NVLink multicast off, and PATH = the
# environment's bin/, then shims named nvcc, cmake and ninja that fail loudly, then
# /usr/bin:/bin. Where a mount namespace can be made (root and unshare), the CUDA
# toolkit's bin/ and library folders, cmake and ninja, and the source tree are covered
# too, so nothing can fall back on them (ld.so.cache's entries included); the summary
# says which of the two it was.
# Then a smaller check of a package installed apart from its nvidia-* wheels (a second
# fresh environment: the wheel with --no-deps, the first environment's site-packages
# through a .pth file): import, info, one GEMM, through _lib.py's preloading.
# WHEEL=path skips the build (a wheel built before); KEEP=1 keeps the temporary folder.
# Exit 0 only if every step passed. Logs in $OUT (or ./results): wheel_summary.txt,
# wheel_build.log, wheel_show.txt, wheel_install.log, wheel_checks.log,
# wheel_pytest_{cpu,gpu,2gpu}.log, wheel_apart.log, and the wheel.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$src/results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
work=$(mktemp -d /tmp/warpspec-wheel.XXXXXX)
summary="$out/wheel_summary.txt"
rc_all=0
note() { echo "$*" | tee -a "$summary"; }
fail() { note "FAIL: $*"; rc_all=1; }
{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  echo "python: $("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  "$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1
  "$py" -m pip --version
  "$py" -m pip list 2>/dev/null | grep -iE "^(scikit[-_]build[-_]core|cmake|ninja|nvidia-|cuda-|torch|pytest) "
  echo "glibc: $(ldd --version | head -1)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
  echo "work folder: $work"
} >"$summary" 2>&1
cat "$summary"

# ---- 1. the wheel, from the tree, offline -------------------------------------------------
t0=$(date +%s)
if [ -n "${WHEEL:-}" ]; then  # a wheel built before (re-runs)
  mkdir -p "$work/dist" && cp "$WHEEL" "$work/dist/" && rc=0 && echo "given: $WHEEL" >"$out/wheel_build.log"
else
  (cd "$src" && "$py" -m pip wheel --no-build-isolation --no-deps -v -w "$work/dist" .) >"$out/wheel_build.log" 2>&1
  rc=$?
fi
whl=$(ls "$work"/dist/warpspec-*.whl 2>/dev/null | head -1)
note "pip wheel --no-build-isolation .: rc=$rc, $(( $(date +%s) - t0 )) s, ${whl##*/}"
if [ $rc -ne 0 ] || [ -z "$whl" ]; then tail -40 "$out/wheel_build.log"; fail "the wheel did not build"; cat "$summary"; exit 1; fi
cp "$whl" "$out/"  # the artifact itself (WHEEL=$OUT/... re-runs without building)
{ "$py" "$src/tools/wheel/warpspec_wheel.py" show "$whl"; echo "show rc=$?"; echo; "$py" -m zipfile -l "$whl";
  if "$py" -m auditwheel --version >/dev/null 2>&1; then echo; "$py" -m auditwheel show "$whl"; fi
} >"$out/wheel_show.txt" 2>&1
grep -q "^show rc=0" "$out/wheel_show.txt" || fail "the wheel's tag is not the one its binaries allow (wheel_show.txt)"
grep -E "^(file name tag|tag the binaries)" "$out/wheel_show.txt" | tee -a "$summary"
# what the tests need from the tree, before it may be hidden
mkdir -p "$work/run"
cp -r "$src/python/tests" "$work/run/tests"
cp -r "$src/examples" "$work/examples"  # the nn tests run examples/ from tests/../../ (a user's checkout of the examples)
cp "$src/tools/wheel/warpspec_wheel.py" "$work/"

# ---- 2. the fresh environment -------------------------------------------------------------
venv="$work/venv"
"$py" -m venv --without-pip "$venv" >"$out/wheel_install.log" 2>&1 || { fail "python3 -m venv"; cat "$summary"; exit 1; }
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# the distributions to copy: pip, pytest, torch (+ numpy if installed) and the wheel's
# Requires-Dist, with everything they require, by the markers of this machine
cat >"$work/copy_dists.py" <<'EOF'
import importlib.metadata as md, os, shutil, sys, zipfile
try:
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name
except ImportError:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
dest, whl = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
wants = [ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
dists = {}
for d in md.distributions():
    if d.metadata["Name"]:
        dists.setdefault(canonicalize_name(d.metadata["Name"]), d)  # the first on sys.path wins, as for import
todo = [Requirement(r) for r in ["pip", "pytest", "torch"] + (["numpy"] if "numpy" in dists else []) + wants]
todo = [r for r in todo if not r.marker or r.marker.evaluate({"extra": ""})]
done, linked, copied, missing = {}, 0, 0, []  # done: name -> the extras followed so far ("" = none)
while todo:
    r = todo.pop()
    n = canonicalize_name(r.name)
    if n == "warpspec":
        continue
    if n not in dists:
        missing.append(str(r))
        continue
    new = ({""} | set(r.extras)) - done.setdefault(n, set())
    done[n] |= new
    for q in dists[n].requires or []:
        q = Requirement(q)
        if not q.marker or any(q.marker.evaluate({"extra": e}) for e in new):
            todo.append(q)
for n in sorted(done):
    d = dists[n]
    root = os.path.normpath(str(d.locate_file("")))
    if not d.files:
        print(f"{n}: no RECORD, not copied")
        continue
    for f in d.files:
        s = os.path.normpath(str(d.locate_file(f)))
        rel = os.path.relpath(s, root)
        if rel.startswith("..") or not os.path.isfile(s):
            continue  # scripts in bin/ and data outside site-packages: not needed here
        t = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(t), exist_ok=True)
        try:
            os.link(s, t)
            linked += 1
        except OSError:
            shutil.copy2(s, t)
            copied += 1
    print(f"{n} {d.version}")
print(f"{len(done)} distributions, {linked} files linked, {copied} copied")
if missing:
    print("not installed on this machine: " + ", ".join(sorted(set(missing))))
EOF
t0=$(date +%s)
"$py" "$work/copy_dists.py" "$site" "$whl" >>"$out/wheel_install.log" 2>&1 || fail "copying the installed distributions"
note "dependencies copied into the fresh environment: $(grep -E "^[0-9]+ distributions|^not installed" "$out/wheel_install.log" | paste -sd' '), $(( $(date +%s) - t0 )) s"
# warpspec from the wheel; the declared dependencies must be met by what is there
"$venv/bin/python" -m pip install --no-index "$whl" >>"$out/wheel_install.log" 2>&1
rc=$?
note "pip install --no-index ${whl##*/} (dependencies resolved against PyTorch's nvidia-* wheels): rc=$rc"
if [ $rc -ne 0 ]; then
  tail -20 "$out/wheel_install.log"
  fail "the wheel's declared dependencies are not met by this machine's PyTorch environment; installing with --no-deps to test the rest"
  "$venv/bin/python" -m pip install --no-index --no-deps "$whl" >>"$out/wheel_install.log" 2>&1 || { fail "pip install --no-deps"; cat "$summary"; exit 1; }
fi
{ "$venv/bin/python" -m pip check; echo "pip check rc=$?"; "$venv/bin/python" -m pip list; } >>"$out/wheel_install.log" 2>&1
note "$(grep "pip check rc" "$out/wheel_install.log")"
"$venv/bin/python" -m pip list 2>/dev/null | grep -iE "^(warpspec|torch|nvidia-(cuda-runtime|cublas|nccl-cu13|nvshmem-cu13)) " |
  tr -s ' ' | paste -sd, | sed 's/^/installed: /' | tee -a "$summary"

# ---- 3. checks and tests, with no toolchain or tree on hand -------------------------------
mkdir -p "$work/deny"
for t in nvcc cmake ninja ptxas; do
  printf '#!/bin/sh\necho "run_wheel: $0 was called ($*)" >&2\necho "$0 $*" >>"%s/denied.log"\nexit 127\n' "$out" >"$work/deny/$t"
  chmod +x "$work/deny/$t"
done
# what a mount namespace covers: the toolkit's bin/ and libraries (not compat/, where a
# container's driver may live), cmake and ninja wherever they are, the source tree
: >"$work/hide_dirs"; : >"$work/hide_files"; : >"$work/hide_notes"
nv=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
root=$( [ -e "$nv" ] && dirname "$(dirname "$(readlink -f "$nv")")")
case "$root" in
  */cuda*) ;;  # a toolkit folder of its own (/usr/local/cuda-13.0), never /usr
  *) [ -n "$root" ] && echo "toolkit not covered: $root is not a CUDA folder of its own" >>"$work/hide_notes"; root="" ;;
esac
if [ -n "$root" ]; then
  driver=$(readlink -f "$(ldconfig -p | awk '/libcuda\.so\.1 / {print $NF; exit}')" 2>/dev/null)
  for d in "$root/bin" "$root/nvvm" "$root/lib64" "$root/lib" "$root"/targets/*/lib; do
    [ -d "$d" ] || continue
    d=$(readlink -f "$d")
    case "$driver" in "$d"/*) echo "not covered (the driver is there): $d" >>"$work/hide_notes"; continue ;; esac
    grep -qx "$d" "$work/hide_dirs" || echo "$d" >>"$work/hide_dirs"
  done
fi
for t in cmake ninja; do
  command -v "$t" >/dev/null && readlink -f "$(command -v "$t")" >>"$work/hide_files"
done
case "$out/" in "$src"/*) echo "source tree not covered: \$OUT is inside it" >>"$work/hide_notes" ;; *) echo "$src" >>"$work/hide_dirs" ;; esac
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare --mount --propagation private true 2>/dev/null; then
  ns=1
else
  ns=0
  echo "no mount namespace (not root, or unshare refused): toolkit and tree stay visible; PATH shims only" >>"$work/hide_notes"
fi
# clean VENV SCRIPT LOG: SCRIPT (bash) in the clean environment of VENV, from $work/run
cat >"$work/clean_head.sh" <<EOF
set -u
if [ "\${WS_NS:-0}" = 1 ]; then
  while read -r d; do mount -t tmpfs -o size=1m,ro none "\$d"; done <"$work/hide_dirs"
  while read -r f; do mount --bind "$work/deny/cmake" "\$f"; done <"$work/hide_files"
fi
cd "$work/run"
unset LD_LIBRARY_PATH PYTHONPATH PYTHONHOME WARPSPEC_LIBRARY WARPSPEC_CLI CUDA_HOME CUDA_PATH VIRTUAL_ENV
export PATH="\$VENV/bin:$work/deny:/usr/bin:/bin" PYTHONNOUSERSITE=1
EOF
clean() {
  cat "$work/clean_head.sh" "$2" >"$2.run"
  if [ $ns = 1 ]; then
    VENV=$1 WS_NS=1 unshare --mount --propagation private bash "$2.run" >"$3" 2>&1
  else
    VENV=$1 WS_NS=0 bash "$2.run" >"$3" 2>&1
  fi
}
note "hidden from the tests: $([ $ns = 1 ] && echo "mount namespace over $(paste -sd' ' "$work/hide_dirs") and $(paste -sd' ' "$work/hide_files")" || echo "PATH shims only")"
[ -s "$work/hide_notes" ] && tee -a "$summary" <"$work/hide_notes"

cat >"$work/checks.sh" <<EOF
echo "== toolchain on hand?"
for t in nvcc cmake ninja; do echo "\$t -> \$(command -v \$t)"; done
[ -n "\$(ls -A "$src" 2>/dev/null)" ] && echo "source tree: visible" || echo "source tree: not visible"
[ -e "$root/lib64/libcudart.so.13" ] || [ -e "$root/lib/libcudart.so.13" ] && echo "toolkit cudart: visible" || echo "toolkit cudart: not visible"
python -c "import scikit_build_core" 2>/dev/null && echo "scikit-build-core importable (unexpected)" || echo "scikit-build-core: not importable"
rc=0
echo "== ldd of the installed library and CLI (no LD_LIBRARY_PATH)"
python "$work/warpspec_wheel.py" check-install "$venv/bin/python" || { echo "CHECK FAILED: loader paths"; rc=1; }
echo "== the CLI binary itself, run directly"
"$site/warpspec/bin/warpspec" info || { echo "CHECK FAILED: bin/warpspec info"; rc=1; }
echo "== the warpspec command"
warpspec version && warpspec info && warpspec plan dispatch:4:rest receiver:4:80 compute:4:184 || { echo "CHECK FAILED: warpspec command"; rc=1; }
echo "== import, where everything came from, one GEMM"
python - <<'PY' || { echo "CHECK FAILED: import"; rc=1; }
import os, torch, warpspec
venv = os.path.realpath("$venv") + "/"
print("warpspec", warpspec.__version__, "from", warpspec.__file__)
print("library", warpspec._lib.library_path)
libs = sorted({l.split()[-1] for l in open("/proc/self/maps")
               if any(k in l for k in ("libcudart.so", "libnvshmem_host.so", "libcublas", "libnccl.so", "libwarpspec.so"))})
for p in libs: print("  loaded", p)
bad = [p for p in libs if not os.path.realpath(p).startswith(venv)]
assert os.path.realpath(warpspec._lib.library_path).startswith(venv), "warpspec's library is not the venv's"
assert not bad, f"loaded from outside the venv: {bad}"
print(warpspec.info())
a = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
b = torch.randn(384, 512, device="cuda", dtype=torch.bfloat16)  # [n, k], as the weights of nn.Linear
y = warpspec.gemm(a, b); warpspec.sync()
err = (y.float() - a.float() @ b.float().T).abs().max().item()
print("gemm 256x384x512 bf16, max abs error vs torch:", err); assert err < 0.5
PY
echo "checks rc=\$rc"
EOF
clean "$venv" "$work/checks.sh" "$out/wheel_checks.log"
grep -E " -> |^source tree|^toolkit cudart|scikit-build-core|CHECK FAILED|^checks rc|max abs error" \
  "$out/wheel_checks.log" | tee -a "$summary"
grep -q "^checks rc=0" "$out/wheel_checks.log" || fail "checks (wheel_checks.log)"

# the package's tests: CPU, one GPU, two GPUs
hopper=$("$venv/bin/python" -c "import torch; print(sum(torch.cuda.get_device_capability(d)[0] == 9 for d in range(torch.cuda.device_count())))" 2>/dev/null || echo 0)
for mode in cpu gpu 2gpu; do
  case $mode in
    cpu) sel="not gpu and not multi_gpu" ;;
    gpu) sel="gpu and not multi_gpu"; [ "$hopper" -ge 1 ] || { fail "no sm_90 GPU seen from the fresh environment"; continue; } ;;
    2gpu) sel="multi_gpu"; [ "$hopper" -ge 2 ] || { note "pytest [2gpu]: not run, $hopper sm_90 GPU(s)"; continue; } ;;
  esac
  log="$out/wheel_pytest_$mode.log"
  echo "PYTHONUNBUFFERED=1 timeout 1200 python -m pytest -v -rs -p no:cacheprovider -m \"$sel\" tests" >"$work/pytest_$mode.sh"
  t0=$(date +%s)
  clean "$venv" "$work/pytest_$mode.sh" "$log"
  rc=$?
  note "pytest [$mode] -m \"$sel\": rc=$rc, $(grep -E "^=+ .*(passed|failed|error)" "$log" | tail -1 | tr -d '='), $(( $(date +%s) - t0 )) s"
  [ $rc -ne 0 ] && fail "pytest [$mode]"
  # on a machine with the GPUs a skipped GPU test is a failure (Triton-only baselines aside)
  if [ "$mode" != cpu ]; then
    sk=$(grep -E "^SKIPPED" "$log" | grep -viE "triton" || true)
    [ -n "$sk" ] && { echo "$sk" | head -10 | tee -a "$summary"; fail "GPU tests skipped on a GPU machine [$mode]"; }
  fi
done

# ---- 4. installed apart from its nvidia-* wheels: _lib.py's preloading ----------------------
# a second fresh environment holding the wheel alone (--no-deps); the first one's
# site-packages (torch, the nvidia-* wheels) reached through a .pth file: the library's
# RPATH finds nothing beside it, _lib.py loads the CUDA libraries from sys.path's nvidia/
apart="$work/venv_apart"
{
  # pip from the first environment, run by the second one's interpreter: it installs there
  "$py" -m venv --without-pip "$apart" &&
    PYTHONPATH="$site" "$apart/bin/python" -m pip install --no-index --no-deps --ignore-installed "$whl" &&
    "$apart/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$work/apart_site" &&
    echo "$site" >"$(cat "$work/apart_site")/zz_deps.pth"
  echo "apart install rc=$?"
} >"$out/wheel_apart.log" 2>&1
cat >"$work/apart.sh" <<EOF
echo "== without torch (its import would load the CUDA runtime itself)"
python - <<'PY'
import os, sys
sys.modules["torch"] = None
import warpspec
assert os.path.realpath(warpspec.__file__).startswith(os.path.realpath("$apart") + "/"), warpspec.__file__
print("warpspec from", warpspec.__file__)
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcudart.so" in l or "libnvshmem_host.so" in l})
print("loaded", libs)
assert len(libs) == 2 and all(p.startswith("$site/nvidia/") for p in libs), libs
print(warpspec.info())
PY
echo "apart rc=\$?"
echo "== with torch: one GEMM"
python - <<'PY'
import torch, warpspec
a = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16); b = torch.randn(192, 256, device="cuda", dtype=torch.bfloat16)
y = warpspec.gemm(a, b); warpspec.sync()
err = (y.float() - a.float() @ b.float().T).abs().max().item()
print("gemm max abs error", err); assert err < 0.5
PY
echo "apart torch rc=\$?"
echo "== the warpspec command (it puts the nvidia-* folders on LD_LIBRARY_PATH for the binary)"
warpspec info
echo "apart cli rc=\$?"
EOF
clean "$apart" "$work/apart.sh" "$work/apart.log"
cat "$work/apart.log" >>"$out/wheel_apart.log"
note "installed apart from the nvidia-* wheels (preloading): $(grep -E "^apart " "$out/wheel_apart.log" | paste -sd' ')"
[ "$(grep -cE "^apart .*rc=0$" "$out/wheel_apart.log")" = 4 ] || fail "installed apart (wheel_apart.log)"

[ -s "$out/denied.log" ] && fail "a toolchain program was called: $(sort -u "$out/denied.log" | head -5 | paste -sd';')"
note "run_wheel.sh: $([ $rc_all = 0 ] && echo PASSED || echo FAILED)"
[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
exit $rc_all
