"""Where output goes: stdout, or a file opened with a large buffer; bytes written without decoding them.

``open_output`` is the one way every ``-o``/``--output`` (and ``--junit``, ``--markdown``, ``--labels``,
``--plot``) opens its file, so they all follow the same rules:

- A regular file, or a new one, is written beside its name (``.NAME.RANDOM.part``, created like any file,
  so the umask applies; an existing file's mode is kept) and renamed over it only when the command got to
  the end: an error part-way leaves the old file as it was, and a reader never sees half a report.
- Anything else is written through, in place: a device (``/dev/null``, ``/dev/stdout``), a pipe, and a
  symbolic link (its target is written; the link stays a link). Renaming over those would replace the
  machine's ``/dev/null`` with a regular file, or a link with a copy.
- A file with other hard links, or in a folder where no sibling can be created, is written in place too.
- An output that is one of the command's inputs (the same file by any name, or a trace file inside an
  input folder) is refused before anything is opened: ``check rules.yaml t.jsonl -o t.jsonl`` would
  otherwise read an empty file, or replace its input with its report.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from seqjudge.errors import InputError

# Reports are written a few KB at a time; a large buffer turns a syscall per report into one per hundred.
BUFFER = 1 << 20

# The suffixes a folder's trace files have (seqjudge.ingest.files.TRACE_SUFFIXES; not imported, so that
# writing a report needs none of the importers).
_TRACE_SUFFIXES = (".json", ".jsonl")


@contextlib.contextmanager
def open_output(
    output: Path | str | None, *, inputs: Iterable[Path | str | None] = (), option: str = "--output"
) -> Iterator[IO[str]]:
    """The stream to write to: stdout for None or ``-``, else ``output`` under the rules above. ``inputs``:
    the files and folders the command reads (``-`` and None are skipped); ``option``: the flag that named
    ``output``, for messages."""
    if output is None or str(output) == "-":
        yield sys.stdout
        return
    path = Path(output)
    refuse_input(path, inputs, option)
    try:
        info: os.stat_result | None = path.lstat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _unwritable(path, exc, option) from None
    atomic = info is None or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1)
    if atomic:
        temp = _sibling(path, info, option, required=info is None)
        if temp is not None:
            with _replacing(temp, path) as handle:
                yield handle
            return
    with _in_place(path, option) as handle:
        yield handle


def refuse_input(output: Path, inputs: Iterable[Path | str | None], option: str = "--output") -> None:
    """Refuse ``output`` when it is one of ``inputs``: the same file (by any path or link), or a trace file
    inside an input folder (which the command would read, or find replaced)."""
    for given in inputs:
        if given is None or str(given) == "-":
            continue
        source = Path(given)
        same = False
        with contextlib.suppress(OSError):
            if source.is_dir():
                inside = output.resolve().is_relative_to(source.resolve())
                same = inside and output.suffix.lower() in _TRACE_SUFFIXES
            elif output.exists():
                same = os.path.samefile(output, source)
        if same:
            raise InputError(
                f"the output is also an input ({source}): writing it would destroy what is read",
                source=str(output),
                where=option,
                hint="Write the output to a path the command does not read",
            )


def _sibling(path: Path, info: os.stat_result | None, option: str, *, required: bool) -> Path | None:
    """A new file beside ``path`` to write into (an existing ``path``'s mode given to it); None when none
    can be created there (unless ``required``: a new output with nowhere to go is an error)."""
    folder = path.parent
    for _ in range(100):
        temp = folder / f".{path.name}.{secrets.token_hex(4)}.part"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            if required:
                raise _unwritable(path, exc, option) from None
            return None
        try:
            if info is not None:
                os.fchmod(fd, stat.S_IMODE(info.st_mode))
                with contextlib.suppress(OSError):  # another owner's file: keep it theirs when we may
                    os.fchown(fd, info.st_uid, info.st_gid)
        finally:
            os.close(fd)
        return temp
    raise _unwritable(path, FileExistsError(17, "no free temporary name"), option)


@contextlib.contextmanager
def _replacing(temp: Path, path: Path) -> Iterator[IO[str]]:
    try:
        # Open to read as well: a writer may move what it wrote (junit's cases, after their head).
        with temp.open("r+", encoding="utf-8", buffering=BUFFER) as handle:
            yield handle
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _in_place(path: Path, option: str) -> Iterator[IO[str]]:
    try:
        # A regular file behind it is opened to read as well (see _replacing). Not a pipe or a device: a
        # pipe opened to read too would keep its writer blocked, not ended, once its reader goes away. A
        # file we may only write is written as it comes.
        handle = None
        if path.is_file():
            with contextlib.suppress(PermissionError):
                handle = path.open("w+", encoding="utf-8", buffering=BUFFER)
        if handle is None:
            handle = path.open("w", encoding="utf-8", buffering=BUFFER)
    except OSError as exc:
        raise _unwritable(path, exc, option) from None
    with handle:
        yield handle


def _unwritable(path: Path, exc: OSError, option: str) -> InputError:
    if not path.parent.is_dir():
        return InputError(
            "the output folder does not exist",
            source=str(path),
            where=option,
            hint="create the folder first, or write elsewhere",
        )
    return InputError(
        f"cannot write the output file ({exc.strerror or exc})",
        source=str(path),
        where=option,
        hint="choose a writable path",
    )


def write_bytes(
    data: bytes, output: Path | str, *, inputs: Iterable[Path | str | None] = (), option: str
) -> None:
    """Write ``data`` whole to ``output`` under ``open_output``'s rules (a PNG plot, a JUnit file)."""
    with open_output(output, inputs=inputs, option=option) as out:
        byte_writer(out)(data)


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
