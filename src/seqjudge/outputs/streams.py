"""Where output goes: stdout, or a file opened with a large buffer; bytes written without decoding them."""

from __future__ import annotations

import codecs
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from seqjudge.errors import InputError

# Reports are written a few KB at a time; a large buffer turns a syscall per report into one per hundred.
BUFFER = 1 << 20


@contextlib.contextmanager
def open_output(output: Path | None) -> Iterator[IO[str]]:
    if output is None or str(output) == "-":
        yield sys.stdout
        return
    try:
        # A regular file (or a new one) is opened to read as well: a writer may move what it wrote (junit's
        # cases, after their head). Not a pipe or a device: a pipe opened to read too would keep its writer
        # blocked, not ended, once its reader goes away. A file we may only write is written as it comes.
        handle = None
        if output.is_file() or not output.exists():
            with contextlib.suppress(PermissionError):
                handle = output.open("w+", encoding="utf-8", buffering=BUFFER)
        if handle is None:
            handle = output.open("w", encoding="utf-8", buffering=BUFFER)
    except OSError as exc:
        raise InputError(
            f"cannot write the output file ({exc.strerror})",
            source=str(output),
            hint="choose a writable path",
        ) from None
    with handle:
        yield handle


def byte_writer(out: IO[str]) -> Callable[[bytes | memoryview], object]:
    """Write UTF-8 bytes to a text stream: straight to its byte buffer when it has one (after flushing the
    text already written), else decoded (a stream without a buffer, such as a test's StringIO) by an
    incremental decoder, since a write may end inside a character (a writer copying a file in blocks)."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        decode = codecs.getincrementaldecoder("utf-8")().decode
        return lambda data: out.write(decode(data))
    out.flush()
    return buffer.write  # type: ignore[no-any-return]
