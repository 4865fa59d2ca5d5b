"""`benchflow models`: every model benchflow can run here, and whether it can.

Reads config and the TorchBench checkout's files only (no torch, no model import):
each model checked against the suite's skip lists, its metadata.yaml and its
requirements. `suite=huggingface|timm` lists that suite's (cli/suite_models.py).
"""

from __future__ import annotations

import argparse
import os

from benchflow.cli import exit_refused
from benchflow.cli.suite_models import show, skipped, verdict
from benchflow.config.schema import SuiteConfig, read_yaml
from benchflow.config.store import CONF_DIR, options, problem
from benchflow.core.machine import cuda_present
from benchflow.models.torchbench_index import (
    CLONE_HINT,
    TorchBenchNotFound,
    find_root,
    list_models,
    missing_packages,
    not_implemented,
)
from benchflow.suite.suites import SUITES, with_rules


def _first_comment(path: os.PathLike[str]) -> str:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                return line.lstrip("# ").strip()
    return ""


# The tests a TorchBench model is listed for, in the order its line names them.
TESTS = ("eval", "train")

# The key=value arguments `benchflow models` takes, and what each says.
KEYS = {
    "suite": "whose models: torchbench (the default), huggingface or timm",
    "suite.torchbench_root": "the pytorch/benchmark checkout (default: $TORCHBENCH_ROOT)",
    "hydra.searchpath": "[file://DIR,...]: your config folders, as for a run",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchflow models",
        description="Every model benchflow can run here, and whether it can.",
        epilog="key=value: " + "; ".join(f"{key}=: {meaning}" for key, meaning in KEYS.items()),
    )
    p.add_argument(
        "--config-dir", "-cd", action="append", default=[], metavar="DIR", help="your config folder"
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="see below")
    return p


def bad_argument(argv: list[str]) -> str | None:
    """The first argument `benchflow models` does not take, and what it takes (None: all
    are good). argparse itself answers --help."""
    known, unknown = parser().parse_known_args(argv)
    allowed = f"--config-dir DIR, --help, or {', '.join(f'{k}=...' for k in KEYS)}"
    for arg in argv:
        key, sep, _ = arg.partition("=")
        if arg in unknown:
            why = "not an option" if arg.startswith("-") else "not a key=value"
            return f"{arg}: {why} of `benchflow models`; allowed: {allowed}"
        if sep and arg in known.overrides and key not in KEYS:
            return f"{arg}: `benchflow models` takes no key {key}; allowed: {allowed}"
        if not sep and arg in known.overrides:
            return f"{arg}: not a key=value of `benchflow models`; allowed: {allowed}"
    return None


def main(argv: list[str]) -> int:
    if why := bad_argument(argv) or problem(argv):
        exit_refused(why)
    suite_arg = next((a.split("=", 1)[1] for a in argv if a.startswith("suite=")), "torchbench")
    allowed = sorted(p.stem for p in (CONF_DIR / "suite").glob("*.yaml"))
    if suite_arg not in allowed:
        exit_refused(f"suite={suite_arg!r} is not allowed; allowed: {', '.join(allowed)}")
    device = "cuda" if cuda_present() else "cpu"
    if suite_arg in SUITES and SUITES[suite_arg].models_list:  # huggingface, timm
        return show(SUITES[suite_arg], device)
    root_arg = next(
        (a.split("=", 1)[1] for a in argv if a.startswith("suite.torchbench_root=")), None
    )
    suite = with_rules(SuiteConfig(name="torchbench"))
    try:
        root = find_root(root_arg)
    except TorchBenchNotFound as exc:
        exit_refused(str(exc))
    tb_models = list_models(root) if root else []
    print(f"Models, and whether they run on this machine ({device}). `model=<name>` runs one.")
    print("Suite skip lists and metadata.yaml are applied (suite.skip_lists=false overrides")
    print("the lists). 'yes' means nothing known blocks it: a load can still fail on a")
    print("package or a download, and the job then says which.\n")
    print("built-in (benchflow's own; TorchBench's model of the same name is used when present)")
    print("and yours (your config folders; `factory`: built by model.target):")
    for name, path in options("model", argv).items():
        spec = read_yaml(path.read_text()) or {}
        if not path.is_relative_to(CONF_DIR):
            kind, note = ("factory" if spec.get("target") else "yours"), f" [{path}]"
        elif spec.get("builtin"):
            kind = "builtin"
            note = " [TorchBench's is used here]" if name in tb_models else ""
        else:
            kind, note = "factory", " [needs model.target=module:function]"
        print(f"{name:<32} {kind:<11} yes{note}: {_first_comment(path)}")
    if root is None:
        print(f"\nTorchBench: not found ({CLONE_HINT}, or export TORCHBENCH_ROOT).")
        return 0
    print(f"\nTorchBench at {root}:")
    for name in tb_models:
        blocked = skipped(suite, name, device, TESTS)
        status = verdict(blocked, TESTS)
        said = [t for t in TESTS if t not in blocked and not_implemented(root, name, device, t)]
        if said:
            status += (
                f"; its metadata.yaml says {'/'.join(said)} not_implemented (run all the same)"
            )
        missing = missing_packages(root, name)
        if missing and len(blocked) < 2:
            status += f"; its requirements.txt lists missing packages: {', '.join(missing)}"
        print(f"{name:<32} torchbench  {status}")
    return 0
