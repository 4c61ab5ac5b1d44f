"""The wheel's build backend: scikit-build-core's, with an honest manylinux platform tag.

scikit-build-core tags a Linux wheel `linux_x86_64` (it leaves manylinux to auditwheel).
This wrapper builds with it, then reads every ELF file in the wheel (libwarpspec.so, the
CLI) and retags the wheel `py3-none-manylinux_2_<y>_<arch>`, where 2.<y> is the newest
glibc symbol version they need, if and only if every library they link is one that
manylinux allows (glibc's, libstdc++, libgcc_s) or one that comes from the wheel's
declared dependencies (the nvidia-* wheels: cudart, cuBLAS/cuBLASLt, NCCL, NVSHMEM) or
the driver (libcuda.so.1). Nothing is vendored. Anything else leaves the tag as
scikit-build-core made it, with a message saying why.

libstdc++ and libgcc_s: a need beyond what GCC 4.8's provide (GLIBCXX_3.4.19,
CXXABI_1.3.7, GCC_4.8.0; manylinux2014's system compiler) raises the tag to the build
machine's own glibc: distributions ship glibc and the compiler runtime together, so one
with that glibc or newer has a runtime as new as the build machine's. (The binaries built
so far need none: CXXABI_1.3, GCC_3.0/3.4 only.)

Also a command line, for CI and the GPU scripts:
  python tools/wheel/warpspec_wheel.py show WHEEL          what the tag rests on
  python tools/wheel/warpspec_wheel.py check-install PYTHON
      ldd of the installed package's library and CLI (LD_LIBRARY_PATH unset): every CUDA
      library must resolve inside an nvidia/ folder of that environment's site-packages,
      nothing may be missing; exit 1 otherwise.
"""

import base64
import hashlib
import os
import re
import struct
import sys
import zipfile


# ---- PEP 517 hooks: scikit-build-core's, build_wheel wrapped --------------------------
# The others are looked up on first use (PEP 562), so that the command line below runs
# where scikit-build-core is not installed.
def __getattr__(name):
    if name.startswith(("build_", "get_requires_for_", "prepare_metadata_for_")):
        try:
            from scikit_build_core import build
        except ImportError as e:
            raise AttributeError(f"{name}: {e}") from e
        return getattr(build, name)
    raise AttributeError(name)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    from scikit_build_core import build
    name = build.build_wheel(wheel_directory, config_settings, metadata_directory)
    return retag(wheel_directory, name)


# ---- what the binaries need -------------------------------------------------------------
# Libraries a manylinux wheel may link without carrying them (glibc's own, the compiler's
# runtime); the rest of auditwheel's policy lists (X11, ...) is nothing this package uses.
SYSTEM = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
          "libresolv.so.2", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# From the declared nvidia-* dependencies (pyproject.toml), or the driver.
EXTERNAL = {"libcudart.so.13": "nvidia-cuda-runtime", "libcublas.so.13": "nvidia-cublas",
            "libcublasLt.so.13": "nvidia-cublas", "libnccl.so.2": "nvidia-nccl-cu13",
            "libnvshmem_host.so.3": "nvidia-nvshmem-cu13", "libcuda.so.1": "the NVIDIA driver"}
# What GCC 4.8's runtime provides (manylinux2014): needing more ties the wheel to newer
# distributions than glibc alone says.
OLD_CXX = {"GLIBCXX": (3, 4, 19), "CXXABI": (1, 3, 7), "GCC": (4, 8, 0)}
ARCHES = {62: "x86_64", 183: "aarch64"}


def _version(s):
    return tuple(int(x) for x in re.findall(r"\d+", s))


