"""`python -m benchflow [-m] key=value ...`: compose, validate, and run benchmark jobs.

Nothing heavy is imported here: --help, --cfg job and config errors never load
torch, torch_xla or mlflow. Each job's child process imports those itself.
"""

from __future__ import annotations

import sys

# `python -m benchflow <name> ...`: commands beside the sweep, each a module with main(argv).
SUBCOMMANDS = {
    "models": "benchflow.cli.models",  # which models can run here
    "report": "benchflow.cli.report",  # tables, plots and the regression gate
    "ui": "benchflow.cli.ui",  # the MLflow UI over the runs' store
    "sync": "benchflow.cli.sync",  # upload to MLflow what a sweep could not log
}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        command = importlib.import_module(SUBCOMMANDS[sys.argv[1]])
        raise SystemExit(command.main(sys.argv[2:]))

    args = sys.argv[1:]
    _check_launcher(args)
    _check_keys(args)
    _check_yaml(args)
    if "resume=true" in args:
        sys.argv[1:] = _resume_into(args)

    import signal

    import hydra

    from benchflow.models.torchbench_index import register_torchbench
    from benchflow.suite.suites import register_suite_models, unchosen_suite_model

    root = next(
        (a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("suite.torchbench_root=")), None
    )
    register_torchbench(root)
    why = unchosen_suite_model(sys.argv[1:])
    if why:
        print(f"benchflow: error: {why}", file=sys.stderr)
        raise SystemExit(2)
    register_suite_models(sys.argv[1:])

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


# Launchers benchflow documents, and the distribution that brings each.
_CORE = "`uv sync --locked` (a benchflow dependency)"
_RAY = "`uv sync --locked --extra ray` or `pip install 'benchflow[ray]'` (make setup does)"
LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "hydra-joblib-launcher", _CORE),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", _CORE),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", _CORE),
    "ray": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", _RAY),
    "ray_local": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", _RAY),
}


def _check_launcher(args: list[str]) -> None:
    """hydra/launcher=X whose plugin is not installed: say how to get it (Hydra's own
    message only lists the launchers it found)."""
    import importlib.util

    for arg in args:
        if arg.startswith("hydra/launcher="):
            name = arg.split("=", 1)[1]
            module, dist, how = LAUNCHERS.get(name, (None, "", ""))
            if module and importlib.util.find_spec(module) is None:
                print(
                    f"benchflow: error: hydra/launcher={name} needs {dist}, which is not "
                    "installed here; allowed: basic (the default) or an installed launcher. "
                    f"Install it with {how}",
                    file=sys.stderr,
                )
                raise SystemExit(2)


def _check_keys(args: list[str]) -> None:
    """An override of a key the schema does not have: one message with the allowed keys
    (Hydra's own says only that the key is not in the config)."""
    import dataclasses
    import typing

    from benchflow.config.schema import BenchConfig
    from benchflow.config.store import CONF_DIR

    groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra")
    for arg in args:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith(("-", "+", "~", "hydra.", "hydra/")) or "@" in key:
            continue
        if key in groups:
            continue  # a group choice: Hydra lists the options when one is unknown
        cls: typing.Any = BenchConfig
        done: list[str] = []
        for part in key.split("."):
            fields = {f.name for f in dataclasses.fields(cls)}
            if part not in fields:
                allowed = sorted(fields | (set(groups) if not done else set()))
                where = ".".join(done) + "." if done else ""
                print(
                    f"benchflow: error: {key}={arg.partition('=')[2]}: no key {where}{part}; "
                    f"allowed {'keys' if not done else 'keys of ' + '.'.join(done)}: "
                    + ", ".join(allowed),
                    file=sys.stderr,
                )
                raise SystemExit(2)
            done.append(part)
            hint = typing.get_type_hints(cls)[part]
            if not dataclasses.is_dataclass(hint):
                break  # a value (or a free-form mapping): Hydra checks its type
            cls = hint


def _check_yaml(args: list[str]) -> None:
    """A chosen config file that is not valid YAML: one message naming the file and the
    place, before Hydra (which would print a parser traceback)."""
    from pathlib import Path

    from benchflow.config.store import CONF_DIR

    dirs = [Path(CONF_DIR)]
    for arg in args:
        if arg.startswith("hydra.searchpath="):
            for item in arg.split("=", 1)[1].strip("[]").split(","):
                item = item.strip().strip("'\"")
                if item.startswith("file://"):
                    dirs.append(Path(item.removeprefix("file://")))
    for arg in args:
        group, sep, value = arg.partition("=")
        if not sep or arg.startswith(("-", "+", "~", "hydra.")):
            continue
        for option in (v.strip() for v in value.split(",")):
            for path in (d / group / f"{option}.yaml" for d in dirs):
                if path.is_file():
                    _load_or_exit(path, f"{group}={option}")


def _load_or_exit(path: object, choice: str) -> None:
    from pathlib import Path

    import yaml

    try:
        yaml.safe_load(Path(str(path)).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        print(
            f"benchflow: error: {choice}: {path} is not valid YAML{where}: {problem}; "
            "allowed: a YAML mapping like the files beside it",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
