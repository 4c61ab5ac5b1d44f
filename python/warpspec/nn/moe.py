"""warpspec.nn's MoE block: warpspec.MoeLayer (dispatch, FP8 experts, combine) as a
torch module, and the one communicator the blocks of a process share."""
import importlib
import math

import torch

from .. import Communicator, MoeLayer, _lib, get_unique_id, quantize_fp8
from .. import _nn_reference as ref
from .._lib import invalid, wrong_type
from .._nn_reference import moe_reference
from ._checks import MAX_TOPK, _FP8, _require_gpu, _same_device, _tensor

# ---- the communicator -----------------------------------------------------------------
_SHARED = {"comm": None, "group": None}


def shared_communicator(group=None, device=None):
    """The warpspec.Communicator the MoE blocks share: NVSHMEM initialises once per process,
    so one communicator serves every block. Made on the first call, over `group` (a
    torch.distributed process group; collective over it) or, with group None, over this
    process alone (one GPU, no expert parallelism). device: its CUDA device (default the
    current one). Destroy it with .destroy() (collective) when done."""
    comm = _SHARED["comm"]
    if comm is not None and comm._h is not None:
        if _SHARED["group"] is not group:
            raise invalid(f"shared_communicator: this process already has one over {comm.size} rank(s) for another "
                          "group (NVSHMEM initialises once per process); pass the same group, or comm=")
        return comm
    comm = Communicator(0, 1, get_unique_id(), device=device) if group is None else \
        Communicator.from_process_group(group, device=device)
    _SHARED.update(comm=comm, group=group)
    return comm


def _ep_rank(comm, group, what):
    """(rank, ranks) of the expert-parallel group: the communicator's, the process group's,
    or (0, 1) for one GPU."""
    if comm is not None and group is not None:
        raise invalid(f"{what}: pass comm or group, not both")
    if comm is not None:
        if not isinstance(comm, Communicator):
            raise wrong_type(f"{what}: comm is {type(comm).__name__}, expected a warpspec.Communicator "
                             "(for a torch.distributed group pass group=)")
        return comm.rank, comm.size
    if group is not None:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise invalid(f"{what}: group given but torch.distributed is not initialised (dist.init_process_group)")
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


