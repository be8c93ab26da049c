"""`seqjudge calibrate --alpha/--delta/--auto-fail` on a golden dataset judged with stated confidences, the
certificate it writes and `calibrate --check` (issue 18, parts 2 and 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calibrate_helpers import ByTraceProvider, judge_output
from seqjudge.bounds import clopper_pearson_upper
from seqjudge.calibrate_guarantee import GuaranteeSettings
from seqjudge.calibrate_runs import calibrate_golden
from seqjudge.certificate import load_certificates, rules_hash, template_hash
from seqjudge.cli import run
from seqjudge.golden import load_dataset
from seqjudge.judge.providers import ProviderProfile, registry
from test_calibrate import RULES

# 80 traces. The judge passes 65 labelled-pass traces at confidence 0.95; at 0.55 it passes 5 labelled-pass
# and 6 labelled-fail ones; it fails the other 4 labelled-fail ones at 0.9.
PLAN: list[tuple[str, str, float]] = (
    [("pass", "passed", 0.95)] * 65
    + [("pass", "passed", 0.55)] * 5
    + [("fail", "passed", 0.55)] * 6
    + [("fail", "failed", 0.9)] * 4
)


def make_dataset(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "rules.yaml").write_text(RULES)
    traces, labels = [], []
    for i, (label, _, _) in enumerate(PLAN):
        tid = f"t{i:02d}"
        traces.append(
            {
                "trace_id": tid,
                "calls": [
                    {"tool_name": "Lookup", "arguments": {"customer_id": f"C-{tid}"}},
                    {"tool_name": "Delete", "arguments": {"customer_id": f"C-{tid}"}},
                ],
            }
        )
        labels.append(
            {
                "trace_id": tid,
                "verdict": label,
                "rules": {"lookup-required": "pass", "confirm-before-delete": label},
                "labeler": "test",
            }
        )
    (root / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    (root / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return root


def replies(dataset: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for i, trace in enumerate(dataset.traces):
        _, said, confidence = PLAN[i]
        failed = ["confirm-before-delete"] if said == "failed" else []
        reply = judge_output(trace, dataset.ruleset, failed, ["lookup-required", "email-limit", *failed])
        reply["rule_decisions"] = [
            {"rule_id": "lookup-required", "decision": "passed", "confidence": 0.99},
            {"rule_id": "email-limit", "decision": "passed", "confidence": 0.99},
            {"rule_id": "confirm-before-delete", "decision": said, "confidence": confidence},
        ]
        out[trace.trace_id] = reply
    return out


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return make_dataset(tmp_path / "suite")


def test_guarantee_per_judge_rule_and_the_certificate(suite: Path, tmp_path: Path) -> None:
    dataset = load_dataset(suite)
    provider = ByTraceProvider(dataset.traces, replies(dataset), model="conf")
    store = tmp_path / "db" / "seqjudge.db"
    report = calibrate_golden(
        suite,
        provider=provider,
        store=store,
        risk_level="high",
        guarantee=GuaranteeSettings(alpha=0.05, delta=0.05, auto_fail=True),
    )
    g = report.guarantee
    assert g is not None and g.risk_level == "high" and g.confidence_source == "stated"
    [rule] = g.rules
    assert rule.rule_id == "confirm-before-delete"
    # 65 clean passes at 0.95 certify (bound 0.045 <= 0.05); adding the 0.55s (6 wrong of 76) does not.
    assert {k: rule.guarantee[k] for k in ("alpha", "delta", "threshold", "n_auto_passed")} == {
        "alpha": 0.05,
        "delta": 0.05,
        "threshold": 0.95,
        "n_auto_passed": 65,
    }
    assert rule.guarantee["upper_bound"] == pytest.approx(clopper_pearson_upper(0, 65, 0.05))
    assert rule.guarantee["auto_pass_coverage"] == pytest.approx(65 / 80)
    # Only 4 judge fails: auto-fail cannot be certified, and the report says how many it would take.
    assert rule.auto_fail is not None and rule.auto_fail["threshold"] is None
    assert rule.auto_fail["needed"] == 59 and "59" in rule.auto_fail["reason"]
    # Coverage against alpha: none at 0.01 (needs 299 clean passes), 65/80 from 0.05 up to where the
    # 0.55s fit too (6 of 76 wrong: bound 0.15 at delta 0.05).
    assert rule.coverage_by_alpha["0.01"] == 0.0
    assert rule.coverage_by_alpha["0.05"] == pytest.approx(65 / 80)
    assert rule.coverage_by_alpha["0.2"] == pytest.approx(76 / 80)

    [cert] = load_certificates(store.parent / "certificates")
    assert str(report.guarantee.certificate).startswith(str(store.parent / "certificates"))
    assert (cert.model, cert.template_hash, cert.rules_hash) == (
        "scripted:conf",
        template_hash(),
        rules_hash(dataset.ruleset),
    )
    [entry] = cert.rules
    assert (entry.rule_id, entry.risk_level, entry.auto_pass, entry.auto_fail) == (
        "confirm-before-delete",
        "high",
        0.95,
        None,
    )


@pytest.fixture
def conf_provider(monkeypatch: pytest.MonkeyPatch, suite: Path) -> None:
    dataset = load_dataset(suite)
    script = replies(dataset)

    def factory(model: str, **options: Any) -> ByTraceProvider:
        return ByTraceProvider(dataset.traces, script, model=model, **options)

    monkeypatch.setitem(registry._REGISTRY, "conf", ProviderProfile(name="conf", factory=factory))


def test_cli_json_text_plot_and_check(
    suite: Path, tmp_path: Path, conf_provider: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "db" / "seqjudge.db"
    out_json, png = tmp_path / "cal.json", tmp_path / "cal.png"
    base = ["calibrate", str(suite), "--model", "conf:m", "--store", str(store)]
    assert run([*base, "--alpha", "0.05", "--delta", "0.05", "-o", str(out_json), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out_json.read_text())["guarantee"]
    assert data["rules"][0]["guarantee"]["threshold"] == 0.95
    assert "auto-pass: confidence >= 0.950: 65 of 80 labelled decisions (81.2%)" in text
    assert "auto-pass coverage by alpha: 0.01: 0.0%" in text
    assert (tmp_path / "cal-guarantee.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    check = ["calibrate", str(suite), "--check", "--model", "conf:m", "--store", str(store)]
    assert run(check) == 0
    assert "holds" in capsys.readouterr().out
    assert run(["calibrate", str(suite), "--check", "--model", "conf:other", "--store", str(store)]) == 1
    assert "the judge model changed (conf:m -> conf:other)" in capsys.readouterr().out
    rules = suite / "rules.yaml"
    rules.write_text(rules.read_text().replace("Confirm with the user", "Ask the user"))
    assert run(check) == 1
    assert "the rules changed" in capsys.readouterr().out
    labels = suite / "labels.jsonl"
    rules.write_text(RULES)
    labels.write_text(labels.read_text().replace('"labeler": "test"', '"labeler": "someone"', 1))
    assert run(check) == 1
    assert "the labelled dataset changed" in capsys.readouterr().out
    assert run(["calibrate", str(suite), "--alpha", "0", "--model", "conf:m", "--store", str(store)]) == 2


def test_check_without_any_certificate_says_none_exists(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "db" / "seqjudge.db"
    assert run(["calibrate", str(suite), "--check", "--model", "conf:m", "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert "has no calibration certificate" in out and "stale" not in out
    assert f"run `seqjudge calibrate {suite}`" in out


def scores_file(path: Path, dataset: Any, **line_extra: Any) -> Path:
    lines = []
    for i, trace in enumerate(dataset.traces):
        _, said, confidence = PLAN[i]
        record = {
            "trace_id": trace.trace_id,
            "score": 0.0 if said == "failed" else 1.0,
            "rules": {"confirm-before-delete": {"decision": said, "confidence": confidence}},
            **line_extra,
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_external_scores_with_rule_decisions_certify_without_a_certificate(
    suite: Path, tmp_path: Path
) -> None:
    dataset = load_dataset(suite)
    report = calibrate_golden(
        suite,
        scores_file=scores_file(tmp_path / "s.jsonl", dataset),
        store=tmp_path / "db" / "x.db",
        guarantee=GuaranteeSettings(),
    )
    g = report.guarantee
    assert g is not None and g.rules[0].guarantee["threshold"] == 0.95
    assert g.rules[0].guarantee["n_auto_passed"] == 65 and g.certificate is None
    assert "no certificate is written" in (g.note or "")
    assert not (tmp_path / "db" / "certificates").exists()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"labell": "x"}, "unknown key(s) labell"),
        ({"rules": {"lookup-required": {"decision": "passed", "confidence": 1.0}}}, "is not a `judge` rule"),
        ({"rules": {"confirm-before-delete": {"decision": "ok", "confidence": 1.0}}}, "expected exactly"),
        ({"rules": {"confirm-before-delete": {"decision": "passed", "confidence": 2}}}, "expected exactly"),
    ],
)
def test_bad_rule_scores_are_located_errors(
    suite: Path, tmp_path: Path, extra: dict[str, Any], words: str
) -> None:
    from seqjudge.calibrate_runs import read_scores
    from seqjudge.errors import InputError

    dataset = load_dataset(suite)
    path = scores_file(tmp_path / "s.jsonl", dataset, **extra)
    with pytest.raises(InputError) as err:
        read_scores(path, dataset, {})
    assert words in str(err.value) and "line 1" in str(err.value)
