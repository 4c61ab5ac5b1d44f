/* warpspec.c - the `warpspec` command: info, plan, bench, demo. */
#include "bench.h" /* warpspec_bench's interface (CMakeLists.txt) */
#include "cli.h"
#include "parse_num.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void) {
  fprintf(stderr,
          "usage: warpspec <command> [options]\n"
          "  info                              GPUs, SMs, shared memory, NVLink peers\n"
          "  plan ROLE... [--entry N] [--smem BYTES] [--name K]\n"
          "                                    check a role plan; ROLE = name:warps:regs[xreplicas],\n"
          "                                    regs = 24..256 (multiple of 8), rest or entry\n"
          "  plan --kernel K                   plan of a known kernel (stream_tma, stream_threads,\n"
          "                                    gemm_bf16, gemm_bf16_skinny, gemm_fp8, gemm_fp8_wide,\n"
          "                                    gemm_fp8_skinny, seed, seed_twin, gemm)\n"
          "  bench [pipe] [--bytes N] [--iters N] [--csv FILE] [--sweep]\n"
          "  bench sendrecv [--ranks N] [--max-bytes N] [--csv FILE]   ws_sendrecv vs NCCL (ring)\n"
          "  bench allgather [--ranks N] [--max-bytes N] [--csv FILE]  ws_allgather vs ncclAllGather\n"
          "  bench nvlink                      NVLink ceilings: copy engine, SM and TMA copies (all-to-all with 3+ GPUs)\n"
          "  bench hbm                         local-memory read/copy ceilings by CTA count\n"
          "  bench combine-mix                 combine's reduce traffic (local reads, NVLink sums) without its protocol\n"
          "  bench gemm [--csv FILE] [--only TYPE,G,M,N,K] [--soak S]\n"
          "                                    ws_gemm (BF16, FP8) against cuBLASLt\n"
          "  bench gemm-gather [--variant NAME] [--tokens T] [--reps N] [--pitch B]\n"
          "                                    the MoE L1's FP8 GEMM on copied rows and on gathered rows\n"
          "                                    (identity, tokens, shuffled, ...): time and bit check\n"
          "  bench moe [--ranks N] [--csv FILE] [--quick] [--shape DeepSeekV3|Flash] [--tokens T] [--sms N]\n"
          "            [--trace PREFIX [--trace-block B]]  role timeline of CTA B (-1: all) of each fused call\n"
          "                                    the whole MoE layer per rank and its time split\n"
          "  bench ep [--ranks N] [--tokens T] [--sms N] [--receive copy|index|both] [--csv FILE] [--trace DIR]\n"
          "           [--profile]              MoE dispatch and combine alone (ws_ep), NVLink GB/s per rank;\n"
          "                                    --profile: 3 timed pairs at 128 and 4096 tokens (for ncu)\n"
          "  bench moe-a2a [--ranks N] [--csv FILE]   MoE dispatch/combine vs PyTorch (python -m warpspec)\n"
          "  bench moe-layer [--ranks N] [--shape S] [--tokens T,T] [--csv FILE]\n"
          "                                    the MoE layer vs the NCCL + cuBLASLt composite (Python)\n"
          "  bench attention [--csv FILE] [--quick]   flash attention vs PyTorch SDPA (cuDNN, flash)\n"
          "  bench attn-kernels [--only mla,flash,nsa] [--match TEXT]\n"
          "                                    the attention kernels alone, every schedule and grid\n"
          "                                    (TEXT: only the shapes whose name contains it)\n"
          "  run -n N [--timeout S] -- PROG ... start N ranks of PROG, one per GPU (no MPI needed)\n"
          "  demo [--planner]                  the main job: benchmarks on the GPUs present, or the\n"
          "                                    planner on the library's kernels (without a GPU, or asked)\n"
          "  version\n");
  return 2;
}

/* Numeric options: read whole and range-checked (parse_num.h); 0, or -1 after printing
 * the usage error (the command then exits with status 2). */
static int int_option(const char *option, const char *text, long long min, long long max, long long *out) {
  if (cli_parse_int(option, text, min, max, out) == WS_OK) return 0;
  fprintf(stderr, "warpspec: %s\n", ws_last_error());
  return -1;
}

static int int_option_i(const char *option, const char *text, int min, int max, int *out) {
  long long v = 0;
  if (int_option(option, text, min, max, &v) != 0) return -1;
  *out = (int)v;
  return 0;
}

static int real_option(const char *option, const char *text, double min, double max, double *out) {
  if (cli_parse_real(option, text, min, max, out) == WS_OK) return 0;
  fprintf(stderr, "warpspec: %s\n", ws_last_error());
  return -1;
}

