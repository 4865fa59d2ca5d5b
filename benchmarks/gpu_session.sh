#!/usr/bin/env bash
# One call on a GPU machine (docs/gpu.md): the gpu test lane, the fidelity table and
# the first part of the matrix, most important first, each step with a time limit of
# its own, so that one slow step leaves the others' results. Run from the checkout,
# with the wheels `make gpu-wheels` made in .whl/; every log goes to $OUT (5 files).
#
#   bash benchmarks/gpu_session.sh            # LANE_S=240 FIDELITY_S=150 MATRIX_S=150
#
# The rest of the matrix (train, AMP, the two Inductor modes) in later calls:
#   bash benchmarks/gpu_session.sh matrix --configs modes --tests eval --dtypes bfloat16
#   bash benchmarks/gpu_session.sh matrix --tests train --dtypes bfloat16,amp
set -u
OUT=${OUT:-/tmp/benchflow-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
SITE=/tmp/benchflow-site

{
    date
    nvidia-smi
    python3 -c "import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
} >"$OUT/machine.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl >>"$OUT/machine.txt" 2>&1 || { echo "wheels: see machine.txt"; exit 1; }
export PYTHONPATH="src:$SITE"

if [ "${1:-}" = matrix ]; then  # a later call: the matrix alone, with the given options
    shift
    timeout "${MATRIX_S:-540}" python3 benchmarks/gpu.py --skip fidelity --out "$OUT/gpu.md" "$@" \
        >"$OUT/matrix.log" 2>&1
    echo "matrix: rc=$?"
    exit 0
fi

timeout "${LANE_S:-240}" python3 -m pytest -p no:cacheprovider -m gpu tests/test_gpu.py -q -rA \
    >"$OUT/lane.txt" 2>&1
echo "lane: rc=$? ($(tail -1 "$OUT/lane.txt"))"
timeout "${FIDELITY_S:-150}" python3 benchmarks/gpu.py --skip matrix --out "$OUT/gpu.md" \
    >"$OUT/fidelity.log" 2>&1
echo "fidelity: rc=$?"
timeout "${MATRIX_S:-150}" python3 benchmarks/gpu.py --skip fidelity --out "$OUT/gpu.md" \
    --tests eval --dtypes bfloat16 --configs plain >"$OUT/matrix.log" 2>&1
echo "matrix (eval, bf16, eager, Inductor, cudagraphs): rc=$?"
