"""The regions of a job's child that no work beside it may share: one definition, read by
the timing loop (harness/timing.py), the holds on the work beside the job (harness/hold.py,
whose holds name their region) and the check of the rows' clocks (results/overlap.py).
Each is recorded in the row's ``timing.spans`` as [region, start, end] on
CLOCK_MONOTONIC, with the whole child's span (``child``), which they lie in."""

from __future__ import annotations

COMPILE = "compile"  # the cold first call: the compile, or the first trace and execution
WARMUP = "warmup"  # the warm-up steps: the fixed ones, and an adaptive warm-up's
TIMED = "timed"  # the calibration, the host's reference steps and the timed repeats
PROFILE = "profile"  # the profiler's passes (profile=torch)
EXCLUSIVE = (COMPILE, WARMUP, TIMED, PROFILE)

CHILD = "child"  # the child's whole run: what a build ahead may run beside, not within
