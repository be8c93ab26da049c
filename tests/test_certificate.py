"""Part 4 of issue 18: the calibration certificate, its hashes and the lookup of certified thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqjudge.certificate import (
    CertifiedRule,
    certificates_dir,
    certified_thresholds,
    new_certificate,
    rules_hash,
    save_certificate,
    template_hash,
)
from seqjudge.errors import InputError
from seqjudge.judge.prompt import template_info
from seqjudge.rules.model import RuleSet

RULES = RuleSet.model_validate(
    {
        "rules": [
            {
                "id": "confirm",
                "type": "judge",
                "description": "Confirm before a write.",
                "criteria": {"pass": ["a"], "fail": ["x"]},
            }
        ]
    }
)


def cert(level: str, auto_pass: float | None, **fields: object):
    base = {
        "model": "openai:m",
        "template_hash": "T",
        "rules_hash": "R",
        "dataset_hash": "D",
        "dataset": "suite",
        "alpha": 0.05,
        "delta": 0.05,
        "rules": [
            CertifiedRule(rule_id="confirm", risk_level=level, auto_pass=auto_pass, alpha=0.05, delta=0.05)
        ],
    }
    return new_certificate(**{**base, **fields})


def test_rules_hash_covers_criteria_but_not_the_file_name() -> None:
    other = RULES.model_copy(update={"source": "elsewhere.yaml"})
    assert rules_hash(other) == rules_hash(RULES)
    changed = RuleSet.model_validate(
        {
            "rules": [
                {
                    "id": "confirm",
                    "type": "judge",
                    "description": "Confirm before a write.",
                    "criteria": {"pass": ["b"], "fail": ["x"]},
                }
            ]
        }
    )
    assert rules_hash(changed) != rules_hash(RULES)
    assert template_hash() == template_info()[2]


def test_lookup_matches_model_template_and_rules_only(tmp_path: Path) -> None:
    folder = certificates_dir(tmp_path / "seqjudge.db")
    assert certified_thresholds("openai:m", "T", "R", folder=folder) is None  # no folder yet
    save_certificate(cert("high", 0.9), folder)
    found = certified_thresholds("openai:m", "T", "R", folder=folder)
    assert found is not None and found[("confirm", "high")].auto_pass == 0.9
    for key in (("openai:other", "T", "R"), ("openai:m", "T2", "R"), ("openai:m", "T", "R2")):
        assert certified_thresholds(*key, folder=folder) is None
    assert certified_thresholds("openai:m", "T", "R", folder=folder, confidence_source="samples") is None


def test_newest_certificate_wins_per_rule_and_level(tmp_path: Path) -> None:
    folder = tmp_path / "certificates"
    old = cert("high", 0.9).model_copy(update={"created": "2026-01-01T00:00:00+00:00"})
    save_certificate(old, folder)
    save_certificate(cert("high", None).model_copy(update={"created": "2026-02-01T00:00:00+00:00"}), folder)
    save_certificate(cert("medium", 0.7).model_copy(update={"created": "2026-01-15T00:00:00+00:00"}), folder)
    found = certified_thresholds("openai:m", "T", "R", folder=folder)
    assert found is not None
    assert found[("confirm", "high")].auto_pass is None  # the newer calibration could not certify it
    assert found[("confirm", "medium")].auto_pass == 0.7


def test_a_broken_certificate_file_is_an_error_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "certificates"
    path = save_certificate(cert("high", 0.9), folder)
    data = json.loads(path.read_text())
    del data["rules_hash"]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        certified_thresholds("openai:m", "T", "R", folder=folder)
    assert str(path) in str(err.value) and "rules_hash" in str(err.value)
