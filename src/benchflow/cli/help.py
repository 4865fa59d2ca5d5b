"""`benchflow --help`: one screen. The config groups and their options (the config
tree, config/store.py), each setting with the schema's own comment (config/schema.py),
the keys inside the groups, and the commands (cli.COMMANDS). The full reference is
docs/usage.md; which models run here and the suites' rules are `benchflow models`."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Sequence

from benchflow.cli import COMMANDS
from benchflow.config.keys import field_comments
from benchflow.config.schema import BenchConfig
from benchflow.config.store import groups, options

HEADER = """\
benchflow: run PyTorch models on backends and time them correctly, each job in its own child
process (timeout_s bounds it). Rows: results.jsonl in runs/<date>/<time>/ or multirun/ (-m), MLflow.

usage: benchflow [-m] [group=option ...] [key=value ...] [--cfg job (shows the jobs, runs none)]"""

FOOTER = """\
Examples:
  benchflow -m model=llama,dlrm dynamo=openxla,inductor
  benchflow model=resnet dynamo=inductor test=train repeat=10
Full reference: docs/usage.md. Models and suite rules: `benchflow models`. Hydra: --hydra-help."""


def render(argv: Sequence[str] = ()) -> str:
    """The help text for a command line (its --config-dir folders' options included)."""
    out = [HEADER, "", "== Config groups (group=option) =="]
    defaults = _defaults()
    for group in groups(argv):
        default = f"   [default: {defaults[group]}]" if group in defaults else ""
        out.append(_clip(f"{group}: {', '.join(sorted(options(group, argv)))}{default}"))
    out += ["", "== Settings (key=default: what it does) =="]
    comments = field_comments(BenchConfig)
    hints = typing.get_type_hints(BenchConfig)
    inside = []
    for f in dataclasses.fields(BenchConfig):
        if dataclasses.is_dataclass(hints[f.name]):
            inside.append(f.name)
            continue
        default = json.dumps(getattr(BenchConfig(), f.name))
        out.append(_clip(f"  {f.name + '=' + default:<24} {comments[f.name]}"))
    out += ["", "== Keys inside sections (section.key=value; a group's option sets them) =="]
    for name in inside:
        keys = [f.name for f in dataclasses.fields(hints[name]) if f.name != "name"]
        if keys:
            out.append(_clip(f"  {name}.{{{','.join(keys)}}}"))
    out += ["", "== Commands (benchflow COMMAND --help) =="]
    width = max(map(len, COMMANDS))
    out += [f"  {name:<{width}} {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join([*out, "", FOOTER])


def _defaults() -> dict[str, str]:
    """Each group's default option: conf/config.yaml's defaults list."""
    from benchflow.config.schema import read_yaml
    from benchflow.config.store import CONF_DIR

    entries = read_yaml((CONF_DIR / "config.yaml").read_text())["defaults"]
    return {
        k: "null" if v is None else str(v)
        for entry in entries
        if isinstance(entry, dict)
        for k, v in entry.items()
        if not k.startswith("override ")
    }


def _clip(line: str, width: int = 100) -> str:
    """One line each: a longer comment is cut after its last whole word that fits
    (docs/usage.md says it all)."""
    if len(line) <= width:
        return line
    cut = line[: width - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut.strip() else cut).rstrip(" ,;:(") + " …"
