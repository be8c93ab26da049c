"""Keep secrets out of what seqjudge stores and sends: traces, prompts, judge replies, run configs.

Which keys are secret. A key matches a configured name when the name's *words* appear, in order and
next to each other, among the key's words (words are split at ``_ - . space`` and at camelCase humps,
case-insensitively), or when the key with its separators removed *ends with* the name with its separators
removed. So for ``api_key``: ``api_key``, ``API-Key``, ``apiKey``, ``x_api_key``, ``X-Api-Key``,
``openai_api_key_v2`` and ``xapikey`` match; for ``token``: ``access_token``, ``refreshToken``,
``csrftoken`` and ``token_type`` match, while ``max_tokens``, ``tokens_used`` and ``tokenizer`` do not
(token *counts* are not secrets). Plain substring matching was rejected because it would also hide
``max_tokens`` and ``secretary``; exact matching because it would let ``x_api_key`` through.

What is replaced. The value of a matching key becomes ``"[redacted]"`` whatever its type (a nested dict
or list included); ``None`` stays ``None``, since it hides nothing. Inside strings, ``key=value``,
``key: value``, ``"key": "value"`` and ``Authorization: Bearer abc`` patterns with a matching key are
redacted too (URL query strings included), at any depth of nested ``label: value`` text
(``"database:\n  password: x"``, ``"Error: api_key: x"``: a label is never taken for the value of the one
before it). Under a secret key that ends its line (YAML anchors, tags and a comment aside: ``secret: &x``,
Ansible's ``password: !vault |``), every line of the indented block below is redacted
(``secret:\n  user: a\n  pin: x``: the values, labels kept; a ``- item`` list's or a ``|`` block scalar's
lines whole); a secret key's ``{...}`` or ``[...]`` value is replaced whole, as a secret key's dict is. Query
parameters named in ``URL_SECRET_NAMES`` (``?key=``, ``&sig=``) are redacted besides the configured names,
with or without a URL around them (``GET /v1/items?key=...``). So are ``key => value`` and ``key := value``,
the content of an element named like a secret (``<password>x</password>``, child elements included) and the
word after a command line's long option (``--password x``).
Prose such as "my password is hunter2" is not recognised: no pattern can tell a secret from a word.

Key-shaped values. Whatever key they sit under, values that look like credentials are replaced too
(``VALUE_PATTERNS``): OpenAI/Anthropic-style ``sk-...`` keys, ``Bearer ...`` credentials, the
``user:password`` of a URL (``https://user:pass@host`` keeps its scheme, user-less host and path), AWS access
key ids, GitHub, GitLab and Slack tokens, Google API keys, Stripe keys, JWTs and PEM private keys. A
configured name written ``value:REGEX`` adds a pattern of one's own
(``redact: [password, "value:acme-[0-9a-f]{32}"]``); the built-in patterns always apply.

One policy, one place. Every path that lets trace data leave the process or reach a screen, file or store
redacts through this module with the run's names (default ``DEFAULT_REDACT``): the judge's input gate
(``seqjudge.judge.validate.check_inputs``, so provider requests and ``seqjudge prompt``), the store (and
with it the HTML report and exports, which read the store), and ``check``'s text and JSON output.

Environment secrets. Values of environment variables whose names look secret (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``AZURE_OPENAI_KEY``...) are removed verbatim wherever they appear
(``secret_env_values`` + ``scrub_secrets``); the store does this to every value it writes, so an API key
never reaches the database even when it hides under an innocent key name.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from seqjudge.errors import InputError
from seqjudge.pattern import PatternError, UserPattern, compile_user_pattern
from seqjudge.trace import Trace

DEFAULT_REDACT: tuple[str, ...] = ("password", "api_key", "token", "authorization", "secret")
REDACTED = "[redacted]"
# Environment variable names whose values are treated as secrets: the defaults, and any *_KEY or credential.
ENV_SECRET_NAMES: tuple[str, ...] = (*DEFAULT_REDACT, "key", "credential", "credentials")
# URL query parameters whose values are treated as secrets besides the run's names (``?key=``, ``&sig=``):
# a parameter's name is all there is to go on, and these names are used for nothing else in a URL. Not in
# ``ENV_SECRET_NAMES``: ``PWD`` is the working directory there.
URL_SECRET_NAMES: tuple[str, ...] = (*ENV_SECRET_NAMES, "sig", "signature", "passwd", "pwd")
# Only values that look like keys are removed verbatim: at least this long, with a letter and a digit.
# Shorter values or plain words ("critical", "/run/secrets") are too likely to be ordinary text, and
# replacing them everywhere would corrupt what is stored.
MIN_SECRET_LENGTH = 10

_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def _words(text: str) -> tuple[str, ...]:
    return tuple(w for w in _SEPARATORS.split(_HUMP.sub(" ", text).lower()) if w)


VALUE_PREFIX = "value:"
# Credentials recognised by their shape. Each alternative's ``keep`` group (when present) is kept: the
# scheme word of an auth header, the ``://`` and ``@`` around URL credentials.
VALUE_PATTERNS: tuple[str, ...] = (
    r"\b(?:sk|rk)-[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic (sk-ant-...), project keys
    # A bearer credential in text: with a digit, so that prose ("bearer instruments") is left alone.
    r"(?P<k1>\b(?i:bearer)\s+)(?=[A-Za-z\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{8,}=*",
    r"(?P<k2>://)[^\s/@:'\"]{1,256}:[^\s/@'\"]{1,256}(?P<k3>@)",  # user:password@ in a URL
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b",  # AWS access key ids
    r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",  # GitHub tokens
    r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab personal access tokens
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}",  # Stripe keys
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWTs
    r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----[\s\S]{0,20000}?-----END [A-Z ]{0,40}PRIVATE KEY-----",
)


# A literal every built-in value pattern starts with (or holds): searching a text for these is what decides
# whether the patterns themselves run. Python's re tries each alternative at each position, and eleven
# patterns over a 40 MB stored trace cost 30 s, where these literals cost well under one.
_VALUE_HINTS = (
    r"[sr]k[-_]|(?i:bearer)|://|A(?:KIA|SIA|GPA|IDA|ROA|Iza)|gh[pousr]_|github_pat_|glpat-|xox|eyJ|-----BEGIN"
)


# _VALUE_HINTS as lower-case literals, for ``json_needs_value_redaction``.
_VALUE_LITERALS = (
    *("sk-", "rk-", "sk_", "rk_", "bearer", "://", "akia", "asia", "agpa", "aida", "aroa", "aiza"),
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "eyj", "-----begin"),
)


def _user_patterns(names: tuple[str, ...]) -> list[str]:
    return [f"(?:{n[len(VALUE_PREFIX) :]})" for n in names if n.startswith(VALUE_PREFIX)]


# A pattern holding a ``value:`` entry: the time-limited matcher (seqjudge.pattern), since a user's pattern
# may backtrack without end (``value:(a|aa)+$``); running out is exit 2 naming the entries. Built-ins: re.
_Searcher = re.Pattern[str] | UserPattern


def _compile(expression: str, names: tuple[str, ...]) -> _Searcher:
    user = _user_patterns(names)
    if not user:
        return re.compile(expression)
    try:
        return compile_user_pattern(expression, given="redact", shown=", ".join(user))
    except PatternError as exc:
        raise InputError(
            f"the redact patterns {', '.join(user)} are not regular expressions ({exc})", where="redact"
        ) from None


@lru_cache(maxsize=64)
def _value_screen(names: tuple[str, ...]) -> _Searcher:
    """Matches wherever a value pattern might: the built-in literals and the ``value:`` patterns."""
    _value_pattern(names)  # reports a bad value: pattern before it is used here
    return _compile("|".join((_VALUE_HINTS, *_user_patterns(names))), names)


@lru_cache(maxsize=64)
def _value_pattern(names: tuple[str, ...]) -> _Searcher:
    """The built-in value patterns and the ``value:REGEX`` entries of ``names``, as one pattern."""
    extra = []
    for name in names:
        if name.startswith(VALUE_PREFIX):
            pattern = name[len(VALUE_PREFIX) :]
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InputError(
                    f"the redact pattern {pattern!r} is not a regular expression ({exc})",
                    where="redact",
                    hint='write it as "value:REGEX", e.g. "value:acme-[0-9a-f]{32}"',
                ) from None
            extra.append(f"(?:{pattern})")
    return _compile("|".join((*VALUE_PATTERNS, *extra)), names)


def _replace_value(match: re.Match[str]) -> str:
    groups = match.groupdict()
    if groups.get("k2") is not None:
        return f"{groups['k2']}{REDACTED}{groups['k3']}"
    return f"{groups.get('k1') or ''}{REDACTED}"


def redact_values(text: str, names: Iterable[str] = DEFAULT_REDACT) -> str:
    """``text`` with every key-shaped value (``VALUE_PATTERNS`` and ``value:`` entries) replaced."""
    return _value_pattern(_names(names)).sub(_replace_value, text)


@lru_cache(maxsize=64)
def _compiled(names: tuple[str, ...]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """(words, compact form) per name; names without a letter or digit, and value patterns, are ignored."""
    out = []
    for name in names:
        if name.startswith(VALUE_PREFIX):
            continue
        words = _words(name)
        if words:
            out.append((words, "".join(words)))
    return tuple(out)


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return names if isinstance(names, tuple) else tuple(names)


# Every ASCII character a key's words are split on (``_SEPARATORS``); non-ASCII ones are dropped by encoding.
_NOT_ALNUM = bytes(b for b in range(128) if not (chr(b).isascii() and chr(b).isalnum()))


@lru_cache(maxsize=64)
def _compacts(names: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(compact.encode() for _, compact in _compiled(names))


# The contents of a JSON text's strings (keys included), escapes left as they are.
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


# A JSON escape: its letters (the n of \n) are not the text's, so it reads as a separator.
_JSON_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")


def _split_name_in(text: str, names: tuple[str, ...], *, json_text: bool = False) -> bool:
    """Whether ``text`` may hold a key that matches a name only once its separators are dropped
    (``pass_word``, ``Pass-Word`` for ``password``), which the first-word screens cannot see: a matching key's
    letters and digits, lower-cased, contain the name's compact form, so the text's do too. ``json_text``:
    ``text`` is JSON, whose escapes stand for separators."""
    compacts = _compacts(names)
    if not compacts:
        return False
    if json_text and "\\" in text:
        text = _JSON_ESCAPE.sub(" ", text)
    squeezed = text.lower().encode("ascii", "ignore").translate(None, _NOT_ALNUM)
    return any(map(squeezed.__contains__, compacts))  # (no generator to resume per name)


def key_matches(key: str, names: Iterable[str]) -> bool:
    """Whether ``key`` names a secret under ``names`` (see the module docstring for the rule)."""
    return _key_matches(key, _names(names))


# A run stores thousands of traces whose keys repeat (customer_id, order_id, ...): the answer per key is
# remembered, which made key matching the store's hottest path before.
@lru_cache(maxsize=8192)
def _key_matches(key: str, names: tuple[str, ...]) -> bool:
    compiled = _compiled(names)
    if not compiled:
        return False
    words = _words(key)
    if not words:
        return False
    compact = "".join(words)
    for name_words, name_compact in compiled:
        if compact.endswith(name_compact):
            return True
        n = len(name_words)
        if any(words[i : i + n] == name_words for i in range(len(words) - n + 1)):
            return True
    return False


# key, separator, value. The key may be quoted; the value is a quoted string, an HTTP auth scheme with its
# credential, or a bare run of characters up to whitespace or a delimiter (URLs: & ; JSON: , } ]).
_PAIR = re.compile(
    r"""(?P<key>\\"[^"\\\n]{1,100}\\"|"[^"\n]{1,100}"|'[^'\n]{1,100}'|[A-Za-z_][\w.\-]{0,100})"""
    r"""(?P<sep>\s*(?:=>|:=|[:=])\s*)"""  # Ruby's, Perl's and PHP's => and Go's := too
    # JSON quoted inside a JSON string (\"key\": \"value\"), then plain quoted strings.
    r"""(?P<value>\\"(?:[^"\\\n]|\\[^"\n])*\\"|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
    r"""|(?:bearer|basic|token|digest)\s+[^\s,;&'"\\]+"""
    r"""|&[\w\-]+"""  # a YAML anchor (``secret: &creds`` over an indented block)
    r"""|[^\s,;&'"}\])\\]+)""",
    re.IGNORECASE,
)


