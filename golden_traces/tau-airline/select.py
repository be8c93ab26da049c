#!/usr/bin/env python3
"""Select the labelled tau-airline subset, deterministically.

Usage (from the repository root, or anywhere):

    python3 golden_traces/tau-airline/select.py [--source PATH] [--output PATH] [--list]

By default it reads ``../shared/data/tau/traces.jsonl`` (relative to the repository root) and writes
``golden_traces/tau-airline/traces.jsonl`` next to this script. Lines are copied byte for byte from the
source, in source order, so every selected trace is identical to its original. Running it twice gives
the same file: there is no randomness, only a SHA-256 ordering of trace ids.

How traces are chosen (airline traces only):

1. Every airline trace that breaks one of the ordering rules of ``rules.yaml`` (types ``before``,
   ``never_after``, ``max_calls``, with ``same:`` and aliases) is taken, so that the subset holds the
   real violations. The check here is a small stand-alone evaluator used only to choose traces; it is
   not the engine and the labels do not come from it (they come from reading every trace).
2. Then, for every ``metadata.agent`` and every reward (0.0 / 1.0), the cell is filled up to its quota
   (``QUOTA`` below, split evenly between the two rewards) by a round-robin over feature tags, so that
   each cell mixes writes of every kind, failed calls, transfers, certificates and read-only
   conversations. Within a tag, candidates are taken in order of sha256(trace_id).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "tau" / "traces.jsonl"

# traces per agent (split evenly between reward 0.0 and reward 1.0; forced violators count in it)
QUOTA = {"gpt-4o": 30, "toolorchestra-gpt-5": 16, "gpt-4.1": 12, "gpt-4.1-sft": 12}

WRITE_TAGS = {
    "book_reservation": "book",
    "cancel_reservation": "cancel",
    "update_reservation_flights": "update_flights",
    "update_reservation_baggages": "update_baggages",
    "update_reservation_passengers": "update_passengers",
    "send_certificate": "certificate",
}
TAG_ORDER = [
    "update_passengers",
    "update_baggages",
    "certificate",
    "failed_call",
    "book",
    "cancel",
    "update_flights",
    "transfer",
    "no_write",
]


def key(trace_id: str) -> str:
    return hashlib.sha256(trace_id.encode()).hexdigest()


# ---------------------------------------------------------------- a minimal evaluator (selection only)
def _names(sel, aliases) -> set[str]:
    items = sel if isinstance(sel, list) else [sel]
    out: set[str] = set()
    for it in items:
        if isinstance(it, dict):  # args_match operands are not used in rules.yaml
            it = it["tool"]
        out |= set(aliases.get(it, [it]))
    return out


def _subtraces(calls, same):
    if not same:
        return [list(enumerate(calls))]
    groups: dict[str, list] = {}
    for i, c in enumerate(calls):
        args = c.get("arguments") or {}
        if all(a in args for a in same):
            k = json.dumps([args[a] for a in same], sort_keys=True, separators=(",", ":"))
            groups.setdefault(k, []).append((i, c))
    return list(groups.values())


def broken_rules(trace, rules, aliases) -> list[str]:
    """Ids of the deterministic rules this trace breaks (every call is its own step in this data)."""
    broken = []
    for r in rules:
        t = r["type"]
        for sub in _subtraces(trace["calls"], r.get("same")):
            fail = False
            if t == "before":
                first, then = _names(r["first"], aliases), _names(r["then"], aliases)
                tpos = next((i for i, c in sub if c["tool_name"] in then), None)
                if tpos is not None:
                    fail = not any(
                        c["tool_name"] in first and c.get("status", "ok") == "ok" and i < tpos
                        for i, c in sub
                    )
            elif t == "never_after":
                trig, forb = _names(r["trigger"], aliases), _names(r["forbidden"], aliases)
                a = next((i for i, c in sub if c["tool_name"] in trig), None)
                if a is not None:
                    fail = any(c["tool_name"] in forb and i > a for i, c in sub)
            elif t == "max_calls":
                tools = _names(r["tool"], aliases)
                fail = sum(c["tool_name"] in tools for _, c in sub) > r["max"]
            if fail:
                broken.append(r["id"])
                break
    return broken


def tags(trace) -> set[str]:
    names = [c["tool_name"] for c in trace["calls"]]
    out = {WRITE_TAGS[n] for n in names if n in WRITE_TAGS}
    if not out:
        out.add("no_write")
    if any(c.get("status", "ok") != "ok" for c in trace["calls"]):
        out.add("failed_call")
    if "transfer_to_human_agents" in names:
        out.add("transfer")
    return out


def select(lines: list[bytes], rules_doc) -> list[int]:
    rules = [r for r in rules_doc["rules"] if r["type"] != "judge"]
    aliases = rules_doc.get("aliases", {})
    traces = [json.loads(b) for b in lines]
    chosen: set[int] = set()
    cells: dict[tuple[str, float], list[int]] = {}
    for n, tr in enumerate(traces):
        md = tr["metadata"]
        if md["domain"] != "airline":
            continue
        cells.setdefault((md["agent"], float(md["reward"])), []).append(n)
        if broken_rules(tr, rules, aliases):
            chosen.add(n)
    unknown = {a for a, _ in cells} - set(QUOTA)
    if unknown:
        sys.exit(f"select.py: no quota for agent(s) {sorted(unknown)}; add them to QUOTA")
    for (agent, reward), members in sorted(cells.items()):
        quota = QUOTA[agent] // 2
        pool = sorted(members, key=lambda n: key(traces[n]["trace_id"]))
        picked = [n for n in pool if n in chosen]
        while len(picked) < quota:
            progressed = False
            for tag in TAG_ORDER:
                if len(picked) >= quota:
                    break
                cand = next((n for n in pool if n not in picked and tag in tags(traces[n])), None)
                if cand is not None:
                    picked.append(cand)
                    progressed = True
            if not progressed:
                break
        chosen.update(picked)
    return sorted(chosen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--rules", type=Path, default=HERE / "rules.yaml")
    ap.add_argument("--output", type=Path, default=HERE / "traces.jsonl")
    ap.add_argument("--list", action="store_true", help="also print the chosen ids with their tags")
    a = ap.parse_args()
    lines = [ln for ln in a.source.read_bytes().splitlines(keepends=True) if ln.strip()]
    lines = [ln if ln.endswith(b"\n") else ln + b"\n" for ln in lines]
    rules_doc = yaml.safe_load(a.rules.read_text())
    idx = select(lines, rules_doc)
    a.output.write_bytes(b"".join(lines[n] for n in idx))
    rules = [r for r in rules_doc["rules"] if r["type"] != "judge"]
    aliases = rules_doc.get("aliases", {})
    if a.list:
        for n in idx:
            tr = json.loads(lines[n])
            md = tr["metadata"]
            print(tr["trace_id"], md["reward"], sorted(tags(tr)), broken_rules(tr, rules, aliases))
    print(f"wrote {len(idx)} traces to {a.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
