"""Shared pieces of warpspec.nn: the kernels' fixed dimensions and the argument checks
both modules use."""

import torch

from .. import _nn_reference as ref
from .._lib import invalid, wrong_type

MAX_TOPK = 16                           # warpspec/moe.h: WS_EP_MAX_TOPK
LATENT, ROPE = ref.MLA_LATENT, ref.MLA_ROPE  # the MLA kernels' fixed dims: q/k 576, v 512
DENSE_DIMS = ((128, 128), (192, 128))   # (qk, v) head dims warpspec.attention takes for MLA
_FP8 = (torch.float8_e4m3fn, torch.uint8)



def _tensor(t, name, dtypes, shape=None, what=""):
    """t checked to be a torch tensor of one of `dtypes` and, if given, `shape` (None: any
    extent there)."""
    if not isinstance(t, torch.Tensor):
        raise wrong_type(f"{what}: {name} is {type(t).__name__}, expected a torch.Tensor")
    if t.dtype not in dtypes:
        raise invalid(f"{what}: {name} has dtype {t.dtype}, expected {' or '.join(str(d) for d in dtypes)}")
    if shape is not None and (t.dim() != len(shape) or any(w is not None and s != w for s, w in zip(t.shape, shape))):
        want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
        raise invalid(f"{what}: {name} has shape {tuple(t.shape)}, expected {want}")
    return t


def _require_gpu(what, x):
    if x.device.type != "cuda":
        raise invalid(f"{what}: x is on {x.device}; the kernels run on an sm_90 GPU (reference=True runs anywhere)")


def _same_device(what, **tensors):
    devs = {n: t.device for n, t in tensors.items() if t is not None}
    if len(set(devs.values())) > 1:
        raise invalid(f"{what}: tensors on different devices: " + ", ".join(f"{n} on {d}" for n, d in devs.items()))