def redact_text(text: str, names: Iterable[str] = DEFAULT_REDACT) -> str:
    """``text`` with the values of matching ``key=value`` / ``key: value`` / ``"key": "value"`` pairs
    replaced by ``[redacted]`` (quotes kept)."""
    names = _names(names)
    return _redact_text(text, names, _first_words(names))


@lru_cache(maxsize=64)
def _filter(names: tuple[str, ...]) -> _Searcher:
    """Matches where a redaction may start: the first word of a name (a matching key contains one) or a
    key-shaped value. Text without a match is left alone: one search spares most strings the full work."""
    firsts = sorted({words[0] for words, _ in _compiled(names)})
    alternatives = [*(f"(?i:{re.escape(w)})" for w in firsts), _value_screen(names).pattern]
    return _compile("|".join(alternatives), names)


@lru_cache(maxsize=64)
def _screen_literals(
    names: tuple[str, ...],
) -> tuple[tuple[str, ...], _Searcher | None, re.Pattern[str]]:
    """The screen's lower-case literals, the ``value:`` patterns (None: none), and the literals as one
    pattern, which finds any of them in a short text faster than one find each."""
    user = _user_patterns(names)
    words = tuple(sorted({words[0] for words, _ in _compiled(names)}))
    literals = (*words, *_VALUE_LITERALS)
    return (
        literals,
        _compile("|".join(user), names) if user else None,
        re.compile("|".join(map(re.escape, literals))),
    )


