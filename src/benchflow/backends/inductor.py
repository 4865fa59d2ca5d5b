"""TorchInductor: C++/OpenMP kernels on the CPU, Triton on CUDA."""

from typing import Any

from benchflow.backends.base import DynamoBackend, register


@register
class Inductor(DynamoBackend):
    label = "inductor"
    dynamo = "inductor"
    summary = "TorchInductor (C++ on CPU, Triton on CUDA)"
    generates_code = True
    compile_zygote = "inductor"  # its C++ toolchain checked once there, not in each job


# --- Inductor's C++ toolchain check, once per machine --------------------------------
# Inductor's first compile builds and loads a test library per vector ISA the CPU
# claims, every process (docs/isolation.md). The answer depends only on the CPU, the
# compiler, torch and Python, so the inductor zygote keeps it on disk under the cache
# root: where every ISA works it sets Inductor's own switch (config.cpp.vec_isa_ok, on
# a first run as on a later one, so kernels and cache keys match), and each of the
# further test builds (`VecISA.check_build`) is answered from the same file.
ISA_CHECK = "benchflow.backends.inductor.check_vec_isa()"  # the inductor zygote's preload
# ... and the hashes of the installs that key Inductor's caches (below)
CACHE_KEYS = "benchflow.backends.inductor.compute_cache_keys()"
ISA_CHECK_NAME = "Inductor's C++ vector-ISA check (valid_vec_isa_list)"


def _isa_facts() -> dict[str, Any]:
    """What the check's answer depends on (torch imported)."""
    import subprocess
    import sys

    import torch
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch._inductor.cpu_vec_isa import supported_vec_isa_list, x86_isa_checker

    compiler = get_cpp_compiler()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    flags = x86_isa_checker()
    claimed = [
        str(isa) for isa in supported_vec_isa_list if all(f in flags for f in str(isa).split())
    ]
    return {
        "torch": torch.__version__,
        "python": sys.version,  # not its path: each venv of one Python shares the answer
        "compiler": compiler,
        "compiler_version": version.splitlines()[0] if version else "",
        "cpu_isa_flags": sorted(flags),
        "claimed": claimed,
    }


def check_vec_isa() -> bool:
    """Answer Inductor's vector-ISA check from the machine's cache, or run it and keep
    its answers there; True when the answer came from the cache."""
    import hashlib
    import json

    from torch._inductor import cpu_vec_isa

    from benchflow.core.files import read_json, write_json_atomic
    from benchflow.core.layout import cache_root

    facts = _isa_facts()
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_root() / "machine" / f"inductor-vec-isa-{key}.json"
    known = read_json(path)
    cached = bool(known and known.get("facts") == facts and "builds" in known)
    builds: dict[str, bool] = dict(known["builds"]) if cached else {}
    original = cpu_vec_isa.VecISA.check_build

    def check_build(isa: Any, code: str) -> bool:
        # Inductor's own test build and load, answered as it answered on this machine before
        what = f"{isa._arch_flags} {hashlib.sha256(code.encode()).hexdigest()[:16]}"
        if what not in builds:
            builds[what] = bool(original(isa, code))
        return builds[what]

    if cached and known and known.get("all_claimed_valid"):
        _all_isas_valid()  # the switch first: the check then asks only the extra ones
    cpu_vec_isa.VecISA.check_build = check_build  # type: ignore[method-assign,assignment]
    try:
        valid = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    finally:
        cpu_vec_isa.VecISA.check_build = original  # type: ignore[method-assign]
    if not cached:
        everything = sorted(valid) == sorted(facts["claimed"])
        path.parent.mkdir(parents=True, exist_ok=True)
        known = {"facts": facts, "valid": valid, "all_claimed_valid": everything}
        if everything:
            _all_isas_valid()
    elif known and builds == known["builds"]:
        return True
    write_json_atomic(path, (known or {}) | {"builds": builds})  # a new answer kept too
    return cached


def _all_isas_valid() -> None:
    """Inductor's own switch for "every ISA the CPU claims builds and loads"."""
    import os

    from torch._inductor import config

    config.cpp.vec_isa_ok = True
    os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"


# --- Inductor's compile workers, stopped before the timed repeats --------------------
# On CUDA, Inductor's pool of Triton compile workers, started at a job's first compile,
# runs beside the job's timed repeats on its own cores (docs/gpu.md); the child stops it
# once the warm-up has ended (harness/timing.measure: `before_timed`).
def stop_compile_workers() -> float | None:
    """Shut down the compile-worker pools Inductor started in this process; the seconds
    that took, None where none was running (on a CPU: a thread pool, idle once done)."""
    import sys
    import time

    async_compile = sys.modules.get("torch._inductor.async_compile")
    pools = getattr(async_compile, "_pool_set", None)
    shutdown = getattr(async_compile, "shutdown_compile_workers", None)
    if not pools or shutdown is None:
        return None
    start = time.perf_counter()
    shutdown()
    return time.perf_counter() - start


def stop_compile_threads() -> None:
    """Stop the idle threads a compile leaves (Inductor's pool, tqdm's monitor), which a
    process that forks must not hold (harness/prebuilt.warm_here)."""
    import sys

    stop_compile_workers()
    async_compile = sys.modules.get("torch._inductor.async_compile")
    pool = getattr(getattr(async_compile, "AsyncCompile", None), "pool", None)
    if pool is not None and pool.cache_info().currsize:
        pool().shutdown(wait=True)
        pool.cache_clear()
    tqdm = getattr(sys.modules.get("tqdm"), "tqdm", None)
    if tqdm is not None and getattr(tqdm, "monitor", None) is not None:
        tqdm.monitor.exit()
        tqdm.monitor = None


# --- the installs' keys and the C++ kernels' header, once per zygote -------------------
# Inductor keys its caches by hashes of torch's and Triton's installed files, and finds
# its C++ kernels' precompiled header (cpp_prefix.h) by hashing it: each is the same in
# every process of an environment, yet every process pays it at its first compile, as
# PyTorch's dynamo benchmarks (many models in one process) do once. The inductor zygote
# computes them once and its forked jobs find them computed (docs/isolation.md).
def compute_cache_keys() -> None:
    """Compute torch's and (where installed) Triton's keys, kept by their functions, and
    the C++ kernels' precompiled header (_cpu_header)."""
    from torch._inductor.codecache import torch_key
    from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key

    torch_key()
    if HAS_TRITON:
        triton_key()
    _cpu_header()


def _cpu_header() -> None:
    """Ask Inductor for its C++ kernels' precompiled header as its first CPU kernel will
    (torch 2.9's CppPythonBindingsCodeCache.load_async), so that its function's cache
    keeps the answer; a torch that asks otherwise (or has no such function) is left be."""
    try:
        from torch._inductor import codecache, config
        from torch._inductor.cpp_builder import CppBuilder, CppTorchDeviceOptions

        if not config.cpp_cache_precompile_headers:
            return
        header = codecache._get_cpp_prefix_header("cpu")
        flags = codecache.CppPythonBindingsCodeCache.cpp_compile_command_flags
        command = {
            **flags,
            "device_type": "cpu",
            "extra_flags": (),
            "use_relative_path": config.is_fbcode(),
            "vec_isa": codecache.pick_vec_isa(),
        }
        options = CppTorchDeviceOptions(compile_only=False, min_optimize=False, **command)
        line = CppBuilder(name="o", sources="i", BuildOption=options).get_command_line()
        codecache._precompile_header(header, line, min_optimize=False, **command)
    except Exception:  # a job that needs the header asks for it, and says what failed
        return
