"""The searches equal the ones they replaced (`search_reference`, issue 29): the same
hypotheses, scores, attention and finished flags on random small models and inputs, whether
finished rows leave the batch at once (a CPU's default), below half (a GPU's) or never; and a
step reads back at most one small tensor from the device."""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import search_reference as reference
import torch
from test_search import BOS, EOS, EOSBias, sources

from seqtasks.decoders import BahdanauDecoder, LuongDecoder, TransformerDecoder
from seqtasks.decoders.base import Decoder
from seqtasks.encoders import RNNEncoder
from seqtasks.layers.memory import Memory
from seqtasks.parsing.constraint import BracketConstraint
from seqtasks.parsing.vocabulary import SPECIALS
from seqtasks.search import Hypothesis, SearchSettings, beam_search, greedy, length_penalty, sample
from seqtasks.search.beam import Groups, _input_done
from seqtasks.search.ensemble import EnsembleDecoder, EnsembleEncoder
from seqtasks.search.hypothesis import shrink_threshold

SHRINKS = [None, 0.5, 0.0]  # at once (on a CPU), below half the rows (a GPU's), never
ALPHAS = [-0.5, 0.0, 0.6, 1.0, 2.0]  # < 0: lp falls with the length
INF = float("inf")
BRACKETS = [*SPECIALS, "(S", ")S", "(NP", ")NP", "(VP", ")VP", "XX"]


class Forbid:
    """A `Constraint` that never allows the last token of a vocabulary of `vocab`."""

    def __init__(self, vocab: int):
        self.vocab = vocab

    def start(self, max_length, beam_size):
        return torch.zeros(len(max_length) * beam_size)

    def allowed(self, state):
        return (torch.arange(self.vocab) < self.vocab - 1).expand(len(state), self.vocab)

    def advance(self, state, tokens):
        return state

    def reorder(self, state, index):
        return state.index_select(0, index)


class NoRepeat:
    """A `Constraint` with a state per row: a row may not choose the token it chose last."""

    def __init__(self, vocab: int):
        self.vocab = vocab

    def start(self, max_length, beam_size):
        return torch.full((len(max_length) * beam_size,), BOS)

    def allowed(self, state):
        return torch.arange(self.vocab) != state[:, None]

    def advance(self, state, tokens):
        return tokens

    def reorder(self, state, index):
        return state.index_select(0, index)


class Sharp(EOSBias):
    """A decoder whose logits are multiplied by `factor`: a peaked, trained-looking model."""

    def __init__(self, inner, factor: float):
        super().__init__(inner, 0.0)
        self.factor = factor

    def _adjust(self, logits, prev):
        return logits * self.factor


@dataclass
class Case:
    """A random model, batch and search settings, drawn from `seed` (`settings` as the kept
    copy of the old search takes them: beam_size, alpha, n_best, return_attention, stop)."""

    decoder: torch.nn.Module
    memory: Memory
    limits: torch.Tensor
    settings: dict
    constraint: object | None

    @property
    def search_settings(self) -> SearchSettings:
        """The same settings, as today's search takes them."""
        s = self.settings
        return SearchSettings(s["beam_size"], s["alpha"], s["stop"], n_best=s["n_best"])


