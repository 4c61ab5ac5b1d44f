"""warpspec.nn: PyTorch modules for a DeepSeek-V3-style model, over the package's ops.

    import warpspec.nn as wnn
    moe = wnn.MoEBlock.from_bf16(w1, w2, topk=8, max_tokens=4096,   # this rank's experts
                                 group=dist.group.WORLD)             # (None: one GPU)
    y = moe(x, topk_idx, topk_weights)        # the router is the caller's

    attn = wnn.MLAAttention(hidden=7168, heads=128, q_lora_rank=1536, device="cuda")
    cache, table = wnn.paged_cache(batch=8, max_len=4096, fp8=True, device="cuda")
    y = attn(prompt, cache, table)            # prefill: positions 0 .. S - 1
    y = attn(step, cache, table, seqlens)     # decode: after `seqlens` cached tokens

MoEBlock is warpspec.MoeLayer (dispatch, FP8 experts, combine) as a module. MLAAttention
runs warpspec.attention or mla_sparse_prefill (prefill), warpspec.mla_decode over the
paged latent cache (decode) and mla_kv_quantize_fp8 (the FP8 cache); its projections,
norms and rotary embedding are PyTorch ops. forward(..., reference=True) of either module is a float64
pure-PyTorch path (_nn_reference.py) that runs anywhere, the CPU included, and that the
GPU tests hold the kernel paths against. Bad shapes and dtypes raise the package's
InvalidArgumentError / InvalidTypeError before any kernel runs."""

try:
    import torch  # noqa: F401
except ImportError as e:  # the rest of the package works without PyTorch; this part cannot
    raise ImportError("warpspec.nn needs PyTorch (pip install torch)") from e

from .._nn_reference import moe_reference
from .mla import MLAAttention, RMSNorm, paged_cache
from .moe import MoEBlock, shared_communicator

__all__ = ["MoEBlock", "MLAAttention", "RMSNorm", "paged_cache", "shared_communicator", "moe_reference"]
