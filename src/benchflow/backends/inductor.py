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
# Inductor's first compile asks which vector ISAs the CPU claims (AVX2, AVX-512, ...)
# and, for each, builds a test library and loads it in a fresh Python that imports
# torch: 7-35 s here, every process (its answer is cached in memory only). The answer
# depends only on the CPU, the compiler, torch and the Python that loads the library,
# so the inductor zygote keeps it on disk, keyed by those, under the cache root
# (core/layout.cache_root). Where every ISA the CPU claims builds and loads, the zygote
# sets Inductor's own switch for that answer (config.cpp.vec_isa_ok = True, which
# TORCHINDUCTOR_VEC_ISA_OK=1 also sets), on a first run as on a later one, so that the
# kernels and Inductor's cache keys are the same either way; otherwise it runs the check
# each time, as Inductor does. The switch does not answer the checks past the ISA
# itself (AVX-512's bf16; AMX's tiles and fp16: a build and a load each, 2-3 s): each
# of Inductor's test builds (`VecISA.check_build`, by its flags and code) is answered
# from the same file, and run and kept there only where it is not.
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
        "python": sys.executable,
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

    from benchflow.core.files import write_json_atomic
    from benchflow.core.layout import cache_root

    facts = _isa_facts()
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_root() / "machine" / f"inductor-vec-isa-{key}.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = None
    cached = bool(known and known.get("facts") == facts and "builds" in known)
    builds: dict[str, bool] = dict(known["builds"]) if cached else {}
    original = cpu_vec_isa.VecISA.check_build

    def check_build(isa: Any, code: str) -> bool:
        # Inductor's own test build and load (a compile, and a fresh Python that imports
        # torch: 2-3 s each), answered as it answered on this machine before
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
# On CUDA, Inductor compiles Triton kernels in a pool of worker processes that it starts
# at a job's first compile (a sidecar process and `compile_threads` workers, one per
# core of the job) and stops only after a minute unused. On an H200 (torch 2.11) every
# Inductor job's timed repeats had about one core of other CPU on the job's own cores
# (host_other_cpu_own_s 0.03-0.08 s a 50 ms repeat), and none with one compile thread
# (no pool): the pool still starting. Every job is a fresh process, so every job's
# repeats would run beside it; the job's child stops it once the warm-up has ended
# (harness/timing.measure: `before_timed`). A later compile starts a new one.
def stop_compile_workers() -> float | None:
    """Shut down the compile-worker pools Inductor started in this process (torch's
    own shutdown_compile_workers); the seconds that took, None where none was running
    (on a CPU Inductor compiles in a thread pool, which is idle once it has compiled)."""
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
    """Stop the threads a compile leaves idle in this process, which a process that
    forks must not hold (harness/prebuilt.warm_here): Inductor's compile thread pool
    (kept for the next compile: its C++ kernels load there, from a warm cache too) and
    tqdm's monitor (its progress bar's); a later compile starts them again."""
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
# Inductor keys its caches (the FX graph cache, AOTAutograd's) by hashes of installed
# files: torch's sources (`torch_key`) and Triton's (`triton_key`, with its compiler
# library), each computed at a process's first compile and kept in that process's memory.
# They are the same in every process of an environment, and cost 0.35 s of every
# Inductor job's first call here (0.25 s Triton's, 0.1 s torch's), from a warm cache or
# a cold one; PyTorch's dynamo benchmarks, many models in one process, pay them once.
# So does the header Inductor precompiles for its C++ kernels (cpp_prefix.h): each
# process's first kernel runs the preprocessor over it and hashes the output, 0.12 s
# here in two subprocesses, to find its precompiled copy (about 120 MB, under
# /tmp/torchinductor_<user>, whatever TORCHINDUCTOR_CACHE_DIR says), and builds that
# copy where it is missing (3 s here: a machine's first Inductor job paid it). The
# inductor zygote computes all three once, and its forked jobs find them computed (a
# spawned job computes its own).
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
    (torch 2.9's CppPythonBindingsCodeCache.load_async: the same header, command line
    and flags), so that the answer is kept by its function (`_precompile_header`, a
    functools.cache) and built on disk where it is missing. Where a torch asks otherwise,
    the job misses it and asks itself, as without this; where it has no such function,
    nothing is done."""
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
