/* test_device_prims.cu - the device headers' small primitives against their documented
 * meaning, exhaustively where the domain is small:
 *   fp8    ws_e4m3x2_lo_to_f16x2 / _hi_to_f16x2 and ws_from_e4m3x2 for every 16-bit pair of
 *          e4m3 bytes, in either half of a word whose other half is random: each f16 (or
 *          float) is the byte's value exactly (ws_fp8_e4m3_decode), NaN for the NaN bytes;
 *   matrix ws_stmatrix_x4_trans: four 8 x 8 matrices of distinct 16-bit tags from a warp's
 *          registers, stored transposed at per-lane row addresses, land where ptx.cuh says
 *          (row r of matrix m's transpose at lane 8m + r's address, column r of the matrix);
 *          and ws_ldmatrix_x4_trans reading them back gives every lane its words again. */
#include "gpu_test.h"
#include "warpspec/device/fp8.cuh"
#include "warpspec/device/ptx.cuh"
#include "warpspec/fp8.h"

#include <math.h>

#define PAIRS 65536

/* Word i: pair i in the low half (lo) or the high half (hi), the other half `other[i]`. */
__global__ void unpack_kernel(const uint16_t *other, uint32_t *lo, uint32_t *hi, float2 *f) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= PAIRS) return;
  lo[i] = ws_e4m3x2_lo_to_f16x2((uint32_t)i | ((uint32_t)other[i] << 16));
  hi[i] = ws_e4m3x2_hi_to_f16x2(((uint32_t)i << 16) | other[i]);
  f[i] = ws_from_e4m3x2((uint16_t)i);
}

/* The f16 bits of v, which must be exact in f16 (every e4m3 value is); NaN: 0x7E00 marks it. */
static uint16_t f16_bits_exact(double v) {
  if (isnan(v)) return 0x7E00;
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (a == 0.0) return sign;
  int e;
  const double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
  int exp16 = e - 1 + 15;        /* a = (2m) 2^(e - 1) */
  if (exp16 >= 1) return (uint16_t)(sign | (exp16 << 10) | (uint16_t)((2.0 * m - 1.0) * 1024.0));
  return (uint16_t)(sign | (uint16_t)(a / ldexp(1.0, -24))); /* subnormal: multiples of 2^-24 */
}
static int f16_matches(uint16_t got, double want) {
  if (isnan(want)) return (got & 0x7C00) == 0x7C00 && (got & 0x03FF) != 0;
  return got == f16_bits_exact(want);
}

