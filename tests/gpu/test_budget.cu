/* test_budget.cu - the budget check against what the driver really does.
 *
 * The seed configuration (dispatch 4 warps + receiver 4 + compute 4 = 384 threads)
 * plans, passes the compiled-kernel check, launches with setmaxnreg, and computes
 * the right thing. Its twin, built with a 240-register entry cap, is refused before
 * launch with a message about registers; a raw launch shows the driver error it
 * prevents. For several role tables, the layout's entry cap and thread count agree
 * with cudaFuncGetAttributes. */
#include "gpu_test.h"
#include "warpspec/device/warpspec.cuh"

#define SEED_ROLES(ROLE) ROLE(DISPATCH, 4, WS_REGS_REST, 1) ROLE(RECEIVER, 4, 80, 1) ROLE(COMPUTE, 4, 184, 1)
WS_DECLARE_ROLES(seed, SEED_ROLES);

#define WIDE_ROLES(ROLE) ROLE(W_LOAD, 1, 24, 1) ROLE(W_MATH, 4, 160, 3)
WS_DECLARE_ROLES(wide, WIDE_ROLES);

#define PACKED_ROLES(ROLE) ROLE(P_SEND, 1, WS_REGS_ENTRY, 1) ROLE(P_RECV, 1, WS_REGS_ENTRY, 1) ROLE(P_WORK, 2, WS_REGS_ENTRY, 2)
WS_DECLARE_ROLES(packed, PACKED_ROLES);

/* Work that wants registers: 48 independent accumulators per thread. */
static __device__ __forceinline__ uint32_t heavy(uint32_t x) {
  uint32_t acc[48];
#pragma unroll
  for (int i = 0; i < 48; i++) acc[i] = x * (uint32_t)(2 * i + 1);
#pragma unroll 1
  for (int k = 0; k < 64; k++) {
#pragma unroll
    for (int i = 0; i < 48; i++) acc[i] = acc[i] * 1664525u + acc[(i + 1) % 48];
  }
  uint32_t s = 0;
#pragma unroll
  for (int i = 0; i < 48; i++) s ^= acc[i];
  return s;
}

static uint32_t heavy_host(uint32_t x) {
  uint32_t acc[48];
  for (int i = 0; i < 48; i++) acc[i] = x * (uint32_t)(2 * i + 1);
  for (int k = 0; k < 64; k++) {
    for (int i = 0; i < 48; i++) acc[i] = acc[i] * 1664525u + acc[(i + 1) % 48];
  }
  uint32_t s = 0;
  for (int i = 0; i < 48; i++) s ^= acc[i];
  return s;
}

#define SEED_BODY(P)                                                         \
  ws_ctx ctx = WS_SELF(P, diag);                                             \
  const uint32_t x = in[blockIdx.x * blockDim.x + threadIdx.x];              \
  uint32_t y;                                                                \
  if (ctx.role == DISPATCH) { WS_ENTER_ROLE(seed, DISPATCH); y = x + 1; }    \
  else if (ctx.role == RECEIVER) { WS_ENTER_ROLE(seed, RECEIVER); y = x ^ 0x5a5a5a5au; } \
  else { WS_ENTER_ROLE(seed, COMPUTE); y = heavy(x); }                       \
  out[blockIdx.x * blockDim.x + threadIdx.x] = y

WS_KERNEL(seed) seed_kernel(const uint32_t *in, uint32_t *out, ws_diag diag) { SEED_BODY(seed); }

/* The failing twin: same code, entry cap 240 as Triton's maxnreg=240 gives it. */
__global__ void __maxnreg__(240) seed_twin_kernel(const uint32_t *in, uint32_t *out, ws_diag diag) { SEED_BODY(seed); }

WS_KERNEL(wide) wide_kernel(uint32_t *out, ws_diag diag) {
  ws_ctx ctx = WS_SELF(wide, diag);
  if (ctx.role == W_LOAD) { WS_ENTER_ROLE(wide, W_LOAD); if (ctx.spare) return; out[threadIdx.x] = 1; }
  else { WS_ENTER_ROLE(wide, W_MATH); out[threadIdx.x] = heavy(threadIdx.x); }
}

WS_KERNEL(packed) packed_kernel(uint32_t *out, ws_diag diag) {
  ws_ctx ctx = WS_SELF(packed, diag);
  out[threadIdx.x] = (uint32_t)(ctx.role * 100 + ctx.replica * 10 + ctx.warp);
}

