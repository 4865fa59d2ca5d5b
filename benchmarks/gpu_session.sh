#!/usr/bin/env bash
# One call on a GPU machine (docs/gpu.md): a check (do the zygotes fork here?),
# the gpu test lane (its sweeps' rows and the profile's op table kept), the fidelity
# table and the matrix, most important first, each step with a time limit of its own and
# the whole within TOTAL_S, so that one slow step leaves the others' results. Where a
# zygote refuses to fork, the call ends after the check, which names why. Run from the
# checkout, with the wheels `make gpu-wheels` made in .whl/; every log goes to $OUT.
#
#   bash benchmarks/gpu_session.sh        # TOTAL_S=560 LANE_S=230 FIDELITY_S=100
#
# A dry run on a CPU machine, from the checkout after `make setup` (the lane skips; the
# configurations that need CUDA are refused, their cells "not run"):
#   PATH=$PWD/.venv/bin:$PATH NO_WHEELS=1 ACCELERATOR=cpu SIZE=tiny ROUNDS=2 \
#       bash benchmarks/gpu_session.sh
#
# The rest of the matrix in a later call (CHECK=0: without the check), for instance:
#   CHECK=0 bash benchmarks/gpu_session.sh matrix --configs modes --tests eval,train \
#       --dtypes bfloat16 --sizes base --extra repeat=10
# and whether Inductor's compile workers run beside its timed repeats (docs/gpu.md):
#   bash benchmarks/gpu_session.sh workers
# The check alone:
#   bash benchmarks/gpu_session.sh check
# On a fresh machine Inductor's ISA check takes about a minute (48 s on the H200, kept in
# benchflow's cache after): the check pays it, or with CHECK=0 the lane's first sweep.
set -u
OUT=${OUT:-/tmp/benchflow-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
SITE=/tmp/benchflow-site
WORK=/tmp/benchflow-gpu-work
TOTAL_S=${TOTAL_S:-560}
left() { echo $((TOTAL_S - SECONDS)); }
# `within N cmd...`: cmd stopped after N s; not started with under 20 s (timeout 0 is none)
within() { if [ "$1" -ge 20 ]; then timeout "$@"; else echo "no time left for: ${*:2}"; return 124; fi; }

{
    date
    nvidia-smi
    nproc
    python3 -c "import sys, torch, triton; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), triton.__version__)"
} >"$OUT/machine.txt" 2>&1
[ -n "${NO_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$SITE" .whl/*.whl >>"$OUT/machine.txt" 2>&1 \
    || { echo "wheels: see machine.txt"; exit 1; }
export PYTHONPATH="$PWD/src:$SITE"  # absolute: the sweeps run in folders of their own
ACCELERATOR=${ACCELERATOR:-cuda}  # cpu: a dry run here (the header)
# First, in seconds: which threads each step of a zygote's preloads leaves on this machine
# (Inductor's import and checks, with torch.cuda.is_available() answered as a zygote
# answers it), with each Python thread's stack and where it was started, then whether the
# torch, dynamo and inductor zygotes fork (a refusal names each thread and the preload
# that started it). On the H200 NVML's check left a thread of the driver's (docs/gpu.md).
[ "${CHECK:-1}" = 0 ] || within 120 python3 - >>"$OUT/machine.txt" 2>&1 <<'PY'
import logging, os, sys, threading, traceback
started_at = {}  # a Python thread's name: where it was started
_start = threading.Thread.start
def start(self):
    started_at[self.name] = "".join(traceback.format_stack(limit=14)[:-1])
    return _start(self)
threading.Thread.start = start
os.environ.setdefault("TORCH_WARM_POOL", "0")
from benchflow.harness.process import unsafe_threads
from benchflow.runner.zygote import KINDS, _preload, cuda_answered_without_the_driver, nvidia_files
def show(step):
    print(f"after {step}: {sorted(unsafe_threads().values())}", flush=True)
import torch
show("import torch")
called = []  # any other torch.cuda function the imports call, and from where
for fn in ("device_count", "get_device_properties", "get_device_capability", "_lazy_init"):
    def traced(*a, _real=getattr(torch.cuda, fn), _fn=fn, **k):
        called.append((_fn, traceback.format_stack(limit=3)[0].strip().splitlines()[0]))
        return _real(*a, **k)
    setattr(torch.cuda, fn, traced)
with cuda_answered_without_the_driver():
    print("cuda available (the driver's files):", torch.cuda.is_available())
    import torch._dynamo
    show("import torch._dynamo")
    import torch._inductor.compile_fx
    show("import torch._inductor.compile_fx")
    for name in KINDS["inductor"]:
        if name.endswith("()"):
            _preload(name, {})
            show(name)
print("cuda initialized:", torch.cuda.is_initialized(), "NVIDIA files open:", nvidia_files())
print("other torch.cuda calls:", called)
frames = sys._current_frames()
for t in threading.enumerate():
    if t is not threading.main_thread():
        print(f"--- Python thread {t.name!r} (native {t.native_id}), started at:")
        print(started_at.get(t.name, "  (before the patch)"))
        print("  now at:", "".join(traceback.format_stack(frames.get(t.ident))[-4:]))
python = {t.native_id for t in threading.enumerate()}
for tid, name in unsafe_threads().items():
    if tid not in python and name != "python3":  # (OpenBLAS's, one a core)
        wchan = open(f"/proc/self/task/{tid}/wchan").read() if os.path.exists(f"/proc/self/task/{tid}/wchan") else "?"
        print(f"--- native thread {name!r} ({tid}), waiting in {wchan!r}")
logging.basicConfig(level=logging.INFO)
from benchflow.runner.zygote import Zygote, ZygoteError
base = Zygote("torch")
print("torch zygote ready in", round(base.wait_ready(120), 1), "s", flush=True)
refused = 0
for kind in ("dynamo", "inductor"):
    try:
        zygote = Zygote(kind, base=base)
        print(kind, "zygote ready in", round(zygote.wait_ready(120), 1), "s", flush=True)
        zygote.close()
    except ZygoteError as exc:
        refused += 1
        print(kind, "zygote refused:", exc, flush=True)
base.close()
print("ZYGOTES:", "refused" if refused else "fork")
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # last: torch's NVML check, and its thread
print("cuda available (NVML):", torch.cuda.is_available())
show("torch.cuda.is_available() through NVML")
PY
# that check alone (`check`), or the check and, where a zygote refused, nothing more: a
# short call, leaving the device time to fix what it found and run the whole call after
if [ "${1:-}" = check ] || { [ "${CHECK:-1}" != 0 ] && ! grep -q "^ZYGOTES: fork" "$OUT/machine.txt"; }; then
    cat "$OUT/machine.txt"
    exit 0
fi
ON=(--accelerator "$ACCELERATOR")
# a last word whatever stops the script: the sweeps' rows, the lane's rows and profile
trap 'find "$WORK" -size -4M \( -name results.jsonl -o -name "ops_*.txt" -o -name "*.log" \
    -o -name "*.md" -o -name "*.yaml" -o -name "*.json" \) | tar czf "$OUT/runs.tar.gz" -T - \
    2>/dev/null; echo "runs: $(du -h "$OUT/runs.tar.gz" | cut -f1)"' EXIT
mkdir -p "$WORK"

if [ "${1:-}" = workers ]; then  # a later call: is Inductor's compile-worker pool busy
    # beside the timed repeats? (docs/gpu.md) Inductor jobs with the pool and without it
    # (one compile thread), both spawned, so that only the pool differs; each row's CPU
    # of other processes on its cores, per repeat
    for pool in default "env.TORCHINDUCTOR_COMPILE_THREADS=1"; do
        mkdir -p "$WORK/workers-${pool%%=*}" && (cd "$WORK/workers-${pool%%=*}" &&
            within "$(($(left) / 2))" python3 -m benchflow -m model=bert,llama model.size=small \
                "accelerator=$ACCELERATOR" dtype=bfloat16 dynamo=inductor repeat=10 \
                prefork=false mlflow.enabled=false $([ "$pool" = default ] || echo "$pool"))
    done >"$OUT/workers.log" 2>&1
    python3 - "$WORK" >>"$OUT/workers.log" 2>&1 <<'PY'
import json, pathlib, statistics, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("workers-*/multirun/*/*/results.jsonl")):
    for row in map(json.loads, f.read_text().splitlines()):
        m = row.get("metrics") or {}
        own = m.get("host_other_cpu_own_s") or []
        ms = statistics.median(m["per_iter_time_s"]) * 1e3 if m.get("per_iter_time_s") else None
        stopped = (row.get("timing") or {}).get("compile_workers_stopped_s")
        print(f.parts[-5], row["job"]["name"], row["status"], "median ms/iter", ms,
              "pool stopped in (s)", stopped, "other CPU a repeat (s)", [round(x, 3) for x in own])
PY
    echo "workers: done at ${SECONDS} s"
    exit 0
fi

if [ "${1:-}" = matrix ]; then  # a later call: the matrix alone, with the given options
    shift
    within "$(left)" python3 benchmarks/gpu.py "${ON[@]}" --skip fidelity --out "$OUT/gpu.md" \
        --workdir "$WORK" --deadline-s "$(($(left) - 30))" "$@" >"$OUT/matrix.log" 2>&1
    echo "matrix: rc=$?"
    exit 0
fi

within "${LANE_S:-230}" python3 -m pytest -p no:cacheprovider -m gpu tests/test_gpu.py -q -rA \
    --durations=0 --basetemp="$WORK/lane" >"$OUT/lane.txt" 2>&1
echo "lane: rc=$? ($(tail -1 "$OUT/lane.txt")) at ${SECONDS} s"
# fidelity on two models whose step keeps the GPU busy (bf16, base: 2-10 ms a step on the
# H200), 20 rounds
within "${FIDELITY_S:-100}" python3 benchmarks/gpu.py "${ON[@]}" --skip matrix --out "$OUT/gpu.md" \
    --fidelity-models llama,bert --fidelity-sizes "${SIZE:-base}" --rounds "${ROUNDS:-20}" \
    >"$OUT/fidelity.log" 2>&1
echo "fidelity: rc=$? at ${SECONDS} s"
# the matrix: eval and train on the three plain configurations, then Inductor's two
# modes, in bf16, as far as the time left goes; one process a job (repeat=10: its
# interval from the repeats' order statistics), one sweep a configuration set, eval first
for configs in plain modes; do
    within "$(left)" python3 benchmarks/gpu.py "${ON[@]}" --skip fidelity --out "$OUT/gpu.md" \
        --workdir "$WORK" --deadline-s "$(($(left) - 25))" --tests eval,train \
        --dtypes bfloat16 --configs "$configs" --sizes "${SIZE:-base}" --extra repeat=10 >>"$OUT/matrix.log" 2>&1
    echo "matrix ($configs, eval and train, bf16): rc=$? at ${SECONDS} s"
done