/* Limits of the numeric options: what the option's type and the library accept. */
#define CLI_MAX_BYTES (1ll << 40)     /* benchmark message and copy sizes        */
#define CLI_MAX_SECONDS 1e6           /* --soak                                  */
#define CLI_MAX_ITERS 1000000
#define CLI_MAX_TOKENS (1 << 20)      /* ws_ep's max_tokens                      */

static int gpu_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
  return n;
}

static int cmd_info(void) {
  int n = gpu_count();
  printf("warpspec %s; %d CUDA device(s)\n", ws_version(), n);
  for (int d = 0; d < n; d++) {
    ws_device_limits l;
    if (ws_device_limits_query(d, &l) != WS_OK) { fprintf(stderr, "%s\n", ws_last_error()); return 1; }
    printf("  device %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB, shared memory opt-in %zu bytes/block%s\n", d, l.name,
           l.cc_major, l.cc_minor, l.sm_count, (double)l.global_mem / (1 << 30), (double)l.l2_bytes / (1 << 20), l.smem_optin,
           l.cc_major == 9 ? "" : "  (not sm_90: warpspec kernels will not run)");
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      int can = 0;
      cudaDeviceCanAccessPeer(&can, a, b);
      int unknown = 0;
      int links = cli_nvlinks(a, b, &unknown);
      if (links < 0) printf("  peer %d -> %d: access %s, NVLink count unknown (no NVML)\n", a, b, can ? "yes" : "no");
      else if (unknown > 0)
        printf("  peer %d -> %d: access %s, %d NVLink(s) to it, and %d active NVLink(s) of device %d whose remote end NVML "
               "does not report\n", a, b, can ? "yes" : "no", links, unknown, a);
      else printf("  peer %d -> %d: access %s, %d NVLink(s)\n", a, b, can ? "yes" : "no", links);
    }
  if (n == 0) printf("  no GPU on this machine\n");
  return 0;
}

static int cmd_plan(int argc, char **argv) {
  ws_role roles[WS_MAX_ROLES];
  char names[WS_MAX_ROLES][WS_NAME_LEN];
  int nroles = 0, entry = 0;
  long long smem = 0;
  const char *kname = "cli", *known = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--entry") == 0 && i + 1 < argc) {
      if (int_option_i("--entry", argv[++i], 0, 255, &entry) != 0) return 2;
    } else if (strcmp(argv[i], "--smem") == 0 && i + 1 < argc) {
      /* a kernel's dynamic shared memory attribute is an int */
      if (int_option("--smem", argv[++i], 0, INT_MAX, &smem) != 0) return 2;
    } else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) kname = argv[++i];
    else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) known = argv[++i];
    else if (argv[i][0] == '-') return usage();
    else {
      if (nroles == WS_MAX_ROLES) { fprintf(stderr, "at most %d roles\n", WS_MAX_ROLES); return 2; }
      if (cli_parse_role(argv[i], &roles[nroles], names[nroles], WS_NAME_LEN) != WS_OK) {
        fprintf(stderr, "%s\n", ws_last_error());
        return 2;
      }
      nroles++;
    }
  }
  ws_plan plan;
  ws_status s;
  if (known) s = cli_named_plan(known, &plan);
  else if (nroles == 0) return usage();
  else s = ws_plan_init(&plan, kname, roles, nroles, entry);
  if (s == WS_OK && smem > 0) s = ws_plan_set_smem(&plan, (size_t)smem);
  if (s != WS_OK) {
    printf("REJECTED %s: %s\n", ws_strerror(s), ws_last_error());
    return 1;
  }
  ws_plan_print(&plan, stdout);
  if (gpu_count() > 0) {
    s = ws_plan_check_device(&plan, 0);
    printf("  device 0: %s%s%s\n", s == WS_OK ? "fits" : ws_strerror(s), s == WS_OK ? "" : ": ", s == WS_OK ? "" : ws_last_error());
    if (s != WS_OK) return 1;
  }
  printf("OK\n");
  return 0;
}

/* Outside the launcher, a multi-rank benchmark starts itself again as `want` ranks (one
 * per GPU) under `warpspec run`, with the same arguments; at least `least` ranks. */
static int bench_under_launcher(int want, int least, int argc, char **argv) {
  const int n = gpu_count();
  if (n < want || want < least) { fprintf(stderr, "bench %s: needs %d GPUs, found %d\n", argv[0], want, n); return 1; }
  char nbuf[16];
  snprintf(nbuf, sizeof nbuf, "%d", want);
  char *args[64] = {(char *)"-n", nbuf, (char *)"--timeout", (char *)"1800", (char *)"--", (char *)"/proc/self/exe",
                    (char *)"bench"};
  int k = 7;
  for (int i = 0; i < argc && k < 63; i++) args[k++] = argv[i];
  args[k] = NULL;
  return cli_run(k, args);
}

