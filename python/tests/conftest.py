"""Shared by the Python tests: markers, fake device arrays for the checks that need no
GPU, and the skip rules (GPU tests skip without an sm_90 GPU and PyTorch)."""

import os

import pytest

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an sm_90 GPU and PyTorch")
    config.addinivalue_line("markers", "multi_gpu: needs two sm_90 GPUs, NVSHMEM and PyTorch")


def hopper_count():
    """sm_90 GPUs PyTorch sees (0 without PyTorch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    if not torch.cuda.is_available():
        return 0
    return sum(1 for d in range(torch.cuda.device_count()) if torch.cuda.get_device_capability(d)[0] == 9)


def pytest_collection_modifyitems(config, items):
    n = hopper_count()
    for item in items:
        if "multi_gpu" in item.keywords and n < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 sm_90 GPUs and PyTorch ({n} found)"))
        elif "gpu" in item.keywords and n < 1:
            item.add_marker(pytest.mark.skip(reason="needs an sm_90 GPU and PyTorch"))


class FakeArray:
    """A device array as __cuda_array_interface__ describes it, at a made-up address:
    enough for every check that happens before the GPU is touched."""

    _next = 0x7F0000000000

    def __init__(self, shape, typestr, strides=None, ptr=None):
        item = int(typestr[2:])
        if ptr is None:
            ptr = FakeArray._next
            n = 1
            for s in shape:
                n *= s
            FakeArray._next += (n * item + 255) // 256 * 256 + 256
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 3,
            "strides": None if strides is None else tuple(s * item for s in strides)}


@pytest.fixture
def fake():
    return FakeArray
