#!/usr/bin/env python3
"""Print a compact, human-readable view of traces, for reading and labelling them.

Usage (from the repository root or this folder):

    python golden_traces/tau-retail/view.py [TRACE_ID ...] [--file traces.jsonl] [--width 400]

Without TRACE_IDs every trace in the file is printed. Calls and messages are interleaved by the
messages' `at` position (the number of calls made before the message), so the output reads in
conversation order:

    [c5] ok   cancel_pending_order {"order_id": "#W1", "reason": "no longer needed"}  -> {...}
    (@5) USER: yes, please cancel it

`c5` is the 0-based call index used in labels.jsonl notes; `@5` means "5 calls had been made before
this message". Long arguments, outputs and messages are cut at --width characters.
"""
import argparse
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cut(s, width):
    s = s if isinstance(s, str) else json.dumps(s, ensure_ascii=False)
    s = " ".join(s.split())
    return s if len(s) <= width else s[:width] + f" ...[+{len(s) - width}]"


def payment_methods(call):
    """For a get_user_details call, the user's payment methods in short (id=brand/last four/balance)."""
    if call["tool_name"] != "get_user_details" or call.get("status", "ok") != "ok":
        return ""
    text = call.get("output") or ""
    try:
        methods = json.loads(text).get("payment_methods", {})
    except (ValueError, AttributeError):  # output cut at 1,500 characters: scan what is there
        found = re.findall(r'"id": "([a-z_0-9]+)"(?:, "brand": "(\w+)", "last_four": "(\d+)")?', text)
        return "; ".join("/".join(x for x in m if x) for m in found) + " (output cut)"
    return "; ".join(f"{k}=" + "/".join(str(v[x]) for x in ("brand", "last_four", "balance") if x in v)
                     for k, v in methods.items())


def show(trace, width):
    md = trace.get("metadata", {})
    print("=" * 100)
    print(f"{trace['trace_id']}  agent={md.get('agent')} reward={md.get('reward')} "
          f"calls={len(trace['calls'])} msgs={len(trace.get('messages', []))}")
    msgs = sorted(enumerate(trace.get("messages", [])), key=lambda im: (im[1]["at"], im[0]))
    mi = 0
    calls = trace["calls"]
    for ci in range(len(calls) + 1):
        while mi < len(msgs) and msgs[mi][1]["at"] <= ci:
            m = msgs[mi][1]
            print(f"  (@{m['at']}) {m['role'].upper()}: {cut(m.get('content') or '', width)}")
            mi += 1
        if ci < len(calls):
            c = calls[ci]
            out = cut(c.get("output", ""), min(width, 160))
            print(f"    [c{ci}] {c.get('status', 'ok'):5} {c['tool_name']} "
                  f"{json.dumps(c.get('arguments', {}), ensure_ascii=False)}  -> {out}")
            pm = payment_methods(c)
            if pm:
                print(f"           payment methods: {pm}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="*")
    ap.add_argument("--file", default=str(HERE / "traces.jsonl"))
    ap.add_argument("--width", type=int, default=400)
    a = ap.parse_args()
    traces = [json.loads(line) for line in open(a.file, encoding="utf-8") if line.strip()]
    wanted = set(a.ids)
    for t in traces:
        if not wanted or t["trace_id"] in wanted:
            show(t, a.width)


if __name__ == "__main__":
    main()