/* `bench sendrecv` needs one process per GPU: outside the launcher, start it. */
static int cmd_bench_sendrecv(int argc, char **argv) {
  bench_sr_opts o = {1ull << 30, NULL, 0, 0, strcmp(argv[0], "allgather") == 0};
  for (int i = 1; i < argc; i++) {
    long long v = 0;
    if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
      if (int_option("--max-bytes", argv[++i], 1, CLI_MAX_BYTES, &v) != 0) return 2;
      o.max_bytes = (unsigned long long)v;
    } else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) o.csv = argv[++i];
    else if (strcmp(argv[i], "--nccl-probe") == 0) o.nccl_probe = 1;
    else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      if (int_option_i("--ranks", argv[++i], 2, WS_RUN_MAX_RANKS, &o.ranks) != 0) return 2;
    } else return usage();
  }
  if (getenv(WS_RANK_ENV) == NULL) return bench_under_launcher(o.ranks ? o.ranks : 2, 2, argc, argv);
#ifdef WS_HAVE_NCCL
  if (o.allgather) return bench_allgather(&o) == 0 ? 0 : 1;
  return bench_sendrecv(&o) == 0 ? 0 : 1;
#else
  (void)o;
  fprintf(stderr, "bench sendrecv: warpspec was built without NCCL (the baseline)\n");
  return 1;
#endif
}

/* `bench moe` runs one process per rank (default 1: EP1 on one GPU): outside the
 * launcher, start it. */
static int cmd_bench_ep(int argc, char **argv) {
  bench_ep_opts o = {NULL, 0, 0, 0, -1, NULL, 0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) o.csv = argv[++i];
    else if (strcmp(argv[i], "--profile") == 0) o.profile = 1;
    else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) o.trace = argv[++i];
    else if (strcmp(argv[i], "--receive") == 0 && i + 1 < argc) {
      const char *r = argv[++i];
      if (strcmp(r, "copy") == 0) o.receive = WS_EP_RECEIVE_COPY;
      else if (strcmp(r, "index") == 0) o.receive = WS_EP_RECEIVE_INDEX;
      else if (strcmp(r, "both") == 0) o.receive = -1;
      else { fprintf(stderr, "bench ep: --receive %s: copy, index or both\n", r); return 2; }
    } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      if (int_option_i("--ranks", argv[++i], 1, WS_RUN_MAX_RANKS, &o.ranks) != 0) return 2;
    } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      if (int_option_i("--tokens", argv[++i], 1, CLI_MAX_TOKENS, &o.tokens) != 0) return 2;
    } else if (strcmp(argv[i], "--sms") == 0 && i + 1 < argc) {
      if (int_option_i("--sms", argv[++i], 1, WS_EP_MAX_SMS, &o.sms) != 0) return 2;
    } else return usage();
  }
  if (getenv(WS_RANK_ENV) == NULL) return bench_under_launcher(o.ranks ? o.ranks : 2, 1, argc, argv);
  return bench_ep(&o) == 0 ? 0 : 1;
}

/* `bench attn-kernels [--only PART,...] [--match TEXT]`: one GPU, one process; the parts
 * run in the order mla, flash, nsa whatever the order named; TEXT picks shapes by name. */
static int cmd_bench_attn_kernels(int argc, char **argv) {
  int parts = 0;
  const char *match = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--match") == 0 && i + 1 < argc) {
      match = argv[++i];
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      for (const char *t = argv[++i]; *t;) { /* a comma-separated list */
        const size_t len = strcspn(t, ",");
        if (len == 3 && strncmp(t, "mla", 3) == 0) parts |= BENCH_ATTN_MLA;
        else if (len == 5 && strncmp(t, "flash", 5) == 0) parts |= BENCH_ATTN_FLASH;
        else if (len == 3 && strncmp(t, "nsa", 3) == 0) parts |= BENCH_ATTN_NSA;
        else {
          fprintf(stderr, "bench attn-kernels: --only %s: '%.*s' is not mla, flash or nsa (comma-separated)\n", argv[i],
                  (int)len, t);
          return 2;
        }
        t += len + (t[len] == ',');
      }
    } else {
      fprintf(stderr, "bench attn-kernels: unknown argument '%s' (--only mla,flash,nsa; --match TEXT)\n", argv[i]);
      return 2;
    }
  }
  if (gpu_count() == 0) { fprintf(stderr, "bench attn-kernels: no GPU on this machine\n"); return 1; }
  return bench_attn_kernels(parts ? parts : BENCH_ATTN_MLA | BENCH_ATTN_FLASH | BENCH_ATTN_NSA, match) == 0 ? 0 : 1;
}