def draw(seed: int) -> Case:
    """Vocabularies of 4 to 30 (some below 2K, so a row has fewer than 2K candidates), RNN and
    Transformer decoders and ensembles of them, EOS pushed up after some tokens (outputs that
    end at many steps) or never allowed, per-input limits, constraints, n-best and both stop
    rules, attention asked for or not."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    brackets = rng.random() < 0.2
    vocab = len(BRACKETS) if brackets else rng.randint(4, 30)
    lengths = [rng.randint(1, 7) for _ in range(rng.randint(1, 7))]
    kinds = rng.choice([["bahdanau"], ["luong"], ["transformer"], ["luong", "transformer"]])
    encoders, decoders = [], []
    for kind in kinds:
        encoder = RNNEncoder(vocab, embed_dim=8, hidden_size=8, dropout=0.0).eval()
        if kind == "transformer":
            decoder = TransformerDecoder(
                vocab, encoder.out_dim, d_model=16, num_heads=2, num_layers=2, ff_dim=32,
                dropout=0.0,
            )  # fmt: skip
        else:
            decoder_class = BahdanauDecoder if kind == "bahdanau" else LuongDecoder
            decoder = decoder_class(vocab, encoder.out_dim, embed_dim=8, hidden_size=16, dropout=0)
        encoders.append(encoder)
        decoders.append(decoder.eval())
    bias = rng.choice([0.0, 1.0, 2.5, float("-inf")]) if not brackets else 0.0
    decoder = EOSBias(Sharp(decoders[0], rng.choice([1.0, 4.0])), bias, every=rng.randint(1, 4))
    encoder = encoders[0]
    if len(kinds) > 1:
        encoder, decoder = EnsembleEncoder(encoders), EnsembleDecoder([decoder, *decoders[1:]])
    src, mask = sources(seed, lengths)
    src = src.clamp(max=vocab - 1)
    with torch.no_grad():
        memory = encoder(src, mask)
    words = torch.tensor(lengths)
    limits = torch.tensor([rng.randint(0, 14) for _ in lengths])  # 0: one step all the same
    constraint = rng.choice([None, None, Forbid(vocab), NoRepeat(vocab)])
    if brackets:
        limits = words * 3 + rng.randint(3, 6)
        constraint = BracketConstraint(BRACKETS, words, EOS, len(SPECIALS))
    beam = rng.randint(1, 6)
    settings = {
        "beam_size": beam,
        "n_best": rng.randint(1, beam),
        "alpha": rng.choice(ALPHAS),
        "stop": rng.choice(["exact", "heuristic"]),
        "return_attention": rng.random() < 0.5,
    }
    return Case(decoder, memory, limits, settings, constraint)


def assert_same(found, expected, exact: bool) -> None:
    """Equal hypotheses; with `exact`, equal to the bit (the same rows in every batch)."""
    assert len(found) == len(expected)
    for nbest, reference_nbest in zip(found, expected, strict=True):
        assert [(h.tokens, h.finished) for h in nbest] == [
            (h.tokens, h.finished) for h in reference_nbest
        ]
        for h, r in zip(nbest, reference_nbest, strict=True):
            if exact:
                assert h.score == r.score
            else:
                assert h.score == pytest.approx(r.score, abs=1e-5)
            assert (h.attention is None) == (r.attention is None)
            if h.attention is not None:
                assert h.attention.dtype == r.attention.dtype
                tolerance = 0.0 if exact else 1e-5
                torch.testing.assert_close(h.attention, r.attention, atol=tolerance, rtol=0)


@pytest.mark.parametrize("shrink", SHRINKS)
@pytest.mark.parametrize("seed", range(40))
def test_beam_search_equals_the_reference(seed, shrink):
    case = draw(seed)
    args = (case.decoder, case.memory, BOS, EOS, case.limits)
    expected = reference.beam_search(*args, **case.settings, constraint=case.constraint)
    found = beam_search(
        case.decoder, case.memory, case.search_settings, case.limits,
        attention=case.settings["return_attention"], constraint=case.constraint,
        shrink_below=shrink,
    )  # fmt: skip
    assert_same(found, expected, exact=shrink is None)


@pytest.mark.parametrize("shrink", SHRINKS)
@pytest.mark.parametrize("seed", range(40))
def test_greedy_equals_the_reference(seed, shrink):
    case = draw(seed)
    args = (case.decoder, case.memory, BOS, EOS, case.limits)
    attention = case.settings["return_attention"]
    expected = reference.greedy(*args, attention, case.constraint)
    found = greedy(
        case.decoder, case.memory, case.limits, attention=attention, constraint=case.constraint,
        shrink_below=shrink,
    )  # fmt: skip
    assert_same(found, expected, exact=shrink is None)


@pytest.mark.parametrize("seed", range(10))
def test_sample_equals_the_reference_with_the_same_generator(seed):
    case = draw(seed)
    args = (case.decoder, case.memory, BOS, EOS, case.limits)
    attention = case.settings["return_attention"]
    expected = reference.sample(
        *args, 1.3, 3, torch.Generator().manual_seed(seed), attention, case.constraint
    )
    found = sample(
        case.decoder, case.memory, case.limits, temperature=1.3, top_k=3,
        generator=torch.Generator().manual_seed(seed), attention=attention,
        constraint=case.constraint,
    )  # fmt: skip
    assert_same(found, expected, exact=True)


class Tied(Decoder):
    """BOS -> 4 or 5 (p .4 each) -> EOS, or BOS -> EOS (p .2): two outputs of equal score."""

    vocab_size = 8

    def __init__(self):
        super().__init__()
        table = torch.full((8, 8), 1e-3)
        table[BOS, [4, 5, EOS]] = torch.tensor([0.4, 0.4, 0.2])
        table[[4, 5], EOS] = 1.0
        self.log_table = (table / table.sum(-1, keepdim=True)).log()

    def forward(self, memory, tgt_in, **attention):
        raise NotImplementedError

    def start(self, memory, beam_size=1):
        return None

    def step(self, prev_tokens, state):
        return self.log_table[prev_tokens], state, None

    def reorder(self, state, index):
        return state


@pytest.mark.parametrize("stop", ["exact", "heuristic"])
def test_the_stop_rules_decide_as_the_reference(stop):
    """`_input_done` on 3,000 random inputs (finished scores, live scores, limits from this
    step's end on, lengths penalised with α < 0 too) decides as the reference's does."""
    rng = random.Random(stop)
    for _ in range(100):
        k = rng.randint(1, 5)
        n_best, t, alpha, n = rng.randint(1, k), rng.randint(0, 12), rng.choice(ALPHAS), 30
        limit = [t + 1 + rng.choice([0, 0, 1, 2, 7]) for _ in range(n)]
        before = [[rng.gauss(-4, 2) for _ in range(rng.randint(0, 2 * k))] for _ in range(n)]
        ending = [[rng.choice([-INF, rng.gauss(-4, 2)]) for _ in range(k)] for _ in range(n)]
        best_live = [rng.choice([-INF, rng.gauss(-5, 2), rng.gauss(-5, 2)]) for _ in range(n)]
        scores = torch.tensor(best_live)[:, None].expand(n, k)  # float32, as search keeps them
        best = [(sorted(b, reverse=True) + [-INF] * n_best)[:n_best] for b in before]
        groups = Groups(
            inputs=torch.arange(n),
            live=torch.ones(n, dtype=torch.bool),
            scores=scores,
            limit=torch.tensor(limit),
            limit_lp=torch.tensor([length_penalty(m, alpha) for m in limit], dtype=torch.float64),
            count=torch.tensor([len(b) for b in before]),
            best=torch.tensor(best, dtype=torch.float64),
        )
        done = _input_done(stop, groups, torch.tensor(ending, dtype=torch.float64), t, alpha, k)
        expected = []
        for g in range(n):
            finished = [Hypothesis([], s) for s in before[g] + ending[g] if s > -INF]
            live = float(scores[g, 0])
            expected.append(
                reference._input_done(stop, finished, live, t, limit[g], alpha, n_best, k)
            )
        assert done.tolist() == expected


@pytest.mark.parametrize("shrink", SHRINKS)
def test_equal_scores_rank_as_the_reference_ranks_them(shrink):
    """Hypotheses of equal score come in the order they ended (Python's stable sort)."""
    memory = Memory(torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 4))
    args = (Tied(), memory, BOS, EOS, torch.tensor([3, 6]))
    expected = reference.beam_search(*args, beam_size=3, n_best=3)
    assert expected[0][0].score == expected[0][1].score, "a tie to rank"
    found = beam_search(Tied(), memory, SearchSettings(3, n_best=3), args[-1], shrink_below=shrink)
    assert_same(found, expected, True)


@pytest.mark.parametrize("limit", [0, 1])
def test_the_shortest_limits_equal_the_reference(limit):
    """Limits of 0 everywhere (no step at all) or 1, where the old searches' quirks show: at 0
    beam search returns nothing and greedy an empty unfinished output; a row limited to 0
    among longer ones still takes one step."""
    case = draw(3)
    limits = torch.full_like(case.limits, limit)
    args = (case.decoder, case.memory, BOS, EOS, limits)
    found = greedy(case.decoder, case.memory, limits)
    assert_same(found, reference.greedy(*args), exact=True)
    found = beam_search(case.decoder, case.memory, SearchSettings(3), limits)
    assert_same(found, reference.beam_search(*args, beam_size=3), True)


def test_finished_rows_leave_at_once_on_a_cpu_and_below_half_elsewhere():
    assert shrink_threshold(None, torch.device("cpu")) == 1.0
    assert shrink_threshold(None, torch.device("cuda")) == 0.5
    assert shrink_threshold(0.25, torch.device("cpu")) == 0.25


def test_the_random_cases_cover_what_they_should():
    """The draws include every decoder, constraint and rule, outputs cut at their limit and
    outputs ended at several lengths, so the equalities above test all of it."""
    kinds, constraints, stops, ended, cut, lengths, narrow = set(), set(), set(), 0, 0, set(), 0
    for seed in range(40):
        case = draw(seed)
        kinds.add(type(case.decoder).__name__)
        constraints.add(type(case.constraint).__name__)
        stops.add(case.settings["stop"])
        narrow += case.decoder.vocab_size < 2 * case.settings["beam_size"]
        for nbest in reference.beam_search(
            case.decoder, case.memory, BOS, EOS, case.limits, **case.settings,
            constraint=case.constraint,
        ):  # fmt: skip
            for h in nbest:
                ended += h.finished
                cut += not h.finished
                lengths.add(len(h.tokens))
    assert kinds == {"EOSBias", "EnsembleDecoder"}
    assert constraints == {"NoneType", "Forbid", "NoRepeat", "BracketConstraint"}
    assert stops == {"exact", "heuristic"}
    assert ended > 20 and cut > 20 and len(lengths) > 6 and narrow > 2


@contextmanager
def counted_reads():
    """Count what reads a tensor's values back to the host: `tolist`, `item`, `nonzero`,
    `cpu`, and `int`, `float`, `bool` of a tensor. On a GPU each waits for the device."""
    counts = {"reads": 0}
    names = ["tolist", "item", "nonzero", "cpu", "__int__", "__float__", "__bool__", "__index__"]
    saved = {name: getattr(torch.Tensor, name) for name in names}

    def counting(method):
        def read(self, *args, **kwargs):
            counts["reads"] += 1
            return method(self, *args, **kwargs)

        return read

    for name, method in saved.items():
        setattr(torch.Tensor, name, counting(method))
    try:
        yield counts
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


class Marking(EOSBias):
    """Notes the reads counted so far (`counts`) at every step."""

    def __init__(self, inner, bias, every, counts):
        super().__init__(inner, bias, every)
        self.counts, self.marks = counts, []

    def step(self, prev_tokens, state):
        self.marks.append(self.counts["reads"])
        return super().step(prev_tokens, state)


def reads_per_step(search) -> list[int]:
    """The reads between one decoder step and the next, for 8 inputs, of `search(decoder,
    memory)`."""
    torch.manual_seed(0)
    encoder = RNNEncoder(12, embed_dim=8, hidden_size=8, dropout=0.0).eval()
    inner = LuongDecoder(12, encoder.out_dim, embed_dim=8, hidden_size=16, dropout=0.0).eval()
    src, mask = sources(3, [6, 3, 5, 1, 7, 2, 4, 6])
    with torch.no_grad():
        memory = encoder(src, mask)
    with counted_reads() as counts:
        decoder = Marking(inner, 2.0, 3, counts)
        search(decoder, memory)
    marks = decoder.marks
    return [after - before for before, after in zip(marks, marks[1:])]


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_step_reads_back_one_small_tensor(search):
    """With finished rows kept in the batch (shrink_below=0), a step reads the device once,
    however many inputs end there (greedy a step late: none at its first step); the old search
    read twice (greedy) or per input (beam)."""
    if search == "beam":

        def new(decoder, memory):
            settings = SearchSettings(4, n_best=2)
            return beam_search(decoder, memory, settings, 9, shrink_below=0.0)

        def old(decoder, memory):
            return reference.beam_search(decoder, memory, BOS, EOS, 9, beam_size=4, n_best=2)

    else:

        def new(decoder, memory):
            return greedy(decoder, memory, 9, shrink_below=0.0)

        def old(decoder, memory):
            return reference.greedy(decoder, memory, BOS, EOS, 9)

    found = reads_per_step(new)
    late = search == "greedy"  # greedy reads the step before's count, in flight since then
    assert len(found) >= 4 and set(found[late:]) == {1} and found[:late] == [0] * late
    assert max(reads_per_step(old)) >= (2 if search == "greedy" else 4)
