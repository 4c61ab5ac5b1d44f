/* warpspec/device/ptx.cuh - one tiny inline function per PTX instruction, named after it.
 *
 * Nothing here knows about roles or pipes; higher layers compose these. All shared
 * memory operands are 32-bit shared-window addresses (ws_smem_addr). sm_90a. */
#ifndef WARPSPEC_DEVICE_PTX_CUH
#define WARPSPEC_DEVICE_PTX_CUH

#include <stdint.h>

#define WS_DEV static __device__ __forceinline__

WS_DEV uint32_t ws_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* The first 1024-byte aligned byte of a dynamic shared-memory array (the 128-byte swizzle
 * of TMA and wgmma wants 1024-byte aligned tiles). Aligned by pointer arithmetic on the
 * array itself, not through an integer cast of its address: the compiler then still knows
 * the result points into shared memory and accesses through it become LDS/STS instead of
 * generic LD/ST (which each resolve the address space at run time). */
WS_DEV uint8_t *ws_smem_align1024(uint8_t *raw) {
  return raw + ((1024u - (ws_smem_addr(raw) & 1023u)) & 1023u);
}

WS_DEV uint64_t ws_globaltimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

WS_DEV uint32_t ws_smid(void) {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

WS_DEV void ws_trap(void) { asm volatile("trap;"); }

/* Programmatic dependent launch (a kernel launched with programmatic stream
 * serialisation, ws_plan_launch_chained): griddepcontrol.wait returns once the grids this
 * one depends on have finished and their memory is visible (at once without such a
 * launch); launch_dependents lets the next such grid in the stream be scheduled now, its
 * CTAs waiting in their own griddepcontrol.wait. */
WS_DEV void ws_griddepcontrol_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
WS_DEV void ws_griddepcontrol_launch_dependents(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/* An empty asm that "changes" x: the compiler must keep the value in a register
 * instead of recomputing it where it is used (rematerialization inside a hot loop). */
WS_DEV void ws_pin_u32(uint32_t *x) { asm("" : "+r"(*x)); }

/* ---- mbarrier -------------------------------------------------------------------- */
WS_DEV void ws_mbarrier_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ws_smem_addr(bar)), "r"(count) : "memory");
}

WS_DEV void ws_fence_mbarrier_init(void) {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* arrive has .release.cta semantics: writes before it are visible to the waiter. */
WS_DEV void ws_mbarrier_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ws_smem_addr(bar)) : "memory");
}

WS_DEV void ws_mbarrier_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(ws_smem_addr(bar)), "r"(bytes) : "memory");
}

/* Returns 1 once the phase of the given parity has completed (acquire.cta). The
 * hardware suspends the thread for a short while before answering 0. */
WS_DEV uint32_t ws_mbarrier_try_wait_parity(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(done) : "r"(ws_smem_addr(bar)), "r"(parity) : "memory");
  return done;
}

/* The same test without the suspension: answers at once (a pipe's probe ahead, which must
 * not hold its warp; measurement code that must not wait while it looks). */
WS_DEV uint32_t ws_mbarrier_test_wait_parity(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(done) : "r"(ws_smem_addr(bar)), "r"(parity) : "memory");
  return done;
}

/* ---- clusters (the CTAs of a cluster reach each other's shared memory) ------------ */
WS_DEV uint32_t ws_cluster_ctarank(void) {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/* Every non-exited thread of every CTA of the cluster: arrive (release), then wait (acquire). */
WS_DEV void ws_barrier_cluster_arrive_release(void) { asm volatile("barrier.cluster.arrive.release;" ::: "memory"); }
WS_DEV void ws_barrier_cluster_wait_acquire(void) { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }

/* The shared::cluster address of the same shared-memory location in the CTA `rank`. */
WS_DEV uint32_t ws_mapa_shared_cluster(const void *p, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(ws_smem_addr(p)), "r"(rank));
  return r;
}

