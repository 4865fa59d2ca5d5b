"""`benchflow [-m] key=value ...`: the sweep's command line. Its arguments are checked
here, before Hydra composes anything (a refused command leaves no folder); then Hydra
runs with benchflow's config tree and sweeper plugin (benchflow.sweep.start). Nothing
heavy is imported here: --help, --cfg job and config errors never load torch or mlflow.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from benchflow.cli import exit_refused
from benchflow.config.keys import unknown_key, wrong_type
from benchflow.config.schema import ENV, INDUCTOR, XLA_FLAGS_KEY, setting_text
from benchflow.core.interrupts import Terminated, raise_stop


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep (or single run) `argv` names; the exit code (Hydra's errors exit
    through SystemExit, as its own entry does)."""
    from benchflow.config.store import problem

    args = list(sys.argv[1:] if argv is None else argv)
    if why := problem(args):
        exit_refused(why)
    if "--help" in args or "-h" in args:
        from benchflow.cli.help import render

        print(render(args))
        return 0
    _check_launcher(args)
    _check_keys(args)
    _check_types(args)
    _check_yaml(args)
    args = [_knob_override(a) for a in args]
    if "resume=true" in args:
        args = _resume_into(args)

    import signal

    from benchflow.models.torchbench_index import register_torchbench
    from benchflow.suite.suites import register_suite_models, unchosen_suite_model

    root = next((a.split("=", 1)[1] for a in args if a.startswith("suite.torchbench_root=")), None)
    register_torchbench(root)
    if why := unchosen_suite_model(args):
        exit_refused(why)
    register_suite_models(args)
    _check_choices(args, root)

    parsed = _hydra_args(args)
    if parsed.cfg == "job" and parsed.package is None:
        return _show_jobs(parsed.overrides, args, parsed.multirun)
    single = not parsed.multirun and not parsed.cfg
    if single:
        args = _single(args)

    # SIGTERM (a scheduler, `kill`) takes Ctrl-C's path: the running job is recorded as
    # `interrupted`, a resume finishes the rest (core/interrupts.py).
    before = signal.signal(signal.SIGTERM, raise_stop)
    try:
        _hydra(args)
    except KeyboardInterrupt as exc:
        # The running job was killed and recorded as `interrupted`; rows already
        # written stay in results.jsonl.
        terminated = isinstance(exc, Terminated)
        how = "terminated (SIGTERM)" if terminated else "interrupted"
        what = "run" if single else "sweep"
        print(
            f"benchflow: {how}; the results so far are kept. Run the same command with "
            f"resume=true to finish the {what}.",
            file=sys.stderr,
        )
        return 143 if terminated else 130
    finally:
        signal.signal(signal.SIGTERM, before)
    return 0


def _hydra_args(args: list[str]) -> argparse.Namespace:
    """The few of Hydra's own flags that decide what runs: --cfg, --package, -m."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--cfg", "-c")
    parser.add_argument("--package", "-p")
    parser.add_argument("--multirun", "-m", action="store_true")
    parser.add_argument("--config-dir", "-cd")
    parser.add_argument("--config-name", "-cn")
    parser.add_argument("--config-path", "-cp")
    parser.add_argument("overrides", nargs="*")
    parsed, _ = parser.parse_known_args(args)
    return parsed


def _single(args: list[str]) -> list[str]:
    """A single run (no -m) is a sweep of one job, in hydra.run.dir (runs/<date>/<time>,
    or the one given): its own folder, no job folder within."""
    run_dir = "runs/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    for arg in args:
        if arg.startswith("hydra.run.dir="):
            run_dir = arg.split("=", 1)[1]
    kept = [a for a in args if not a.startswith("hydra.run.dir=")]
    return ["-m", *kept, "hydra.sweeper.single=true", f"hydra.sweep.dir={run_dir}"]


def _hydra(args: list[str]) -> None:
    """Hydra's own entry (hydra.main) with benchflow's tree and `args`; each process a
    launcher of Hydra's starts runs its task (sweep/process.task)."""
    import hydra

    from benchflow.config.store import CONF_DIR

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base=None)
    def task(cfg: object) -> object:
        from hydra.core.hydra_config import HydraConfig

        from benchflow.sweep.process import task

        hc = HydraConfig.get()
        return task(Path(hc.sweep.dir), int(hc.job.num), Path(hc.runtime.output_dir))

    argv = sys.argv
    sys.argv = [argv[0], *args]  # hydra.main reads its command line there
    try:
        task()
    finally:
        sys.argv = argv


