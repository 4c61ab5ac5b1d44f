"""A small DeepSeek-V3-style model on warpspec.nn with random weights: embedding, layers of
(RMSNorm, MLAAttention, residual; RMSNorm, router, MoEBlock, residual), final norm and LM
head. Prefills a batch of random prompts, then decodes greedily step by step, and prints
tokens/s of both phases.

    python examples/deepseek_stack.py                        # one GPU
    torchrun --nproc-per-node 4 examples/deepseek_stack.py   # experts over 4 GPUs

Under torchrun each rank runs its own batch through attention (data parallel) and the MoE
blocks spread the experts over the ranks (rank r holds E / n of them); every weight
outside the experts is the same on every rank (one seed). The steps run eagerly, so at
these small sizes decode is bound by kernel launches, not by the kernels. The sizes obey
the kernels' rules: hidden and intermediate multiples of 128, heads a multiple of 64.
"""

import argparse
import os
import sys
import time


def fail(message):
    print(f"deepseek_stack: {message}", file=sys.stderr)
    sys.exit(1)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--q-lora", type=int, default=384, help="q down-projection rank (0: none)")
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--inter", type=int, default=512, help="each expert's intermediate size")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank")
    p.add_argument("--prompt", type=int, default=256, help="prompt tokens per sequence")
    p.add_argument("--decode", type=int, default=32, help="decode steps")
    p.add_argument("--fp8-cache", action="store_true", help="FP8 latent cache (mla_kv_quantize_fp8 rows)")
    return p.parse_args()


def build(a, torch, wnn, group):
    """The model; the same weights on every rank except the experts (each rank its own)."""
    dev, bf16 = "cuda", torch.bfloat16

    class Layer(torch.nn.Module):
        def __init__(self, seed):
            super().__init__()
            self.attn_norm = wnn.RMSNorm(a.hidden, device=dev)
            self.attn = wnn.MLAAttention(a.hidden, a.heads, q_lora_rank=a.q_lora or None, device=dev)
            self.moe_norm = wnn.RMSNorm(a.hidden, device=dev)
            self.router = torch.nn.Linear(a.hidden, a.experts, bias=False, dtype=bf16, device=dev)
            self.moe = wnn.MoEBlock.random(a.hidden, a.inter, a.experts, a.topk, max_tokens=a.batch * a.prompt,
                                           group=group, seed=seed, device=dev)

        def forward(self, x, cache, table, seqlens):
            x = x + self.attn(self.attn_norm(x), cache, table, seqlens)
            h = self.moe_norm(x)
            w, idx = self.router(h).float().softmax(-1).topk(a.topk, dim=-1)
            return x + self.moe(h, idx, w / w.sum(-1, keepdim=True))

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(a.vocab, a.hidden, dtype=bf16, device=dev)
            self.layers = torch.nn.ModuleList(Layer(seed=i) for i in range(a.layers))
            self.norm = wnn.RMSNorm(a.hidden, device=dev)
            self.head = torch.nn.Linear(a.hidden, a.vocab, bias=False, dtype=bf16, device=dev)

        def forward(self, tokens, caches, table, seqlens=None):
            """Logits of each sequence's last token; seqlens None: a prefill."""
            x = self.embed(tokens)
            for layer, cache in zip(self.layers, caches):
                x = layer(x, cache, table, seqlens)
            return self.head(self.norm(x[:, -1]))

    torch.manual_seed(1234)
    return Stack()


def generate(model, a, torch, caches, table, prompt):
    """Prefill, then a.decode greedy steps: (seconds of the prefill, of the decode)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    nxt = model(prompt, caches, table).argmax(-1)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    for step in range(a.decode):
        seqlens = torch.full((a.batch,), a.prompt + step, dtype=torch.int32, device="cuda")
        nxt = model(nxt[:, None], caches, table, seqlens).argmax(-1)
    torch.cuda.synchronize()
    return t1 - t0, time.perf_counter() - t1


def main():
    a = parse()
    try:
        import torch
    except ImportError:
        fail("needs PyTorch with CUDA and an NVIDIA Hopper GPU (sm_90); PyTorch is not installed")
    if not torch.cuda.is_available():
        fail("needs an NVIDIA Hopper GPU (sm_90, H100 / H200); PyTorch sees no CUDA GPU here")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.get_device_capability(local)[0] != 9:
        fail(f"cuda:{local} is {torch.cuda.get_device_name(local)}; warpspec's kernels need sm_90 (H100 / H200)")
    torch.cuda.set_device(local)
    try:
        import warpspec
        import warpspec.nn as wnn
    except ImportError as e:
        fail(f"the warpspec package did not load: {e}")
    group, rank, ranks = None, 0, 1
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # torchrun: expert parallel over the world
        import torch.distributed as dist
        dist.init_process_group("gloo")  # only the communicator's bootstrap id travels through it
        group, rank, ranks = dist.group.WORLD, dist.get_rank(), dist.get_world_size()
    try:
        model = build(a, torch, wnn, group)
        caches, table = [], None
        for _ in range(a.layers):
            cache, table = wnn.paged_cache(a.batch, a.prompt + a.decode, fp8=a.fp8_cache, device="cuda")
            caches.append(cache)
        g = torch.Generator().manual_seed(rank)
        prompt = torch.randint(0, a.vocab, (a.batch, a.prompt), generator=g).cuda()
        with torch.inference_mode():
            generate(model, a, torch, caches, table, prompt)  # warm-up: layers made, kernels loaded
            t_prefill, t_decode = generate(model, a, torch, caches, table, prompt)
        if rank == 0:
            p_tok, d_tok = a.batch * a.prompt, a.batch * a.decode
            print(f"{a.layers} layers, hidden {a.hidden}, {a.heads} heads, {a.experts} experts (top {a.topk}) over "
                  f"{ranks} GPU(s), {'FP8' if a.fp8_cache else 'BF16'} latent cache")
            print(f"prefill {a.batch} x {a.prompt} tokens: {t_prefill * 1e3:.1f} ms, {p_tok / t_prefill:,.0f} tokens/s "
                  f"per rank ({ranks * p_tok / t_prefill:,.0f} in all)")
            print(f"decode  {a.batch} x {a.decode} steps: {t_decode / a.decode * 1e3:.2f} ms a step, "
                  f"{d_tok / t_decode:,.0f} tokens/s per rank ({ranks * d_tok / t_decode:,.0f} in all)")
        wnn.shared_communicator(group).destroy()  # collective; destroys the blocks' layers first
    except warpspec.WarpspecError as e:
        fail(str(e))
    if group is not None:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
