"""What a long preparation (generating a corpus, training a sentencepiece model, filling a
feature cache, writing shards) says on stderr, so that a run is never silent for long:

    shapes world: generating 11,500 images into data/shapes
    shapes world: 3,210/11,500 images (28 %)  elapsed 0:15  eta 0:38
    shapes world: done, 11,500 images in 0:53

A line when it starts, one at least every `every` seconds saying how far it has got (counted
with `advance`, or, around a call that cannot count, from a thread: `ticking`), and one when
it is done. Nothing is written when it fails: the error says why.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO


def clock(seconds: float) -> str:
    """`1:02:03`, or `2:03` under an hour."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Preparation:
    """The messages of one preparation, as a context manager.

    Args:
        name: what is prepared, the start of every line ("shapes world").
        start: what the first line says after the name ("generating 11,500 images into …").
        total: how many `unit`s there are to do, when known.
        unit: what `advance` counts ("images").
        every: seconds at most between two lines.
        ticking: write the progress line from a thread, for work that cannot call `advance`
            (a C++ call such as sentencepiece's training, which releases the GIL).
        clock: the time in seconds; `time.monotonic` by default.
        stream: where the lines go; stderr (as it is when a line is written) by default.
    """

    def __init__(
        self,
        name: str,
        start: str,
        total: int | None = None,
        unit: str = "",
        every: float = 15.0,
        ticking: bool = False,
        clock: Callable[[], float] | None = None,
        stream: TextIO | None = None,
    ):
        self.name, self.start, self.total, self.unit = name, start, total, unit
        self.every, self.ticking, self.stream = every, ticking, stream
        self.clock = clock or time.monotonic
        self.done = 0
        self._started = self._last_line = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Preparation:
        self._started = self.clock()
        self._write(self.start)
        if self.ticking:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        if kind is None:
            counted = f", {self.done:,} {self.unit}" if self.unit else ""
            self._write(f"done{counted} in {clock(self.clock() - self._started)}")

    def advance(self, count: int = 1) -> None:
        """Count `count` more units done; write the progress line when `every` seconds have
        passed since the last line."""
        self.done += count
        if self.clock() - self._last_line >= self.every:
            self._write(self.progress_line())

    def progress_line(self) -> str:
        """How far it has got: done of total, share, time elapsed and left (when known)."""
        elapsed = self.clock() - self._started
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            share = f"{100 * self.done / self.total:.0f} %"
            parts = [f"{self.done:,}/{self.total:,}{unit} ({share})"]
        else:
            parts = [f"{self.done:,}{unit}" if unit else "still working"]
        parts.append(f"elapsed {clock(elapsed)}")
        if self.total and self.done:
            parts.append(f"eta {clock(elapsed * (self.total - self.done) / self.done)}")
        return "  ".join(parts)

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._write(self.progress_line())

    def _write(self, message: str) -> None:
        with self._lock:
            self._last_line = self.clock()
            print(f"{self.name}: {message}", file=self.stream or sys.stderr, flush=True)