def elf_needs(data):
    """(machine, [DT_NEEDED], {library: {version names}}) of a 64-bit little-endian ELF
    image, from its section headers (.dynamic, .gnu.version_r); None if not ELF."""
    if data[:4] != b"\x7fELF":
        return None
    if data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    machine = struct.unpack_from("<H", data, 18)[0]
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    sec = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(strtab, off):
        start = sec[strtab][4] + off
        return data[start:data.index(b"\0", start)].decode()

    needed, versions = [], {}
    for s in sec:
        if s[1] == 6:  # SHT_DYNAMIC
            for off in range(s[4], s[4] + s[5], 16):
                tag, val = struct.unpack_from("<qQ", data, off)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    needed.append(string(s[6], val))
        elif s[1] == 0x6FFFFFFE:  # SHT_GNU_verneed: sh_info entries
            off = s[4]
            for _ in range(s[7]):
                _, cnt, file_, aux, nxt = struct.unpack_from("<HHIII", data, off)
                names = versions.setdefault(string(s[6], file_), set())
                a = off + aux
                for _ in range(cnt):
                    _, _, _, name, anext = struct.unpack_from("<IHHII", data, a)
                    names.add(string(s[6], name))
                    a += anext
                off += nxt
    return machine, needed, versions


def build_glibc():
    """(major, minor) of the running glibc, or None (musl, not Linux)."""
    try:
        name, ver = os.confstr("CS_GNU_LIBC_VERSION").split()
    except (AttributeError, ValueError, OSError):
        return None
    return _version(ver)[:2] if name == "glibc" else None


def platform_tag(binaries):
    """binaries: {path: elf_needs(...)}. Returns (tag or None, [reasons])."""
    notes, glibc, arches, cxx_newer = [], (2, 17), set(), []
    for path, (machine, needed, versions) in sorted(binaries.items()):
        arches.add(ARCHES.get(machine, f"machine {machine}"))
        for lib in needed:
            if lib not in SYSTEM and lib not in EXTERNAL:
                notes.append(f"{path} links {lib}: neither a manylinux system library nor a declared dependency")
        for lib, names in versions.items():
            for v in names:
                m = re.fullmatch(r"(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)", v)
                if not m:
                    continue
                kind, num = m.group(1), _version(m.group(2))
                if kind == "GLIBC":
                    glibc = max(glibc, num[:2])
                elif num > OLD_CXX[kind]:
                    cxx_newer.append(f"{path}: {v}")
    if len(arches) != 1 or next(iter(arches)) not in ARCHES.values():
        notes.append(f"architectures {sorted(arches)}")
    if cxx_newer:
        here = build_glibc()
        if here is None:
            notes.append("needs a newer libstdc++/libgcc_s (" + ", ".join(cxx_newer) + ") and the build glibc is unknown")
        else:
            glibc = max(glibc, here)
            notes.append("needs a newer libstdc++/libgcc_s than GCC 4.8's (" + ", ".join(cxx_newer) +
                         f"): tagged at the build machine's glibc {here[0]}.{here[1]}")
    if any("neither" in n or "architectures" in n or "unknown" in n for n in notes):
        return None, notes
    return f"manylinux_{glibc[0]}_{glibc[1]}_{next(iter(arches))}", notes


