"""`seqjudge init`'s starter suite: a config, a rule file with one rule of each common type, a tool catalog
and two sample traces (one passing, one failing), so that `seqjudge run` works in the folder at once; and
the JSON Schemas the config and the rule file name for YAML editors (seqjudge.schema).

The files are written as text (not dumped from models) so they keep the comments a newcomer reads first.
``tests/test_first_run.py`` runs `init` then `run` and `check` and holds each rule to its sample outcome.
"""

from __future__ import annotations

import json
from pathlib import Path

from seqjudge.defaults import CONFIG_FILE
from seqjudge.errors import InputError
from seqjudge.schema import SCHEMA_FILES, modeline, schema_text

# Each YAML file names its JSON Schema, written beside it, so that YAML editors complete and check it offline.
CONFIG = (
    modeline("config")
    + """
# seqjudge.yaml: this suite's settings (written by `seqjudge init`; paths are relative to this file).
# `seqjudge run` in this folder reads it; `seqjudge run path/to/this/folder` works from anywhere.
rules: rules.yaml
traces: traces.jsonl        # your agent's traces: native JSON/JSONL, or a framework's log (docs/traces.md)
catalog: catalog.json       # the tools your agent has: a rule naming any other tool is an error
risk_level: medium
threshold: 0.85             # a trace scoring below this goes to review
store: .seqjudge/seqjudge.db
# model: openai:gpt-4o      # the LLM judge decides `judge` rules (needs OPENAI_API_KEY); without a model
#                           # they are reported as deferred and the verdicts are the engine's
"""
)

RULES = (
    modeline("rules")
    + """
# rules.yaml: one rule of each common type, for the support agent of traces.jsonl. Edit or replace them.
# Every rule type and its exact meaning: docs/rules.md in seqjudge's repository.
aliases:
  Write: [cancel_order, refund_order]       # an alias names several tools at once

rules:
  - id: identity-verified                   # require: a successful call must exist
    type: require
    tool: verify_identity
    description: Every session verifies the customer's identity.

  - id: verify-before-write                 # before: a successful `first` in an earlier step than `then`
    type: before
    first: verify_identity
    then: Write

  - id: read-order-before-write             # same: the rule holds per order_id value ("that order")
    type: before
    first: get_order
    then: Write
    same: [order_id]

  - id: no-admin-tools                      # blocklist: no tool whose name contains the pattern
    type: blocklist
    pattern: admin_

  - id: one-email                           # max_calls: at most `max` attempts
    type: max_calls
    tool: send_email
    max: 1
    severity: warning                       # a warning lowers the score; a critical rule fails the trace

  - id: find-customer-first                 # eventually: a successful call within the first N steps
    type: eventually
    tool: find_customer
    within: 2

  - id: nothing-after-handoff               # never_after: once the trigger ran, the tool is forbidden
    type: never_after
    trigger: escalate_to_human
    forbidden: Write

  - id: cancel-flow                         # sequence: these tools succeed in this order (gaps allowed)
    type: sequence
    tools: [get_order, cancel_order]

  - id: email-after-cancel                  # after: each trigger is followed by `then` within N steps
    type: after
    trigger: cancel_order
    then: send_email
    within: 1

  - id: order-id-from-a-source              # lineage: the value acted on came from somewhere, earlier
    type: lineage
    tool: Write
    argument: order_id                      # a JMESPath into the call's arguments
    from:
      - {output: get_order, path: order_id} # what a lookup returned (a JMESPath into its output)
      - {user: true}                        # or what the customer wrote
    normalize: [trim, lowercase]

  - id: confirm-before-write                # judge: only the LLM judge decides it (deferred without a model)
    type: judge
    description: Obtain the customer's explicit yes before any write.
    applies_to: Write
    criteria:
      pass: ["Before the call, the agent stated the action and the customer then said yes to it."]
      fail: ["No yes before the call.", "The yes came only after the call."]
"""
)