def _show_jobs(overrides: list[str], args: list[str], multirun: bool) -> int:
    """--cfg job: each job as it would run, composed and planned as a run does
    (config/compose.py), with only the suite rules that name its model (Hydra's own
    prints the config before planning, with every rule, and refuses -m). With -m: a YAML
    document per job."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from benchflow.config.compose import Composer
    from benchflow.config.store import CONF_DIR, user_config_dirs
    from benchflow.config.validate import parse
    from benchflow.sweep.start import grid

    dirs = user_config_dirs(args)  # --config-dir too, as Hydra's search path
    given = [o for o in overrides if not o.startswith("hydra.searchpath=")]
    searchpath = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []
    # a sweep's master config holds its experiment's grid; a single run's is its job's
    chosen = [o for o in given if o.startswith("experiment=") and "," not in o]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None, job_name="benchflow"):
        try:
            master = compose(
                "config", [*(chosen if multirun else given), *searchpath], return_hydra_config=True
            )
        except Exception as exc:  # Hydra's own error, as it prints it
            exit_refused(str(exc))
        jobs, typed = [given], lambda _: parse(master)
        if multirun:
            jobs = grid(master.hydra.sweeper.params or {}, given)
            typed = Composer(GlobalHydra.instance().config_loader(), master).typed
        for num, job_overrides in enumerate(jobs):
            if num:
                print("---")
            _show_job(typed, num, job_overrides, multirun)
    return 0


def _show_job(
    typed_of: Callable[[list[str]], Any], num: int, given: list[str], multirun: bool
) -> None:
    import dataclasses

    import yaml

    from benchflow.config.errors import ConfigError
    from benchflow.runner.knobs import check_knobs
    from benchflow.suite.rules import rules_for
    from benchflow.sweep.plan import plan_config

    def refuse(exc: ConfigError) -> NoReturn:
        exit_refused(f"job {num} ({' '.join(given)}): {exc}" if multirun else str(exc))

    try:
        typed = typed_of(given)
    except ConfigError as exc:
        refuse(exc)
    except Exception as exc:  # Hydra's own error, as it prints it
        exit_refused(str(exc))
    try:
        job = plan_config(typed, num, given, single=not multirun)
        check_knobs([job])
    except ConfigError as exc:
        refuse(exc)
    if job.invalid:  # a sweep records it as such, and runs nothing
        print(f"# {job.name} ({' '.join(given)}): {job.invalid}")
        return
    cfg = job.config
    shown = dataclasses.asdict(cfg)
    shown["suite"]["rules"] = rules_for(cfg.suite.rules, cfg.model.name)
    src = dict(job.sources)
    if cfg.batch_size is None and cfg.model.builtin:
        # the model's own default, as its build will take it (read, not imported)
        from benchflow.models.target import declared_batch_size

        if (declared := declared_batch_size(cfg.model.builtin, cfg.test.name)) is not None:
            shown["batch_size"] = declared
            src["batch_size_source"] = "model"
    print(
        f"# {job.name}, as it would run: dtype from {src['dtype_source']}, batch_size from "
        f"{src['batch_size_source']} (null: the model's default); suite.rules: those naming "
        f"{cfg.model.name} (`benchflow models` lists the suite's)"
    )
    if job.skip:
        print(f"# skipped: {job.skip}")
    print(yaml.safe_dump(shown, sort_keys=False), end="")


def _resume_into(args: list[str]) -> list[str]:
    """resume=true: run into the newest folder that ran the same overrides: a sweep's
    under multirun/ (-m), a single run's under runs/ (each holds its plan.json)."""
    from benchflow.sweep.resume import find_sweep

    key, root, what = (
        ("hydra.sweep.dir", "multirun", "sweep")
        if "-m" in args or "--multirun" in args
        else ("hydra.run.dir", "runs", "run")
    )
    if any(a.startswith(f"{key}=") for a in args):
        return args  # the user named the folder: running into it resumes it
    found, seen = find_sweep(Path(root), args)
    if found is None:
        listing = ", ".join(str(p) for p in seen[:5]) or "none"
        exit_refused(
            f"resume=true found no {what} under {root}/ with these overrides ({what}s there: "
            f"{listing}); allowed: the same overrides as the {what} to resume, or "
            f"{key}=<its folder>"
        )
    print(f"benchflow: resuming {found}", file=sys.stderr)
    return [*args, f"{key}={found}"]