def wheel_binaries(zf):
    out = {}
    for info in zf.infolist():
        if info.is_dir():
            continue
        with zf.open(info) as f:
            if f.read(4) != b"\x7fELF":
                continue
        out[info.filename] = elf_needs(zf.read(info))
    return out


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def retag(directory, name):
    """Rewrite directory/name with the manylinux tag its binaries allow; returns the new
    file name (the old one when the tag stays)."""
    path = os.path.join(directory, name)
    with zipfile.ZipFile(path) as zf:
        binaries = wheel_binaries(zf)
        if not binaries:
            return name
        tag, notes = platform_tag(binaries)
        for n in notes:
            print(f"warpspec_wheel: {n}", file=sys.stderr)
        if tag is None:
            print(f"warpspec_wheel: keeping the tag of {name}", file=sys.stderr)
            return name
        parts = name[:-len(".whl")].split("-")
        dist_version, (py, abi, _plat) = parts[:-3], parts[-3:]
        new_name = "-".join(dist_version + [py, abi, tag]) + ".whl"
        if new_name == name:
            return name
        wheel_file = next(i.filename for i in zf.infolist()
                          if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/WHEEL"))
        record_file = wheel_file[:-len("WHEEL")] + "RECORD"
        text = zf.read(wheel_file).decode()
        lines, tagged = [], False
        for ln in text.splitlines(keepends=True):  # the first Tag line becomes ours, others go
            if ln.startswith("Tag:"):
                if tagged:
                    continue
                ln, tagged = f"Tag: {py}-{abi}-{tag}\n", True
            lines.append(ln)
        if not tagged:
            raise RuntimeError(f"{wheel_file} has no Tag line")
        wheel_data = "".join(lines).encode()
        record = []
        for ln in zf.read(record_file).decode().splitlines():
            if ln.split(",")[0] == wheel_file:
                ln = f"{wheel_file},{_record_hash(wheel_data)},{len(wheel_data)}"
            record.append(ln)
        record_data = ("\n".join(record) + "\n").encode()
        tmp = os.path.join(directory, new_name + ".part")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in zf.infolist():
                data = zf.read(info)
                if info.filename == wheel_file:
                    data = wheel_data
                elif info.filename == record_file:
                    data = record_data
                out.writestr(info, data)  # keeps the mode bits (the CLI's x) and compression
    os.replace(tmp, os.path.join(directory, new_name))
    os.remove(path)
    print(f"warpspec_wheel: {name} -> {new_name}", file=sys.stderr)
    return new_name


# ---- command line -----------------------------------------------------------------------
def _show(whl):
    with zipfile.ZipFile(whl) as zf:
        binaries = wheel_binaries(zf)
        tags = [ln for ln in zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
                .splitlines() if ln.startswith("Tag:")]
    for path, (machine, needed, versions) in sorted(binaries.items()):
        print(f"{path} ({ARCHES.get(machine, machine)})")
        for lib in needed:
            what = "system" if lib in SYSTEM else f"external: {EXTERNAL[lib]}" if lib in EXTERNAL else "NOT ALLOWED"
            vs = sorted(versions.get(lib, ()), key=lambda v: (re.sub(r"[0-9._]+$", "", v), _version(v)))
            print(f"  {lib:24} {what:36} {' '.join(vs)}")
    tag, notes = platform_tag(binaries)
    for n in notes:
        print(f"note: {n}")
    print(f"file name tag: {os.path.basename(whl)[:-4].split('-', 2)[2]}")
    print(f"WHEEL: {' '.join(t.split()[1] for t in tags)}")
    print(f"tag the binaries allow: {tag or 'none (not manylinux)'}")
    return 0 if tag and all(t.endswith(tag) for t in tags) and whl.endswith(tag + ".whl") else 1


def _check_install(python):
    """ldd of the installed library and CLI of `python`'s warpspec, without
    LD_LIBRARY_PATH: CUDA libraries from that environment's nvidia/ folders."""
    import subprocess
    python = os.path.abspath(python)  # not realpath: a venv's python is a link out of it
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    pkg = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('warpspec').submodule_search_locations[0])"],
                         env=env, check=True, capture_output=True, text=True, cwd="/").stdout.strip()
    site = os.path.dirname(pkg)
    rc = 0
    for rel in ("lib/libwarpspec.so", "bin/warpspec"):
        f = os.path.join(pkg, rel)
        out = subprocess.run(["ldd", f], env=env, capture_output=True, text=True).stdout
        print(f"== {f}")
        for ln in out.splitlines():
            m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", ln)
            if not m:
                continue
            lib, where = m.groups()
            if lib in EXTERNAL and lib != "libcuda.so.1":
                real = os.path.realpath(where) if where != "not found" else where
                ok = real.startswith(os.path.realpath(os.path.join(site, "nvidia")) + os.sep)
                print(f"  {lib:24} {where}  [{'in ' + site + '/nvidia' if ok else 'NOT FROM THE nvidia-* WHEELS'}]")
                rc |= not ok
            elif where == "not found":
                print(f"  {lib:24} NOT FOUND")
                rc = 1
    return rc


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "show":
        sys.exit(_show(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "check-install":
        sys.exit(_check_install(sys.argv[2]))
    sys.exit(__doc__)