static void attrs_agree(const char *name, ws_plan *plan, const void *func) {
  struct cudaFuncAttributes fa;
  CUDA_OK(cudaFuncGetAttributes(&fa, func));
  printf("%-8s plan: %4d threads, entry cap %3d | compiled: %3d regs, max %4d threads, local %zu B\n", name,
         plan->layout.threads, plan->layout.entry_regs, fa.numRegs, fa.maxThreadsPerBlock, fa.localSizeBytes);
  CHECK(fa.maxThreadsPerBlock >= plan->layout.threads);
  CHECK(fa.maxThreadsPerBlock == ws_max_threads_for_regs(fa.numRegs) || fa.maxThreadsPerBlock == 1024 ||
        fa.maxThreadsPerBlock == plan->layout.threads);
  if (plan->layout.setmaxnreg) CHECK(ws_align_up(fa.numRegs, 8) == plan->layout.entry_regs);
  CHECK(fa.localSizeBytes == 0);
  CHECK_STATUS(ws_plan_check_func(plan, func), WS_OK);
}

int main(void) {
  require_hopper();
  rng_seed_from_time();
  ws_diag diag;
  WS_OK_OR_DIE(ws_diag_get(&diag));

  /* The seed: plans, checks, launches, computes. */
  ws_plan seed_plan, wide_plan, packed_plan;
  WS_OK_OR_DIE(ws_plan_init(&seed_plan, "seed", seed_roles, seed_NROLES, 0));
  WS_OK_OR_DIE(ws_plan_init(&wide_plan, "wide", wide_roles, wide_NROLES, 0));
  WS_OK_OR_DIE(ws_plan_init(&packed_plan, "packed", packed_roles, packed_NROLES, 0));
  attrs_agree("seed", &seed_plan, (const void *)seed_kernel);
  attrs_agree("wide", &wide_plan, (const void *)wide_kernel);
  attrs_agree("packed", &packed_plan, (const void *)packed_kernel);

  const int blocks = 264, n = blocks * 384;
  uint32_t *in, *out;
  CUDA_OK(cudaMalloc(&in, n * 4));
  CUDA_OK(cudaMalloc(&out, n * 4));
  uint32_t *h_in = (uint32_t *)host_alloc((size_t)n, 4, 0), *h_out = (uint32_t *)host_alloc((size_t)n, 4, 0);
  rng_fill(h_in, n * 4);
  CUDA_OK(cudaMemcpy(in, h_in, n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(out, 0xCD, n * 4));
  void *args[] = {&in, &out, &diag};
  WS_OK_OR_DIE(ws_plan_launch(&seed_plan, (const void *)seed_kernel, dim3{(unsigned)blocks, 1, 1}, 0, args));
  WS_OK_OR_DIE(ws_sync(0));
  CUDA_OK(cudaMemcpy(h_out, out, n * 4, cudaMemcpyDeviceToHost));
  long bad = 0;
  for (int i = 0; i < n; i++) {
    const int t = i % 384;
    const uint32_t want = t < 128 ? h_in[i] + 1 : t < 256 ? h_in[i] ^ 0x5a5a5a5au : heavy_host(h_in[i]);
    bad += h_out[i] != want;
  }
  CHECK(bad == 0);
  printf("seed: 384 threads launched with setmaxnreg 240/80/184, %ld wrong outputs\n", bad);

  /* The twin: refused by the planner, and by the kernel check, before any launch. */
  ws_plan twin_plan;
  CHECK_STATUS(ws_plan_init(&twin_plan, "seed_twin", seed_roles, seed_NROLES, 240), WS_ERR_BUDGET);
  CHECK_MSG("registers, not threads");
  printf("twin planned with entry 240: %s\n", ws_last_error());
  struct cudaFuncAttributes fa;
  CUDA_OK(cudaFuncGetAttributes(&fa, (const void *)seed_twin_kernel));
  printf("twin compiled: %d registers, driver max %d threads per block\n", fa.numRegs, fa.maxThreadsPerBlock);
  CHECK(fa.maxThreadsPerBlock == 256);
  CHECK(fa.maxThreadsPerBlock == ws_max_threads_for_regs(fa.numRegs));
  ws_plan as_built;
  WS_OK_OR_DIE(ws_plan_init(&as_built, "seed_twin", seed_roles, seed_NROLES, 0));
  CHECK_STATUS(ws_plan_launch(&as_built, (const void *)seed_twin_kernel, dim3{1, 1, 1}, 0, args), WS_ERR_MISMATCH);
  CHECK_MSG("registers, not threads");
  printf("twin refused before launch: %s\n", ws_last_error());
  /* What the driver says when nobody checks first. */
  seed_twin_kernel<<<1, 384>>>(in, out, diag);
  cudaError_t e = cudaGetLastError();
  printf("raw launch of the twin with 384 threads: %s\n", cudaGetErrorString(e));
  CHECK(e == cudaErrorLaunchOutOfResources || e == cudaErrorInvalidConfiguration);
  CUDA_OK(cudaDeviceSynchronize());
  return test_finish("test_budget");
}
