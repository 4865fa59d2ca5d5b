"""Baseline sweep against candidate sweep: the regression gate.

A model's time *regressed* when both rules hold:
  1. candidate median > baseline median x (1 + threshold), and
  2. the repeats' interquartile ranges do not overlap (candidate Q1 > baseline Q3).
Rule 2 keeps noise from being called a regression: when the spreads overlap,
the slowdown is reported as "slower, within noise" and does not fail the gate.
With a single repeat the IQR is empty and rule 1 decides alone.
An improvement is the mirror image. A job that passed in the baseline and did
not in the candidate (a failure, a crash, a timeout, or accuracy that broke) is
*broken* and fails the gate too. Models only one side ran are listed, never
dropped, and do not fail it.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchflow.report.model import Entry, Report

REGRESSED = "regressed"
BROKEN = "broken"
IMPROVED = "improved"
FAILING = (REGRESSED, BROKEN)


@dataclass
class Change:
    model: str
    test: str
    config: str
    base: Entry | None
    cand: Entry | None
    verdict: str
    detail: str

    @property
    def ratio(self) -> float | None:
        """candidate time / baseline time: > 1 is slower."""
        if self.base and self.cand and self.base.time_s and self.cand.time_s:
            return self.cand.time_s / self.base.time_s
        return None

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING


def _judge(base: Entry, cand: Entry, threshold: float) -> tuple[str, str]:
    if base.passed and not cand.passed:
        what = cand.status if cand.status != "ok" else f"accuracy {cand.verification}"
        return BROKEN, f"passed in the baseline, {what} in the candidate {cand.error}".rstrip()
    if not base.passed and cand.passed:
        return "fixed", "passes now"
    if not base.passed:
        return "still failing", cand.status if cand.status != "ok" else cand.verification
    assert base.time_s and cand.time_s
    ratio = cand.time_s / base.time_s
    apart_slower = (cand.q1_s or cand.time_s) > (base.q3_s or base.time_s)
    apart_faster = (cand.q3_s or cand.time_s) < (base.q1_s or base.time_s)
    if ratio > 1 + threshold:
        if apart_slower:
            return REGRESSED, f"{ratio - 1:+.1%}, IQRs apart"
        return "slower, within noise", f"{ratio - 1:+.1%}, IQRs overlap"
    if ratio < 1 / (1 + threshold):
        if apart_faster:
            return IMPROVED, f"{ratio - 1:+.1%}, IQRs apart"
        return "faster, within noise", f"{ratio - 1:+.1%}, IQRs overlap"
    return "same", f"{ratio - 1:+.1%}, within {threshold:.0%}"


def compare(base: Report, cand: Report, threshold: float) -> list[Change]:
    """One change per (model, test, configuration) that either side has."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    b, c = base.lookup(), cand.lookup()
    changes = []
    for key in [*b, *(k for k in c if k not in b)]:
        model, test, config = key
        be, ce = b.get(key), c.get(key)
        if be is None:
            verdict, detail = "new", "only in the candidate"
        elif ce is None:
            verdict, detail = "missing", "only in the baseline"
        else:
            verdict, detail = _judge(be, ce, threshold)
        changes.append(Change(model, test, config, be, ce, verdict, detail))
    return changes