# Launchers benchflow documents, and the distribution that brings each.
# In a checkout, `make setup` installs them all (its EXTRAS: the Makefile).
_CORE = "`make setup` in a checkout, or `pip install {dist}` (a dependency of benchflow's wheel)"
_RAY = "`make setup` in a checkout, or `pip install {dist}` (the wheel's `ray` extra)"
LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "hydra-joblib-launcher", _CORE),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", _CORE),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", _CORE),
    "ray": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", _RAY),
    "ray_local": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", _RAY),
    "ray_cluster": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", _RAY),
}


def _check_launcher(args: list[str]) -> None:
    """hydra/launcher=X whose plugin is not installed: say how to get it (Hydra does not)."""
    import importlib.util

    for arg in args:
        if arg.startswith("hydra/launcher="):
            name = arg.split("=", 1)[1]
            module, dist, how = LAUNCHERS.get(name, (None, "", ""))
            if module and importlib.util.find_spec(module) is None:
                exit_refused(
                    f"hydra/launcher={name} needs {dist}, which is not installed here; "
                    "allowed: basic (the default) or an installed launcher. "
                    f"Install it with {how.format(dist=dist)}"
                )


def _knob_override(arg: str) -> str:
    """`inductor.<key>=value` and `env.NAME=value` (keys the schema cannot list) go to
    Hydra as `++...`, so that they need no `+` and sweep as any key does; one value with
    an `=` in it is quoted for Hydra."""
    key, sep, value = arg.partition("=")
    # `xla.flags=--xla_cpu_use_thunk_runtime=false`: an `=` in the value is Hydra's
    # grammar error unless quoted; one value (no comma) is quoted here
    one = "=" in value and "," not in value and value[:1] not in "'\""
    if one and (key == XLA_FLAGS_KEY or key.startswith(f"{ENV}.")):
        arg = f"{key}='{value}'"
    return f"++{arg}" if key.startswith((f"{INDUCTOR}.", f"{ENV}.")) and sep else arg


def _check_keys(args: list[str]) -> None:
    """An override of a key the schema does not have, `+key=` too: one message with the
    allowed keys (Hydra's own names none, and would add a `+key`)."""
    from benchflow.config.store import groups as config_groups

    groups = config_groups(args)
    for arg in args:
        key, sep, _ = arg.partition("=")
        key = key.lstrip("+")
        if not sep or arg.startswith(("-", "~", "hydra.", "hydra/")) or "@" in key:
            continue
        if key in groups or key.startswith("hydra.") or "/" in key:
            continue  # a group choice: Hydra lists the options when one is unknown
        if why := unknown_key(key, groups):
            exit_refused(f"{arg}: {why}")


