"""GEMMs and quantisers from Python on an sm_90 GPU, against float64 references in
PyTorch on fresh random data; outputs poisoned (NaN) before each run. Thresholds: BF16
operands 1e-2, FP8 2e-2 against the reference on the same quantised inputs (the bf16
rounding of D dominates), as the C tests use."""

import itertools

import pytest

import warpspec

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def rel_err(got, ref):
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def rand_bf16(*shape, scale=1.0):
    return ((torch.rand(*shape, device="cuda") * 2 - 1) * scale).to(torch.bfloat16)


def poisoned(*shape):
    return torch.full(shape, float("nan"), dtype=torch.bfloat16, device="cuda")


def dequant_rows(q, s):
    """q [rows, k] fp8 with s [rows, k / 128] -> float64."""
    return q.double() * s.double().repeat_interleave(128, dim=1)


def dequant_blocks(q, s):
    """q [n, k] fp8 with s [ceil(n / 128), k / 128] -> float64."""
    n = q.shape[0]
    return q.double() * s.double().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)


@pytest.mark.parametrize("m,n,k", [(128, 256, 64), (300, 264, 192), (1, 256, 1024), (64, 512, 2048),
                                   (2048, 2048, 1024)])
def test_bf16_dense(m, n, k):
    a, b = rand_bf16(m, k), rand_bf16(n, k)
    out = poisoned(m, n)
    warpspec.gemm(a, b, out=out)
    torch.cuda.synchronize()
    assert not out.isnan().any()
    assert rel_err(out, a.double() @ b.double().T) < 1e-2


@pytest.mark.parametrize("m,n,k", [(257, 520, 128), (300, 328, 192), (16384, 520, 128), (16384, 392, 128)])
def test_bf16_last_tile_column_repeated(m, n, k):
    """A last tile column of 1-3 of the tile's four 64-column chunks, 20 runs: its TMA-store
    epilogue once staged the chunks past n into a buffer still being stored (wrong rows about
    one run in 20, session 44), and with more tiles than SMs a CTA's next tile could refill
    the buffer its odd last store was still reading."""
    a, b = rand_bf16(m, k), rand_bf16(n, k)
    ref = a.double() @ b.double().T
    first = None
    for _ in range(20):
        out = poisoned(m, n)
        warpspec.gemm(a, b, out=out)
        torch.cuda.synchronize()
        assert rel_err(out, ref) < 1e-2
        if first is None:
            first = out.clone()
        assert torch.equal(out, first)


def test_bf16_allocates_and_uses_current_stream():
    a, b = rand_bf16(256, 512), rand_bf16(384, 512)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        d = warpspec.gemm(a, b)
    s.synchronize()
    assert d.shape == (256, 384) and d.dtype == torch.bfloat16
    assert rel_err(d, a.double() @ b.double().T) < 1e-2