/* 16 bytes of any CTA's shared memory in the cluster (address from ws_mapa_shared_cluster).
 * Ordered after that CTA's writes by a cluster barrier between them (ws_cluster_sync). */
WS_DEV uint4 ws_ld_shared_cluster_v4_u32(uint32_t cluster_addr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(cluster_addr)
               : "memory");
  return v;
}

/* Arrive on an mbarrier of any CTA of the cluster (address from ws_mapa_shared_cluster),
 * ordering nothing: for readers whose reads have completed (wgmma operands after
 * wgmma.wait_group). The .release.cluster form costs a MEMBAR.GPU per arrival (it halved
 * the FP8 GEMM's speed in CTA pairs: docs/benchmarks.md, FP8 third round). */
WS_DEV void ws_mbarrier_arrive_relaxed_cluster(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}

/* Arrive on a peer CTA's mbarrier and add `bytes` to its phase's transaction count: the
 * bytes that copies issued by this thread (multicast, st.async) will land in that CTA. */
WS_DEV void ws_mbarrier_arrive_expect_tx_relaxed_cluster(uint32_t cluster_addr, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.relaxed.cluster.shared::cluster.b64 _, [%0], %1;" ::"r"(cluster_addr),
               "r"(bytes) : "memory");
}

/* 8 bytes into a peer CTA's shared memory, counted as complete_tx bytes on its mbarrier
 * (both shared::cluster addresses): the data is visible to whoever sees that phase end. */
WS_DEV void ws_st_async_v2_b32(uint32_t cluster_addr, uint32_t x, uint32_t y, uint32_t cluster_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(cluster_addr),
               "r"(x), "r"(y), "r"(cluster_bar) : "memory");
}

/* ---- named barriers -------------------------------------------------------------- */
/* bar.sync is .aligned: every thread of each participating warp must execute it. */
WS_DEV void ws_bar_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

WS_DEV void ws_bar_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* barrier.sync without .aligned: tolerates divergent warps, slower. */
WS_DEV void ws_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* ---- warp helpers ---------------------------------------------------------------- */
WS_DEV uint32_t ws_elect_sync(void) {
  uint32_t is_elected;
  asm volatile("{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 %0, 1, 0, p; }" : "=r"(is_elected));
  return is_elected;
}

/* setmaxnreg needs an immediate, hence macros. Warpgroup-wide (.sync.aligned). */
#define WS_SETMAXNREG_INC(N) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N))
#define WS_SETMAXNREG_DEC(N) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N))

/* ---- proxy fences ---------------------------------------------------------------- */
/* Generic-proxy shared-memory writes become visible to the async proxy (TMA, wgmma). */
WS_DEV void ws_fence_proxy_async_shared_cta(void) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* A float from shared memory as LDS (a pointer the compiler cannot trace to shared
 * memory would otherwise become a generic load). Ordered with the barrier waits around it. */
WS_DEV float ws_ld_shared_f32(const void *p) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(ws_smem_addr(p)) : "memory");
  return v;
}

/* 16 bytes at a shared-window address (ws_smem_addr): LDS.128 / STS.128 with 32-bit
 * addresses, where a loop over many pieces would otherwise keep 64-bit pointers live. */
