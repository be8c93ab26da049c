"""Holding what importers must keep until the input ends (a span's trace may get more spans in any later
record), in bounded memory.

``Held`` keeps byte strings grouped by key, in the order they were added. Up to ``limit`` bytes stay in
memory; past that everything moves to an anonymous temporary file (deleted when closed, or when the process
ends), and memory keeps only an offset and a size per item - sixteen bytes, however large the item.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from typing import IO

LIMIT = 16 << 20


class Held:
    def __init__(self, limit: int | None = None) -> None:
        self.limit = LIMIT if limit is None else limit
        self.memory: dict[str, list[bytes]] = {}
        self.size = 0
        self.file: IO[bytes] | None = None
        self.offsets: dict[str, array[int]] = {}
        self.sizes: dict[str, array[int]] = {}
        self.position = 0

    def add(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key``."""
        if self.file is None:
            self.memory.setdefault(key, []).append(data)
            self.size += len(data)
            if self.size > self.limit:
                self._spill()
        else:
            self._write(key, data)

    def take(self, key: str) -> list[bytes]:
        """Everything kept under ``key``, in the order it was added (and forget it)."""
        if self.file is None:
            return self.memory.pop(key, [])
        self.file.flush()
        fd = self.file.fileno()
        offsets = self.offsets.pop(key, array("q"))
        sizes = self.sizes.pop(key, array("q"))
        # pread reads exactly each item, without moving (or refilling) the write buffer's position
        return [os.pread(fd, size, offset) for offset, size in zip(offsets, sizes, strict=True)]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def _spill(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="seqjudge-held-")  # noqa: SIM115 - closed by close()
        for key, items in self.memory.items():
            for data in items:
                self._write(key, data)
        self.memory = {}

    def _write(self, key: str, data: bytes) -> None:
        assert self.file is not None
        offsets = self.offsets.get(key)
        if offsets is None:
            offsets = self.offsets[key] = array("q")
            self.sizes[key] = array("q")
        offsets.append(self.position)
        self.sizes[key].append(len(data))
        self.file.write(data)
        self.position += len(data)
