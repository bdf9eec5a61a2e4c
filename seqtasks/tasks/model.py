"""What every model `seqtasks.load` returns shares: the task it wraps, the search settings a
call runs with (the checkpoint's, with what the call gives instead), and batched search over
token sources.

Each model takes any number of inputs and batches them itself (length-sorted batches of a token
budget, or of a number of images), and returns one typed result per input, in input order, with
the rest of its n-best list in `alternatives`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import torch

from seqtasks.data.batch import pad
from seqtasks.data.batching import TokenBucketSampler
from seqtasks.data.tokenizer import EOS_ID, PAD_ID, Tokenizer
from seqtasks.search import Hypothesis, SearchSettings, run_batches, search
from seqtasks.search.budget import TokenBudget, batch_tokens, bytes_per_token
from seqtasks.tasks.attentions import Attentions, Maps, recorded_maps
from seqtasks.tasks.base import EncoderDecoderTask

R = TypeVar("R")  # a result type: Translation, Parse or Caption


def with_alternatives(nbest: Sequence[R]) -> R:
    """The first result of an n-best list, the others its `alternatives`, in order."""
    best, *others = nbest
    return replace(best, alternatives=others)


def decoded(hypothesis: Hypothesis, tokenizer: Tokenizer) -> tuple:
    """A hypothesis as its result's first fields: (text, pieces, score, attention), its tokens
    read by the target `tokenizer`."""
    tokens = hypothesis.tokens
    text, pieces = tokenizer.decode(tokens), tokenizer.pieces(tokens)
    return text, pieces, hypothesis.score, hypothesis.attention


def read_outputs(
    nbests: Sequence[list[Hypothesis] | None], results: Sequence[Any]
) -> list[tuple[int, list[int], Any]]:
    """(input i, output token ids, result) for every result and alternative read from an
    n-best list (none for an input without one)."""
    return [
        (i, hypothesis.tokens, found)
        for i, (nbest, result) in enumerate(zip(nbests, results, strict=True))
        if nbest is not None
        for hypothesis, found in zip(nbest, [result, *result.alternatives])
    ]


def as_list(items: Sequence, what: str) -> list:
    """`items` as a list, refusing a lone string (a sequence of characters, not of inputs)."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"pass a list of {what}, not a single string: [{items[:30]!r}]")
    return list(items)