/* `bench gemm-gather`: one GPU, one process; --variant NAME runs one variant (for ncu). */
static int cmd_bench_gemm_gather(int argc, char **argv) {
  bench_gemm_gather_opts o = {-1, 4096, 20, 0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--variant") == 0 && i + 1 < argc) {
      if ((o.variant = bench_gemm_gather_variant(argv[++i])) < 0) return 2;
    } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      if (int_option_i("--tokens", argv[++i], 1, CLI_MAX_TOKENS, &o.tokens) != 0) return 2;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      if (int_option_i("--reps", argv[++i], 1, CLI_MAX_ITERS, &o.reps) != 0) return 2;
    } else if (strcmp(argv[i], "--pitch") == 0 && i + 1 < argc) { /* the padded rows' bytes (bench_gemm_gather.cu) */
      if (int_option_i("--pitch", argv[++i], 7392, 1 << 20, &o.pitch) != 0) return 2;
      if (o.pitch % 16) { fprintf(stderr, "bench gemm-gather: --pitch %d: a multiple of 16\n", o.pitch); return 2; }
    } else {
      fprintf(stderr, "bench gemm-gather: unknown argument '%s' (--variant NAME, --tokens T, --reps N, --pitch B)\n", argv[i]);
      return 2;
    }
  }
  if (gpu_count() == 0) { fprintf(stderr, "bench gemm-gather: no GPU on this machine\n"); return 1; }
  return bench_gemm_gather(&o) == 0 ? 0 : 1;
}

static int cmd_bench_moe_layer(int argc, char **argv) {
  bench_moe_opts o = {NULL, NULL, 0, 0, 0, NULL, 0, 0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) o.csv = argv[++i];
    else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) o.shape = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0) o.quick = 1;
    else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) o.trace = argv[++i];
    else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      if (int_option_i("--ranks", argv[++i], 1, WS_RUN_MAX_RANKS, &o.ranks) != 0) return 2;
    } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      if (int_option_i("--tokens", argv[++i], 1, CLI_MAX_TOKENS, &o.tokens) != 0) return 2;
    } else if (strcmp(argv[i], "--trace-block") == 0 && i + 1 < argc) { /* -1: every block */
      if (int_option_i("--trace-block", argv[++i], -1, INT_MAX, &o.trace_block) != 0) return 2;
    } else if (strcmp(argv[i], "--sms") == 0 && i + 1 < argc) { /* 0: the layer's default */
      if (int_option_i("--sms", argv[++i], 0, WS_EP_MAX_SMS, &o.sms) != 0) return 2;
    } else return usage();
  }
  if (getenv(WS_RANK_ENV) == NULL) return bench_under_launcher(o.ranks ? o.ranks : 1, 1, argc, argv);
  return bench_moe(&o) == 0 ? 0 : 1;
}

/* `bench moe-a2a`, `bench moe-layer` and `bench attention` are PyTorch benchmarks
 * (warpspec.bench_moe, warpspec.bench_moe_layer, warpspec.bench_attention): hand over to
 * Python. */
static int cmd_bench_python(int argc, char **argv) {
  char *args[64] = {(char *)"python3", (char *)"-m", (char *)"warpspec", (char *)"bench", argv[0]};
  int k = 5;
  for (int i = 1; i < argc && k < 63; i++) args[k++] = argv[i];
  args[k] = NULL;
  fflush(stdout);
  execvp(args[0], args);
  fprintf(stderr, "bench %s: cannot start python3 (%s); it needs the warpspec Python package and PyTorch: "
          "pip install . then python -m warpspec bench %s\n", argv[0], strerror(errno), argv[0]);
  return 1;
}

