"""Messages from Lightning and torch that tell a seqtasks user nothing they can act on, silenced
here and nowhere else, each by its own text (and category), so that every other warning
still shows.

- Lightning's "💡 Tip: For seamless cloud …" lines advertise its hosted services (litlogger,
  litmodels) at every run, and Lightning offers no switch for them: they are dropped by a
  filter on the logger that writes them, the way Lightning documents to tune its console.
- torch 2.14 deprecated `LeafSpec`, which Lightning 2.6's `utilities/_pytree.py` still builds
  for every batch it moves: a FutureWarning about Lightning's code, not seqtasks'.
- `seqtasks validate`, `test` and `predict` with `--ckpt_path` restore the state of the fit's
  callbacks, which an evaluation never uses: Lightning then warns that a callback of the fit
  is missing (the `Timer` of `max_time`) and that the checkpoints' `dirpath` changed (the run
  writes its logs to a new `version_N`). Both are silenced for those runs only; in `fit`, where
  they mean a resumed run lost that state, they still show.
- Lightning's start-up lines ("Seed set to 1", "GPU available: …") are held back until a run's
  checks have passed (`StartupLines`): a run refused before its first step ends with its one
  `error:` line alone, and a run that starts shows them as before.
"""

from __future__ import annotations

import logging
import logging.handlers
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

ADVERTS = ("💡 Tip: For seamless cloud",)
RANK_ZERO_LOGGER = "lightning.pytorch.utilities.rank_zero"  # rank_zero_info writes here
# The fit's callbacks' state, restored by an evaluation that has no use for it.
EVALUATION_WARNINGS = (
    r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be",
    r"The dirpath has changed from ",
)


class _NoAdverts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(ADVERTS)


NO_ADVERTS = _NoAdverts()


def silence_known_noise() -> None:
    """Drop Lightning's adverts and the `LeafSpec` FutureWarning Lightning's code causes, for
    the rest of the process (calling it again adds nothing)."""
    logging.getLogger(RANK_ZERO_LOGGER).addFilter(NO_ADVERTS)
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )


@contextmanager
def evaluation_without_fit_state(subcommand: str) -> Iterator[None]:
    """Inside, for `validate`, `test` and `predict`: no warnings about the fit's callback state
    that the evaluation does not restore."""
    with warnings.catch_warnings():
        if subcommand != "fit":
            for message in EVALUATION_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=UserWarning)
        yield


LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric")  # each with its stderr handler


class StartupLines:
    """Holds what Lightning's loggers write (their records, in order) from `hold()` until
    `release()` writes them as they would have been, or `drop()` forgets them."""

    def __init__(self) -> None:
        self._held: list[tuple[logging.Logger, list[logging.Handler], logging.Handler]] = []

    def hold(self) -> None:
        for name in LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            buffer = logging.handlers.BufferingHandler(capacity=1 << 30)
            self._held.append((logger, list(logger.handlers), buffer))
            logger.handlers = [buffer]

    def _restore(self, write: bool) -> None:
        for logger, handlers, buffer in self._held:
            logger.handlers = handlers
            for record in buffer.buffer if write else []:
                for handler in handlers:
                    if record.levelno >= handler.level:
                        handler.handle(record)
        self._held = []

    def release(self) -> None:
        self._restore(write=True)

    def drop(self) -> None:
        self._restore(write=False)


STARTUP = StartupLines()