class Model:
    """A trained task (`task`, a LightningModule, put in eval mode), loaded from `checkpoints`
    (several: an ensemble), each named as it was given: a checkpoint's or model folder's path,
    or `hf://ORG/NAME@COMMIT`.

    Raises:
        ValueError: for a task without what its checkpoints store (tokenisers, vocabularies).
    """

    max_rows: int | None = None  # search rows (tokens × beam) a batch may hold (None: any)

    def __init__(self, task: EncoderDecoderTask, checkpoints: Sequence[str | Path]):
        if task.stored() is None:
            raise ValueError(f"the model has no {task.stored_as}: load it from a checkpoint")
        self.task = task.eval()
        self.checkpoints = list(checkpoints)

    def search_settings(
        self,
        beam: int | None = None,
        n_best: int | None = None,
        stop: str | None = None,
        max_length: int | None = None,
        settings: SearchSettings | None = None,
    ) -> SearchSettings:
        """What a call with these arguments searches with: `settings` as they are, when given
        (a server's job, a caller's own); else the checkpoint's settings (its `test_beam`,
        `length_alpha`, `beam_stop`, length limits), each argument given (not None) instead.
        Raises a ValueError naming a bad one (`SearchSettings`), or for `settings` given with
        any of the others."""
        if settings is None:
            return self.task.test_settings.override(
                beam=beam, n_best=n_best, stop=stop, max_length=max_length
            )
        if any(value is not None for value in (beam, n_best, stop, max_length)):
            raise ValueError("give settings, or beam, n_best, stop and max_length: not both")
        return settings

    @property
    def device(self) -> torch.device:
        return self.task.device

    def batch_tokens(
        self,
        max_tokens: TokenBudget,
        settings: SearchSettings,
        attention_sources: int | None = None,
    ) -> int:
        """Source tokens per batch: `max_tokens`, or for "auto" what suits the model's device
        (`seqtasks.search.budget.batch_tokens`: 2,000 on a CPU, by free memory on a GPU); at
        most `max_rows` search rows (tokens × beam), but for "auto" on a GPU, which bounds
        the rows itself."""
        task = self.task
        encoders = getattr(task.encoder, "members", [task.encoder])  # an ensemble's, each
        per_token = bytes_per_token(
            task.decoder,
            sum(encoder.out_dim for encoder in encoders),
            settings.beam,
            settings.max_length_ratio,
            settings.max_length_offset,
            attention_sources,
        )
        tokens = batch_tokens(max_tokens, self.device, per_token)
        if self.max_rows is None or (max_tokens == "auto" and self.device.type == "cuda"):
            return tokens
        return max(min(tokens, self.max_rows // settings.beam), 1)

    def search_sources(
        self,
        sources: Sequence[list[int]],
        settings: SearchSettings,
        max_tokens: TokenBudget = "auto",
        workers: int | None = None,
        attention: bool = False,
    ) -> list[list[Hypothesis] | None]:
        """Per source (token ids, without the EOS added here, at most `source_limit` of
        them), its n-best hypotheses, or None for an empty one; searched in length-sorted
        batches of about `max_tokens` padded tokens (`batch_tokens`), under the task's
        constraint. On a CPU, `workers` threads (default: torch's thread count) take the
        batches in turn, each on one core (`run_batches`); the results do not depend on them.
        `attention` keeps each hypothesis' attention (ValueError if the decoder has none)."""
        if attention:
            self.require_attention()
        limit = self.source_limit(settings.max_length)
        budget = self.batch_tokens(max_tokens, settings, limit + 1 if attention else None)
        results: list[list[Hypothesis] | None] = [None] * len(sources)
        todo = [i for i, ids in enumerate(sources) if ids]
        task = self.task

        def search_batch(chunk: Sequence[int]) -> None:
            rows = [todo[j] for j in chunk]
            src = pad([sources[i] + [EOS_ID] for i in rows]).to(self.device)  # (B, S)
            memory = task.encode_source(src, src != PAD_ID)
            constraint = task.search_constraint(memory)
            found = search(task.decoder, memory, settings, constraint, attention)
            for i, nbest in zip(rows, found, strict=True):
                results[i] = nbest

        lengths = [len(sources[i]) + 1 for i in todo]
        batches = TokenBucketSampler(lengths, budget, shuffle=False).batches
        run_batches(search_batch, batches, workers, self.device.type)
        return results

    def every_attention(
        self, sources: Sequence[list[int]], targets: Sequence[list[int]], max_tokens: int = 2000
    ) -> list[Maps | None]:
        """Per pair of source and target token ids (without EOS), every attention the model
        computes while it reads the target by teacher forcing, as it would while writing it, by
        kind, layer and head (`attentions.recorded_maps`: rows for the target and its EOS); None
        for an empty source. In length-sorted batches of about `max_tokens` padded tokens of
        source and target. ValueError if the decoder has no attention, or for a target longer
        than the decoder reads (naming the pair, from 0)."""
        self.require_attention()
        self.check_forced(targets)
        results: list[Maps | None] = [None] * len(sources)
        task = self.task
        for rows in self.forced_batches(sources, targets, max_tokens):
            src = pad([sources[i] + [EOS_ID] for i in rows]).to(self.device)
            found = recorded_maps(
                task,
                lambda src=src: task.encode_source(src, src != PAD_ID),
                [targets[i] for i in rows],
                [len(sources[i]) + 1 for i in rows],
            )
            for i, maps in zip(rows, found, strict=True):
                results[i] = maps
        return results

    def attach_attentions(
        self,
        sources: Sequence[list[int]],
        nbests: Sequence[list[Hypothesis] | None],
        results: Sequence[Any],
        names: Callable[[int, list[int]], tuple[list[str], list[str], list[str]]],
    ) -> None:
        """Fill `attentions` of every result and of its alternatives (`every_attention`, over
        the hypothesis each was read from); `names(i, tokens)` gives the pieces the maps of
        source i and output `tokens` are over: (source, memory, target), with their EOS."""
        outputs = read_outputs(nbests, results)
        every = self.every_attention(
            [sources[i] for i, _, _ in outputs], [t for _, t, _ in outputs]
        )
        for (i, tokens, found), maps in zip(outputs, every, strict=True):
            found.attentions = Attentions(*names(i, tokens), **maps)

    def check_forced(self, targets: Sequence[list[int]]) -> None:
        """A ValueError for a target longer than the decoder reads, naming it (from 0)."""
        steps = self.task.decoder.max_positions  # BOS included
        for i, target in enumerate(targets):
            if steps is not None and len(target) + 1 > steps:
                raise ValueError(
                    f"translation {i} has {len(target)} pieces; the model's decoder reads at "
                    f"most {steps - 1}"
                )

    @staticmethod
    def forced_batches(
        sources: Sequence[list[int]], targets: Sequence[list[int]], max_tokens: int
    ) -> list[list[int]]:
        """The pairs with a source, by index, in length-sorted batches of about `max_tokens`
        padded tokens of source and target."""
        todo = [i for i, source in enumerate(sources) if source]
        lengths = [len(sources[i]) + len(targets[i]) + 2 for i in todo]
        batches = TokenBucketSampler(lengths, max_tokens, shuffle=False).batches
        return [[todo[j] for j in chunk] for chunk in batches]

    def source_limit(self, max_length: int) -> int:
        """`max_length`, or fewer tokens if the encoder reads fewer positions (the source's
        EOS takes one)."""
        positions = self.task.encoder.max_positions
        return max_length if positions is None else min(max_length, positions - 1)

    def require_attention(self) -> None:
        """Raise a ValueError naming the decoder if results cannot carry attention."""
        if not self.gives_attention:
            name = type(self.task.decoder).__name__
            raise ValueError(f"attention was asked for, but the model's {name} has no attention")

    def to(self, device: str | torch.device) -> Model:
        """Move the model to `device`; returns itself."""
        self.task.to(device)
        return self

    @property
    def gives_attention(self) -> bool:
        """Whether results can carry attention weights (the decoder has attention)."""
        return self.task.decoder.gives_attention

    def __repr__(self) -> str:
        names = ", ".join(str(path) for path in self.checkpoints)
        return f"{type(self).__name__}({names}, device={self.device})"
