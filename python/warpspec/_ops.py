"""_ops.py - the public ops as torch.library custom ops (namespace "warpspec"), so that
torch.compile(fullgraph=True) and CUDA graphs take them as they take aten ops.

Dynamo cannot trace ctypes: a call into the C library inside a compiled function is a
graph break. So each public function, called plainly on torch tensors (no out=,
workspace=, stream=, check=), hands its tensors to torch.ops.warpspec.<op> right away; the
op's real implementation is the package's own function (every check, then the C
library), and its fake implementation gives the outputs' shapes and dtypes from the
inputs' alone, so tracing needs no GPU. Outputs are new tensors (no input is mutated).

The kernels are for inference and have no backward. Each op still registers one that
raises a clear error: without it, torch.compile of a module whose weights require grad
(grad mode on) fails inside AOT autograd with a message that names no remedy. Run
inference under torch.no_grad() or torch.inference_mode().

Registration happens once, when the package is imported after torch, or at the first
routed call."""

import sys

_OPS = None  # torch.ops.warpspec once registered


def _register(torch):
    from typing import List, Optional

    # The package's __init__ binds the public functions over their submodules' names
    # (warpspec.gemm is the function), so `from . import gemm` would give the function.
    import importlib
    _attn = importlib.import_module(__package__ + ".attention")
    _gemm = importlib.import_module(__package__ + ".gemm")
    _moe = importlib.import_module(__package__ + ".moe_layer")

    Tensor = torch.Tensor
    lib = "warpspec::"

    @torch.library.custom_op(lib + "gemm", mutates_args=())
    def gemm(a: Tensor, b: Tensor, a_scale: Optional[Tensor], b_scale: Optional[Tensor],
             group_offsets: Optional[Tensor], group_rows: Optional[Tensor]) -> Tensor:
        return _gemm.gemm_direct(a, b, a_scale=a_scale, b_scale=b_scale, group_offsets=group_offsets,
                                 group_rows=group_rows)

    @gemm.register_fake
    def _(a, b, a_scale, b_scale, group_offsets, group_rows):
        n = b.shape[-2]
        masked = group_rows is not None and group_offsets is None
        shape = (a.shape[0], a.shape[1], n) if masked else (a.shape[0], n)
        return a.new_empty(shape, dtype=torch.bfloat16)

    @torch.library.custom_op(lib + "attention", mutates_args=())
    def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, causal_align: str, softmax_scale: Optional[float],
                  cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], max_seqlen_q: Optional[int],
                  max_seqlen_k: Optional[int]) -> List[Tensor]:
        o, lse = _attn.attention_direct(q, k, v, causal=causal, causal_align=causal_align, softmax_scale=softmax_scale,
                                        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, return_lse=True)
        return [o, lse]

    @attention.register_fake
    def _(q, k, v, causal, causal_align, softmax_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        dv = v.shape[-1]
        if cu_seqlens_q is not None:  # varlen: q [total_q, heads, d]
            tq, hq = q.shape[0], q.shape[1]
            oshape = (tq, hq, dv)
        else:  # [batch, seq, heads, d]
            tq, hq = q.shape[0] * q.shape[1], q.shape[2]
            oshape = (q.shape[0], q.shape[1], hq, dv)
        return [q.new_empty(oshape), q.new_empty((hq, tq), dtype=torch.float32)]

    def _mla_outputs(q):
        """Both MLA decodes' outputs: o [B, s_q, H, 512] bf16 and lse [B, s_q, H] fp32."""
        b, s_q, heads = q.shape[0], q.shape[1], q.shape[2]
        return [q.new_empty((b, s_q, heads, 512)), q.new_empty((b, s_q, heads), dtype=torch.float32)]

    @torch.library.custom_op(lib + "mla_decode", mutates_args=())
    def mla_decode(q: Tensor, kv_cache: Tensor, block_table: Tensor, seqlens: Tensor, max_seqlen: Optional[int],
                   softmax_scale: Optional[float]) -> List[Tensor]:
        o, lse = _attn.mla_decode_direct(q, kv_cache, block_table, seqlens, max_seqlen=max_seqlen,
                                         softmax_scale=softmax_scale, return_lse=True)
        return [o, lse]

    @mla_decode.register_fake
    def _(q, kv_cache, block_table, seqlens, max_seqlen, softmax_scale):
        return _mla_outputs(q)

    @torch.library.custom_op(lib + "mla_sparse_decode", mutates_args=())
    def mla_sparse_decode(q: Tensor, kv_cache: Tensor, indices: Tensor, softmax_scale: Optional[float]) -> List[Tensor]:
        o, lse = _attn.mla_sparse_decode_direct(q, kv_cache, indices, softmax_scale=softmax_scale, return_lse=True)
        return [o, lse]

    @mla_sparse_decode.register_fake
    def _(q, kv_cache, indices, softmax_scale):
        return _mla_outputs(q)

    @torch.library.custom_op(lib + "moe_layer", mutates_args=())
    def moe_layer(handle: int, x: Tensor, x_scale: Optional[Tensor], topk_idx: Tensor, topk_weights: Tensor) -> Tensor:
        return _moe.layer_by_id(handle)._call_direct(x, topk_idx, topk_weights, x_scale=x_scale)

    @moe_layer.register_fake
    def _(handle, x, x_scale, topk_idx, topk_weights):
        return x.new_empty((x.shape[0], x.shape[1]), dtype=torch.bfloat16)

    for op, name in ((gemm, "gemm"), (attention, "attention"), (mla_decode, "mla_decode"),
                     (mla_sparse_decode, "mla_sparse_decode"), (moe_layer, "moe_layer")):
        op.register_autograd(_no_backward(name))
    return torch.ops.warpspec


def _no_backward(name):
    def backward(ctx, *grads):
        raise RuntimeError(f"warpspec.{name} is an inference kernel and has no backward; call it (or compile the "
                           "module that calls it) under torch.no_grad() or torch.inference_mode()")
    return backward


def ops():
    """torch.ops.warpspec (registered on the first call), or None without PyTorch."""
    global _OPS
    if _OPS is None:
        torch = sys.modules.get("torch")
        if torch is None:
            try:
                import torch
            except ImportError:
                return None
        _OPS = _register(torch)
    return _OPS


def routed(*tensors):
    """torch.ops.warpspec when every given tensor (None skipped) is a torch.Tensor, else None:
    the plain call on torch tensors goes through the custom op."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for t in tensors:
        if t is not None and not isinstance(t, torch.Tensor):
            return None
    return _OPS if _OPS is not None else ops()
