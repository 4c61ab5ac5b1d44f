/* test_moe_idle.cu - the MoE paths at their edges, on N ranks (`warpspec run -n N`):
 *
 *   "idle": ranks without tokens. In serving, idle data-parallel ranks are normal: such a
 *   rank calls the layer with 0 tokens and NULL for every tensor (an empty tensor's
 *   pointer), and still serves its experts to the others. Token counts per rank
 *   {96, 0, 0, ...} then {0, 0, ...}, on every path (auto, unfused, fused experts, fused
 *   layer), eager and as a replayed CUDA graph: rank 0's output against the float64
 *   layer (ws_moe_reference) and bit for bit equal across paths; the ranks without tokens
 *   return WS_OK and nobody waits into a timeout.
 *
 *   "ll_bytes": low-latency dispatch with the FP8 payload quantises BF16 rows on the
 *   sender; moe.h promises the bits of ws_fp8_quantize_1x128. Every received row (bytes
 *   and scales) against the host quantiser of the source's row, with fresh Gaussian rows
 *   on every call (so a row left over from an earlier call cannot pass), over several
 *   calls in a row; the normal mode's FP8 rows the same way (sent as given).
 *
 * Every rank draws every rank's data from one seed (rank 0's, through the rendezvous). */
#include "comm_test.h"
#include "moe_test_data.h"
#include "warpspec/comm.h"
#include "warpspec/fp8.h"
#include "warpspec/moe.h"
#include "warpspec/moe_layer.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static uint64_t seed;

/* A standard normal (Box-Muller) from two hashes: what torch.randn gives a harness. */
static float gauss(uint64_t a) {
  const double u1 = ((double)mix(a) + 1.0) / 4294967297.0, u2 = (double)mix(a ^ 0x5555ull) / 4294967296.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Rank r's routing of T tokens: K distinct experts of E per token, some slots -1. */
static void make_routing(int E, int K, int r, int T, uint64_t salt, int *idx, float *w) {
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      const uint64_t h = seed ^ salt ^ ((uint64_t)r << 48) ^ ((uint64_t)t << 8) ^ (uint64_t)k;
      int e = (int)(mix(h) % (uint32_t)E);
      for (int j = 0; j < k; j++)
        if (idx[t * K + j] == e) e = -1;
      if (mix(h ^ 7) % 5 == 0) e = -1;
      idx[t * K + k] = e;
      w[t * K + k] = 0.25f + 0.25f * (unit(h ^ 99) + 1.0f);
    }
}