# Up to this length one search of the literals' pattern beats a find per literal; past it the finds win (the
# pattern tries every literal at each position).
_SCREEN_SHORT = 64


def may_need_redaction(text: str, names: Iterable[str] = DEFAULT_REDACT) -> bool:
    """False when ``redact_text(text, names)`` surely returns ``text``: no name's first word and no value
    pattern's literal in it (plain finds in the lower-cased text, several times cheaper than the screen
    regex on texts of a hundred characters and more)."""
    names = names if isinstance(names, tuple) else tuple(names)  # (``_names``, without the call)
    literals, user, short = _screen_literals(names)
    low = text.lower()
    if len(low) <= _SCREEN_SHORT:
        if short.search(low) is not None:
            return True
    else:
        for word in literals:
            if word in low:
                return True
    if user is not None and user.search(text) is not None:
        return True
    if _query_secret_in(text):
        return True
    # A name's compact form starts with its first word: in a text of ASCII letters and digits alone, which
    # squeezes to itself, the finds above have already looked for it.
    return not (text.isascii() and text.isalnum()) and _split_name_in(text, names)


def _first_words(names: tuple[str, ...]) -> _Searcher:
    """The screen (``_filter``): handed down a walk so that each string costs one search, not a lookup."""
    return _filter(names)