@pytest.mark.parametrize("scale_layout", ["row", "kmajor"])
@pytest.mark.parametrize("m,n,k", [(300, 384, 1024), (1, 256, 512), (600, 256, 512), (64, 512, 2048)])
def test_fp8_dense(m, n, k, scale_layout):
    x, w = rand_bf16(m, k, scale=4.0), rand_bf16(n, k)
    qa, sa = warpspec.quantize_fp8(x, block=(1, 128), scale_layout=scale_layout)
    qb, sb = warpspec.quantize_fp8(w, block=(128, 128))
    if scale_layout == "kmajor":
        assert sa.shape == (m, k // 128) and sa.stride(0) == 1 and sa.stride(1) % 4 == 0
    out = poisoned(m, n)
    warpspec.gemm(qa, qb, a_scale=sa, b_scale=sb, out=out)
    torch.cuda.synchronize()
    assert not out.isnan().any()
    ref = dequant_rows(qa, sa) @ dequant_blocks(qb, sb).T
    assert rel_err(out, ref) < 2e-2
    assert rel_err(out, x.double() @ w.double().T) < 6e-2  # and near the unquantised product


def _quantize_groups(w):
    g, n, k = w.shape
    qs, ss = zip(*(warpspec.quantize_fp8(w[i], block=(128, 128)) for i in range(g)))
    return torch.stack(qs), torch.stack(ss)


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8k"])
def test_grouped_contiguous(dtype):
    counts = [200, 0, 1, 513, 64]
    g, n, k = len(counts), 256, 512
    offsets = torch.tensor([0] + list(itertools.accumulate(counts)), dtype=torch.int32, device="cuda")
    m = sum(counts)
    x, w = rand_bf16(m, k, scale=2.0), rand_bf16(g, n, k)
    out = poisoned(m, n)
    if dtype == "bf16":
        warpspec.gemm(x, w, group_offsets=offsets, out=out)
        A, B = x.double(), w.double()
    else:
        qa, sa = warpspec.quantize_fp8(x, scale_layout="kmajor" if dtype == "fp8k" else "row")
        qb, sb = _quantize_groups(w)
        warpspec.gemm(qa, qb, a_scale=sa, b_scale=sb, group_offsets=offsets, out=out)
        A = dequant_rows(qa, sa)
        B = torch.stack([dequant_blocks(qb[i], sb[i]) for i in range(g)])
    torch.cuda.synchronize()
    assert not out.isnan().any()
    ref = torch.cat([A[o:o + c] @ B[i].T for i, (o, c) in enumerate(zip(offsets.tolist(), counts))])
    assert rel_err(out, ref) < (1e-2 if dtype == "bf16" else 2e-2)


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8k"])
def test_grouped_contiguous_with_counts(dtype):
    # spans padded to 128 rows, the counts as group_rows (the MoE receive layout): the rows
    # in use match the reference; the padding rows of out are unspecified (not compared)
    counts = [144, 0, 200, 17, 128, 1, 300, 64]
    spans = [(c + 127) // 128 * 128 for c in counts]
    g, n, k = len(counts), 256, 512
    starts = [0] + list(itertools.accumulate(spans))
    offsets = torch.tensor(starts, dtype=torch.int32, device="cuda")
    rows = torch.tensor(counts, dtype=torch.int32, device="cuda")
    m = starts[-1]
    x, w = rand_bf16(m, k, scale=2.0), rand_bf16(g, n, k)
    out = poisoned(m, n)
    if dtype == "bf16":
        warpspec.gemm(x, w, group_offsets=offsets, group_rows=rows, out=out)
        A, B = x.double(), w.double()
    else:
        qa, sa = warpspec.quantize_fp8(x, scale_layout="kmajor" if dtype == "fp8k" else "row")
        qb, sb = _quantize_groups(w)
        warpspec.gemm(qa, qb, a_scale=sa, b_scale=sb, group_offsets=offsets, group_rows=rows, out=out)
        A = dequant_rows(qa, sa)
        B = torch.stack([dequant_blocks(qb[i], sb[i]) for i in range(g)])
    torch.cuda.synchronize()
    used = torch.cat([out[o:o + c] for o, c in zip(starts, counts)])
    assert not used.isnan().any()
    ref = torch.cat([A[o:o + c] @ B[i].T for i, (o, c) in enumerate(zip(starts, counts))])
    assert rel_err(used, ref) < (1e-2 if dtype == "bf16" else 2e-2)


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8k"])
def test_grouped_masked(dtype):
    counts = [100, 0, 256, 17]
    g, m, n, k = len(counts), 256, 256, 512
    rows = torch.tensor(counts, dtype=torch.int32, device="cuda")
    x, w = rand_bf16(g, m, k, scale=2.0), rand_bf16(g, n, k)
    out = poisoned(g, m, n)
    if dtype == "bf16":
        warpspec.gemm(x, w, group_rows=rows, out=out)
        A, B = x.double(), w.double()
    else:
        qa, sa = warpspec.quantize_fp8(x.view(g * m, k), scale_layout="kmajor" if dtype == "fp8k" else "row")
        qb, sb = _quantize_groups(w)
        warpspec.gemm(qa.view(g, m, k), qb, a_scale=sa.view(g, m, k // 128) if dtype == "fp8" else sa, b_scale=sb,
                      group_rows=rows, out=out)
        A = dequant_rows(qa, sa).view(g, m, k)
        B = torch.stack([dequant_blocks(qb[i], sb[i]) for i in range(g)])
    torch.cuda.synchronize()
    for i, c in enumerate(counts):
        assert not out[i, :c].isnan().any(), f"group {i}: unwritten rows"
        assert out[i, c:].isnan().all(), f"group {i}: rows past the count were written"
        if c:
            assert rel_err(out[i, :c], A[i, :c] @ B[i].T) < (1e-2 if dtype == "bf16" else 2e-2)


def test_quantize_matches_definition():
    rows, cols = 300, 512
    x = rand_bf16(rows, cols, scale=3.0)
    x[7, :128] = 0  # an all-zero block: scale 1
    for layout in ("row", "kmajor"):
        q, s = warpspec.quantize_fp8(x, scale_layout=layout)
        torch.cuda.synchronize()
        amax = x.float().abs().view(rows, cols // 128, 128).amax(-1)
        # amax / 448 rounded once to float32 (PyTorch's division by a scalar on the GPU
        # multiplies by the reciprocal, which is not the same float)
        want = torch.where(amax > 0, (amax.double() / 448.0).float(), torch.ones_like(amax))
        assert torch.equal(s, want), layout
        deq = dequant_rows(q, s)
        # E4M3 keeps 3 mantissa bits: each value within half a step (2^-4 relative) of x
        assert ((deq - x.double()).abs() <= x.double().abs() * 2**-4 + s.double().repeat_interleave(128, 1) * 2**-9).all()
    q2, s2 = warpspec.quantize_fp8(x, block=(128, 128))
    amax2 = torch.nn.functional.pad(x.float().abs(), (0, 0, 0, 84)).view(3, 128, 4, 128).amax((1, 3))
    assert torch.equal(s2, torch.where(amax2 > 0, (amax2.double() / 448.0).float(), torch.ones_like(amax2)))


def test_quantize_strided_rows_and_preallocated():
    big = rand_bf16(64, 512)
    x = big[:, 128:384]  # row stride 512
    q = torch.empty(64, 256, dtype=torch.float8_e4m3fn, device="cuda")
    s = torch.full((64, 2), float("nan"), device="cuda")
    warpspec.quantize_fp8(x, out=q, out_scale=s)
    q_ref, s_ref = warpspec.quantize_fp8(x.contiguous())
    torch.cuda.synchronize()
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s, s_ref)


def test_split_k_workspace():
    # rows past the skinny kernel's 128: K split over CTAs, fp32 partials in a workspace
    a, b = rand_bf16(160, 1024), rand_bf16(256, 1024)
    assert warpspec.gemm_workspace_size(a, b) > 0
    out = poisoned(160, 256)
    warpspec.gemm(a, b, out=out)
    torch.cuda.synchronize()
    assert rel_err(out, a.double() @ b.double().T) < 1e-2


def test_few_rows_need_no_workspace():
    # BF16 with at most 128 rows: the K slices are summed inside a cluster (gemm_bf16_skinny)
    b = rand_bf16(1000, 2048)
    for m in (1, 17, 64, 100):
        a = rand_bf16(m, 2048)
        assert warpspec.gemm_workspace_size(a, b) == 0
        assert warpspec.gemm_tile(a, b) == ({1: 16, 17: 32, 64: 64, 100: 128}[m], 64)
        out = poisoned(m, 1000)
        warpspec.gemm(a, b, out=out)
        torch.cuda.synchronize()
        assert rel_err(out, a.double() @ b.double().T) < 1e-2


def test_few_fp8_rows_need_no_workspace():
    # FP8 with at most 64 rows: the same swap and in-cluster sum (gemm_fp8_skinny)
    w = rand_bf16(1024, 4096)
    qb, sb = warpspec.quantize_fp8(w, block=(128, 128))
    for m in (1, 24, 64):
        qa, sa = warpspec.quantize_fp8(rand_bf16(m, 4096, scale=4.0), block=(1, 128))
        assert warpspec.gemm_workspace_size(qa, qb, a_scale=sa, b_scale=sb) == 0
        assert warpspec.gemm_tile(qa, qb, a_scale=sa, b_scale=sb) == ({1: 16, 24: 32, 64: 64}[m], 64)
        out = poisoned(m, 1024)
        warpspec.gemm(qa, qb, a_scale=sa, b_scale=sb, out=out)
        torch.cuda.synchronize()
        assert rel_err(out, dequant_rows(qa, sa) @ dequant_blocks(qb, sb).T) < 2e-2


def test_errors_on_gpu_arguments():
    a = rand_bf16(64, 128)
    with pytest.raises(warpspec.InvalidArgumentError, match="CUDA device"):
        warpspec.gemm(a.cpu(), rand_bf16(256, 128))
    with pytest.raises(warpspec.InvalidArgumentError, match="contiguous"):
        warpspec.gemm(rand_bf16(128, 64).T, rand_bf16(256, 128))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_tensors_on_another_device():
    with torch.cuda.device(1):
        a, b = rand_bf16(128, 256), rand_bf16(256, 256)
    assert torch.cuda.current_device() == 0
    d = warpspec.gemm(a, b)
    torch.cuda.synchronize(1)
    assert d.device.index == 1 and torch.cuda.current_device() == 0
    assert rel_err(d, a.double() @ b.double().T) < 1e-2
    with pytest.raises(warpspec.InvalidArgumentError, match="different devices"):
        warpspec.gemm(a, b.to("cuda:0"))


def test_sync_and_timeout_setting():
    warpspec.sync()
    old = warpspec.timeout_ms()
    warpspec.set_timeout_ms(1234)
    assert warpspec.timeout_ms() == 1234
    warpspec.set_timeout_ms(old)


def test_swiglu_quant_matches_torch():
    rows, inter = 300, 256
    h = rand_bf16(rows, 2 * inter, scale=3.0)
    for layout in ("kmajor", "row"):
        q, s = warpspec.swiglu_quant(h, scale_layout=layout)
        torch.cuda.synchronize()
        g, u = h[:, :inter].double(), h[:, inter:].double()
        a = g * torch.sigmoid(g) * u
        sc = s.double().repeat_interleave(128, 1)
        deq = q.double() * sc
        # E4M3 keeps 3 mantissa bits: within half a step (2^-4 relative) of a, plus the
        # subnormal step and the fp32 silu's own rounding
        assert ((deq - a).abs() <= a.abs() * (2**-4 + 1e-3) + sc * 2**-9).all(), layout
        amax = a.abs().view(rows, inter // 128, 128).amax(-1)
        assert ((s.double() - amax / 448).abs() <= amax / 448 * 1e-3 + 1e-12).all(), layout