WS_DEV uint4 ws_ld_shared_v4_u32(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
WS_DEV void ws_st_shared_v4_u32(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
WS_DEV uint32_t ws_ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
WS_DEV void ws_st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

/* Four 8 x 8 matrices of 16-bit elements, transposed (ldmatrix .trans): lanes 8m .. 8m + 7
 * give the shared-window addresses of matrix m's eight 16-byte rows; word m of lane l then
 * holds elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) of matrix m (row, column),
 * the first in its low half. */
WS_DEV uint4 ws_ldmatrix_x4_trans(uint32_t addr) {
  uint4 v;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}

/* The inverse direction, transposed (stmatrix .trans): word m of lane l holds elements
 * (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix m (row, column; an mma
 * accumulator's layout), and row r of the stored transpose -- column r of the matrix, 16
 * bytes -- goes to the shared-window address that lane 8m + r gives. */
WS_DEV void ws_stmatrix_x4_trans(uint32_t addr, uint4 v) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

/* ---- bulk copies (TMA engine) ---------------------------------------------------- */
WS_DEV void ws_cp_async_bulk_global_to_shared(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(ws_smem_addr(dst)), "l"(src), "r"(bytes), "r"(ws_smem_addr(bar)) : "memory");
}

/* The same to a shared-window address (ws_smem_addr), for a caller that keeps its ring as
 * one base address. */
WS_DEV void ws_cp_async_bulk_global_to_shared_at(uint32_t dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(ws_smem_addr(bar)) : "memory");
}

WS_DEV void ws_cp_async_bulk_shared_to_global(void *dst, const void *src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               ::"l"(dst), "r"(ws_smem_addr(src)), "r"(bytes) : "memory");
}

WS_DEV void ws_cp_async_bulk_tensor_2d_global_to_shared(void *dst, const void *tmap, int x, int y, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               ::"r"(ws_smem_addr(dst)), "l"(tmap), "r"(x), "r"(y), "r"(ws_smem_addr(bar)) : "memory");
}

/* A 4-D box (ws_tmap_nd_swizzled) at coordinates (x, y, z, w), innermost first. */
WS_DEV void ws_cp_async_bulk_tensor_4d_global_to_shared(void *dst, const void *tmap, int x, int y, int z, int w,
                                                        uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];"
               ::"r"(ws_smem_addr(dst)), "l"(tmap), "r"(x), "r"(y), "r"(z), "r"(w), "r"(ws_smem_addr(bar)) : "memory");
}

WS_DEV void ws_cp_async_bulk_tensor_2d_shared_to_global(const void *tmap, int x, int y, const void *src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               ::"l"(tmap), "r"(x), "r"(y), "r"(ws_smem_addr(src)) : "memory");
}

/* The same box written to the same offset of every CTA in cta_mask, each CTA's mbarrier
 * at bar's offset counting the bytes that land in it. One L2 read for all of them. */
WS_DEV void ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(void *dst, const void *tmap, int x, int y,
                                                                  uint64_t *bar, uint16_t cta_mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               ::"r"(ws_smem_addr(dst)), "l"(tmap), "r"(x), "r"(y), "r"(ws_smem_addr(bar)), "h"(cta_mask) : "memory");
}

/* An L2 policy that evicts the lines first: for data read or written once. */
WS_DEV uint64_t ws_createpolicy_fractional_evict_first(void) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

WS_DEV void ws_cp_async_bulk_tensor_2d_global_to_shared_hint(void *dst, const void *tmap, int x, int y, uint64_t *bar,
                                                             uint64_t policy) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               ::"r"(ws_smem_addr(dst)), "l"(tmap), "r"(x), "r"(y), "r"(ws_smem_addr(bar)), "l"(policy) : "memory");
}

WS_DEV void ws_cp_async_bulk_tensor_2d_shared_to_global_hint(const void *tmap, int x, int y, const void *src,
                                                             uint64_t policy) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], [%3], %4;"
               ::"l"(tmap), "r"(x), "r"(y), "r"(ws_smem_addr(src)), "l"(policy) : "memory");
}

