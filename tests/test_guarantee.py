"""Risk-controlled thresholds (Learn-then-Test): exact small cases, a seeded simulation of the guarantee."""

from __future__ import annotations

import random

import pytest

from seqjudge.bounds import clopper_pearson_upper
from seqjudge.guarantee import LabelledDecision, certify, certify_rules, more_labels


def passes(n: int, confidence: float, errors: int = 0, rule: str = "r") -> list[LabelledDecision]:
    return [LabelledDecision(rule, "passed", confidence, "fail" if i < errors else "pass") for i in range(n)]


def test_59_clean_passes_certify_alpha_005_and_58_do_not() -> None:
    g = certify(passes(59, 0.9), 0.05, 0.05)
    assert g.threshold == 0.9
    assert g.n_auto_passed == 59 and g.errors == 0
    assert g.upper_bound == pytest.approx(clopper_pearson_upper(0, 59, 0.05))
    assert g.auto_pass_coverage == 1.0
    short = certify(passes(58, 0.9), 0.05, 0.05)
    assert short.threshold is None and short.upper_bound is None
    assert short.needed == 59
    assert "59" in (short.reason or "") and "1 more" in (short.reason or "")


def test_the_loosest_certified_threshold_stops_before_the_errors() -> None:
    # 80 clean passes at 0.95, then 30 passes at 0.6 of which 15 are wrong: 0.6 cannot be certified.
    data = passes(80, 0.95) + passes(30, 0.6, errors=15) + [LabelledDecision("r", "failed", 0.99, "fail")]
    g = certify(data, 0.05, 0.05)
    assert g.threshold == 0.95  # the lowest confidence auto-passed: the 0.6s stay out
    assert g.n_auto_passed == 80
    assert g.auto_pass_coverage == pytest.approx(80 / 111)
    assert g.steps[-1].rejected is False and g.steps[-1].n == 110


def test_no_confidence_is_never_auto_passed() -> None:
    data = passes(100, 0.9) + [LabelledDecision("r", "passed", None, "fail") for _ in range(5)]
    g = certify(data, 0.05, 0.05)
    assert g.n_auto_passed == 100 and g.no_confidence == 5 and g.decisions == 105


def test_too_many_errors_say_labels_cannot_help() -> None:
    g = certify(passes(200, 0.9, errors=20), 0.05, 0.05)
    assert g.threshold is None and g.needed is None
    assert "more labels cannot certify" in (g.reason or "")


def test_auto_fail_mirrors_auto_pass() -> None:
    data = [LabelledDecision("r", "failed", 0.8, "fail") for _ in range(60)] + passes(10, 0.9)
    g = certify(data, 0.05, 0.05, side="fail")
    assert g.threshold == 0.8 and g.n_auto_passed == 60
    public = g.public()
    assert public["n_auto_failed"] == 60 and "n_auto_passed" not in public
    assert public["auto_fail_coverage"] == pytest.approx(60 / 70)


def test_certify_rules_gives_every_rule_an_entry() -> None:
    out = certify_rules(passes(70, 0.9, rule="a"), "high", auto_fail=True, rule_ids=["a", "b"])
    assert [(r.rule_id, r.risk_level) for r in out] == [("a", "high"), ("b", "high")]
    assert out[0].guarantee.threshold == 0.9 and out[0].auto_fail is not None
    assert out[1].guarantee.threshold is None and out[1].guarantee.decisions == 0
    assert more_labels(out[0].guarantee) == pytest.approx(clopper_pearson_upper(0, 140, 0.05))


def test_guarantee_holds_on_a_synthetic_population() -> None:
    """Calibrate on many samples from a population with a known error curve: P(label fail | judge pass,
    confidence c) = 0.3 (1 - c), c uniform, so the error rate among passes with c >= t is 0.15 (1 - t).
    The realised error at the chosen threshold must exceed alpha in at most about delta of the draws."""
    rng = random.Random(20261201)
    alpha = delta = 0.1
    draws, exceeded, certified = 300, 0, 0
    for _ in range(draws):
        data = []
        for _ in range(400):
            c = rng.random()
            data.append(
                LabelledDecision("r", "passed", c, "fail" if rng.random() < 0.3 * (1 - c) else "pass")
            )
        g = certify(data, alpha, delta)
        if g.threshold is not None:
            certified += 1
            exceeded += 0.15 * (1 - g.threshold) > alpha
    # Binomial(300, 0.1) exceeds 0.1 + 3 sd (~0.152) with probability < 0.2%; the seed makes it fixed.
    assert exceeded / draws <= delta + 3 * (delta * (1 - delta) / draws) ** 0.5
    assert certified > draws // 2  # and the procedure is not vacuous: it does certify thresholds
