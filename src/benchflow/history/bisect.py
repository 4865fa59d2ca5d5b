"""The first release that regressed, by binary search between a good and a bad toolchain
(`benchflow bisect`, docs/toolchains.md#bisect).

The releases between the two pins come from PyPI (final releases with a wheel for this
interpreter) or from the user. Each step is a real job in its release's environment,
judged against the good toolchain's as `report --compare` judges a row: a significant
regression, or a job that did not end ok, is bad; too little data to tell is said so.
"""

from __future__ import annotations

import json
import sys
import sysconfig
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

PYPI = "https://pypi.org/pypi/{package}/json"


@dataclass(frozen=True)
class Step:
    release: str
    bad: bool
    said: str  # the verdict in words
    undecided: bool = False  # too little data to tell a change from the host's noise


def search(releases: Sequence[str], judge: Callable[[str], Step]) -> tuple[int, int, list[Step]]:
    """Binary search over `releases` (oldest first, between the good and the bad): (the
    last good index, -1 for the good toolchain; the first bad, len(releases) for the
    bad toolchain; the steps as judged). Assumes one boundary, as bisection does."""
    low, high = -1, len(releases)
    steps: list[Step] = []
    while high - low > 1:
        mid = (low + high) // 2
        step = judge(releases[mid])
        steps.append(step)
        if step.bad:
            high = mid
        else:
            low = mid
    return low, high, steps


def _wheel_fits(filename: str) -> bool:
    """A wheel this interpreter can install: pure Python, or this CPython's on this platform."""
    if not filename.endswith(".whl"):
        return False
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    machine = sysconfig.get_platform().split("-")[-1]  # linux-x86_64 -> x86_64
    return filename.endswith("-none-any.whl") or (tag in filename and machine in filename)


def releases_between(package: str, good: str, bad: str, timeout_s: float = 30.0) -> list[str]:
    """The final releases of `package` strictly between `good` and `bad` that have a wheel
    for this interpreter, oldest first, from PyPI."""
    with urllib.request.urlopen(PYPI.format(package=package), timeout=timeout_s) as answer:
        data = json.load(answer)
    low, high = Version(good), Version(bad)
    found = []
    for text, files in data.get("releases", {}).items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease or not low < version < high:
            continue
        if any(_wheel_fits(f.get("filename", "")) and not f.get("yanked") for f in files):
            found.append(version)
    return [str(v) for v in sorted(found)]
