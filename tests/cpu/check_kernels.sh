#!/usr/bin/env bash
# check_kernels.sh BINARY... - read the compiled kernels without a GPU:
#   every kernel: STACK:0 and LOCAL:0 (no spills, no runtime-indexed arrays);
#   kernels whose role tables change registers: USETMAXREG in SASS (not dropped);
#   the GEMMs: their wgmma (HGMMA / QGMMA), TMA loads and TMA-store epilogue;
#   the stream kernels: TMA loads (UTMALDG), the TMA-store one also UTMASTG.
# Exit 77 (skipped) if cuobjdump/nvdisasm are not installed (.ci/run installs them).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$PATH:$here/.tools/bin:/usr/local/cuda/bin"
if ! command -v cuobjdump >/dev/null || ! command -v nvdisasm >/dev/null; then
  echo "cuobjdump/nvdisasm not found: skipped (run .ci/run or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
  exit 77
fi
fail=0
for bin in "$@"; do
  res=$(cuobjdump -res-usage "$bin" 2>&1) || { echo "cuobjdump failed on $bin: $res"; exit 1; }
  n=$(grep -c "Function " <<<"$res")
  echo "$bin: $n kernels"
  while read -r line; do
    name=$(sed -n 's/.*Function \([^:]*\):.*/\1/p' <<<"$line")
    [ -z "$name" ] && continue
    usage=$(grep -A1 "Function $name:" <<<"$res" | tail -1)
    stack=$(sed -n 's/.*STACK:\([0-9]*\).*/\1/p' <<<"$usage")
    local_=$(sed -n 's/.*LOCAL:\([0-9]*\).*/\1/p' <<<"$usage")
    if [ "$stack" != 0 ] || [ "$local_" != 0 ]; then
      echo "FAIL $name: STACK:$stack LOCAL:$local_ ($usage)"; fail=1
    else
      echo "ok   $name: $(sed 's/^ *//' <<<"$usage" | cut -d' ' -f1-4)"
    fi
  done < <(grep "Function " <<<"$res")
  sass=$(cuobjdump --dump-sass "$bin" 2>&1)
  # Per-function SASS: awk splits on the "Function :" headers.
  check_sass() { # function-substring instruction min-count
    local count
    count=$(awk -v f="$1" '/Function : /{on = index($0, f) > 0} on' <<<"$sass" | grep -c "$2")
    if [ "$count" -lt "$3" ]; then echo "FAIL $1: $count x $2 in SASS, expected >= $3"; fail=1
    else echo "ok   $1: $count x $2"; fi
  }
  case "$bin" in
    *libwarpspec*)
      check_sass stream_threads_kernel USETMAXREG 2
      check_sass stream_threads_kernel UTMALDG 1
      check_sass stream_tma_kernel UTMALDG 1
      check_sass stream_tma_kernel UTMASTG 1
      check_sass gemm_bf16_kernel HGMMA.64x256x16 1
      check_sass gemm_bf16_kernel USETMAXREG 2
      check_sass gemm_bf16_kernel UTMALDG 2
      check_sass gemm_fp8_kernel QGMMA.64x128x32 1
      check_sass gemm_fp8_kernel UTMALDG 2
      check_sass gemm_fp8_wide_kernel QGMMA.64x128x32 1
      check_sass gemm_fp8_wide_kernel USETMAXREG 2
      check_sass gemm_fp8_wide_kernel UTMALDG 2
      check_sass gemm_fp8_wide_kernel UTMASTG 1
      check_sass gemm_fp8_wide_pair_kernel QGMMA.64x128x32 1
      check_sass gemm_fp8_wide_pair_kernel USETMAXREG 2
      check_sass gemm_fp8_wide_pair_kernel UTMALDG.2D.MULTICAST 1
      check_sass gemm_fp8_wide_pair_kernel UCGABAR_WAIT 1
      check_sass gemm_bf16_kernel UTMASTG 1
      check_sass gemm_fp8_gather_kernel QGMMA.64x128x32 1
      check_sass gemm_fp8_gather_kernel LDGSTS.E.BYPASS 1
      check_sass gemm_fp8_gather_kernel UTMALDG 1
      check_sass gemm_fp8_gather_kernel UTMASTG 1
      check_sass gemm_fp8_kernel UTMASTG 1
      check_sass moe_experts_kernel QGMMA.64x128x32 1
      check_sass moe_experts_kernel USETMAXREG 2
      check_sass moe_experts_kernel UTMALDG 2
      check_sass moe_experts_kernel UTMASTG 1
      ;;
  esac
  # A report, not a check: per kernel, the wgmmas whose descriptors come from ordinary
  # registers (an R2UR move in the 6 instructions before), where uniform-datapath
  # arithmetic is what the kernels were tuned with (docs/benchmarks.md, the MoE layer).
  awk '/Function : /{if (f != "" && g > 0) printf "info %s: %d of %d wgmma after R2UR\n", f, r, g; f = $3; g = 0; r = 0; n = 0; next}
       !/\/\*[0-9a-f]+\*\/ /{next}
       /GMMA/{g++; for (i = 1; i <= 6; i++) if (h[(n - i + 64) % 64] ~ /R2UR/) {r++; break}}
       {h[n % 64] = $0; n++}
       END{if (f != "" && g > 0) printf "info %s: %d of %d wgmma after R2UR\n", f, r, g}' <<<"$sass"
done
exit $fail
