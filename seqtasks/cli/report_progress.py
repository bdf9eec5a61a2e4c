"""What a `seqtasks evaluate` report says on stderr while it works, so that loading a model,
decoding a test set and scoring it are never a long silence (stdout holds the report alone, and
--json's last line stays the JSON):

    evaluate translation: loading best.ckpt
    evaluate translation: done in 0:03
    evaluate translation: decoding 1,000 sentences with best.ckpt (beam 5)
    evaluate translation: 412/1,000 sentences (41 %)  elapsed 0:15  eta 0:21  27.5 sentences/s
    evaluate translation: done, 1,000 sentences in 0:36
    evaluate translation: scoring
    evaluate translation: done in 0:01

A line when a stage starts and when it is done, and while it works one at least every
`EVERY` seconds ($SEQTASKS_PROGRESS_SECONDS instead; 0 writes a line at every batch and none
from a clock, for tests): plain lines as `seqtasks.io.preparation` writes them, never a
redrawn bar, whatever stderr is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from seqtasks.io.preparation import Preparation

if TYPE_CHECKING:
    from torch import nn

EVERY = 15.0  # seconds at most between two lines: well inside the 30 s a user waits calmly
VARIABLE = "SEQTASKS_PROGRESS_SECONDS"


def every_seconds() -> float:
    """Seconds at most between two lines: $SEQTASKS_PROGRESS_SECONDS, or `EVERY`.

    Raises:
        ValueError: naming the variable, for a value that is not a number of seconds ≥ 0.
    """
    given = os.environ.get(VARIABLE)
    if given is None:
        return EVERY
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise ValueError(f"${VARIABLE} must be a number of seconds, 0 or more; got {given!r}")
    return seconds


class Stage(Preparation):
    """One stage of a report (loading, decoding, scoring); its progress line also says how many
    units it does a second."""

    def progress_line(self) -> str:
        line = super().progress_line()
        elapsed = self.clock() - self._started
        if not (self.unit and self.done and elapsed > 0):
            return line
        return f"{line}  {self.done / elapsed:,.1f} {self.unit}/s"


class ReportProgress:
    """The stages of one report, each line starting with `name` ("evaluate translation"), a
    line at least every `every_seconds()` (read once, here)."""

    def __init__(self, name: str):
        self.name = name
        self.every = every_seconds()

    def stage(self, start: str, total: int | None = None, unit: str = "") -> Stage:
        """A stage, as a context manager: `start` ("decoding 1,000 sentences"), then lines
        of `unit`s done (`Stage.advance`) of `total`, or from a clock; "done" once it is."""
        ticking = self.every > 0
        return Stage(self.name, start, total, unit, self.every, ticking)


@contextmanager
def counting_batches(encoder: nn.Module, stage: Stage) -> Iterator[None]:
    """Count in `stage` the inputs a model has decoded while the block runs, for a model that
    decodes a batch per call of its `encoder` (`Model.search_sources`, whose batches worker
    threads may share): a thread's batch is done when that thread starts its next, and every
    input (`stage.total`) once the block ends."""
    lock = threading.Lock()
    under_way: dict[int, int] = {}  # by thread, the inputs of the batch it is decoding

    def count(module: nn.Module, inputs: tuple, output: object) -> None:
        with lock:
            done = under_way.get(threading.get_ident(), 0)
            under_way[threading.get_ident()] = inputs[0].size(0)  # (B, S) source ids
            if done:
                stage.advance(done)

    hook = encoder.register_forward_hook(count)
    try:
        yield
    finally:
        hook.remove()
    if stage.total and stage.done < stage.total:
        stage.advance(stage.total - stage.done)
