"""Pure-PyTorch pieces of warpspec.nn: the FP8 formats written out in torch ops (for CPU
tensors, for torch.compile, and for the references), rotary embedding, and the float64
references of the two blocks. Nothing here calls the C library, so all of it runs on
the CPU; the GPU tests hold the modules' kernel paths against these functions."""

import torch

FP8_MAX = 448.0            # largest finite float8_e4m3fn
MLA_LATENT, MLA_ROPE = 512, 64
MLA_FP8_ROW_BYTES = 656    # warpspec/attention.h: 512 e4m3, 4 fp32 scales, 64 bf16


# ---- FP8 with block scales (warpspec.quantize_fp8's definition) -------------------------
def quantize_blocks(x, block=(1, 128)):
    """float8_e4m3fn and fp32 scales of a matrix x [rows, cols] (cols a multiple of 128):
    scale = amax of the block / 448 (1 for an all-zero block), q = x / scale rounded to
    nearest. block (1, 128): scales [rows, cols / 128]; (128, 128): [ceil(rows / 128),
    cols / 128]. The same definition as warpspec.quantize_fp8, in torch ops."""
    br, bc = block
    rows, cols = x.shape
    pad = (-rows) % br
    xp = torch.nn.functional.pad(x.float(), (0, 0, 0, pad))
    blocks = xp.view((rows + pad) // br, br, cols // bc, bc)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (blocks / scale[:, None, :, None]).view(rows + pad, cols)[:rows]
    return q.to(torch.float8_e4m3fn), scale


def dequantize_blocks(q, scale, block=(1, 128)):
    """q [rows, cols] e4m3 (or its uint8 bytes) times its block scales, in float64."""
    if q.dtype == torch.uint8:
        q = q.view(torch.float8_e4m3fn)
    rows = q.shape[0]
    s = scale.double().repeat_interleave(block[0], 0)[:rows].repeat_interleave(block[1], 1)
    return q.double() * s


# ---- the FP8 latent cache rows (mla_kv_quantize_fp8's format) ---------------------------
def mla_rows_to_fp8(kv):
    """BF16 rows [..., 576] into FP8 cache rows uint8 [..., 656]: per 128-column tile of the
    latent a power-of-two scale (the smallest 2^e with amax / 2^e <= 448; 1 for a zero
    tile), the tile as e4m3 of x / scale, then the four scales as fp32 bytes and the 64
    rope dims as BF16 bytes. Bit for bit mla_kv_quantize_fp8's rows (test_gpu_attention)."""
    lead = kv.shape[:-1]
    x = kv.reshape(-1, MLA_LATENT + MLA_ROPE)
    tiles = x[:, :MLA_LATENT].float().view(-1, 4, 128)
    amax = tiles.abs().amax(-1)
    m, e = torch.frexp(amax / FP8_MAX)  # amax / 448 = m 2^e with m in [0.5, 1)
    scale = torch.ldexp(torch.ones_like(amax), torch.where(m == 0.5, e - 1, e))
    scale = torch.where(amax > 0, scale, torch.ones_like(amax))
    q = (tiles / scale[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).view(-1, MLA_LATENT)
    rope = x[:, MLA_LATENT:].to(torch.bfloat16).contiguous().view(torch.uint8)
    return torch.cat([q, scale.view(torch.uint8), rope], 1).view(*lead, MLA_FP8_ROW_BYTES)


def mla_rows_from_fp8(rows):
    """FP8 cache rows uint8 [..., 656] back into their exact values, float64 [..., 576]."""
    lead = rows.shape[:-1]
    r = rows.reshape(-1, MLA_FP8_ROW_BYTES)
    scale = r[:, 512:528].contiguous().view(torch.float32).double().repeat_interleave(128, dim=1)
    lat = r[:, :512].contiguous().view(torch.float8_e4m3fn).double() * scale
    rope = r[:, 528:].contiguous().view(torch.bfloat16).double()
    return torch.cat([lat, rope], 1).view(*lead, MLA_LATENT + MLA_ROPE)


# ---- rotary embedding --------------------------------------------------------------------
def rope_angles(positions, theta, dtype=torch.float32):
    """cos, sin [..., 32] of the 64 rope dims at integer positions [...]."""
    inv = 1.0 / theta ** (torch.arange(0, MLA_ROPE, 2, device=positions.device, dtype=dtype) / MLA_ROPE)
    ang = positions.to(dtype)[..., None] * inv
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """Rotate consecutive pairs (x[2i], x[2i+1]) of x [..., 64] by the angles, as DeepSeek's
    reference code does (its weights expect the interleaved pairs); cos / sin broadcast
    against x [..., 32]. Computed in cos's dtype."""
    pairs = x.to(cos.dtype).unflatten(-1, (MLA_ROPE // 2, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# ---- the MoE block ------------------------------------------------------------------------
def moe_reference(x, topk_idx, topk_weights, w1, w1_scale, w2, w2_scale, *, x_scale=None):
    """float64 [T, H] = sum_k topk_weights[t, k] x expert_{topk_idx[t, k]}(x[t]) over all
    experts of w1 [E, 2I, H] / w2 [E, H, I] (FP8, 128 x 128 scales): x quantised 1 x 128
    (unless given as FP8 with x_scale), each GEMM in float64 over the dequantised operands
    and rounded to BF16, SwiGLU (gate rows first) in float64, -1 slots skipped. The layer
    also requantises the SwiGLU output to FP8, which this does not: within 4e-2 of it."""
    if x_scale is None:
        x, x_scale = quantize_blocks(x)
    xd = dequantize_blocks(x, x_scale)
    inter = w2.shape[2]
    out = torch.zeros(xd.shape, dtype=torch.float64, device=xd.device)
    for e in range(w1.shape[0]):
        rows = (topk_idx == e).nonzero()
        if rows.numel() == 0:
            continue
        t, k = rows[:, 0], rows[:, 1]
        h = (xd[t] @ dequantize_blocks(w1[e], w1_scale[e], (128, 128)).T).to(torch.bfloat16).double()
        a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
        y = (a @ dequantize_blocks(w2[e], w2_scale[e], (128, 128)).T).to(torch.bfloat16).double()
        out.index_add_(0, t, y * topk_weights[t, k].double()[:, None])
    return out


# ---- the MLA block ------------------------------------------------------------------------
def _gather_cache(kv_cache, block_table, keys):
    """Rows 0 .. keys - 1 of every sequence, float64 [B, keys, 576], from the paged cache."""
    page = kv_cache.shape[1]
    flat = kv_cache.reshape(kv_cache.shape[0] * page, kv_cache.shape[-1])
    pos = torch.arange(keys, device=block_table.device)
    pages = block_table.long()[:, pos // page].clamp_min(0)  # unused pages (-1) are masked below
    rows = flat[pages * page + pos % page]
    return mla_rows_from_fp8(rows) if kv_cache.dtype == torch.uint8 else rows.double()


def mla_forward(m, x, kv_cache, block_table, start):
    """MLAAttention's forward in float64 and in the decompressed form (k and v per head from
    the latent, no absorption): writes the new rows into the cache as the module does
    (BF16, or FP8 through the torch definition of mla_kv_quantize_fp8) and returns
    float64 [B, S, hidden]. start None: prefill from position 0, attending to the new rows
    as computed (not as cached); else decode: start [B] tokens already cached, attending
    to the cache."""
    d = torch.float64
    B, S, _ = x.shape
    H, dn, dv = m.heads, m.qk_nope_head_dim, m.v_head_dim
    xd = x.to(d)
    if m.q_lora_rank is None:
        q = xd @ m.wq.weight.to(d).T
    else:
        qa = rms_norm(xd @ m.wq_a.weight.to(d).T, m.q_norm.weight.to(d), m.q_norm.eps)
        q = qa @ m.wq_b.weight.to(d).T
    q = q.view(B, S, H, dn + MLA_ROPE)
    kv_a = xd @ m.wkv_a.weight.to(d).T
    c = rms_norm(kv_a[..., :MLA_LATENT], m.kv_norm.weight.to(d), m.kv_norm.eps)
    first = torch.zeros(B, dtype=torch.long, device=x.device) if start is None else start.long()
    pos = first[:, None] + torch.arange(S, device=x.device)
    cos, sin = rope_angles(pos, m.rope_theta, d)
    k_pe = apply_rope(kv_a[..., MLA_LATENT:], cos, sin)
    q_nope, q_pe = q[..., :dn], apply_rope(q[..., dn:], cos[:, :, None], sin[:, :, None])
    new = torch.cat([c, k_pe], -1)
    m._write_rows(kv_cache, block_table, pos, new.to(torch.bfloat16), fp8_rows=mla_rows_to_fp8)
    if start is None:
        keys, limit = new, torch.arange(S, device=x.device).expand(B, S)
    else:
        keys, limit = _gather_cache(kv_cache, block_table, block_table.shape[1] * kv_cache.shape[1]), pos
    wkv_b = m.wkv_b.weight.to(d).view(H, dn + dv, MLA_LATENT)
    k_nope = torch.einsum("blc,hnc->blhn", keys[..., :MLA_LATENT], wkv_b[:, :dn])
    v = torch.einsum("blc,hvc->blhv", keys[..., :MLA_LATENT], wkv_b[:, dn:])
    s = (torch.einsum("bshn,blhn->bhsl", q_nope, k_nope) + torch.einsum("bshr,blr->bhsl", q_pe, keys[..., MLA_LATENT:]))
    seen = torch.arange(keys.shape[1], device=x.device)[None, None, :] <= limit[:, :, None]  # [B, S, L]
    s = (s * m.softmax_scale).masked_fill(~seen[:, None], float("-inf"))
    o = torch.einsum("bhsl,blhv->bshv", torch.softmax(s, -1), v).reshape(B, S, H * dv)
    return o @ m.wo.weight.to(d).T
