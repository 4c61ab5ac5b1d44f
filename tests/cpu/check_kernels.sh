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
  # The SASS once into a file (tens of MB: passed around as a here-string, and read once
  # per check, it took minutes), then every check counted in one pass.
  sass_file=$(mktemp)
  cuobjdump --dump-sass "$bin" >"$sass_file" 2>&1
  checks=""
  check_sass() { checks+="$1 $2 $3"$'\n'; } # function-substring instruction min-count
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
  if [ -n "$checks" ]; then
    # Lines of every function whose header contains the substring, counted per check.
    out=$(awk -v list="$checks" '
      BEGIN { n = split(list, rows, "\n"); m = 0
              for (i = 1; i <= n; i++) if (split(rows[i], w, " ") == 3) { m++; f[m] = w[1]; pat[m] = w[2]; need[m] = w[3]; c[m] = 0 } }
      /Function : / { for (i = 1; i <= m; i++) on[i] = index($0, f[i]) > 0 }
      { for (i = 1; i <= m; i++) if (on[i] && $0 ~ pat[i]) c[i]++ }
      END { for (i = 1; i <= m; i++)
              if (c[i] < need[i]) printf "FAIL %s: %d x %s in SASS, expected >= %d\n", f[i], c[i], pat[i], need[i]
              else printf "ok   %s: %d x %s\n", f[i], c[i], pat[i] }' "$sass_file")
    echo "$out"
    grep -q "^FAIL" <<<"$out" && fail=1
  fi
  # A report, not a check: per kernel, the wgmmas whose descriptors come from ordinary
  # registers (an R2UR move in the 6 instructions before), where uniform-datapath
  # arithmetic is what the kernels were tuned with (docs/benchmarks.md, the MoE layer).
  awk '/Function : /{if (f != "" && g > 0) printf "info %s: %d of %d wgmma after R2UR\n", f, r, g; f = $3; g = 0; r = 0; n = 0; next}
       !/\/\*[0-9a-f]+\*\/ /{next}
       /GMMA/{g++; for (i = 1; i <= 6; i++) if (h[(n - i + 64) % 64] ~ /R2UR/) {r++; break}}
       {h[n % 64] = $0; n++}
       END{if (f != "" && g > 0) printf "info %s: %d of %d wgmma after R2UR\n", f, r, g}' "$sass_file"
  rm -f "$sass_file"
done
exit $fail