# ---- the MoE block ----------------------------------------------------------------------
class MoEBlock(torch.nn.Module):
    """DeepSeek-V3-style routed experts, expert parallel over the ranks of `comm` / `group`
    (rank r holds experts r x E / n .. (r + 1) x E / n - 1; neither given: one GPU):

        y = block(x, topk_idx, topk_weights)   # [..., hidden] bf16 out

    x [..., hidden] bf16, or FP8 as (x, x_scale) / x_scale= with scales [..., hidden / 128]
    fp32 (1 x 128 blocks, warpspec.quantize_fp8's); topk_idx [..., topk] int32 or int64
    (-1 skips a slot); topk_weights [..., topk] floating (used as fp32). At most max_tokens
    tokens per call and rank; 0 tokens (an idle rank) is fine and still serves its experts.
    Every call is collective over the ranks, as MoeLayer's. Shared experts and the router
    are the caller's.

    w1 [E/n, 2 I, hidden] (gate rows, then up) and w2 [E/n, hidden, I] float8_e4m3fn with
    128 x 128 fp32 scales w1_scale [E/n, 2 I / 128, hidden / 128], w2_scale [E/n, hidden /
    128, I / 128]: buffers of the module (state_dict, .to()). from_bf16 quantises BF16
    weights, random makes them. The C layer is made at the first forward or prepare()
    (collective) and made again when the weights have moved (.to()); call prepare() before
    torch.compile or CUDA graph capture. hidden and intermediate multiples of 128."""

    def __init__(self, hidden, intermediate, experts, topk, max_tokens, w1, w1_scale, w2, w2_scale, *, comm=None,
                 group=None, path="auto", num_sms=0):
        super().__init__()
        what = "MoEBlock"
        self.rank, self.ranks = _ep_rank(comm, group, what)
        i = _lib.as_int
        self.hidden = i(hidden, f"{what}: hidden", 128)
        self.intermediate = i(intermediate, f"{what}: intermediate", 128)
        self.experts, self.topk = i(experts, f"{what}: experts", 1), i(topk, f"{what}: topk", 1, MAX_TOPK)
        self.max_tokens, self.num_sms = i(max_tokens, f"{what}: max_tokens", 1), i(num_sms, f"{what}: num_sms", 0)
        H, I = self.hidden, self.intermediate
        if H % 128 or I % 128:
            raise invalid(f"{what}: hidden {H} and intermediate {I} must be multiples of 128")
        if self.experts % self.ranks:
            raise invalid(f"{what}: {self.experts} experts over {self.ranks} ranks: must divide")
        if self.topk > self.experts:
            raise invalid(f"{what}: topk {self.topk} > {self.experts} experts")
        paths = importlib.import_module("..moe_layer", __package__).PATHS
        if not isinstance(path, str) or path not in paths:
            raise invalid(f"{what}: path {path!r}, one of {sorted(paths)}")
        self.path = path
        weights = dict(zip(self._weight_specs(), (w1, w1_scale, w2, w2_scale)))
        for name, (dtypes, shape) in self._weight_specs().items():
            _tensor(weights[name], name, dtypes, shape, what)
        _same_device(what, **weights)
        for name, t in weights.items():
            self.register_buffer(name, t.contiguous())  # the C layer reads them in place
        self._comm, self._group = comm, group
        self._layer, self._ptrs = None, None

    @property
    def local_experts(self):
        return self.experts // self.ranks

    def _weight_specs(self):
        """name: (dtypes, shape) of each expert weight buffer, this rank's experts."""
        L, H, I, f32 = self.local_experts, self.hidden, self.intermediate, (torch.float32,)
        return {"w1": (_FP8, (L, 2 * I, H)), "w1_scale": (f32, (L, 2 * I // 128, H // 128)),
                "w2": (_FP8, (L, H, I)), "w2_scale": (f32, (L, H // 128, I // 128))}

    def extra_repr(self):
        return (f"hidden={self.hidden}, intermediate={self.intermediate}, experts={self.experts} "
                f"({self.local_experts} on rank {self.rank} of {self.ranks}), topk={self.topk}, "
                f"max_tokens={self.max_tokens}, path={self.path!r}")

    # ---- weights ----
    @staticmethod
    def quantize_weights(w1, w2):
        """(w1, w1_scale, w2, w2_scale) as MoEBlock takes them, from floating expert weights
        w1 [L, 2 I, H] and w2 [L, H, I] (rounded to BF16 first): FP8 with 128 x 128 scales,
        per expert. CUDA tensors go through warpspec.quantize_fp8, CPU ones through the
        same definition in torch ops."""
        what = "MoEBlock.quantize_weights"
        floats = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
        _tensor(w1, "w1", floats, (None, None, None), what)
        L, I2, H = w1.shape
        _tensor(w2, "w2", floats, (L, H, I2 // 2), what)
        if I2 % 256 or H % 128:
            raise invalid(f"{what}: w1 {tuple(w1.shape)}: 2 x intermediate and hidden must be multiples of 256 and 128")

        def q(w):
            w = w.to(torch.bfloat16).contiguous()
            return quantize_fp8(w, block=(128, 128)) if w.is_cuda else ref.quantize_blocks(w, (128, 128))

        pairs1, pairs2 = [q(w) for w in w1], [q(w) for w in w2]
        return (torch.stack([p[0] for p in pairs1]), torch.stack([p[1] for p in pairs1]),
                torch.stack([p[0] for p in pairs2]), torch.stack([p[1] for p in pairs2]))

    @staticmethod
    def random_weights(hidden, intermediate, experts, *, first=0, seed=0, device=None):
        """BF16 w1 [experts, 2 I, H], w2 [experts, H, I] of experts first .. first + experts
        - 1, uniform in +-1 / sqrt(fan in). Expert e comes from its own generator (seed, e),
        so every expert-parallel split holds the same weights for the same expert."""
        w1, w2 = [], []
        for e in range(first, first + experts):
            g = torch.Generator().manual_seed(seed * 1000003 + e)
            w1.append((torch.rand(2 * intermediate, hidden, generator=g) * 2 - 1) / math.sqrt(hidden))
            w2.append((torch.rand(hidden, intermediate, generator=g) * 2 - 1) / math.sqrt(intermediate))
        return (torch.stack(w1).to(device=device, dtype=torch.bfloat16),
                torch.stack(w2).to(device=device, dtype=torch.bfloat16))

    @classmethod
    def from_bf16(cls, w1, w2, *, experts=None, topk, max_tokens, comm=None, group=None, **kw):
        """A block from this rank's experts in BF16, w1 [E/n, 2 I, H] and w2 [E/n, H, I],
        quantised by quantize_weights. experts: E in all (default E/n x ranks)."""
        _, ranks = _ep_rank(comm, group, "MoEBlock.from_bf16")
        w1q, w1s, w2q, w2s = cls.quantize_weights(w1, w2)
        L, H, I = w1q.shape[0], w1q.shape[2], w2q.shape[2]
        return cls(H, I, L * ranks if experts is None else experts, topk, max_tokens, w1q, w1s, w2q, w2s, comm=comm,
                   group=group, **kw)

    @classmethod
    def random(cls, hidden, intermediate, experts, topk, max_tokens, *, comm=None, group=None, seed=0, device=None,
               **kw):
        """A block with random_weights for this rank's experts (the same expert, the same
        weights, on any number of ranks)."""
        rank, ranks = _ep_rank(comm, group, "MoEBlock.random")
        experts = _lib.as_int(experts, "MoEBlock.random: experts", 1)
        if experts % ranks:
            raise invalid(f"MoEBlock.random: {experts} experts over {ranks} ranks: must divide")
        L = experts // ranks
        w1, w2 = cls.random_weights(_lib.as_int(hidden, "MoEBlock.random: hidden", 128),
                                    _lib.as_int(intermediate, "MoEBlock.random: intermediate", 128), L,
                                    first=rank * L, seed=seed, device=device)
        return cls.from_bf16(w1, w2, experts=experts, topk=topk, max_tokens=max_tokens, comm=comm, group=group, **kw)

    # ---- the C layer ----
    def prepare(self):
        """Make the C layer now (collective: every rank calls it, or its first forward):
        on the communicator given, else on shared_communicator(group)."""
        what = "MoEBlock"
        if not self.w1.is_cuda:
            raise invalid(f"{what}: the expert weights are on {self.w1.device}; move the block to its GPU "
                          "(block.cuda()) first; reference=True runs on the CPU")
        for name, (dtypes, shape) in self._weight_specs().items():
            _tensor(getattr(self, name), name, dtypes, shape, what + " (a module-wide .to(dtype) converts buffers too)")
        dev = self.w1.device.index
        comm = self._comm if self._comm is not None else shared_communicator(self._group, dev)
        if comm.size != self.ranks or comm.device != dev:
            raise invalid(f"{what}: the communicator has {comm.size} rank(s) on cuda:{comm.device}; the block was made "
                          f"for {self.ranks} with its weights on cuda:{dev}")
        self.close()
        self._layer = MoeLayer(comm, hidden=self.hidden, inter=self.intermediate, experts=self.experts,
                               topk=self.topk, max_tokens=self.max_tokens, w1=self.w1, w1_scale=self.w1_scale,
                               w2=self.w2, w2_scale=self.w2_scale, num_sms=self.num_sms, path=self.path)
        # comm.destroy() destroys the layers in this dict before the communicator
        comm.__dict__.setdefault("_moe_layers", {})[("warpspec.nn", id(self))] = self._layer
        self._ptrs = self._weight_ptrs()

    def close(self):
        """Destroy the C layer (collective); a later forward makes a new one."""
        layer, self._layer = self._layer, None
        if layer is not None:
            layer.comm.__dict__.get("_moe_layers", {}).pop(("warpspec.nn", id(self)), None)
            layer.destroy()

    def _weight_ptrs(self):
        return tuple(t.data_ptr() for t in (self.w1, self.w1_scale, self.w2, self.w2_scale))

    # ---- forward ----
    def forward(self, x, topk_idx, topk_weights, x_scale=None, *, reference=False):
        """[..., hidden] bf16 (float64 with reference=True: moe_reference over this
        block's weights, which needs every expert here, i.e. one rank)."""
        if isinstance(x, (tuple, list)):
            if len(x) != 2 or x_scale is not None:
                raise invalid("MoEBlock: x as a pair is (x_fp8, x_scale), and then no x_scale=")
            x, x_scale = x
        x, idx, w, s, lead = self._flat_inputs(x, topk_idx, topk_weights, x_scale)
        if reference:
            if self.ranks != 1:
                raise invalid("MoEBlock: reference=True needs every expert on this rank (one rank); under expert "
                              "parallelism call warpspec.nn.moe_reference with all the experts' weights")
            return moe_reference(x, idx, w, self.w1, self.w1_scale, self.w2, self.w2_scale,
                                 x_scale=s).view(*lead, self.hidden)
        if not torch.compiler.is_compiling():  # traced code runs the layer made before
            _require_gpu("MoEBlock", x)
            if x.device != self.w1.device:
                raise invalid(f"MoEBlock: x is on {x.device}, the expert weights on {self.w1.device}")
            if self._layer is None or self._layer._h is None or self._ptrs != self._weight_ptrs():
                self.prepare()
        return self._layer(x, idx, w, x_scale=s).view(*lead, self.hidden)

    def _flat_inputs(self, x, topk_idx, topk_weights, x_scale):
        """The inputs checked and flattened to [T, ...] rows: (x, idx int32, weights fp32,
        x_scale or None, leading shape)."""
        what, H, K = "MoEBlock", self.hidden, self.topk
        _tensor(x, "x", (torch.bfloat16,) + _FP8, None, what)
        if x.dim() < 1 or x.shape[-1] != H:
            raise invalid(f"{what}: x has shape {tuple(x.shape)}, expected (..., {H})")
        if (x.dtype == torch.bfloat16) != (x_scale is None):
            raise invalid(f"{what}: x is {x.dtype}: bf16 x goes without x_scale, FP8 x with it")
        lead = tuple(x.shape[:-1])
        T = math.prod(lead)
        if T > self.max_tokens:
            raise invalid(f"{what}: {T} tokens, the block was made for at most {self.max_tokens} per call")
        _tensor(topk_idx, "topk_idx", (torch.int32, torch.int64), lead + (K,), what)
        _tensor(topk_weights, "topk_weights", (torch.float32, torch.bfloat16, torch.float16, torch.float64),
                lead + (K,), what)
        if x_scale is not None:
            _tensor(x_scale, "x_scale", (torch.float32,), lead + (H // 128,), what)
            x_scale = x_scale.reshape(T, H // 128).contiguous()
        _same_device(what, x=x, topk_idx=topk_idx, topk_weights=topk_weights, x_scale=x_scale)
        return (x.reshape(T, H).contiguous(), topk_idx.reshape(T, K).to(torch.int32).contiguous(),
                topk_weights.reshape(T, K).float().contiguous(), x_scale, lead)


