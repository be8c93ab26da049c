"""Run the shell commands that documentation shows, as written: fenced `sh` blocks of a markdown file or the
`run:` scripts of a workflow, with the `seqjudge` of this interpreter.

A line is run when every command in it is `seqjudge` (or one of a few harmless shell words) and none needs a
model or data from outside the repository; the others are reported as skipped, with the reason. By default a
line runs in this process (`seqjudge.cli.run`, with `;`, `&&`, `||` and `test $? -eq N` evaluated as bash
does: left to right, `&&` and `||` of equal precedence), because a Python start per command made the README
test take minutes on a loaded machine; ``in_process=False`` runs it through bash instead.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
SHELL_WORDS = {"test", "mkdir", "cd", "echo"}  # run as they are; anything else (make, pip, git...) is skipped
OPERATORS = {";", "&&", "||", "|", "&"}


def fenced_blocks(markdown: str, languages: tuple[str, ...]) -> list[str]:
    return [
        m.group(2)
        for m in re.finditer(r"^```(\w+)\n(.*?)^```", markdown, re.S | re.M)
        if m.group(1) in languages
    ]


def logical_lines(script: str) -> list[str]:
    """Lines with their backslash continuations joined; blank lines and comment lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def _parsed(line: str) -> list[tuple[str, list[str]]]:
    """(the operator before it, argv) for each simple command of a line; comments removed."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[tuple[str, list[str]]] = [(";", [])]
    for token in lexer:
        if token in OPERATORS:
            out.append((token, []))
        else:
            out[-1][1].append(token)
    return [(op, argv) for op, argv in out if argv]


def commands(line: str) -> list[list[str]]:
    """The simple commands of a line (its argv lists), split at ; && || |."""
    return [argv for _, argv in _parsed(line)]


def needs_a_model(argv: list[str]) -> str | None:
    """Why this seqjudge command cannot run without a model (None when it can)."""
    sub = argv[1] if len(argv) > 1 else ""
    if sub == "judge" or "--model" in argv:
        return "asks the LLM judge"
    if sub == "batch" or "--batch" in argv:
        return "uses a provider's batch API"
    if sub == "calibrate" and "--scores" not in argv:
        return "calibrates the judge's own scores"
    return None


@dataclass
class Outcome:
    line: str
    code: int | None  # None: skipped
    why: str = ""
    out: str = ""
    err: str = ""


def run_line(line: str, cwd: Path, env: dict[str, str] | None = None, *, in_process: bool = True) -> Outcome:
    argvs = commands(line)
    seqjudge = [a for a in argvs if Path(a[0]).name == "seqjudge"]
    if not seqjudge:
        return Outcome(line, None, "no seqjudge command")
    for argv in argvs:
        if Path(argv[0]).name != "seqjudge" and argv[0] not in SHELL_WORDS:
            return Outcome(line, None, f"runs {argv[0]}")
        if argv[0] == "export":
            return Outcome(line, None, "sets the environment")
    for argv in seqjudge:
        why = needs_a_model(argv)
        if why:
            return Outcome(line, None, why)
        if any(arg.startswith("../") for arg in argv):
            return Outcome(line, None, "reads data outside the repository")
    environment = clean_env() if env is None else env
    if in_process:
        return _evaluate(line, cwd, environment)
    done = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )
    return Outcome(line, done.returncode, out=done.stdout, err=done.stderr)


def _evaluate(line: str, cwd: Path, env: dict[str, str]) -> Outcome:
    from seqjudge.cli import run

    out, err = io.StringIO(), io.StringIO()
    status = 0
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            for op, argv in _parsed(line):
                if (op == "&&" and status != 0) or (op == "||" and status == 0):
                    continue
                argv = _expanded([os.path.expandvars(a.replace("$?", str(status))) for a in argv])
                if argv[0] == "test":
                    status = 0 if _test(argv[1:]) else 1
                elif argv[0] == "mkdir":
                    for name in argv[1:]:
                        if not name.startswith("-"):
                            Path(name).mkdir(parents=True, exist_ok=True)
                    status = 0
                elif argv[0] == "echo":
                    print(" ".join(argv[1:]))
                    status = 0
                else:
                    status = run(argv[1:])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Outcome(line, status, out=out.getvalue(), err=err.getvalue())


def _expanded(argv: list[str]) -> list[str]:
    """Pathname expansion as bash does it: a word with a pattern that matches becomes the sorted matches; one
    that matches nothing stays as written. (shlex drops quotes, so a quoted pattern would expand here too.)"""
    out: list[str] = []
    for arg in argv:
        matches = sorted(glob.glob(arg)) if any(c in arg for c in "*?[") else []
        out.extend(matches or [arg])
    return out


def _test(args: list[str]) -> bool:
    left, op, right = args
    compare = {"-eq": int.__eq__, "-ne": int.__ne__, "-le": int.__le__, "-lt": int.__lt__}
    return bool(compare[op](int(left), int(right)))


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without model settings or keys, with the interpreter's bin folder on the PATH."""
    drop = ("SEQJUDGE_", "OPENAI_", "ANTHROPIC_", "GITHUB_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    env.update(extra)
    return env
