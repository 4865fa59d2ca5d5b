#!/usr/bin/env bash
# One call on a GPU machine (docs/gpu.md): the gpu test lane (its sweeps' rows and the
# profile's op table kept), the fidelity table and the matrix, most important first,
# each step with a time limit of its own and the whole within TOTAL_S, so that one slow
# step leaves the others' results. Run from the checkout, with the wheels
# `make gpu-wheels` made in .whl/; every log goes to $OUT (at most 8 files).
#
#   bash benchmarks/gpu_session.sh            # TOTAL_S=560 LANE_S=230 FIDELITY_S=110
#
# A dry run on a CPU machine, from the checkout after `make setup` (the lane skips):
#   PATH=$PWD/.venv/bin:$PATH NO_WHEELS=1 ACCELERATOR=cpu bash benchmarks/gpu_session.sh
#
# The rest of the matrix (AMP, the two Inductor modes in training) in later calls:
#   bash benchmarks/gpu_session.sh matrix --configs modes --tests train --dtypes bfloat16 --extra repeat=10
#   bash benchmarks/gpu_session.sh matrix --tests eval,train --dtypes amp --extra repeat=10
# and whether Inductor's compile workers run beside its timed repeats (docs/gpu.md):
#   bash benchmarks/gpu_session.sh workers
# Its first check alone (the threads that keep zygotes from forking; seconds):
#   bash benchmarks/gpu_session.sh check
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
# First, in seconds: the threads torch's NVML check and Inductor's import leave, and
# whether the torch and inductor zygotes will fork (a refusal names each thread and the
# preload that started it); on the H200 every zygote forked from the torch one refused
# with one thread the log did not name (docs/gpu.md)
within 90 python3 - >>"$OUT/machine.txt" 2>&1 <<'PY'
import logging, os
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
import torch
from benchflow.harness.process import unsafe_threads
from benchflow.runner.zygote import release_nvml
print("threads after torch's import:", unsafe_threads())
print("cuda available (NVML):", torch.cuda.is_available(), unsafe_threads())
print("NVML inits released:", release_nvml(), unsafe_threads())
import torch._inductor.compile_fx  # noqa: F401
print("after Inductor's import:", unsafe_threads(), "initialized:", torch.cuda.is_initialized())
logging.basicConfig(level=logging.INFO)
from benchflow.runner.pool import Pool
pool = Pool()
for kind in ("torch", "inductor"):
    print(kind, "zygote ready in:", pool.start(kind, []))
PY
if [ "${1:-}" = check ]; then  # that check alone: a short first call, leaving time to fix
    cat "$OUT/machine.txt"     # what it finds and run the whole call after
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
within "${FIDELITY_S:-110}" python3 benchmarks/gpu.py "${ON[@]}" --skip matrix --out "$OUT/gpu.md" \
    >"$OUT/fidelity.log" 2>&1
echo "fidelity: rc=$? at ${SECONDS} s"
# the matrix: eval and train on the three plain configurations, then the two modes
# (eval), in bf16, as far as the time left goes; one process a job (repeat=10: its
# interval from the repeats' order statistics), since the default's three processes
# a job (each compiling) did not fit a call: on the H200 one sweep of bert's three
# configurations had not ended in 192 s (zygotes refused then: docs/gpu.md)
within "$(left)" python3 benchmarks/gpu.py "${ON[@]}" --skip fidelity --out "$OUT/gpu.md" \
    --workdir "$WORK" --deadline-s "$(( ($(left) - 40) * 2 / 3 ))" \
    --tests eval,train --dtypes bfloat16 --configs plain --extra repeat=10 >"$OUT/matrix.log" 2>&1
echo "matrix (eval and train, bf16, eager, Inductor, cudagraphs): rc=$? at ${SECONDS} s"
within "$(left)" python3 benchmarks/gpu.py "${ON[@]}" --skip fidelity --out "$OUT/gpu.md" \
    --workdir "$WORK" --deadline-s "$(($(left) - 25))" \
    --tests eval --dtypes bfloat16 --configs modes --extra repeat=10 >>"$OUT/matrix.log" 2>&1
echo "matrix (eval, bf16, Inductor's two modes): rc=$? at ${SECONDS} s"