# Short strings that needed no redaction, per filter: statuses, rule ids, tool names and verdicts repeat in
# every stored result, and a set lookup is cheaper than the filter's search. Bounded; cleared when full.
_CLEAN_SHORT: dict[_Searcher, set[str]] = {}
_SHORT = 48


def _redact_text(text: str, names: tuple[str, ...], screen: _Searcher) -> str:
    if not text or _clean_text(text, names, screen):
        return text
    if _compiled(names):
        text = _redact_pairs(text, names, screen)
        if "<" in text:
            text = _redact_elements(text, names)
        if "--" in text:
            text = _FLAG.sub(lambda m: _flag_value(m, names), text)
    return _value_pattern(names).sub(_replace_value, text)


# An XML or HTML start tag: its name, then (past attributes) where its content starts.
_START_TAG = re.compile(r"<([A-Za-z_][\w.\-:]{0,100})(?:\s[^<>]{0,1000})?>")


def _redact_elements(text: str, names: tuple[str, ...]) -> str:
    """``text`` with the content of every element named like a secret replaced, child elements and all
    (``<password>x</password>``, ``<secret><user>a</user></secret>``; a settings.xml or a SOAP reply). An
    element never closed loses the rest of its line (a truncated output; ``usage: login <password>`` keeps
    the lines below)."""
    out: list[str] = []
    copied = at = 0
    while (tag := _START_TAG.search(text, at)) is not None:
        at = tag.end()
        name = tag.group(1)
        if tag.group().endswith("/>") or not _key_matches(name.rsplit(":", 1)[-1], names):
            continue  # empty, or not a secret's (a namespace prefix is not the name)
        close = text.find(f"</{name}", at)
        if close < 0:
            close = text.find("\n", at)
        end = len(text) if close < 0 else close
        if text[at:end].strip() and text[at:end] != REDACTED:
            out.append(f"{text[copied:at]}{REDACTED}")
            copied = end
        at = end
    if not out:
        return text
    out.append(text[copied:])
    return "".join(out)


# A command line's long option and the word after it (``mysql --password hunter2``); ``--password=x`` is a
# ``_PAIR``. Only after a space or a line's start, so that a ``--`` inside a word is not an option.
_FLAG = re.compile(
    r"(?<![^\s\"'])--(?P<name>[A-Za-z][\w\-]{0,100})(?P<gap>[ \t]+)"
    r"(?P<value>[^\s\-\"'][^\s]*|\"[^\"\n]*\"|'[^'\n]*')"
)


def _flag_value(match: re.Match[str], names: tuple[str, ...]) -> str:
    if not _key_matches(match.group("name"), names):
        return match.group()
    value = match.group("value")
    quote = value[0] if value[0] in "\"'" else ""
    return f"--{match.group('name')}{match.group('gap')}{quote}{REDACTED}{quote}"


def _clean_text(text: str, names: tuple[str, ...], screen: _Searcher) -> bool:
    """True when no redaction can start in ``text``: no match of ``screen``, no split name and no query
    parameter named like a credential."""
    if len(text) <= _SHORT:
        clean = _CLEAN_SHORT.get(screen)
        if clean is None:
            clean = _CLEAN_SHORT[screen] = set()
        if text in clean:
            return True
        if not screen.search(text) and not _split_name_in(text, names) and not _query_secret_in(text):
            if len(clean) >= 65_536:
                clean.clear()
            clean.add(text)
            return True
        return False
    return not screen.search(text) and not _split_name_in(text, names) and not _query_secret_in(text)


# The name after a ``?`` or ``&`` (quoted, or a bare run up to what ends a ``_PAIR`` key): every query
# parameter ``_secret_key`` can take for a credential is one of these names.
_QUERY_KEY = re.compile(r"""[?&](?:\\?"([^"\\\n]{1,100})|'([^'\n]{1,100})|([^\s"'\\=:&?;,]{1,100}))""")


