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

    try:
        _app()
    except KeyboardInterrupt:
        # The running job was killed and recorded as `interrupted`; rows already
        # written stay in results.jsonl.
        print("benchflow: interrupted; the results so far are kept.", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