WS_DEV void ws_cp_async_bulk_commit_group(void) {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* cp.async (the per-thread asynchronous copy, generic proxy): 16 bytes global -> shared
 * (dst a shared-window address, ws_smem_addr), through L2 only; src_bytes 0 reads nothing
 * and zero-fills the 16 bytes (a masked row). */
WS_DEV void ws_cp_async_cg_16_to(uint32_t dst, const void *src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
/* Byte offset of 16-byte piece `piece` (0..7) of row `row` in a tile of 128-byte rows with
 * the 128-byte swizzle (what TMA writes and wgmma's 128B descriptors read): the pieces of
 * a row XOR-permuted by row & 7. For copies that place pieces by hand (cp.async gathers). */
WS_DEV uint32_t ws_swizzle128_offset(uint32_t row, uint32_t piece) { return row * 128u + ((piece ^ (row & 7u)) << 4); }
/* ws_cp_async_cg_16_to with L2's 256-byte prefetch on a miss: a row walked in 128-byte
 * steps (a gathered GEMM row, one K block per stage) finds its next step in L2. */
WS_DEV void ws_cp_async_cg_16_to_pf256(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
/* cp.async of 4 bytes (a scale) global -> shared, through L1 (.ca: the only form below 16
 * bytes); dst a shared-window address (ws_smem_addr), 4-byte aligned. */
WS_DEV void ws_cp_async_ca_4_to(uint32_t dst, const void *src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
/* Arrive on the mbarrier once all of this thread's earlier cp.async copies have landed,
 * without raising its expected count (the arrival is one of those it was made with). */
WS_DEV void ws_cp_async_mbarrier_arrive_noinc(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(ws_smem_addr(bar)) : "memory");
}

/* ws_cp_async_cg_16_to from a generic pointer into shared memory. */
WS_DEV void ws_cp_async_cg_16(void *dst, const void *src, uint32_t src_bytes) {
  ws_cp_async_cg_16_to(ws_smem_addr(dst), src, src_bytes);
}
WS_DEV void ws_cp_async_commit_group(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* Wait until at most N of this thread's cp.async groups are incomplete (N a constant). */
#define WS_CP_ASYNC_WAIT_GROUP(N) asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory")

/* Wait until at most N bulk groups still read their shared-memory source. */
#define WS_CP_ASYNC_BULK_WAIT_GROUP_READ(N) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory")
/* Wait until at most N bulk groups are still incomplete (writes visible). */
#define WS_CP_ASYNC_BULK_WAIT_GROUP(N) asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory")

WS_DEV void ws_prefetch_tensormap(const void *tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

WS_DEV void ws_mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ws_smem_addr(bar)), "r"(bytes) : "memory");
}

/* ---- system-scope ordering (peer GPUs, host) ------------------------------------- */
WS_DEV void ws_fence_acq_rel_sys(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

WS_DEV uint64_t ws_ld_acquire_sys_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

WS_DEV void ws_st_relaxed_sys_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* ---- GPU-scope hand-over between CTAs of one kernel ------------------------------- */
WS_DEV uint32_t ws_ld_acquire_gpu_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

WS_DEV void ws_red_release_gpu_add_u32(uint32_t *p, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* *p += v, returning the old value: a release of this thread's writes and an acquire of
 * those released before the values it reads (the last of several writers sees them all). */
WS_DEV uint32_t ws_atom_acq_rel_gpu_add_u32(uint32_t *p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

/* Generic-proxy writes to global memory and async-proxy (TMA) reads of them: the writer
 * fences after its stores, the reader after it acquired them, before its TMA loads. */
WS_DEV void ws_fence_proxy_async_global(void) { asm volatile("fence.proxy.async.global;" ::: "memory"); }

/* ---- 16-byte global accesses ----------------------------------------------------- */
/* Past L1 (the line may have been rewritten by a peer since it was last read); the
 * memory clobber keeps it after the wait and barrier that order it. */
WS_DEV uint4 ws_ld_global_cg_v4(const void *p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
               : "memory");
  return v;
}

/* Volatile 16-byte accesses land and are read whole: the low-latency lines use them. */
WS_DEV uint4 ws_ld_volatile_global_v4(const void *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
               : "memory");
  return v;
}

WS_DEV void ws_st_volatile_global_v4(void *p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

WS_DEV uint4 ws_ld_global_nc_v4(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

WS_DEV void ws_st_global_v4(void *p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

#endif