def _query_secret_in(text: str, *, json_text: bool = False) -> bool:
    """Whether ``text`` may hold a query parameter named like a credential (``URL_SECRET_NAMES``), with or
    without a URL around it (``GET /v1/items?key=...``): the run's names do not screen for these.
    ``json_text``: ``text`` is JSON, where a quote or backslash after the ``?`` may be an escape: counted."""
    if "?" not in text and "&" not in text:
        return False
    # Each name once (a large trace repeats its parameters), matched in C: a loop per match cost 4x more.
    for quoted, single, bare in set(_QUERY_KEY.findall(text)):
        if json_text and quoted:
            return True
        if _key_matches(quoted or single or bare, URL_SECRET_NAMES):
            return True
    return False


# A bare value that is itself a label (``database:`` in ``"database:\n  password: x"``, ``api_key:`` in
# ``"Error: api_key: KEY"``): the pair pattern takes it for the value of the label before it.
_LABEL = re.compile(r"[A-Za-z_][\w.\-]{0,100}:")


def _redact_pairs(text: str, names: tuple[str, ...], screen: _Searcher) -> str:
    """``text`` with the value of every ``_PAIR`` whose key is secret replaced, at any depth of nested
    ``label: value`` text. A pair whose key is not secret is not consumed: the search goes on from its
    value (from inside its key when quoted; past it when nothing can start there), so a secret label that
    the pattern took for the value (``Error: api_key: KEY``, a YAML ``database:`` line followed by an
    indented ``password:``) is matched as a key in its turn, and so is a pair inside a value
    (``url=https://x?token=abc``). A secret key whose value is another label (``api_key: token: TOK``,
    ``secret:\n  name: x``) hands its secrecy down: the nested pair's value is replaced, whatever its key."""
    out: list[str] = []
    copied = at = 0
    inherited = -1  # where a pair starts whose key is secret because the label above it is
    while (match := _PAIR.search(text, at)) is not None:
        value_at = match.start("value")
        if match.start() != inherited and not _secret_key(text, match, names):
            key, value = match.group("key"), match.group("value")
            if key[0] in "\"'\\" and not _clean_text(key, names, screen):
                # A quoted "key" may be a value's string taken for a key (``key="pass_word=x": y``).
                at = match.start() + (2 if key[0] == "\\" else 1)
            elif "?" in value or "&" in value or not _clean_text(value, names, screen):
                at = value_at
            else:
                at = match.end()  # nothing can start in it: passed over whole, as most pairs are
            continue
        value = match.group("value")
        if value[0] in "{[(":  # an object, a list or a shell array: all of it, as a secret key's dict is
            quote = next((q for q in ('\\"', '"', "'") if match.group("key").startswith(q)), "")
            out.append(f"{text[copied:value_at]}{quote}{REDACTED}{quote}")
            copied = at = _container_end(text, value_at, quotes=quote != '\\"')
            continue
        block = _block_under(text, match)
        if block is not None:  # the key ends its line and indented lines follow: every one of them
            begin, end, scalar = block
            out.append(text[copied:begin])
            out.append(_redact_block(text[begin:end], scalar=scalar))
            copied = at = end
            continue
        if value[0] in "&!":
            # a YAML anchor or tag before the value (``password: &pw x``): the rest of the line goes
            line_end = text.find("\n", value_at)
            line_end = len(text) if line_end < 0 else line_end
            tags = _YAML_TAGS.match(text, value_at, line_end)
            assert tags is not None  # it may match nothing
            if text[tags.end() : line_end].strip():
                out.append(f"{text[copied : tags.end()]}{REDACTED}")
                copied = at = line_end
                continue
        if _LABEL.fullmatch(value) and _PAIR.match(text, value_at) is not None:
            inherited = at = value_at
            continue
        quote = next((q for q in ('\\"', '"', "'") if value.startswith(q)), "")
        out.append(f"{text[copied:value_at]}{quote}{REDACTED}{quote}")
        copied = at = match.end()
    if not out:
        return text
    out.append(text[copied:])
    return "".join(out)


_SEP_OPERATOR = re.compile(r"\s*(?:=>|:=|[:=])")  # a ``_PAIR`` separator up to its operator


def _container_end(text: str, at: int, *, quotes: bool) -> int:
    """Where the object or list opening at ``at`` closes (past its bracket), or the end of ``text`` when it
    never does (a truncated output: the rest may be the secret's). With ``quotes``, brackets inside
    ``"..."`` strings do not count; inside JSON quoted in a string (``\\"``) brackets alone are counted."""
    depth = 0
    in_string = False
    i = at
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                i += 1
            elif char == '"':
                in_string = False
        elif char == '"' and quotes:
            in_string = True
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


