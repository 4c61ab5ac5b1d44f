/* swiglu.cuh - the one SwiGLU both L1 epilogues use (the pass in swiglu.cu and the fused
 * experts kernel), so the two give the same bits: silu(g) x u in fp32 on the bf16-rounded
 * L1 outputs, then e4m3 with a 1 x 128 block scale s = amax / 448 (1 for zeros).
 *
 * Both steps use the hardware's approximate units, not the IEEE sequences: ex2.approx for
 * the exponential, rcp.approx for the divide, and each value times 1 / s (one IEEE divide
 * per block) for the requant. Their error is a few fp32 ulp (about 1e-6 relative), far
 * under e4m3's step (2^-3 relative), so the activation gains no measurable error; the
 * host reference (moe_reference.c, float64) bounds it. The IEEE forms (expf, a / b per
 * value) cost about 60 instructions per value and made the fused kernel's 64-row L1
 * epilogue 3.8 of its 4.6 us per tile (clock trace, DeepSeek-V3 at 8192 tokens, H100,
 * session 15) while the tensor cores idled. */
#ifndef WARPSPEC_SWIGLU_CUH
#define WARPSPEC_SWIGLU_CUH

/* silu(g) x u. For g below about -87, e^-g overflows to inf and the quotient is -0, where
 * the exact value underflows to 0 anyway. */
static __device__ __forceinline__ float moe_silu_mul(float g, float u) { return __fdividef(g, 1.0f + __expf(-g)) * u; }

/* The factor each value of a block is multiplied by before its e4m3 conversion. */
static __device__ __forceinline__ float moe_act_inv_scale(float s) { return 1.0f / s; }

#endif
