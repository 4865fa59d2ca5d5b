"""`benchflow models suite=huggingface|timm`: a suite's models, and whether
each runs here: its skip lists applied, the models that need a download, and the
package that builds them. Reads the mirror only (no torch, transformers or timm)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from benchflow.config.schema import SuiteConfig
from benchflow.models.hub import needs_download
from benchflow.suite.rules import TEST_KEY, skip_reason
from benchflow.suite.suites import Suite, model_names, with_rules


def skipped(config: SuiteConfig, name: str, device: str, tests: Sequence[str]) -> dict[str, str]:
    """The tests the suite's lists skip the model in, each with the list's name."""
    return {
        test: why.split("`")[1]  # the list's name, e.g. skip.device.cpu
        for test in tests
        if (why := skip_reason(config, name, test, device))
    }


def verdict(blocked: dict[str, str], tests: Sequence[str]) -> str:
    """`yes`, `<test> only (...)` or `no: ...`, naming the lists that skip it."""
    if len(blocked) == len(tests):
        return "no: " + "; ".join(f"{t}: {w}" for t, w in blocked.items())
    if blocked:
        ((test, why),) = blocked.items()
        other = next(t for t in tests if t != test)
        return f"{other} only ({test}: {why})"
    return "yes"


def status(config: SuiteConfig, name: str, device: str) -> str:
    """`yes`, `<test> only (...)` or `no: ...`, naming the list or the download."""
    blocked = skipped(config, name, device, list(TEST_KEY))
    if len(blocked) < len(TEST_KEY) and needs_download(name):
        return "no: needs a download from the Hugging Face Hub"
    return verdict(blocked, list(TEST_KEY))


def show(suite: Suite, device: str) -> int:
    config = with_rules(SuiteConfig(name=suite.name))
    sizes = (config.rules.get("batch_size") or {}).get("inference") or {}
    print(f"Suite {suite.name}: PyTorch's {suite.upstream} and {suite.models_list}, on this")
    print(f"machine ({device}). `suite={suite.name} model=<name>` runs one; the models are")
    print("built from their configurations with random weights, nothing is downloaded.")
    print("Skip lists are applied (suite.skip_lists=false overrides them).\n")
    missing = suite.package and importlib.util.find_spec(suite.package) is None
    if missing:
        print(
            f"{suite.package} is not installed: `make setup` in a checkout; elsewhere "
            f"`pip install {suite.package} torch==<your torch>` (the wheel's `suites` "
            "extra; naming your torch keeps it: docs/your-torch.md).\n"
        )
    print(f"{'model':<40} {'list batch size':>15}  runs here")
    for name in model_names(suite):
        state = f"no: {suite.package} is not installed" if missing else status(config, name, device)
        print(f"{name:<40} {sizes.get(name, ''):>15}  {state}")
    return 0
