"""sass_by_function.py LISTING KERNEL [N] - how many SASS instructions of one kernel each
source function accounts for (the function that holds the instruction's source line, after
inlining), most first. LISTING: `nvdisasm -g` of a cubin built with -lineinfo, e.g.

    nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I include --expt-relaxed-constexpr \\
         -std=c++17 -lineinfo -cubin -o k.cubin src/moe/layer/layer_kernel.cu
    nvdisasm -g k.cubin > k.sass
    python3 bench/sass_by_function.py k.sass _Z18moe_experts_kernelILi64ELi0E 40

KERNEL: a prefix of the mangled name. Code that runs once per call is fetched cold from L2
(design.md), so at decode its size is time: session 15 found SwiGLU's 936 instructions
worth 8-10 us at 1 token. Standard library only; needs the sources at the listed paths."""
import collections
import os
import re
import sys

FUNC = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:WS_DEV|static|GEMM_HD|WS_KERNEL|__device__|extern|inline)"
                  r"[^;{]*?\b(\w+)\s*\(")


def function_at(cache, path, line):
    """The name of the function whose definition starts last at or before `line`."""
    if path not in cache:
        try:
            cache[path] = open(path).read().split("\n")
        except OSError:
            cache[path] = []
    src = cache[path]
    for j in range(min(line - 1, len(src) - 1), -1, -1):
        m = FUNC.match(src[j])
        if m:
            return m.group(1)
    return "?"


def main(listing, kernel, top):
    lines = open(listing).read().split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("//---") and ".text." + kernel in l), None)
    if start is None:
        sys.exit(f"{listing}: no .text section of a kernel named {kernel}...")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("//---")), len(lines))
    cache, where, count, total = {}, None, collections.Counter(), 0
    for l in lines[start:end]:
        m = re.search(r'//## File "([^"]+)", line (\d+)', l)
        if m:
            where = (m.group(1), int(m.group(2)))
        elif re.search(r"/\*[0-9a-f]{4,}\*/", l):
            total += 1
            count[(os.path.basename(where[0]), function_at(cache, *where)) if where else ("?", "?")] += 1
    print(f"{kernel}: {total} instructions")
    for (f, fn), n in count.most_common(top):
        print(f"{n:7d} {100.0 * n / total:5.1f}%  {f}:{fn}")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 40)
