"""The calibration certificate: which confidence thresholds were certified, for which judge, prompt and rules.

A certificate holds, per (judge rule, risk level), the auto-pass (and, when calibrated, auto-fail)
confidence threshold that ``seqjudge calibrate`` certified, with what it is valid for: the judge model, the
prompt template's hash, the rule set's hash (criteria included) and the labelled dataset's hash. A run or a
comparison uses the thresholds of a certificate that matches its model, template and rules; none matching
means the calibration is stale for it, and its judge rules are advisory (``seqjudge.advisory``).

Certificates are JSON files in a ``certificates`` folder beside the store (as the response cache is), one
file per calibration, never rewritten: plain files, so a certificate can be reviewed and committed, and no
store migration is needed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from seqjudge.errors import InputError

# The rule set's hash is provenance's (the rules and aliases as loaded: a judge rule's criteria and examples
# are in it, a comment or a reordered key is not), the one a run records in its fingerprint.
from seqjudge.provenance import rules_hash as rules_hash

CERTIFICATE_VERSION = 1
FOLDER = "certificates"


class CertifiedRule(BaseModel):
    """The thresholds of one judge rule at one risk level (None: that side is never auto-decided)."""

    rule_id: str
    risk_level: str
    auto_pass: float | None
    auto_fail: float | None = None
    alpha: float
    delta: float
    upper_bound: float | None = None
    n_auto_passed: int = 0
    auto_pass_coverage: float | None = None
    needed: int | None = None


class Certificate(BaseModel):
    version: int = CERTIFICATE_VERSION
    created: str
    model: str
    template_hash: str
    rules_hash: str
    dataset_hash: str
    dataset: str  # the dataset folder's name, for messages and ``calibrate --check``
    confidence_source: str = "stated"
    samples: int = 1
    alpha: float
    delta: float
    rules: list[CertifiedRule] = Field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.model, self.template_hash, self.rules_hash)

    def thresholds(self) -> dict[tuple[str, str], CertifiedRule]:
        return {(r.rule_id, r.risk_level): r for r in self.rules}


# -- hashes ------------------------------------------------------------------------------------------------
def _sha(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def dataset_hash(files: Iterable[Path]) -> str:
    """sha256 over the named files' bytes (a dataset's rules, traces, labels, catalog and examples)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def template_hash() -> str:
    """The judge prompt template's hash, as every judge result's fingerprint records it."""
    from seqjudge.judge.prompt import template_info

    return template_info()[2]


# -- the folder --------------------------------------------------------------------------------------------
def certificates_dir(store: str | Path) -> Path:
    """The certificates folder of a store: beside its database file (``store_dir``)."""
    from seqjudge.defaults import store_dir

    return store_dir(store) / FOLDER


def save_certificate(cert: Certificate, folder: str | Path) -> Path:
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        digest = _sha(cert.model_dump(mode="json"))[:12]
        stamp = cert.created.replace(":", "").replace("-", "")[:15]
        path = folder / f"{stamp}-{cert.dataset}-{digest}.json"
        path.write_text(json.dumps(cert.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write the certificate ({exc.strerror})",
            source=str(folder),
            hint="check the folder's permissions, or give another --store",
        ) from None
    return path


def load_certificates(folder: str | Path) -> list[Certificate]:
    """Every certificate of the folder, newest first; a file that is not one is an error (exit 2), since
    skipping it could make a run advisory, or certified, without saying why."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found: list[Certificate] = []
    for path in sorted(folder.glob("*.json")):
        try:
            found.append(Certificate.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as exc:
            first = exc.errors()[0] if isinstance(exc, ValidationError) else None
            where = ".".join(str(p) for p in first["loc"]) if first else None
            raise InputError(
                f"not a calibration certificate ({first['msg'] if first else exc})",
                source=str(path),
                where=where,
                hint="remove the file, or write a new one with `seqjudge calibrate DATASET --alpha A`",
            ) from None
    found.sort(key=lambda c: c.created, reverse=True)
    return found


def new_certificate(**fields: Any) -> Certificate:
    return Certificate(created=datetime.now(UTC).isoformat(timespec="seconds"), **fields)


# -- lookup ------------------------------------------------------------------------------------------------
def find_certificates(
    model: str,
    template: str,
    rules: str,
    *,
    folder: str | Path,
    confidence_source: str | None = None,
) -> list[Certificate]:
    """The certificates (newest first) made for this judge model, template hash and rules hash (and
    confidence source, when given)."""
    return [
        c
        for c in load_certificates(folder)
        if c.key == (model, template, rules)
        and (confidence_source is None or c.confidence_source == confidence_source)
    ]


def certified_thresholds(
    model: str,
    template: str,
    rules: str,
    *,
    folder: str | Path,
    confidence_source: str | None = None,
) -> dict[tuple[str, str], CertifiedRule] | None:
    """Per (rule id, risk level), the thresholds certified for this judge model, template hash and rules
    hash: the newest certificate's entry for each key (a calibration at another risk level adds its own);
    None when no certificate matches."""
    matching = find_certificates(model, template, rules, folder=folder, confidence_source=confidence_source)
    if not matching:
        return None
    out: dict[tuple[str, str], CertifiedRule] = {}
    for cert in matching:  # newest first: an older certificate only fills keys the newer ones lack
        for key, entry in cert.thresholds().items():
            out.setdefault(key, entry)
    return out


def staleness(
    folder: str | Path, *, dataset: str, model: str, template: str, rules: str, data: str
) -> tuple[Certificate | None, list[str]]:
    """Whether the dataset's calibration still holds: the certificate that matches all four (then no
    change), else the dataset's newest certificate and what changed since it (empty list: fresh)."""
    mine = [c for c in load_certificates(folder) if c.dataset == dataset]
    for cert in mine:
        if (cert.model, cert.template_hash, cert.rules_hash, cert.dataset_hash) == (
            model,
            template,
            rules,
            data,
        ):
            return cert, []
    if not mine:
        return None, [f"no certificate for dataset {dataset!r} in {folder}"]
    newest = mine[0]
    changes = []
    if newest.model != model:
        changes.append(f"the judge model changed ({newest.model} -> {model})")
    if newest.template_hash != template:
        changes.append(f"the prompt template changed ({newest.template_hash[:12]} -> {template[:12]})")
    if newest.rules_hash != rules:
        changes.append(f"the rules changed ({newest.rules_hash[:12]} -> {rules[:12]})")
    if newest.dataset_hash != data:
        changes.append(f"the labelled dataset changed ({newest.dataset_hash[:12]} -> {data[:12]})")
    return newest, changes
