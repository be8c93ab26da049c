#!/usr/bin/env python3
"""Select the labelled tau-retail subset, deterministically.

Usage (from the repository root):

    python golden_traces/tau-retail/select.py                 # writes golden_traces/tau-retail/traces.jsonl
    python golden_traces/tau-retail/select.py --check         # exit 1 if traces.jsonl differs from a fresh selection
    python golden_traces/tau-retail/select.py --source PATH   # default: ../shared/data/tau/traces.jsonl

What it does
------------
1. Reads every line of the source file (the tau-bench / tau2-bench traces in seqjudge's native format) and
   keeps the retail ones (`metadata.domain == "retail"`). Lines are copied byte for byte: the output is a
   subset of the source lines, in source order, never re-serialised.
2. Must-include: every retail trace that a small screen below flags as *possibly* breaking one of the exact
   rules of rules.yaml (authentication first; order details before an order write; at most one
   modify-items / exchange per order; no modify/cancel after modify-items; nothing after a transfer; a
   cancellation reason outside the two allowed ones). The screen only decides what to include; it does not
   label anything (labels.jsonl was written by reading each trace).
3. Stratifies by `metadata.agent` x `metadata.reward`: for every agent present, PER_AGENT traces, of which
   each reward value present gets at least MIN_PER_REWARD (or all it has), the rest going to the most
   common reward. Must-include traces count toward their stratum's quota (and may exceed it).
4. Fills each stratum round-robin over feature buckets, so that each holds a mix: traces with a failed call,
   traces with a transfer to a human, traces with a write and no failure, traces without any write. Inside a
   bucket, traces are taken in the order of sha256(trace_id), a fixed pseudo-random order.

No randomness, no clock, no network: the same source gives the same subset.
"""
import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "tau" / "traces.jsonl"
OUT = HERE / "traces.jsonl"

PER_AGENT = 24
MIN_PER_REWARD = 6

AUTH = {"find_user_id_by_email", "find_user_id_by_name_zip"}
NO_AUTH_NEEDED = {"think", "calculate", "transfer_to_human_agents"}
ORDER_WRITES = {"cancel_pending_order", "modify_pending_order_address", "modify_pending_order_items",
                "modify_pending_order_payment", "return_delivered_order_items",
                "exchange_delivered_order_items"}
WRITES = ORDER_WRITES | {"modify_user_address"}
AFTER_ITEMS_FORBIDDEN = {"cancel_pending_order", "modify_pending_order_address",
                         "modify_pending_order_items", "modify_pending_order_payment"}
CANCEL_REASONS = {"no longer needed", "ordered by mistake"}


def screen(trace):
    """Names of exact rules the trace might break (a coarse screen, for selection only)."""
    calls = trace["calls"]
    hits = set()
    for i, c in enumerate(calls):
        if c["tool_name"] in AUTH | NO_AUTH_NEEDED:
            continue
        if not any(calls[j]["tool_name"] in AUTH and calls[j].get("status", "ok") == "ok" for j in range(i)):
            hits.add("auth")
        break
    by_order = defaultdict(list)
    for i, c in enumerate(calls):
        if "order_id" in c.get("arguments", {}):
            by_order[json.dumps(c["arguments"]["order_id"], sort_keys=True)].append(i)
    for idx in by_order.values():
        names = [calls[i]["tool_name"] for i in idx]
        writes = [k for k, n in enumerate(names) if n in ORDER_WRITES]
        if writes and not any(n == "get_order_details" and calls[idx[k]].get("status", "ok") == "ok"
                              for k, n in enumerate(names[:writes[0]])):
            hits.add("details")
        for tool in ("modify_pending_order_items", "exchange_delivered_order_items"):
            if names.count(tool) > 1:
                hits.add("once")
        if "modify_pending_order_items" in names:
            first = names.index("modify_pending_order_items")
            if any(n in AFTER_ITEMS_FORBIDDEN for n in names[first + 1:]):
                hits.add("after_items")
    names = [c["tool_name"] for c in calls]
    if "transfer_to_human_agents" in names and names.index("transfer_to_human_agents") < len(names) - 1:
        hits.add("after_transfer")
    if any(c["tool_name"] == "cancel_pending_order" and c.get("arguments", {}).get("reason") not in CANCEL_REASONS
           for c in calls):
        hits.add("cancel_reason")
    return hits


