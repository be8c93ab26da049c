"""Holding what importers must keep until the input ends (a span's trace may get more spans in any later
record), in bounded memory.

``Held`` keeps items (plain lists, dicts and scalars) grouped by key, in the order they were added. While the
items' estimated size stays under ``LIMIT`` bytes they stay in memory as they are (no serializing: most inputs
never reach the bound); past it everything is pickled to an anonymous temporary file (deleted when closed, or
when the process ends) and memory keeps only an offset and a size per item - sixteen bytes, however large the
item.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from typing import IO, Any

LIMIT = 8 << 20


class Held:
    def __init__(self, limit: int | None = None) -> None:
        self.limit = LIMIT if limit is None else limit
        self.memory: dict[str, list[Any]] = {}
        self.size = 0
        self.file: IO[bytes] | None = None
        self.offsets: dict[str, array[int]] = {}
        self.sizes: dict[str, array[int]] = {}
        self.position = 0

    def add(self, key: str, item: Any, size: int) -> None:
        """Keep ``item`` under ``key``; ``size`` is its rough size in bytes (it counts towards the bound)."""
        if self.file is None:
            self.memory.setdefault(key, []).append(item)
            self.size += size
            if self.size > self.limit:
                self._spill()
        else:
            self._write(key, item)

    def take(self, key: str) -> list[Any]:
        """Everything kept under ``key``, in the order it was added (and forget it)."""
        if self.file is None:
            return self.memory.pop(key, [])
        self.file.flush()
        fd = self.file.fileno()
        offsets = self.offsets.pop(key, array("q"))
        sizes = self.sizes.pop(key, array("q"))
        # pread reads exactly each item, without moving (or refilling) the write buffer
        return [pickle.loads(os.pread(fd, size, offset)) for offset, size in zip(offsets, sizes, strict=True)]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def _spill(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="seqjudge-held-")  # noqa: SIM115 - closed by close()
        for key, items in self.memory.items():
            for item in items:
                self._write(key, item)
        self.memory = {}

    def _write(self, key: str, item: Any) -> None:
        assert self.file is not None
        # pickle: several times faster than json for these small lists, and the file is our own, private
        # and gone when closed
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        offsets = self.offsets.get(key)
        if offsets is None:
            offsets = self.offsets[key] = array("q")
            self.sizes[key] = array("q")
        offsets.append(self.position)
        self.sizes[key].append(len(data))
        self.file.write(data)
        self.position += len(data)