def _check_types(args: list[str]) -> None:
    """A value of another type than its key's (`warmup=two`, `warmup=1,two`): one line
    with the type allowed, where Hydra prints a stack. Judged as Hydra's merge would
    (keys.wrong_type); sweep functions, interpolations and bad grammar are left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep
    from hydra.errors import OverrideParseException

    parser = None
    for arg in args:
        key, sep, text = arg.partition("=")
        if not sep or arg.startswith(("-", "~", "hydra.", "hydra/")) or "@" in key:
            continue
        if "(" in text or "${" in text:
            continue
        parser = parser or OverridesParser.create()
        try:
            (override,) = parser.parse_overrides([arg])
        except OverrideParseException:
            continue
        value = override.value()
        for one in value.list if isinstance(value, ChoiceSweep) else [value]:
            if why := wrong_type(override.key_or_group, one):
                exit_refused(f"{override.key_or_group}={_value_text(one)}: {why}")


def _value_text(value: object) -> str:
    """A value as the command line writes it: two, true, null, [a,b]."""
    if isinstance(value, list):
        return "[" + ",".join(map(_value_text, value)) + "]"
    return setting_text(value)


def _check_choices(args: list[str], torchbench_root: str | None) -> None:
    """A group option that does not exist (`dynamo=inductr`): one line with "did you
    mean" and the options, where Hydra prints a stack. Sweep functions are left to Hydra."""
    import difflib

    from hydra.core.config_store import ConfigStore

    from benchflow.config.store import groups as config_groups
    from benchflow.config.store import options

    groups = config_groups(args)
    stored = ConfigStore.instance().repo
    for arg in args:
        group, sep, value = arg.partition("=")
        if not sep or group not in groups or "(" in value:
            continue
        known = set(options(group, args)) | {
            n.removesuffix(".yaml") for n in stored.get(group, {}) if n.endswith(".yaml")
        }
        for choice in (v.strip() for v in value.split(",")):
            if not choice or choice in known or choice == "null":
                continue
            close = difflib.get_close_matches(choice, known, n=1)
            hint = f"did you mean {group}={close[0]}? " if close else ""
            where = ""
            if group == "model" and not _torchbench_found(torchbench_root):
                where = (
                    " (TorchBench's models are options once a pytorch/benchmark checkout "
                    "is found: suite.torchbench_root=PATH or $TORCHBENCH_ROOT)"
                )
            exit_refused(
                f"{group}={choice}: no option {choice!r} in {group}{where}; {hint}"
                f"allowed: {', '.join(sorted(known))}"
            )


def _torchbench_found(configured: str | None) -> bool:
    from benchflow.models.torchbench_index import TorchBenchNotFound, find_root

    try:
        return find_root(configured) is not None
    except TorchBenchNotFound:
        return False


def _check_yaml(args: list[str]) -> None:
    """A chosen config file that is not valid YAML, or sets a key the schema does not
    have: one message naming the file, before Hydra's traceback."""
    from benchflow.config.store import config_dirs
    from benchflow.config.store import groups as config_groups

    dirs, groups = config_dirs(args), config_groups(args)
    for arg in args:
        group, sep, value = arg.partition("=")
        # (Hydra's own groups, hydra/launcher=...: keys of Hydra's schema, not ours)
        if not sep or arg.startswith(("-", "+", "~", "hydra.", "hydra/")):
            continue
        for option in (v.strip() for v in value.split(",")):
            path = next(
                (p for p in (d / group / f"{option}.yaml" for d in dirs) if p.is_file()), None
            )
            if path is None:
                continue
            choice = f"{group}={option}"
            text = _load_or_exit(path, choice)
            package = "" if "@package _global_" in path.read_text().split("\n", 1)[0] else group
            for key in _leaf_keys(text, package):
                if why := unknown_key(key, groups):
                    exit_refused(f"{choice}: {path}: {why}")


def _leaf_keys(data: object, prefix: str, root: bool = True) -> list[str]:
    """The dotted keys a config file sets (its defaults list and hydra node left out)."""
    if not isinstance(data, dict):
        return [prefix] if prefix else []
    keys = []
    for key, value in data.items():
        if root and key in ("defaults", "hydra"):
            continue
        keys += _leaf_keys(value, f"{prefix}.{key}" if prefix else str(key), root=False)
    return keys


def _load_or_exit(path: Path, choice: str) -> object:
    import yaml

    from benchflow.config.schema import read_yaml

    try:
        return read_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        exit_refused(
            f"{choice}: {path} is not valid YAML{where}: {problem}; "
            "allowed: a YAML mapping like the files beside it"
        )