/* ---- "idle" -------------------------------------------------------------------------- */
static int idle_case(ws_comm *comm, const int *tokens, const char *name) {
  const int H = 512, I = 256, E = 8 * nranks, K = 4, L = E / nranks, hb = H / 128, ib = I / 128, MAXT = 96;
  const int T = tokens[rank];
  const ws_moe_shape sh = {H, I, E, K};
  /* every expert's weights (the reference needs them all; this rank uploads its own) */
  uint8_t *w1, *w2;
  float *w1s, *w2s;
  moe_test_weights(seed, E, H, I, &w1, &w1s, &w2, &w2s);
  void *dW1, *dW1s, *dW2, *dW2s;
  CUDA_OK(cudaMalloc(&dW1, (size_t)L * 2 * I * H));
  CUDA_OK(cudaMalloc(&dW1s, (size_t)L * 2 * ib * hb * 4));
  CUDA_OK(cudaMalloc(&dW2, (size_t)L * H * I));
  CUDA_OK(cudaMalloc(&dW2s, (size_t)L * hb * ib * 4));
  CUDA_OK(cudaMemcpy(dW1, w1 + (size_t)rank * L * 2 * I * H, (size_t)L * 2 * I * H, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dW1s, w1s + (size_t)rank * L * 2 * ib * hb, (size_t)L * 2 * ib * hb * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dW2, w2 + (size_t)rank * L * H * I, (size_t)L * H * I, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dW2s, w2s + (size_t)rank * L * hb * ib, (size_t)L * hb * ib * 4, cudaMemcpyHostToDevice));
  /* this rank's tokens: FP8 rows with 1 x 128 scales; the device copies only if T > 0 */
  int *idx = (int *)host_alloc((size_t)T * K + 1, sizeof(int), 0);
  float *w = (float *)host_alloc((size_t)T * K + 1, sizeof(float), 0);
  uint8_t *xq = (uint8_t *)host_alloc((size_t)T * H + 1, 1, 0);
  float *xs = (float *)host_alloc((size_t)T * hb + 1, sizeof(float), 0);
  float *xf = (float *)host_alloc((size_t)T * H + 1, sizeof(float), 0);
  make_routing(E, K, rank, T, 0x1D1E, idx, w);
  for (size_t i = 0; i < (size_t)T * H; i++) xf[i] = unit(seed ^ 0x4321ull ^ ((uint64_t)rank << 40) ^ i) * 2.0f;
  if (T) WS_OK_OR_DIE(ws_fp8_quantize_1x128_host(xf, (size_t)T, (size_t)H, (size_t)H, xq, xs));
  void *dx = NULL, *dxs = NULL, *di = NULL, *dw = NULL, *dout = NULL;
  if (T) {
    CUDA_OK(cudaMalloc(&dx, (size_t)T * H));
    CUDA_OK(cudaMalloc(&dxs, (size_t)T * hb * 4));
    CUDA_OK(cudaMalloc(&di, (size_t)T * K * 4));
    CUDA_OK(cudaMalloc(&dw, (size_t)T * K * 4));
    CUDA_OK(cudaMalloc(&dout, (size_t)T * H * 2));
    CUDA_OK(cudaMemcpy(dx, xq, (size_t)T * H, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dxs, xs, (size_t)T * hb * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(di, idx, (size_t)T * K * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw, w, (size_t)T * K * 4, cudaMemcpyHostToDevice));
  }
  double *ref = (double *)host_alloc((size_t)T * H + 1, sizeof(double), 0);
  if (T) WS_OK_OR_DIE(ws_moe_reference(&sh, T, xq, xs, idx, w, w1, w1s, w2, w2s, ref));
  int rows = 0;
  for (int i = 0; i < T * K; i++) rows += idx[i] >= 0;
  const double tol = fmax(2e-2, 0.625 / sqrt((double)I * (rows > 0 ? rows : 1)));
  uint16_t *got = (uint16_t *)host_alloc((size_t)T * H + 1, 2, 0), *first = (uint16_t *)host_alloc((size_t)T * H + 1, 2, 0);
  int ok = 1, have_first = 0;
  const ws_moe_path paths[4] = {WS_MOE_AUTO, WS_MOE_UNFUSED, WS_MOE_FUSED_EXPERTS, WS_MOE_FUSED_LAYER};
  const char *pnames[4] = {"auto", "unfused", "fused experts", "fused layer"};
  for (int p = 0; p < 4; p++) {
    const ws_moe_layer_config lc = {H, I, E, K, MAXT, 8, paths[p]};
    ws_moe_layer *layer = NULL;
    WS_OK_OR_DIE(ws_moe_layer_create(&layer, comm, &lc, dW1, (const float *)dW1s, dW2, (const float *)dW2s));
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int replay = 0; replay < 2; replay++) {
      if (T) CUDA_OK(cudaMemset(dout, 0xFF, (size_t)T * H * 2));
      cudaGraph_t g = NULL;
      cudaGraphExec_t ge = NULL;
      if (replay) CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      /* NULL on a rank without tokens: every tensor is empty there */
      const ws_status s = ws_moe_layer_forward(layer, dx, (const float *)dxs, (const int *)di, (const float *)dw, T,
                                               dout, st);
      if (replay) {
        CUDA_OK(cudaStreamEndCapture(st, &g));
        if (s == WS_OK) {
          CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
          for (int i = 0; i < 3; i++) CUDA_OK(cudaGraphLaunch(ge, st));
        }
      }
      const ws_status s2 = s == WS_OK ? ws_sync(st) : s;
      if (s2 != WS_OK) {
        printf("rank %d: %s, %s%s, %d tokens: %s: %s\n", rank, name, pnames[p], replay ? " (graph)" : "", T,
               ws_strerror(s2), ws_last_error());
        ok = 0;
      } else if (T) {
        CUDA_OK(cudaMemcpy(got, dout, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
        long nan_count = 0;
        const double rel = rel_err_bf16(got, ref, (size_t)T * H, &nan_count);
        int same = 1;
        if (!have_first) { memcpy(first, got, (size_t)T * H * 2); have_first = 1; }
        else same = memcmp(first, got, (size_t)T * H * 2) == 0;
        printf("rank %d: %s, %s%s, %d tokens: rel err %.2e, %ld unwritten, %s\n", rank, name, pnames[p],
               replay ? " (graph x3)" : "", T, rel, nan_count, same ? "equal to the first path" : "DIFFERS from the first path");
        ok &= rel < tol && nan_count == 0 && same;
      } else {
        printf("rank %d: %s, %s%s, no tokens: ok\n", rank, name, pnames[p], replay ? " (graph x3)" : "");
      }
      if (ge) cudaGraphExecDestroy(ge);
      if (g) cudaGraphDestroy(g);
    }
    cudaStreamDestroy(st);
    WS_OK_OR_DIE(ws_moe_layer_destroy(layer));
  }
  /* dispatch and combine alone, BF16 payload, NULL everywhere on an idle rank */
  {
    const ws_ep_config cfg = {H, E, K, MAXT, WS_EP_BF16, 1, 4, WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
    ws_ep *ep = NULL;
    WS_OK_OR_DIE(ws_ep_create(&ep, comm, &cfg));
    void *dxb = NULL, *dy, *dob = NULL;
    const size_t R = ws_ep_max_rows(&cfg, nranks);
    CUDA_OK(cudaMalloc(&dy, R * H * 2));
    CUDA_OK(cudaMemset(dy, 0, R * H * 2));
    if (T) {
      CUDA_OK(cudaMalloc(&dxb, (size_t)T * H * 2));
      CUDA_OK(cudaMalloc(&dob, (size_t)T * H * 2));
      CUDA_OK(cudaMemset(dxb, 0, (size_t)T * H * 2));
      CUDA_OK(cudaMemset(dob, 0xFF, (size_t)T * H * 2));
    }
    ws_status s = ws_ep_dispatch(ep, dxb, NULL, (const int *)di, (const float *)dw, T, NULL, NULL, 0);
    if (s == WS_OK) s = ws_ep_combine(ep, dy, dob, 0);
    if (s == WS_OK) s = ws_sync(0);
    printf("rank %d: %s, dispatch + combine alone, %d tokens: %s%s%s\n", rank, name, T, ws_strerror(s),
           s == WS_OK ? "" : ": ", s == WS_OK ? "" : ws_last_error());
    ok &= s == WS_OK;
    if (T && s == WS_OK) { /* zero rows in: zero out */
      CUDA_OK(cudaMemcpy(got, dob, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < (size_t)T * H; i++)
        if (got[i] != 0) { printf("rank %d: out[%zu] = 0x%04x, want 0\n", rank, i, got[i]); ok = 0; break; }
    }
    WS_OK_OR_DIE(ws_ep_destroy(ep));
    cudaFree(dxb); cudaFree(dy); cudaFree(dob);
  }
  void *bufs[] = {dW1, dW1s, dW2, dW2s, dx, dxs, di, dw, dout};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
  free(w1); free(w2); free(w1s); free(w2s); free(idx); free(w); free(xq); free(xs); free(xf); free(ref);
  free(got); free(first);
  return ok;
}

/* ---- "ll_bytes" ---------------------------------------------------------------------- */
/* Rank r's BF16 rows of call `call`: Gaussian, each row with its own magnitude (2^-8 ..
 * 2^8), so blocks span many binades and some values land on e4m3 subnormals. */
static void gauss_rows(int r, int call, int T, int H, uint16_t *x) {
  for (int t = 0; t < T; t++) {
    const float mag = ldexpf(1.0f, (int)(mix(seed ^ ((uint64_t)r << 50) ^ ((uint64_t)call << 36) ^ (uint64_t)t) % 17) - 8);
    for (int c = 0; c < H; c++)
      x[(size_t)t * H + c] = ws_float_to_bf16(mag * gauss(seed ^ 0xB17Eull ^ ((uint64_t)r << 56) ^ ((uint64_t)call << 44) ^
                                                        ((uint64_t)t << 20) ^ (uint64_t)c));
  }
}

static int bytes_case(ws_comm *comm, ws_ep_mode mode, int H, int E, int K, int T, int calls) {
  const int L = E / nranks, kb = H / 128, ll = mode == WS_EP_LOW_LATENCY;
  const ws_ep_config cfg = {H, E, K, T, WS_EP_FP8, 1, 8, mode, WS_EP_RECEIVE_COPY};
  ws_ep *ep = NULL;
  WS_OK_OR_DIE(ws_ep_create(&ep, comm, &cfg));
  const size_t R = ws_ep_max_rows(&cfg, nranks);
  uint16_t *xb = (uint16_t *)host_alloc((size_t)T * H, 2, 0);
  float *xf = (float *)host_alloc((size_t)T * H, sizeof(float), 0);
  uint8_t **xq = (uint8_t **)host_alloc((size_t)nranks, sizeof(uint8_t *), 0);
  float **xs = (float **)host_alloc((size_t)nranks, sizeof(float *), 0);
  for (int r = 0; r < nranks; r++) {
    xq[r] = (uint8_t *)host_alloc((size_t)T * H, 1, 0);
    xs[r] = (float *)host_alloc((size_t)T * kb, sizeof(float), 0);
  }
  int *idx = (int *)host_alloc((size_t)T * K, sizeof(int), 0);
  float *w = (float *)host_alloc((size_t)T * K, sizeof(float), 0);
  void *dx, *dxs, *di, *dw, *dy, *dout;
  CUDA_OK(cudaMalloc(&dy, R * H * 2));
  CUDA_OK(cudaMemset(dy, 0, R * H * 2));
  CUDA_OK(cudaMalloc(&dout, (size_t)T * H * 2));
  CUDA_OK(cudaMalloc(&dx, (size_t)T * H * 2));
  CUDA_OK(cudaMalloc(&dxs, (size_t)T * kb * 4));
  CUDA_OK(cudaMalloc(&di, (size_t)T * K * 4));
  CUDA_OK(cudaMalloc(&dw, (size_t)T * K * 4));
  uint8_t *hx = (uint8_t *)host_alloc(R * H, 1, 0);
  int *sr = (int *)host_alloc(R, sizeof(int), 0), *stk = (int *)host_alloc(R, sizeof(int), 0);
  int *offs = (int *)host_alloc((size_t)L + 1, sizeof(int), 0), *cnt = (int *)host_alloc((size_t)L, sizeof(int), 0);
  long bad_bytes = 0, bad_scales = 0, rows_seen = 0;
  for (int call = 0; call < calls; call++) {
    /* every rank's rows of this call, quantised on the host (the promise) */
    for (int r = 0; r < nranks; r++) {
      gauss_rows(r, call, T, H, xb);
      for (size_t i = 0; i < (size_t)T * H; i++) xf[i] = ws_bf16_to_float(xb[i]);
      WS_OK_OR_DIE(ws_fp8_quantize_1x128_host(xf, (size_t)T, (size_t)H, (size_t)H, xq[r], xs[r]));
      if (r == rank) {
        if (ll) CUDA_OK(cudaMemcpy(dx, xb, (size_t)T * H * 2, cudaMemcpyHostToDevice));
        else CUDA_OK(cudaMemcpy(dx, xq[r], (size_t)T * H, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dxs, xs[r], (size_t)T * kb * 4, cudaMemcpyHostToDevice));
      }
    }
    make_routing(E, K, rank, T, 0xB1E5 + (uint64_t)call, idx, w);
    CUDA_OK(cudaMemcpy(di, idx, (size_t)T * K * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw, w, (size_t)T * K * 4, cudaMemcpyHostToDevice));
    ws_ep_recv rv;
    WS_OK_OR_DIE(ws_ep_dispatch(ep, dx, ll ? NULL : (const float *)dxs, (const int *)di, (const float *)dw, T, &rv, offs, 0));
    CUDA_OK(cudaMemcpy(hx, rv.x, R * H, cudaMemcpyDeviceToHost));
    float *hs = (float *)host_alloc((size_t)kb * rv.scale_ld, sizeof(float), 0);
    CUDA_OK(cudaMemcpy(hs, rv.x_scale, (size_t)kb * rv.scale_ld * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(sr, rv.src_rank, R * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(stk, rv.src_token, R * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(cnt, rv.expert_counts, (size_t)L * 4, cudaMemcpyDeviceToHost));
    for (int l = 0; l < L; l++) {
      const int beg = offs[l], n = ll ? cnt[l] : offs[l + 1] - offs[l];
      for (int q = beg; q < beg + n; q++) {
        const int s = sr[q], t = stk[q];
        if (s < 0) continue; /* padding */
        rows_seen++;
        for (int c = 0; c < H; c++) bad_bytes += hx[(size_t)q * H + c] != xq[s][(size_t)t * H + c];
        for (int b = 0; b < kb; b++) bad_scales += hs[(size_t)b * rv.scale_ld + q] != xs[s][(size_t)t * kb + b];
      }
    }
    free(hs);
    WS_OK_OR_DIE(ws_ep_combine(ep, dy, dout, 0)); /* the protocol's other half, before the next dispatch */
  }
  printf("rank %d: %s FP8 rows, H %d E %d K %d T %d, %d calls with fresh rows: %ld rows, %ld bytes and %ld scales "
         "differ from ws_fp8_quantize_1x128\n", rank, ll ? "low-latency (quantised by the sender)" : "normal (sent as given)",
         H, E, K, T, calls, rows_seen, bad_bytes, bad_scales);
  WS_OK_OR_DIE(ws_ep_destroy(ep));
  cudaFree(dx); cudaFree(dxs); cudaFree(di); cudaFree(dw); cudaFree(dy); cudaFree(dout);
  for (int r = 0; r < nranks; r++) { free(xq[r]); free(xs[r]); }
  free(xq); free(xs); free(xb); free(xf); free(idx); free(w); free(hx); free(sr); free(stk); free(offs); free(cnt);
  return bad_bytes == 0 && bad_scales == 0 && rows_seen > 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  ws_comm *comm = comm_test_start("moe_idle.seed", &rank, &nranks, &seed);
  printf("rank %d of %d: seed %llu, mode %s\n", rank, nranks, (unsigned long long)seed, mode);
  const int all = !strcmp(mode, "all");
  if (all || !strcmp(mode, "idle")) {
    int *tokens = (int *)host_alloc((size_t)nranks, sizeof(int), 0);
    tokens[0] = 96; /* rank 0 busy, the others idle */
    CHECK(idle_case(comm, tokens, "one busy rank"));
    tokens[0] = 0; /* every rank idle */
    CHECK(idle_case(comm, tokens, "all idle"));
    free(tokens);
  }
  if (all || !strcmp(mode, "ll_bytes")) {
    const int E = 8 * nranks;
    CHECK(bytes_case(comm, WS_EP_LOW_LATENCY, 7168, E, 8, 128, 6));
    CHECK(bytes_case(comm, WS_EP_LOW_LATENCY, 1024, E, 4, 64, 20));
    CHECK(bytes_case(comm, WS_EP_NORMAL, 7168, E, 8, 128, 6));
  }
  WS_OK_OR_DIE(ws_comm_destroy(comm));
  return test_finish("test_moe_idle");
}