_YAML_TAGS = re.compile(r"(?:[&!][^\s#]*[ \t]+)*")  # anchors and tags before a YAML value

# What may follow a key on its line when its value is the indented block below: YAML anchors and tags
# (``secret: &creds``, Ansible's ``password: !vault |``), a block scalar's indicator (its text below) and a
# comment.
_BLOCK_HEAD = re.compile(r"[ \t]*(?:[&!][^\s#]*[ \t]*)*(?P<scalar>[|>][-+1-9]{0,2})?[ \t]*(?:#[^\n]*)?\r?")
_INDENT = re.compile(r"[ \t]*")


def _block_under(text: str, match: re.Match[str]) -> tuple[int, int, bool] | None:
    """The lines that belong to a secret key ending its line (``credentials:`` with ``user:`` and
    ``password:`` indented below it, a YAML ``token: |`` block, a ``secret:`` over ``- item`` lines), as
    (start, end, whether they are a block scalar's text); None when no deeper-indented line follows, where
    the key's value is what ``_PAIR`` found. Without this only the first line below the key was replaced."""
    after = match.start("sep") + _SEP_OPERATOR.match(match.group("sep")).end()  # type: ignore[union-attr]
    line_end = text.find("\n", after)
    head_rest = None if line_end < 0 else _BLOCK_HEAD.fullmatch(text, after, line_end)
    if head_rest is None:
        return None
    scalar = head_rest.group("scalar") is not None
    line_start = text.rfind("\n", 0, match.start()) + 1
    head = text[line_start : match.start()]
    indent = len(_INDENT.match(head).group())  # type: ignore[union-attr]
    # YAML writes a list under a key at the key's own indentation (``secret:\n- a``), unless the key is
    # itself an item of such a list, whose next item is its sibling.
    dash_children = not head[indent:].startswith("-")
    begin = end = line_end + 1
    while end < len(text):
        next_end = text.find("\n", end)
        line = text[end : len(text) if next_end < 0 else next_end]
        depth = len(_INDENT.match(line).group())  # type: ignore[union-attr]
        if line.strip() and not (
            depth > indent or (dash_children and depth == indent and line[depth:].startswith("-"))
        ):
            break
        end = len(text) if next_end < 0 else next_end + 1
    if not text[begin:end].strip():
        return None
    if end > begin and text[end - 1] == "\n" and end < len(text):
        end -= 1  # the line break before the next sibling is not the block's
    return begin, end, scalar


# A line of a block under a secret key: its indentation, list dashes and (outside a block scalar) its own
# ``label:``, all kept, then what is replaced.
_BLOCK_LINE = re.compile(
    r"""(?P<lead>[ \t]*(?:-(?:[ \t]+|$))*)"""
    r"""(?P<label>(?:"[^"\n]{1,100}"|'[^'\n]{1,100}'|[A-Za-z_][\w.\- ]{0,100}?)[ \t]*:(?:[ \t]+|$))?"""
    r"""(?P<rest>[^\r\n]*)"""
)


def _redact_block(block: str, *, scalar: bool) -> str:
    """``block`` with what each line holds replaced: past a ``label:`` of a nested mapping (kept, as the
    labels of a secret key's lines were before), or the whole line of a block scalar's text."""
    lines = []
    for line in block.split("\n"):
        parts = _BLOCK_LINE.match(line)
        assert parts is not None  # every part is optional
        lead, label, rest = parts.group("lead"), parts.group("label") or "", parts.group("rest")
        if scalar:  # text, not a mapping: nothing on the line is a label
            lead, label = line[: len(line) - len(line.lstrip(" \t"))], ""
            rest = line[len(lead) :].rstrip("\r")
        if not rest.strip():
            lines.append(line)
            continue
        whole = rest.rstrip()
        quote = rest[0] if rest[0] in "\"'" and len(whole) > 1 and whole.endswith(rest[0]) else ""
        lines.append(f"{lead}{label}{quote}{REDACTED}{quote}{line[len(lead) + len(label) + len(rest) :]}")
    return "\n".join(lines)


def redact_query(text: str) -> str:
    """``text`` with the values of URL query parameters named like credentials (``URL_SECRET_NAMES``)
    replaced, whatever the run's names: for a base URL shown in a message or a log."""
    return _redact_pairs(text, (), _filter(())) if "?" in text else text


def _secret_key(text: str, match: re.Match[str], names: tuple[str, ...]) -> bool:
    """Whether the key of a ``_PAIR`` match is secret: it matches one of ``names``, or it is a URL's query
    parameter (after ``?`` or ``&``) named like a credential (``URL_SECRET_NAMES``: ``?key=``, ``&sig=``)."""
    key = match.group("key").strip("\"'\\")
    if key_matches(key, names):
        return True
    start = match.start()
    return start > 0 and text[start - 1] in "?&" and _key_matches(key, URL_SECRET_NAMES)