def bucket(trace):
    calls = trace["calls"]
    if any(c.get("status", "ok") == "error" for c in calls):
        return 0  # has a failed call
    if any(c["tool_name"] == "transfer_to_human_agents" for c in calls):
        return 1  # transfer to a human
    if any(c["tool_name"] in WRITES for c in calls):
        return 2  # writes, no failure
    return 3      # read-only


def h(trace_id):
    return hashlib.sha256(trace_id.encode("utf-8")).hexdigest()


def quotas(strata):
    by_agent = defaultdict(dict)
    for (agent, reward), items in strata.items():
        by_agent[agent][reward] = len(items)
    q = {}
    for agent, rewards in by_agent.items():
        common = max(rewards, key=lambda r: (rewards[r], r))
        for r, n in rewards.items():
            if r != common:
                q[(agent, r)] = min(n, MIN_PER_REWARD)
        q[(agent, common)] = min(rewards[common], max(MIN_PER_REWARD, PER_AGENT - sum(
            q[(agent, r)] for r in rewards if r != common)))
    return q


def select(source):
    raw = source.read_bytes().splitlines(keepends=True)
    items = []  # (line_no, raw_line, trace)
    for n, line in enumerate(raw):
        if not line.strip():
            continue
        t = json.loads(line)
        if t.get("metadata", {}).get("domain") == "retail":
            items.append((n, line, t))
    strata = defaultdict(list)
    for it in items:
        md = it[2]["metadata"]
        strata[(md["agent"], md["reward"])].append(it)
    q = quotas(strata)
    chosen = {}
    reasons = {}
    for key in sorted(strata, key=lambda k: (k[0], k[1])):
        members = sorted(strata[key], key=lambda it: h(it[2]["trace_id"]))
        must = [it for it in members if screen(it[2])]
        for it in must:
            chosen[it[0]] = it
            reasons[it[2]["trace_id"]] = "screen:" + ",".join(sorted(screen(it[2])))
        buckets = defaultdict(list)
        for it in members:
            if it[0] not in chosen:
                buckets[bucket(it[2])].append(it)
        taken = len(must)
        while taken < q[key] and any(buckets.values()):
            for b in sorted(buckets):
                if taken >= q[key]:
                    break
                if buckets[b]:
                    it = buckets[b].pop(0)
                    chosen[it[0]] = it
                    reasons[it[2]["trace_id"]] = f"stratum-bucket:{b}"
                    taken += 1
    picked = [chosen[n] for n in sorted(chosen)]
    return picked, q, reasons


def main():
    ap = argparse.ArgumentParser(description="Select the labelled tau-retail subset deterministically.")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args()
    picked, q, reasons = select(a.source)
    data = b"".join(line if line.endswith(b"\n") else line + b"\n" for _, line, _ in picked)
    counts = defaultdict(int)
    for _, _, t in picked:
        counts[(t["metadata"]["agent"], t["metadata"]["reward"])] += 1
    for key in sorted(q):
        print(f"{key[0]:22} reward={key[1]}: quota {q[key]:2}, selected {counts[key]:2}", file=sys.stderr)
    flagged = sum(1 for r in reasons.values() if r.startswith("screen:"))
    print(f"selected {len(picked)} traces ({flagged} flagged by the exact-rule screen)", file=sys.stderr)
    if a.check:
        same = a.out.exists() and a.out.read_bytes() == data
        print("traces.jsonl is up to date" if same else "traces.jsonl differs from a fresh selection",
              file=sys.stderr)
        sys.exit(0 if same else 1)
    a.out.write_bytes(data)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
