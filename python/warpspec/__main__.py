"""python -m warpspec info|plan|bench|run|demo|version: the `warpspec` command-line tool
(the same binary `make` builds), installed inside the package."""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def cli_path():
    env = os.environ.get("WARPSPEC_CLI")
    for p in ([env] if env else []) + [os.path.join(_here, "bin", "warpspec"),
                                       os.path.join(os.path.dirname(os.path.dirname(_here)), "build", "warpspec")]:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["bench", "moe-a2a"]:  # PyTorch benchmarks: they live in Python
        from .bench_moe import main as bench_moe
        return bench_moe(argv[2:])
    if argv[:2] == ["bench", "moe-layer"]:
        from .bench_moe_layer import main as bench_moe_layer
        return bench_moe_layer(argv[2:])
    if argv[:2] == ["bench", "attention"]:
        from .bench_attention import main as bench_attention
        return bench_attention(argv[2:])
    exe = cli_path()
    if exe is None:
        sys.stderr.write("warpspec: the command-line tool was not found in the package (bin/warpspec); "
                         "install with `pip install .` or set WARPSPEC_CLI\n")
        return 2
    env = dict(os.environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    # the CUDA libraries of the nvidia-* wheels (cuBLASLt, NCCL, NVSHMEM), as PyTorch has them
    from ._lib import _nvidia_lib_dirs
    dirs = _nvidia_lib_dirs()
    if dirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    sys.stdout.flush()
    os.execve(exe, [exe] + argv, env)


if __name__ == "__main__":
    sys.exit(main())