def _tool(name: str, kind: str, description: str, **parameters: str) -> dict[str, object]:
    return {
        "name": name,
        "kind": kind,
        "description": description,
        "parameters": {k: {"type": "str", "description": v} for k, v in parameters.items()},
    }


CATALOG = {
    "tools": [
        _tool("find_customer", "read", "Find a customer by e-mail.", email="The customer's e-mail."),
        _tool(
            "verify_identity",
            "read",
            "Check the customer's answer to a security question.",
            customer_id="The customer.",
            answer="The answer given.",
        ),
        _tool("get_order", "read", "Read an order.", order_id="The order."),
        _tool("cancel_order", "write", "Cancel a pending order.", order_id="The order.", reason="Why."),
        _tool("refund_order", "write", "Refund a delivered order.", order_id="The order."),
        _tool("send_email", "write", "E-mail the customer.", customer_id="The customer.", subject="Subject."),
        _tool("escalate_to_human", "generic", "Hand the conversation to a person.", summary="Why."),
        _tool("admin_delete_customer", "write", "Staff only: erase a customer.", customer_id="The customer."),
    ]
}


def _call(tool: str, status: str = "ok", **arguments: str) -> dict[str, object]:
    return {"tool_name": tool, "arguments": arguments, "status": status}


TRACES = [
    {
        "trace_id": "cancel-done-right",
        "calls": [
            _call("find_customer", email="ana@example.com"),
            _call("verify_identity", customer_id="C-1", answer="Lisbon"),
            {**_call("get_order", order_id="A-100"), "output": '{"order_id": "A-100", "status": "pending"}'},
            _call("cancel_order", order_id="A-100", reason="ordered by mistake"),
            _call("send_email", customer_id="C-1", subject="Your order A-100 is cancelled"),
        ],
        "messages": [
            {"role": "user", "content": "Please cancel my order A-100, I ordered it by mistake.", "at": 0},
            {
                "role": "assistant",
                "content": "I'll cancel A-100 (ordered by mistake). Go ahead?",
                "at": 3,
            },
            {"role": "user", "content": "Yes, go ahead.", "at": 3},
        ],
        "context": {"channel": "chat"},
    },
    {
        "trace_id": "refund-without-checks",
        "calls": [
            _call("find_customer", email="bo@example.com"),
            _call("refund_order", order_id="B-200"),
            _call("send_email", customer_id="C-2", subject="Refund"),
            _call("escalate_to_human", summary="customer upset"),
            _call("send_email", customer_id="C-2", subject="Refund, again"),
        ],
        "messages": [
            {"role": "user", "content": "Refund my last order now.", "at": 0},
            {"role": "assistant", "content": "Done, refunded.", "at": 2},
        ],
        "context": {"channel": "chat"},
    },
]


def starter_files() -> dict[str, str]:
    """File name -> text of the starter suite."""
    return {
        CONFIG_FILE: CONFIG,
        "rules.yaml": RULES,
        "catalog.json": json.dumps(CATALOG, indent=2) + "\n",
        "traces.jsonl": "".join(json.dumps(t) + "\n" for t in TRACES),
        **{SCHEMA_FILES[kind]: schema_text(kind) for kind in ("rules", "config")},
    }


def write_starter(folder: Path, *, force: bool = False) -> list[Path]:
    """Write the starter suite into ``folder`` (created if missing). Existing files are refused, all of
    them named, before anything is written, unless ``force``."""
    files = starter_files()
    if folder.exists() and not folder.is_dir():
        raise InputError("not a folder", source=str(folder), hint="give a folder for the starter suite")
    clash = [name for name in files if (folder / name).exists()]
    if clash and not force:
        raise InputError(
            f"{', '.join(clash)} already exist{'s' if len(clash) == 1 else ''}; nothing was written",
            source=str(folder),
            hint="pass --force to overwrite them, or give another folder: seqjudge init DIR",
        )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