def redact_value(value: Any, names: Iterable[str] = DEFAULT_REDACT, *, keys: bool = True) -> Any:
    """A copy of a JSON-like value: with ``keys``, the values of matching dict keys become ``[redacted]``;
    every string is passed through ``redact_text``. Other values are returned as they are."""
    names = _names(names)
    return _redact_value(value, names, _first_words(names), keys)


def json_needs_value_redaction(json_text: str, names: Iterable[str] = DEFAULT_REDACT) -> bool:
    """Whether ``redact_value(value, names, keys=False)`` might change ``value``, judged from its JSON text
    (``json.dumps(value, ensure_ascii=False)``); False is a guarantee that it would not.

    The store writes every result as JSON, and walking each one value by value cost more than everything
    else in storing it. A string only changes when it holds a ``key: value``, ``key=value``,
    ``<key>value</key>`` or ``--key value`` pair whose key contains a name's first word, or spells a name with
    separators between its letters (``pass_word``; ``redact_text``), so it needs both such a key and a ``:``,
    ``=``, ``<`` or ``--``; or a query parameter named like a credential (``_query_secret_in``).
    Each first word found in the text is checked against the JSON string around it. Escaping only touches
    quotes, backslashes and control characters, never the letters and digits of a word, so a match in a
    string is a match in its JSON form; a word outside any string, or in a key, at worst costs the walk."""
    names = _names(names)
    return _json_needs_walk(json_text, names, _split_name_in(json_text, names, json_text=True))


def _json_needs_walk(json_text: str, names: tuple[str, ...], split: bool) -> bool:
    """``json_needs_value_redaction``, told whether ``_split_name_in`` holds for the whole text (a large
    trace's caller has already asked)."""
    words = sorted({w[0] for w, _ in _compiled(names)})
    folded = _fold(json_text)
    if len(folded) != len(json_text):  # pragma: no cover - _fold keeps lengths (tests/test_redact_json.py)
        return True
    # Maybe a key-shaped value: JSON escapes none of the literals looked for. Plain finds on the folded text
    # (a regex alternation costs ~100 ns a character, too much for a 40 MB trace).
    if any(hint in folded for hint in _VALUE_LITERALS):
        return True
    user = _screen_literals(names)[1]  # the value: patterns, time-limited
    if user is not None and user.search(json_text):
        return True
    if _query_secret_in(json_text, json_text=True):
        return True  # ``?key=`` outside a URL: no literal above gives it away
    if split and any(
        (":" in m or "=" in m) and _split_name_in(m, names, json_text=True)
        for m in _JSON_STRING.findall(json_text)
    ):
        return True  # a pair whose key (`pass_word`) holds no first word as written: walk
    for word in words:
        at = folded.find(word)
        while at >= 0:
            begin = _quote_before(json_text, at)
            end = _quote_after(json_text, at + len(word))
            if begin < 0 or end < 0:
                return True  # not inside a string: cannot tell, so walk
            inside = json_text[begin:end]
            if ":" in inside or "=" in inside or "<" in inside or "--" in inside:
                return True
            at = folded.find(word, end)  # the rest of this string holds no ':' or '='
    return False


# The characters Python's case-insensitive regex matching (``redact_text``'s filter) takes for an ASCII
# letter, besides A-Z, and that ``str.lower`` does not turn into it; U+0130 also lowers to two characters.
# tests/test_redact_json.py derives the list from ``re`` itself.
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
_FOLD_CHARS = "".join(map(chr, _FOLD))


def _fold(text: str) -> str:
    """``text`` lower-cased so that a plain ``find`` sees what a case-insensitive regex would, position for
    position."""
    if any(ch in text for ch in _FOLD_CHARS):
        text = text.translate(_FOLD)
    return text.lower()


def _escaped(text: str, at: int) -> bool:
    """Whether the quote at ``at`` is escaped: preceded by an odd run of backslashes."""
    run = 0
    while at - run - 1 >= 0 and text[at - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _quote_after(text: str, at: int) -> int:
    at = text.find('"', at)
    while at >= 0 and _escaped(text, at):
        at = text.find('"', at + 1)
    return at


def _quote_before(text: str, at: int) -> int:
    at = text.rfind('"', 0, at)
    while at >= 0 and _escaped(text, at):
        at = text.rfind('"', 0, at)
    return at


def json_holds_secret(json_text: str, secrets: Iterable[str]) -> bool:
    """Whether any of ``secrets`` occurs in the value ``json_text`` encodes (in a string or a key): each is
    looked for in its JSON-escaped form, which is how it would appear in the text."""
    return any(json.dumps(s, ensure_ascii=False)[1:-1] in json_text for s in secrets)


def _redact_value(value: Any, names: tuple[str, ...], firsts: _Searcher, keys: bool) -> Any:
    # Exact type checks first: this walks every value a run stores, and ABC checks cost more.
    kind = type(value)
    if kind is str:
        return _redact_text(value, names, firsts)
    if kind is dict:
        return _redact_mapping(value, names, firsts, keys)
    if kind is list:
        return [_redact_value(v, names, firsts, keys) for v in value]
    if value is None or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, str):  # a str subclass
        return _redact_text(value, names, firsts)
    if isinstance(value, Mapping):
        return _redact_mapping(value, names, firsts, keys)
    if isinstance(value, list | tuple):
        return [_redact_value(v, names, firsts, keys) for v in value]
    return value


