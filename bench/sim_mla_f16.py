#!/usr/bin/env python3
"""sim_mla_f16.py - the MLA kernels' FP8-cache f16 forms emulated on the host against float64
(numpy and ml_dtypes; no GPU): the few-head kernel's (mla_fewheads.cu: S per latent tile times
the keys' tile scales, P^T once per tile scale in units of 2^-e_run) and the 64-row kernel's
(mla_sparse.cu with WARPSPEC_MLA_FP8_F16: each block as f16 times its power of two E, S and P
scaled back). The data are test_attention's "magnitudes apart" decode case: heads of |q| 1e-6
.. 1e5, 64-key blocks of 8, 8/4096 and 512. Prints each form's relative error against the
float64 product over the dequantised cache (session 39: 2-8e-4 both, the BF16 forms' tests
show about 1.7e-3). A check of a format change before GPU time, not a test of the kernels."""
import numpy as np, ml_dtypes
bf16, e4m3, f16 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.float16
rng = np.random.default_rng(1)
H, N, DQ, DV = 16, 3000, 576, 512
qamp = [1e-6, 1e-2, 1.0, 300.0, 1e5]
q = np.stack([rng.uniform(-1, 1, DQ) * qamp[h % 5] for h in range(H)]).astype(bf16).astype(np.float64)
amp = np.array([[8.0, 8.0/4096, 512.0][(r // 64) % 3] for r in range(N)])
kv = (rng.uniform(-1, 1, (N, DQ)) * amp[:, None]).astype(bf16).astype(np.float64)
# FP8 rows: 4 tiles of 128 latent dims, scale amax/448, e4m3; rope bf16 as is
sc = np.zeros((N, 4)); raw = np.zeros((N, 512))
for t in range(4):
    a = np.abs(kv[:, 128*t:128*t+128]).max(1); s = np.where(a > 0, a / 448.0, 1.0).astype(np.float32).astype(np.float64)
    sc[:, t] = s; raw[:, 128*t:128*t+128] = (kv[:, 128*t:128*t+128] / s[:, None]).astype(e4m3).astype(np.float64)
deq = np.concatenate([raw * np.repeat(sc, 128, 1), kv[:, 512:]], 1)
scale = 1 / np.sqrt(DQ)
def ref():
    S = q @ deq.T * scale; m = S.max(1, keepdims=True); P = np.exp(S - m); return (P @ deq[:, :512]) / P.sum(1, keepdims=True)
def ilogb(x): return int(np.floor(np.log2(x)))
def f16_form():
    e = [min(max(ilogb(np.abs(q[h]).max()) - 14, -126), 126) if np.abs(q[h]).max() > 0 else 0 for h in range(H)]
    qp = np.stack([np.concatenate([(q[h, :512] * 2.0**-e[h]).astype(f16).astype(np.float64), (q[h, 512:] * 2.0**-e[h]).astype(bf16).astype(np.float64)]) for h in range(H)])
    o = np.zeros((H, DV)); m_run = np.full(H, -np.inf); l = np.zeros(H); e_run, e_set = 0, False
    for b0 in range(0, N, 64):
        blk = slice(b0, min(N, b0 + 64)); s_b = sc[blk]
        bmax = s_b.max(); E = min(max(-ilogb(bmax), -64), 64) if bmax > 0 else 0
        sc2 = (s_b * 2.0**E).astype(f16).astype(np.float64)
        k = np.concatenate([(raw[blk].astype(f16).astype(np.float64) * np.repeat(sc2, 128, 1)).astype(f16).astype(np.float64),
                            (kv[blk, 512:] * 2.0**E).astype(bf16).astype(np.float64)], 1)
        S = (qp @ k.T).astype(np.float32).astype(np.float64)  # fp32 accumulation (approx.)
        S = S * (2.0**np.array(e))[:, None] * 2.0**-E
        gshift = 1.0
        if (not e_set) or E < e_run - 4 or (E > e_run + 4 and E - e_run <= 100):
            gshift = 2.0**(E - e_run) if e_set else 1.0; e_run, e_set = E, True
        g = 2.0**(e_run - E)
        mx = S.max(1) * scale
        m_new = np.maximum(m_run, mx)
        keep = (m_new - m_run) <= 8 * np.log(2)  # lazy in log2 units 8
        m_new = np.where(keep, m_run, m_new)
        alpha = np.where(keep, 1.0, np.exp(m_run - m_new)); alpha = np.where(np.isneginf(m_run), 0.0, alpha)
        P = np.exp(S * scale - m_new[:, None])
        l = l * alpha + P.sum(1)
        Pp = (P * g).astype(f16).astype(np.float64)
        o = o * (alpha * gshift)[:, None] + Pp @ k[:, :512]
        m_run = m_new
    return o * 2.0**-e_run / l[:, None]
R = ref()
G = f16_form()
print("64-row form: per head", " ".join("%.1e" % (np.linalg.norm(G[h] - R[h]) / np.linalg.norm(R[h])) for h in range(H)))
print("64-row form, whole: %.2e" % (np.linalg.norm(G - R) / np.linalg.norm(R)))

def fewheads_form():
    # Q to f16 with a power of two per head, S per latent tile times the keys' tile scales, P^T per tile scale
    e = [min(max(ilogb(np.abs(q[h]).max()) - 14, -126), 126) if np.abs(q[h]).max() > 0 else 0 for h in range(H)]
    qp = np.stack([np.concatenate([(q[h, :512] * 2.0**-e[h]).astype(f16).astype(np.float64), (q[h, 512:] * 2.0**-e[h]).astype(bf16).astype(np.float64)]) for h in range(H)])
    sl = scale * 2.0**np.array(e)
    o = np.zeros((H, DV)); m_run = np.full(H, -np.inf); l = np.zeros(H); e_run, e_set = 0, False
    rawf = raw.astype(f16).astype(np.float64)
    for b0 in range(0, N, 64):
        blk = slice(b0, min(N, b0 + 64)); s_b = sc[blk]
        S = np.zeros((H, s_b.shape[0]))
        for t in range(4):
            St = (qp[:, 128*t:128*t+128] @ rawf[blk, 128*t:128*t+128].T).astype(np.float32).astype(np.float64)
            S += St * s_b[:, t][None, :]
        S += qp[:, 512:] @ kv[blk, 512:].T
        bmax = s_b.max()
        gshift = 1.0
        if bmax > 0:
            eb = min(max(-ilogb(bmax), -126), 126)
            if (not e_set) or eb < e_run - 4 or (eb > e_run + 4 and eb - e_run <= 100):
                gshift = 2.0**(eb - e_run) if e_set else 1.0; e_run, e_set = eb, True
        mx = (S * sl[:, None]).max(1)
        m_new = np.maximum(m_run, mx); keep = (m_new - m_run) <= 8 * np.log(2)
        m_new = np.where(keep, m_run, m_new)
        alpha = np.where(keep, 1.0, np.exp(m_run - m_new)); alpha = np.where(np.isneginf(m_run), 0.0, alpha)
        P = np.exp(S * sl[:, None] - m_new[:, None]); l = l * alpha + P.sum(1)
        o = o * (alpha * gshift)[:, None]
        for t in range(4):
            Pt = (P * s_b[:, t][None, :] * 2.0**e_run).astype(f16).astype(np.float64)
            o[:, 128*t:128*t+128] += Pt @ rawf[blk, 128*t:128*t+128]
        m_run = m_new
    return o * 2.0**-e_run / l[:, None]
F = fewheads_form()
print("fewheads form: per head", " ".join("%.1e" % (np.linalg.norm(F[h] - R[h]) / np.linalg.norm(R[h])) for h in range(H)))
print("fewheads form, whole: %.2e" % (np.linalg.norm(F - R) / np.linalg.norm(R)))