static void check_unpacks(void) {
  uint16_t *h_other = (uint16_t *)host_alloc(PAIRS, sizeof(uint16_t), 0);
  for (int i = 0; i < PAIRS; i++) h_other[i] = (uint16_t)rng_u32();
  uint16_t *d_other;
  uint32_t *d_lo, *d_hi;
  float2 *d_f;
  CUDA_OK(cudaMalloc(&d_other, PAIRS * sizeof(uint16_t)));
  CUDA_OK(cudaMalloc(&d_lo, PAIRS * sizeof(uint32_t)));
  CUDA_OK(cudaMalloc(&d_hi, PAIRS * sizeof(uint32_t)));
  CUDA_OK(cudaMalloc(&d_f, PAIRS * sizeof(float2)));
  CUDA_OK(cudaMemset(d_lo, 0xA5, PAIRS * sizeof(uint32_t))); /* poisoned */
  CUDA_OK(cudaMemset(d_hi, 0xA5, PAIRS * sizeof(uint32_t)));
  CUDA_OK(cudaMemset(d_f, 0xA5, PAIRS * sizeof(float2)));
  CUDA_OK(cudaMemcpy(d_other, h_other, PAIRS * sizeof(uint16_t), cudaMemcpyHostToDevice));
  unpack_kernel<<<PAIRS / 256, 256>>>(d_other, d_lo, d_hi, d_f);
  CUDA_OK(cudaGetLastError());
  uint32_t *lo = (uint32_t *)host_alloc(PAIRS, sizeof(uint32_t), 0), *hi = (uint32_t *)host_alloc(PAIRS, sizeof(uint32_t), 0);
  float2 *f = (float2 *)host_alloc(PAIRS, sizeof(float2), 0);
  CUDA_OK(cudaMemcpy(lo, d_lo, PAIRS * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hi, d_hi, PAIRS * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(f, d_f, PAIRS * sizeof(float2), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < PAIRS && bad < 10; i++) {
    const double v0 = ws_fp8_e4m3_decode((uint8_t)(i & 0xFF)), v1 = ws_fp8_e4m3_decode((uint8_t)(i >> 8));
    const int ok = f16_matches((uint16_t)lo[i], v0) && f16_matches((uint16_t)(lo[i] >> 16), v1) &&
                   f16_matches((uint16_t)hi[i], v0) && f16_matches((uint16_t)(hi[i] >> 16), v1) &&
                   (isnan(v0) ? isnan(f[i].x) : f[i].x == (float)v0) && (isnan(v1) ? isnan(f[i].y) : f[i].y == (float)v1);
    if (!ok) {
      fprintf(stderr, "pair 0x%04x (other half 0x%04x): lo 0x%08x hi 0x%08x floats %g %g, values %g %g\n", i, h_other[i],
              lo[i], hi[i], f[i].x, f[i].y, v0, v1);
      bad++;
    }
  }
  CHECK(bad == 0);
  printf("fp8 unpacks: %d pairs, each in either half, %s\n", PAIRS, bad ? "MISMATCH" : "exact");
  CUDA_OK(cudaFree(d_other)); CUDA_OK(cudaFree(d_lo)); CUDA_OK(cudaFree(d_hi)); CUDA_OK(cudaFree(d_f));
  free(h_other); free(lo); free(hi); free(f);
}

/* Matrix m's element (row i, column j) is tag(m, i, j); lane l holds, in word m, elements
 * (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix m (the low half first). The
 * transposes go to rows of 32 bytes (16 elements, only the first 8 written), lane 8m + r
 * giving the address of matrix m's row r, at rows placed out of order (perm) to check the
 * per-lane addresses. */
#define TAG(m, i, j) ((uint16_t)(0x1000 * ((m) + 1) + 16 * (i) + (j)))
__global__ void matrix_kernel(uint16_t *out, uint32_t *back, const int *perm) {
  __shared__ __align__(16) uint16_t rows[32][16];
  const int l = (int)threadIdx.x;
  for (int k = l; k < 32 * 16; k += 32) rows[k / 16][k % 16] = 0xDEAD;
  __syncwarp();
  uint32_t w[4];
#pragma unroll
  for (int m = 0; m < 4; m++) w[m] = (uint32_t)TAG(m, l / 4, 2 * (l % 4)) | ((uint32_t)TAG(m, l / 4, 2 * (l % 4) + 1) << 16);
  const uint32_t at = ws_smem_addr(&rows[perm[l]][0]);
  ws_stmatrix_x4_trans(at, make_uint4(w[0], w[1], w[2], w[3]));
  __syncwarp();
  for (int k = l; k < 32 * 16; k += 32) out[k] = rows[k / 16][k % 16];
  const uint4 r = ws_ldmatrix_x4_trans(at); /* the transposes read back transposed: the words again */
  back[4 * l + 0] = r.x; back[4 * l + 1] = r.y; back[4 * l + 2] = r.z; back[4 * l + 3] = r.w;
}

static void check_stmatrix(void) {
  int perm[32];
  for (int i = 0; i < 32; i++) perm[i] = i;
  for (int i = 31; i > 0; i--) { /* a random order of the 32 row slots */
    const int j = (int)(rng_u32() % (uint32_t)(i + 1)), t = perm[i];
    perm[i] = perm[j]; perm[j] = t;
  }
  int *d_perm;
  uint16_t *d_out;
  uint32_t *d_back;
  CUDA_OK(cudaMalloc(&d_perm, sizeof perm));
  CUDA_OK(cudaMalloc(&d_out, 32 * 16 * sizeof(uint16_t)));
  CUDA_OK(cudaMalloc(&d_back, 32 * 4 * sizeof(uint32_t)));
  CUDA_OK(cudaMemcpy(d_perm, perm, sizeof perm, cudaMemcpyHostToDevice));
  matrix_kernel<<<1, 32>>>(d_out, d_back, d_perm);
  CUDA_OK(cudaGetLastError());
  uint16_t out[32][16];
  uint32_t back[32][4];
  CUDA_OK(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(back, d_back, sizeof back, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int l = 0; l < 32; l++) {
    const int m = l / 8, r = l % 8; /* lane l's address: matrix m's transposed row r = its column r */
    for (int c = 0; c < 16; c++) {
      const uint16_t want = c < 8 ? TAG(m, c, r) : (uint16_t)0xDEAD;
      if (out[perm[l]][c] != want && bad++ < 10)
        fprintf(stderr, "stmatrix: matrix %d, stored row %d, element %d: 0x%04x, want 0x%04x\n", m, r, c, out[perm[l]][c], want);
    }
    for (int w = 0; w < 4; w++) {
      const uint32_t want = (uint32_t)TAG(w, l / 4, 2 * (l % 4)) | ((uint32_t)TAG(w, l / 4, 2 * (l % 4) + 1) << 16);
      if (back[l][w] != want && bad++ < 10)
        fprintf(stderr, "ldmatrix back: lane %d word %d: 0x%08x, want 0x%08x\n", l, w, back[l][w], want);
    }
  }
  CHECK(bad == 0);
  printf("stmatrix .trans: 4 matrices at 32 out-of-order rows, and back by ldmatrix .trans: %s\n", bad ? "MISMATCH" : "as documented");
  CUDA_OK(cudaFree(d_perm)); CUDA_OK(cudaFree(d_out)); CUDA_OK(cudaFree(d_back));
}

int main(void) {
  require_hopper();
  rng_seed_from_time();
  check_unpacks();
  check_stmatrix();
  CUDA_OK(cudaDeviceSynchronize());
  return test_finish("test_device_prims");
}