def _redact_mapping(
    value: Mapping[Any, Any], names: tuple[str, ...], firsts: _Searcher, keys: bool
) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in value.items():
        if keys and v is not None and isinstance(k, str) and _key_matches(k, names):
            out[k] = REDACTED
        else:
            out[k] = _redact_value(v, names, firsts, keys)
    return out


# Trace and call fields that carry structure, never data: left alone so that the copy still validates
# (a configured name such as "step" must not turn a step number into text).
_CALL_STRUCTURE = frozenset({"tool_name", "status", "timestamp", "end_timestamp", "step", "id"})
_MESSAGE_STRUCTURE = frozenset({"role", "at"})
_TRACE_STRUCTURE = frozenset({"trace_id", "calls", "messages"})


def _redact_fields(data: dict[str, Any], structure: frozenset[str], names: tuple[str, ...]) -> dict[str, Any]:
    firsts = _first_words(names)
    out: dict[str, Any] = {}
    for k, v in data.items():
        if k in structure:
            out[k] = v
        elif (
            v is not None
            and k not in ("arguments", "output", "error", "content", "context", "metadata")
            and _key_matches(k, names)
        ):
            out[k] = REDACTED  # an extra key kept from the source format, itself named like a secret
        else:
            out[k] = _redact_value(v, names, firsts, True)
    return out


def redact_trace(trace: Trace, names: Iterable[str] = DEFAULT_REDACT) -> Trace:
    """A redacted copy of ``trace``: call arguments, outputs and errors, message contents, context,
    metadata and any extra keys. Tool names, statuses, timestamps, steps and ids are kept.

    ``trace`` itself when its JSON text proves that nothing would change (``_surely_clean``): the copy
    (a dump, a redacted dump and a new model) tripled a large trace's memory - 3.6 GB for a million calls."""
    names = _names(names)
    return trace if _surely_clean(trace, names) else _redacted_copy(trace, names)


def _redacted_copy(trace: Trace, names: tuple[str, ...]) -> Trace:
    data = trace.model_dump()
    data = _redact_fields(data, _TRACE_STRUCTURE, names)
    data["calls"] = [_redact_fields(c, _CALL_STRUCTURE, names) for c in data["calls"]]
    data["messages"] = [_redact_fields(m, _MESSAGE_STRUCTURE, names) for m in data["messages"]]
    return Trace.model_validate(data)


def _surely_clean(trace: Trace, names: tuple[str, ...]) -> bool:
    """True only when ``redact_trace`` would return an equal trace: no key anywhere contains the first word
    of a name (a key that matches a name contains all its words, so also its first one), and no string
    holds a redactable value or pair (``json_needs_value_redaction``, which the JSON text decides)."""
    try:
        text = trace.model_dump_json()
    except Exception:  # pragma: no cover - a value JSON cannot hold: the walk decides, as before
        return False
    folded = _fold(text)
    if any(words[0] in folded for words, _ in _compiled(names)):
        return False
    if _split_name_in(text, names, json_text=True):
        return False  # a key may match a name (`pass_word` holds no first word as written)
    return not _json_needs_walk(text, names, split=False)


def secret_env_values(
    names: Iterable[str] = ENV_SECRET_NAMES, environ: Mapping[str, str] | None = None
) -> list[str]:
    """Values of environment variables named like secrets that look like keys (at least
    ``MIN_SECRET_LENGTH`` characters, a letter and a digit), longest first so that a secret containing
    another is removed whole."""
    env = os.environ if environ is None else environ
    names = _names(names)
    found = {
        value
        for var, value in env.items()
        if len(value) >= MIN_SECRET_LENGTH
        and any(c.isalpha() for c in value)
        and any(c.isdigit() for c in value)
        and key_matches(var, names)
    }
    return sorted(found, key=len, reverse=True)


def scrub_secrets(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of a JSON-like value with every occurrence of each secret (in strings and keys) replaced."""
    secrets = tuple(secrets)
    if not secrets:
        return value
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {scrub_secrets(k, secrets): scrub_secrets(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_secrets(v, secrets) for v in value]
    return value
