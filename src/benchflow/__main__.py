"""`python -m benchflow [-m] key=value ...`: compose, validate, and run benchmark jobs.

Nothing heavy is imported here: --help, --cfg job and config errors never load
torch, torch_xla or mlflow. Each job's child process imports those itself.
"""

from __future__ import annotations

import sys

# `python -m benchflow <name> ...`: commands beside the sweep, each a module with main(argv).
SUBCOMMANDS = {
    "models": "benchflow.models.listing",  # which models can run here
    "report": "benchflow.report.cli",  # tables, plots and the regression gate
    "ui": "benchflow.ui",  # the MLflow UI over the runs' store
}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        command = importlib.import_module(SUBCOMMANDS[sys.argv[1]])
        raise SystemExit(command.main(sys.argv[2:]))

    args = sys.argv[1:]
    if "resume=true" in args:
        sys.argv[1:] = _resume_into(args)

    import signal

    import hydra

    from benchflow.config.store import register

    root = next(
        (a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("suite.torchbench_root=")), None
    )
    register(torchbench_root=root)

    @hydra.main(version_base="1.3", config_path="../../conf", config_name="config")
    def _app(cfg):  # type: ignore[no-untyped-def]
        from benchflow.sweep.task import run_job

        return run_job(cfg)

    received: list[int] = []

    def _stop(signum: int, frame: object) -> None:
        # SIGTERM (a scheduler, `kill`) takes Ctrl-C's path: the running job's process
        # group is killed and recorded as `interrupted`; a resume finishes the rest.
        received.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        _app()
    except KeyboardInterrupt:
        # The running job was killed and recorded as `interrupted`; rows already
        # written stay in results.jsonl.
        how = "terminated (SIGTERM)" if received else "interrupted"
        print(
            f"benchflow: {how}; the results so far are kept. Run the same command with "
            "resume=true to finish the sweep.",
            file=sys.stderr,
        )
        raise SystemExit(143 if received else 130) from None


def _resume_into(args: list[str]) -> list[str]:
    """resume=true: run into the newest sweep folder that had the same overrides."""
    from pathlib import Path

    from benchflow.sweep.resume import find_sweep

    if "-m" not in args and "--multirun" not in args:
        print(
            "benchflow: error: resume=true applies to sweeps (-m); allowed: add -m", file=sys.stderr
        )
        raise SystemExit(2)
    if any(a.startswith("hydra.sweep.dir=") for a in args):
        return args  # the user named the folder: sweeping into it resumes it
    root = Path("multirun")
    found, seen = find_sweep(root, args)
    if found is None:
        listing = ", ".join(str(p) for p in seen[:5]) or "none"
        print(
            "benchflow: error: resume=true found no sweep under multirun/ with these "
            f"overrides (sweeps there: {listing}); allowed: the same overrides as the "
            "sweep to resume, or hydra.sweep.dir=<its folder>",
            file=sys.stderr,
        )
        raise SystemExit(2)
    print(f"benchflow: resuming {found}", file=sys.stderr)
    return [*args, f"hydra.sweep.dir={found}"]


if __name__ == "__main__":
    main()