static int cmd_bench(int argc, char **argv) {
  if (argc > 0 && strcmp(argv[0], "moe") == 0) return cmd_bench_moe_layer(argc, argv);
  if (argc > 0 && strcmp(argv[0], "ep") == 0) return cmd_bench_ep(argc, argv);
  if (argc > 0 && strcmp(argv[0], "attn-kernels") == 0) return cmd_bench_attn_kernels(argc, argv);
  if (argc > 0 && (strcmp(argv[0], "moe-a2a") == 0 || strcmp(argv[0], "moe-layer") == 0 || strcmp(argv[0], "attention") == 0))
    return cmd_bench_python(argc, argv);
  if (argc > 0 && (strcmp(argv[0], "sendrecv") == 0 || strcmp(argv[0], "allgather") == 0)) return cmd_bench_sendrecv(argc, argv);
  if (argc > 0 && strcmp(argv[0], "nvlink") == 0) return bench_nvlink() == 0 ? 0 : 1;
  if (argc > 0 && strcmp(argv[0], "hbm") == 0) return bench_hbm() == 0 ? 0 : 1;
  if (argc > 0 && strcmp(argv[0], "combine-mix") == 0) return bench_combine_mix() == 0 ? 0 : 1;
  if (argc > 0 && strcmp(argv[0], "gemm-gather") == 0) return cmd_bench_gemm_gather(argc, argv);
  if (argc > 0 && strcmp(argv[0], "gemm") == 0) {
    const char *csv = NULL, *only = NULL;
    double soak = 0;
    for (int i = 1; i < argc; i++) {
      if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) csv = argv[++i];
      else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
      else if (strcmp(argv[i], "--soak") == 0 && i + 1 < argc) {
        if (real_option("--soak", argv[++i], 0, CLI_MAX_SECONDS, &soak) != 0) return 2;
      } else {
        fprintf(stderr, "bench gemm: unknown argument '%s' (--csv FILE, --only TYPE,G,M,N,K, --soak SECONDS)\n", argv[i]);
        return 2;
      }
    }
    if (gpu_count() == 0) { fprintf(stderr, "bench gemm: no GPU on this machine\n"); return 1; }
    return bench_gemm(csv, only, soak) == 0 ? 0 : 1;
  }
  bench_pipe_opts o = {(size_t)1 << 30, 20, NULL, 0};
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "pipe") == 0) continue;
    long long v = 0;
    if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      if (int_option("--bytes", argv[++i], 1, CLI_MAX_BYTES, &v) != 0) return 2;
      o.bytes = (size_t)v;
    } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      if (int_option_i("--iters", argv[++i], 1, CLI_MAX_ITERS, &o.iters) != 0) return 2;
    } else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) o.csv = argv[++i];
    else if (strcmp(argv[i], "--sweep") == 0) o.sweep = 1;
    else return usage();
  }
  if (o.bytes == 0 || o.iters < 1) return usage();
  if (gpu_count() == 0) { fprintf(stderr, "bench: no GPU on this machine\n"); return 1; }
  return bench_pipe(&o) == 0 ? 0 : 1;
}

static int cmd_demo(int planner_only) {
  const int n = planner_only ? 0 : gpu_count();
  if (n > 0) {
    /* The suite on the GPUs present: the pipe and the GEMM on one GPU, the
     * communication benchmarks when there are two or more. */
    int rc = cmd_info();
    char *pipe[] = {(char *)"pipe"};
    rc |= cmd_bench(1, pipe);
    char *gemm[] = {(char *)"gemm"};
    rc |= cmd_bench(1, gemm);
    if (n >= 2) {
      char *sr[] = {(char *)"sendrecv"};
      rc |= cmd_bench_sendrecv(1, sr);
      bench_headline("sendrecv on 2 GPUs against NCCL: the last column of its table (NCCL's best / ours)");
    }
    /* the newcomer's last screen: what ran, how it compared, where the rest is */
    bench_headlines_print(rc ? "Summary (a benchmark FAILED: see its output above)" : "Summary");
    printf("  The full tables are above; `warpspec bench gemm --csv F` and the others write CSVs, and\n"
           "  docs/benchmarks.md has every figure measured so far, with the commands.\n");
    return rc ? 1 : 0;
  }
  if (planner_only) printf("The budget planner on the library's kernels and on the seed pair:\n\n");
  else
    printf("No GPU on this machine: the benchmarks need an sm_90 GPU (H100/H200).\n"
           "Here is the budget planner on the library's kernels and on the seed pair instead.\n\n");
  const char *kernels[] = {"stream_tma", "stream_threads", "gemm_fp8", "gemm_fp8_wide", "seed", "seed_twin"};
  for (int i = 0; i < 6; i++) {
    char *args[] = {(char *)"--kernel", (char *)kernels[i]};
    printf("$ warpspec plan --kernel %s\n", kernels[i]);
    cmd_plan(2, args);
    printf("\n");
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const char *cmd = argv[1];
  if (strcmp(cmd, "info") == 0) return cmd_info();
  if (strcmp(cmd, "plan") == 0) return cmd_plan(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "demo") == 0) return cmd_demo(argc > 2 && strcmp(argv[2], "--planner") == 0);
  if (strcmp(cmd, "run") == 0) return cli_run(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0) { printf("%s\n", ws_version()); return 0; }
  return usage();
}
