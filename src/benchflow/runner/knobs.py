"""A job's compiler settings (`inductor.<key>=`), checked against the job's own torch before
any work: its interpreter lists torch._inductor.config's keys and types, once, only where a
job sets one. A key of a type the command line cannot give takes any value; torch decides.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchflow.config.errors import ConfigError
from benchflow.config.schema import INDUCTOR, setting_text, settings_of
from benchflow.core.files import read_json, write_json_atomic
from benchflow.core.job import Job
from benchflow.core.layout import cache_root
from benchflow.runner.interpreter import ToolchainError, Unanswered, ask
from benchflow.runner.toolchain import launch

# The answer: torch's version, and each key's type names and Literal values (none: any).
PROBE = """
import json, types, typing
import torch
from torch._inductor import config

def takes(t):
    if t is typing.Any:
        return None
    origin = typing.get_origin(t)
    if origin is typing.Union or isinstance(t, types.UnionType):
        out = [[], []]
        for arg in typing.get_args(t):
            got = takes(arg)
            if got is None:
                return None
            out[0] += got[0]
            out[1] += got[1]
        return out
    if origin is typing.Literal:
        return [[], list(typing.get_args(t))]
    if t in (bool, int, float, str, type(None)):
        return [[t.__name__], []]
    if t in (list, tuple) or origin in (list, tuple):
        return [["list"], []]
    return None

keys = {}
for key in config.get_config_copy():
    try:
        keys[key] = takes(config.get_type(key)) or [[], []]
    except Exception:
        keys[key] = [[], []]
print(json.dumps({"torch": str(torch.__version__), "keys": keys}, default=str))
"""


@dataclass(frozen=True)
class InductorKeys:
    """torch._inductor.config's keys in one interpreter, and what each takes."""

    torch: str
    keys: dict[str, tuple[list[str], list[Any]]]  # key -> (type names, Literal values)

    def why_not(self, key: str, value: Any) -> str | None:
        """Why `inductor.<key>=<value>` cannot be set in this torch (None: it can)."""
        shown = f"{INDUCTOR}.{key}={setting_text(value)}"
        if key not in self.keys:
            close = difflib.get_close_matches(key, self.keys, n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(f'{INDUCTOR}.{c}' for c in close)}? " if close else ""
            return (
                f"{shown}: torch {self.torch} has no torch._inductor.config key {key!r}; "
                f'{hint}allowed: any of its {len(self.keys)} keys (`python -c "import '
                'torch._inductor.config as c; print(*sorted(c.get_config_copy()))"` lists '
                "them), e.g. freezing, cpp_wrapper, max_autotune, cpp.threads"
            )
        types, values = self.keys[key]
        if not types and not values:
            return None
        name = type(value).__name__
        if name in types or (name == "int" and "float" in types) or value in values:
            return None
        allowed = [t if t != "NoneType" else "null" for t in types]
        allowed += [setting_text(v) for v in values]
        return f"{shown}: not a value torch {self.torch} takes; allowed: {', '.join(allowed)}"


# Which torch an interpreter holds, asked without importing it (a tenth of a second, where
# the probe imports torch for about 2 s): its version and Inductor config file's path, size
# and time. The probe's answer is kept in benchflow's cache under these facts.
WHICH_TORCH = """
import json, os
from importlib import metadata
dist = metadata.distribution("torch")
path = str(dist.locate_file("torch/_inductor/config.py"))
stat = os.stat(path)
print(json.dumps([dist.version, path, stat.st_size, stat.st_mtime_ns]))
"""


@functools.lru_cache(maxsize=8)
def inductor_keys(python: str, env: tuple[tuple[str, str], ...] = ()) -> InductorKeys:
    """Ask `python` (with `env` added) which keys its torch._inductor.config has: from
    benchflow's cache where the same torch answered before."""
    try:
        which = ask(python, WHICH_TORCH, dict(env))
    except Unanswered:
        which = None  # no torch to name: the probe says what is wrong
    facts = json.dumps([python, env, which, PROBE]).encode()
    kept = cache_root() / "inductor-keys" / f"{hashlib.sha256(facts).hexdigest()[:16]}.json"
    out = read_json(kept) if which else None
    if out is None:
        try:
            out = ask(python, PROBE, dict(env))
        except Unanswered as exc:
            raise ConfigError(
                f"{INDUCTOR}.* settings are checked against the job's torch, but {python} "
                f"could not list torch._inductor.config's keys: {exc}"
            ) from None
        if which:
            write_json_atomic(kept, out)
    keys = {k: (list(v[0]), list(v[1])) for k, v in out["keys"].items()}
    return InductorKeys(out["torch"], keys)


def check_knobs(jobs: Sequence[Job]) -> None:
    """Every `inductor.<key>=` a job sets, checked against its own torch (ConfigError)."""
    for job in jobs:
        settings = settings_of(job.config.inductor)
        if job.invalid or job.skip or not settings:
            continue
        try:
            python, env = launch(job.config.toolchain)
        except ToolchainError:
            continue  # not built yet (--cfg job): a run checks it once it is built
        found = inductor_keys(python, tuple(sorted(env.items())))
        for key, value in settings.items():
            if why := found.why_not(key, value):
                raise ConfigError(why)
