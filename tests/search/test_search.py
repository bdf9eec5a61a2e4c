"""Greedy, sampling and beam search over a small random model."""

from __future__ import annotations

import itertools
import math
from functools import partial

import pytest
import torch

from seqtasks.data.tokenizer import BOS_ID, EOS_ID
from seqtasks.decoders import BahdanauDecoder, LuongDecoder
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.encoders import RNNEncoder
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.search import SearchSettings, beam_search, length_penalty, limits, search
from seqtasks.search.hypothesis import constrained_log_probs, max_lengths, row_candidates
from seqtasks.search.single_path import greedy, sample

VOCAB, BOS, EOS = 12, BOS_ID, EOS_ID  # every search starts from BOS_ID and ends at EOS_ID
LENGTHS = [6, 3, 5, 1]


class EOSBias(Decoder):
    """Wraps a decoder and adds `bias` to the EOS logit after every token that is a multiple
    of `every` (every=1: always). bias=-inf with every=1 gives a model that never ends."""

    def __init__(self, inner: Decoder, bias: float, every: int = 1):
        super().__init__()
        self.inner, self.bias, self.every, self.vocab_size = inner, bias, every, inner.vocab_size

    def _adjust(self, logits: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        logits = logits.clone()
        eos = logits[..., EOS]
        logits[..., EOS] = torch.where(prev % self.every == 0, eos + self.bias, eos)
        return logits

    def forward(self, memory: Memory, tgt_in: torch.Tensor, **attention) -> DecoderOutput:
        output = self.inner(memory, tgt_in, **attention)
        return DecoderOutput(self._adjust(output.logits, tgt_in), output.attention)

    def start(self, memory: Memory, beam_size: int = 1):
        return self.inner.start(memory, beam_size)

    def step(self, prev_tokens, state):
        logits, state, weights = self.inner.step(prev_tokens, state)
        return self._adjust(logits, prev_tokens), state, weights

    def reorder(self, state, index):
        return self.inner.reorder(state, index)


def make_model(eos_bias: float = 0.0, decoder_cls=BahdanauDecoder, seed: int = 1, every: int = 1):
    """A random encoder and decoder. With the defaults and (2.0, every=3) beam search returns a
    mix of finished hypotheses of several lengths and unfinished ones."""
    torch.manual_seed(seed)
    encoder = RNNEncoder(VOCAB, embed_dim=8, hidden_size=8, dropout=0.0).eval()
    decoder = decoder_cls(VOCAB, encoder.out_dim, embed_dim=8, hidden_size=16, dropout=0.0)
    return encoder, EOSBias(decoder.eval(), eos_bias, every).eval()


NEVER_ENDS = {"eos_bias": float("-inf")}
MIXED = {"eos_bias": 2.0, "every": 3}
CASES = {
    "plain": {"eos_bias": 0.0},
    "short": {"eos_bias": 1.0},
    "mixed": MIXED,
    "mixed-seed0": {**MIXED, "seed": 0},
    "mixed-luong": {**MIXED, "decoder_cls": LuongDecoder},
    "never-ends": NEVER_ENDS,
}


def sources(seed: int = 3, lengths: list[int] = LENGTHS):
    g = torch.Generator().manual_seed(seed)
    mask = lengths_to_mask(torch.tensor(lengths))
    src = torch.randint(4, VOCAB, mask.shape, generator=g).masked_fill(~mask, 0)
    src[torch.arange(len(lengths)), torch.tensor(lengths) - 1] = EOS
    return src, mask


def encode(encoder, src=None, mask=None) -> Memory:
    if src is None:
        src, mask = sources()
    with torch.no_grad():
        return encoder(src, mask)


def rescore(decoder, memory: Memory, row: int, tokens: list[int], finished: bool):
    """Teacher-forced log-probability and attention of `tokens` (+ EOS if finished)."""
    target = tokens + ([EOS] if finished else [])
    tgt_in = torch.tensor([[BOS] + target[:-1]])
    with torch.no_grad():
        output = decoder(memory.index_select(torch.tensor([row])), tgt_in)
    log_probs = output.logits[0].log_softmax(-1)
    score = float(log_probs[torch.arange(len(target)), torch.tensor(target)].sum())
    attention = None if output.attention is None else output.attention[0]
    return score, attention


@pytest.mark.parametrize("case", CASES)
def test_beam_one_equals_greedy(case):
    encoder, decoder = make_model(**CASES[case])
    memory = encode(encoder)
    greedy_out = greedy(decoder, memory, 8)
    beam_out = beam_search(decoder, memory, SearchSettings(1, length_alpha=0.0), 8)
    for g, b in zip(greedy_out, beam_out, strict=True):
        assert len(g) == len(b) == 1
        assert b[0].tokens == g[0].tokens
        assert b[0].finished == g[0].finished
        assert b[0].score == pytest.approx(g[0].score, abs=1e-4)


def test_greedy_scores_are_log_probabilities():
    encoder, decoder = make_model(**CASES["mixed-luong"])
    memory = encode(encoder)
    results = greedy(decoder, memory, 8)
    assert {r[0].finished for r in results} == {True, False}, "test both kinds"
    for row, (hyp,) in enumerate(results):
        expected, _ = rescore(decoder, memory, row, hyp.tokens, hyp.finished)
        assert hyp.score == pytest.approx(expected, abs=1e-4)
        assert hyp.score <= 0.0
        assert EOS not in hyp.tokens and BOS not in hyp.tokens


@pytest.mark.parametrize("case", ["plain", "mixed", "mixed-luong"])
def test_n_best_sorted_distinct_and_rescorable(case):
    encoder, decoder = make_model(**CASES[case])
    memory = encode(encoder)
    alpha = 0.6
    results = beam_search(
        decoder,
        memory,
        SearchSettings(4, length_alpha=alpha, n_best=4),
        7,
        attention=True,
    )
    assert len(results) == len(LENGTHS)
    for row, nbest in enumerate(results):
        assert len(nbest) == 4
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in nbest}) == 4, "n-best hypotheses must differ"
        for hyp in nbest:
            assert len(hyp.tokens) <= 7
            assert EOS not in hyp.tokens
            # The score is the model's log-probability over the length penalty, and the
            # attention is the one behind each of the hypothesis' own tokens.
            log_prob, attention = rescore(decoder, memory, row, hyp.tokens, hyp.finished)
            length = len(hyp.tokens) + int(hyp.finished)
            assert hyp.score == pytest.approx(log_prob / length_penalty(length, alpha), abs=1e-4)
            valid = LENGTHS[row]
            assert hyp.attention.shape == (len(hyp.tokens), valid)
            torch.testing.assert_close(
                hyp.attention, attention[: len(hyp.tokens), :valid], atol=1e-5, rtol=1e-5
            )


def test_length_penalty_is_wu_et_al():
    """lp(Y) = (5 + |Y|)^α / (5 + 1)^α (Wu et al. 2016, eq. 14), at values worked out by hand."""
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
    assert length_penalty(13, 0.5) == pytest.approx(math.sqrt(3.0))
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(25, 0.0) == 1.0


def all_sequences(decoder, memory: Memory, row: int, words: list[int], limit: int):
    """Every output of at most `limit` steps for input `row`, with its log-probability: the
    finished ones (≤ limit − 1 words, then EOS) and the unfinished ones of `limit` words."""
    outputs = []
    for length in range(limit + 1):
        prefixes = [list(p) for p in itertools.product(words, repeat=length)]
        finished = length < limit
        targets = torch.tensor([p + [EOS] if finished else p for p in prefixes])
        if targets.size(1) == 0:
            continue
        tgt_in = torch.cat([torch.full((len(targets), 1), BOS), targets[:, :-1]], dim=1)
        rows = memory.index_select(torch.full((len(targets),), row))
        with torch.no_grad():
            log_probs = decoder(rows, tgt_in).logits.log_softmax(-1)
        scores = log_probs.gather(2, targets[:, :, None])[:, :, 0].sum(1)
        outputs += [(p, float(v), finished) for p, v in zip(prefixes, scores)]
    return outputs


@pytest.mark.parametrize("alpha", [0.0, 0.8, 2.0])
def test_wide_beam_finds_the_best_normalised_output_by_enumeration(alpha):
    """With a beam wide enough to keep every prefix, beam search is exhaustive: its best
    hypothesis is the best of all outputs by log p / ((5 + |Y|) / 6)^α, |Y| counting EOS, as
    enumerating them gives, and its n-best are the next ones. The model can only write words
    4, 5 and EOS (the other logits are −inf), so there are 3^4 + … outputs of 4 steps."""
    encoder, decoder = make_model(**CASES["mixed"])
    words, limit = [4, 5], 4
    allowed = torch.full((VOCAB,), float("-inf"))
    allowed[[*words, EOS]] = 0.0
    decoder.inner.readout.out.bias.data += allowed  # only words and EOS have probability
    memory = encode(encoder, *sources(lengths=[5, 2]))
    results = beam_search(decoder, memory, SearchSettings(16, length_alpha=alpha, n_best=5), limit)
    for row, nbest in enumerate(results):
        ranked = sorted(
            (
                (score / ((5 + len(p) + finished) / 6) ** alpha, p, finished)
                for p, score, finished in all_sequences(decoder, memory, row, words, limit)
            ),
            reverse=True,
        )
        assert [(h.tokens, h.finished) for h in nbest] == [(p, f) for _, p, f in ranked[:5]]
        assert [h.score for h in nbest] == pytest.approx([v for v, _, _ in ranked[:5]], abs=1e-4)


@pytest.mark.parametrize("case", ["mixed-seed0", "mixed-luong"])
def test_beam_finds_at_least_as_good_as_greedy(case):
    encoder, decoder = make_model(**CASES[case])
    memory = encode(encoder)
    greedy_out = greedy(decoder, memory, 8)
    beam_out = beam_search(decoder, memory, SearchSettings(4, length_alpha=0.0), 8)
    for g, b in zip(greedy_out, beam_out, strict=True):
        if g[0].finished and b[0].finished:
            assert b[0].score >= g[0].score - 1e-5


def test_n_best_cannot_exceed_beam():
    encoder, decoder = make_model()
    with pytest.raises(ValueError, match="n_best"):
        beam_search(decoder, encode(encoder), SearchSettings(2, n_best=3), 5)


@pytest.mark.parametrize("search", ["greedy", "beam", "sample"])
def test_model_that_never_ends_is_cut_at_max_length(search):
    encoder, decoder = make_model(**NEVER_ENDS)
    memory = encode(encoder)
    limit = 6
    if search == "greedy":
        results = greedy(decoder, memory, limit)
    elif search == "beam":
        results = beam_search(decoder, memory, SearchSettings(3, n_best=2), limit)
    else:
        results = sample(decoder, memory, limit, generator=torch.Generator().manual_seed(0))
    assert len(results) == len(LENGTHS)
    for nbest in results:
        assert len(nbest) >= 1
        for hyp in nbest:
            assert hyp.finished is False
            assert len(hyp.tokens) == limit
            assert math.isfinite(hyp.score)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_per_row_max_length(search):
    encoder, decoder = make_model(**NEVER_ENDS)
    memory = encode(encoder)
    limits = torch.tensor([2, 5, 1, 3])
    if search == "greedy":
        results = greedy(decoder, memory, limits)
    else:
        results = beam_search(decoder, memory, SearchSettings(3), limits)
    assert [len(r[0].tokens) for r in results] == limits.tolist()
    # And a model that can end never exceeds its row's limit.
    encoder, decoder = make_model(**MIXED)
    memory = encode(encoder)
    results = beam_search(decoder, memory, SearchSettings(3, n_best=3), limits)
    for nbest, limit in zip(results, limits.tolist(), strict=True):
        assert all(len(h.tokens) <= limit for h in nbest)


def test_max_lengths_from_source_lengths():
    encoder, _ = make_model()
    memory = encode(encoder)
    assert max_lengths(memory, 1.5, 2).tolist() == [int(n * 1.5) + 2 for n in LENGTHS]


@pytest.mark.parametrize("case", ["plain", "mixed", "mixed-seed0", "mixed-luong"])
def test_batched_beam_equals_one_sentence_at_a_time(case):
    encoder, decoder = make_model(**CASES[case])
    src, mask = sources()
    memory = encode(encoder, src, mask)
    limits = max_lengths(memory, 1.0, 3)
    batched = beam_search(decoder, memory, SearchSettings(3, length_alpha=1.0, n_best=3), limits)
    for row, length in enumerate(LENGTHS):
        alone_memory = encode(encoder, src[row : row + 1, :length], mask[row : row + 1, :length])
        alone = beam_search(
            decoder,
            alone_memory,
            SearchSettings(3, length_alpha=1.0, n_best=3),
            limits[row : row + 1],
        )[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[row]]
        assert [h.finished for h in alone] == [h.finished for h in batched[row]]
        for a, b in zip(alone, batched[row], strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)


@pytest.mark.parametrize("case", ["mixed-seed0", "mixed-luong"])
def test_batched_greedy_equals_one_sentence_at_a_time(case):
    encoder, decoder = make_model(**CASES[case])
    src, mask = sources()
    batched = greedy(decoder, encode(encoder, src, mask), 8)
    for row, length in enumerate(LENGTHS):
        alone = greedy(
            decoder,
            encode(encoder, src[row : row + 1, :length], mask[row : row + 1, :length]),
            8,
        )
        assert alone[0][0].tokens == batched[row][0].tokens
        assert alone[0][0].score == pytest.approx(batched[row][0].score, abs=1e-4)


@pytest.mark.parametrize("search", ["greedy", "beam", "sample"])
def test_return_attention(search):
    encoder, decoder = make_model(**NEVER_ENDS)
    memory = encode(encoder)
    if search == "greedy":
        results = greedy(decoder, memory, 5, attention=True)
    elif search == "beam":
        results = beam_search(decoder, memory, SearchSettings(3, n_best=3), 5, attention=True)
    else:
        results = sample(
            decoder,
            memory,
            5,
            generator=torch.Generator().manual_seed(0),
            attention=True,
        )
    for row, nbest in enumerate(results):
        for hyp in nbest:
            assert hyp.attention is not None
            assert hyp.attention.shape == (len(hyp.tokens), LENGTHS[row])
            torch.testing.assert_close(hyp.attention.sum(-1), torch.ones(len(hyp.tokens)))
    for nbest in greedy(decoder, memory, 5):
        assert nbest[0].attention is None  # not asked for


def test_greedy_attention_is_the_models():
    encoder, decoder = make_model(**CASES["mixed-luong"])
    memory = encode(encoder)
    for row, (hyp,) in enumerate(greedy(decoder, memory, 8, attention=True)):
        _, attention = rescore(decoder, memory, row, hyp.tokens, hyp.finished)
        torch.testing.assert_close(
            hyp.attention, attention[: len(hyp.tokens), : LENGTHS[row]], atol=1e-5, rtol=1e-5
        )


def test_sample_is_reproducible_with_a_seeded_generator():
    encoder, decoder = make_model(0.0)
    memory = encode(encoder)

    def run(seed: int):
        generator = torch.Generator().manual_seed(seed)
        return [r[0].tokens for r in sample(decoder, memory, 10, generator=generator)]

    assert run(7) == run(7)
    assert any(run(7) != run(s) for s in (8, 9, 10)), "different seeds, different samples"


@pytest.mark.parametrize("case", ["mixed-seed0", "mixed-luong"])
def test_sample_top_k_one_is_greedy(case):
    encoder, decoder = make_model(**CASES[case])
    memory = encode(encoder)
    greedy_out = greedy(decoder, memory, 8)
    sampled = sample(decoder, memory, 8, top_k=1, generator=torch.Generator().manual_seed(0))
    assert [r[0].tokens for r in sampled] == [r[0].tokens for r in greedy_out]
    low_temperature = sample(
        decoder,
        memory,
        8,
        temperature=1e-4,
        generator=torch.Generator().manual_seed(0),
    )
    assert [r[0].tokens for r in low_temperature] == [r[0].tokens for r in greedy_out]


class MarkovDecoder(Decoder):
    """The next token depends on the previous one only, through a fixed table of probabilities:
    BOS -> 4 -> 5 -> 6 -> EOS is the likely path; 7 is an unlikely side branch that ends at once.
    """

    def __init__(self):
        super().__init__()
        self.vocab_size = 8
        table = torch.full((8, 8), 1e-4)
        for prev, nexts in {
            BOS: {4: 0.9, 7: 0.05},
            4: {5: 0.95, 7: 0.03},
            5: {6: 0.95, 7: 0.02},
            6: {EOS: 0.95, 7: 0.01},
            7: {EOS: 0.9},
        }.items():
            for token, p in nexts.items():
                table[prev, token] = p
        self.log_table = (table / table.sum(-1, keepdim=True)).log()

    def forward(self, memory: Memory, tgt_in: torch.Tensor, **attention) -> DecoderOutput:
        return DecoderOutput(self.log_table[tgt_in])

    def start(self, memory: Memory, beam_size: int = 1):
        return torch.zeros(memory.states.size(0) * beam_size)

    def step(self, prev_tokens, state):
        return self.log_table[prev_tokens], state, None

    def reorder(self, state, index):
        return state.index_select(0, index)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("beam_size", [2, 3])
def test_beam_does_not_stop_while_a_live_hypothesis_is_better(beam_size, alpha):
    """Unlikely hypotheses that end early must not end the search while the likely one lives."""
    decoder = MarkovDecoder()
    memory = Memory(
        states=torch.zeros(2, 3, 4),
        mask=torch.ones(2, 3, dtype=torch.bool),
        summary=torch.zeros(2, 4),
    )
    best = [4, 5, 6]
    best_score = float(decoder.log_table[[BOS, 4, 5, 6], [4, 5, 6, EOS]].sum())
    assert greedy(decoder, memory, 10)[0][0].tokens == best
    results = beam_search(decoder, memory, SearchSettings(beam_size, length_alpha=alpha), 10)
    for (hyp,) in results:
        assert hyp.tokens == best
        assert hyp.finished
        assert hyp.score == pytest.approx(best_score / length_penalty(4, alpha), abs=1e-5)


class CountingMarkov(MarkovDecoder):
    """`MarkovDecoder` whose first step ends the output almost surely; counts its steps."""

    def __init__(self):
        super().__init__()
        first = torch.full((8,), 1e-4).index_fill(0, torch.tensor([EOS]), 1.0)
        self.log_table[BOS] = (first / first.sum()).log()
        self.steps = 0

    def step(self, prev_tokens, state):
        self.steps += 1
        return super().step(prev_tokens, state)


def test_beam_stops_once_no_live_hypothesis_can_change_the_best():
    """One output (EOS at once, log p ≈ −7e-4) that no live beam can beat even at the length
    limit (each starts at log 1e-4 ≈ −9.2, over lp(10) = 2.5 still ≈ −3.7): the search ends
    after one step, with one finished hypothesis, not after K = 3."""
    decoder = CountingMarkov()
    memory = Memory(
        states=torch.zeros(1, 3, 4), mask=torch.ones(1, 3, dtype=torch.bool),
        summary=torch.zeros(1, 4),
    )  # fmt: skip
    ((best,),) = beam_search(decoder, memory, SearchSettings(3, length_alpha=1.0), 10)
    assert decoder.steps == 1
    assert best.tokens == [] and best.finished
    assert best.score == pytest.approx(math.log(1 / (1 + 7e-4)), abs=1e-6)


class LateWinner(CountingMarkov):
    """BOS -> EOS (p .51) ends at once; BOS 4 5 6 EOS (p .39, then ~1 a step) is less likely
    but wins once divided by the length penalty (α = 1): −0.950 / lp(4) = −0.633 > −0.673;
    BOS 7 EOS (p .09) is a second, poor, finished output."""

    def __init__(self):
        super().__init__()
        table = torch.full((8, 8), 1e-4)
        for prev, nexts in {
            BOS: {EOS: 0.5, 4: 0.38, 7: 0.1},
            4: {5: 0.999},
            5: {6: 0.999},
            6: {EOS: 0.999},
            7: {EOS: 0.9},
        }.items():
            for token, p in nexts.items():
                table[prev, token] = p
        self.log_table = (table / table.sum(-1, keepdim=True)).log()


@pytest.mark.parametrize(("stop", "best", "steps"), [("exact", [4, 5, 6], 4), ("heuristic", [], 2)])
def test_heuristic_stop_ends_once_k_finished_beat_the_best_live_beam_ending_next(stop, best, steps):
    """After step 1 two outputs are finished (K = 2) and the live BOS 4 5 (−0.950) would score
    −0.950 / lp(3) = −0.712 ending next, below BOS EOS (−0.673): the heuristic rule stops and
    returns BOS EOS. After step 0 it must not (one finished, K = 2), though −0.948 / lp(2) is
    below too. The exact rule sees that −0.950 / lp(10) could win and searches on to BOS 4 5 6
    EOS, which does."""
    decoder = LateWinner()
    memory = Memory(
        states=torch.zeros(1, 3, 4), mask=torch.ones(1, 3, dtype=torch.bool),
        summary=torch.zeros(1, 4),
    )  # fmt: skip
    ((found,),) = beam_search(decoder, memory, SearchSettings(2, length_alpha=1.0, stop=stop), 10)
    assert found.tokens == best
    assert decoder.steps == steps
    path = [BOS, *best, EOS]
    raw = float(decoder.log_table[path[:-1], path[1:]].sum())
    assert found.score == pytest.approx(raw / length_penalty(len(best) + 1, 1.0), abs=1e-6)


def test_an_unknown_stop_rule_is_refused_by_name():
    decoder, memory = MarkovDecoder(), Memory(
        states=torch.zeros(1, 3, 4), mask=torch.ones(1, 3, dtype=torch.bool),
        summary=torch.zeros(1, 4),
    )  # fmt: skip
    with pytest.raises(ValueError, match="stop must be one of exact, heuristic, got 'early'"):
        beam_search(decoder, memory, SearchSettings(2, stop="early"), 5)


class Forbid:
    """A `Constraint` that never allows `token` and allows everything else."""

    def __init__(self, token: int | None):
        self.token = token

    def start(self, max_length, beam_size):
        return torch.zeros(len(max_length) * beam_size, dtype=torch.long)  # steps taken

    def allowed(self, state):
        mask = torch.ones(len(state), VOCAB, dtype=torch.bool)
        if self.token is not None:
            mask[:, self.token] = False
        return mask

    def advance(self, state, tokens):
        return state + 1

    def reorder(self, state, index):
        return state.index_select(0, index)


@pytest.mark.parametrize("case", ["plain", "mixed", "mixed-luong"])
def test_constraints(case):
    encoder, decoder = make_model(**CASES[case])
    memory = encode(encoder)
    runs = {
        "greedy": partial(greedy, decoder, memory, 8),
        "beam": partial(beam_search, decoder, memory, SearchSettings(3, n_best=3), 8),
        "sample": partial(sample, decoder, memory, 8, generator=torch.Generator()),
    }
    for name, run in runs.items():
        free, anything = run(), run(constraint=Forbid(None))
        if name != "sample":
            assert [[h.tokens for h in n] for n in free] == [
                [h.tokens for h in n] for n in anything
            ]
        used = {t for nbest in free for h in nbest for t in h.tokens}
        token = max(used, key=lambda t: sum(t in h.tokens for n in free for h in n))
        assert all(token not in h.tokens for n in run(constraint=Forbid(token)) for h in n)
    greedy_out = runs["greedy"](constraint=Forbid(5))
    beam_out = beam_search(
        decoder,
        memory,
        SearchSettings(1, length_alpha=0.0),
        8,
        constraint=Forbid(5),
    )
    assert [g[0].tokens for g in greedy_out] == [b[0].tokens for b in beam_out]


class _EvenTokens:
    """A constraint that allows only even token ids (for `row_candidates`)."""

    def allowed(self, state: None) -> torch.Tensor:
        return (torch.arange(VOCAB) % 2 == 0).expand(state, VOCAB)


@pytest.mark.parametrize("constrained", [False, True])
def test_row_candidates_hold_the_best_extensions_of_every_input(constrained):
    """Beam search scores only each row's 2K best tokens: they must contain the 2K best of the
    whole (K·V) table of an input, with the scores log_softmax gives them."""
    k, inputs = 3, 4
    logits = torch.randn(inputs * k, VOCAB, generator=torch.Generator().manual_seed(0))
    scores = torch.randn(inputs, k, generator=torch.Generator().manual_seed(1))
    constraint = _EvenTokens() if constrained else None
    full = constrained_log_probs(logits, constraint, inputs * k)  # (n·K, V)
    expected, _ = (scores.view(-1, 1) + full).view(inputs, -1).topk(2 * k, dim=-1)

    row_scores, row_tokens = row_candidates(logits, constraint, inputs * k, 2 * k)
    assert torch.allclose(row_scores, full.gather(1, row_tokens), atol=1e-6)
    got, _ = (scores.view(-1, 1) + row_scores).view(inputs, -1).topk(2 * k, dim=-1)
    assert torch.allclose(got, expected, atol=1e-6)


class Room(Forbid):
    """A constraint that never allows EOS and needs `extra` more steps than the search gives."""

    def __init__(self, extra: int):
        super().__init__(EOS)
        self.extra = extra

    def room(self, limits):
        return limits + self.extra


@pytest.mark.parametrize("beam", [1, 3])
def test_search_ends_outputs_at_the_settings_limits_and_the_room_a_constraint_needs(beam):
    """`search`'s limits: ratio · (source length + EOS) + offset per input, at most the
    decoder's positions, widened by what the constraint needs; greedy for one beam, beam search
    otherwise, as the settings say. A model that never ends writes up to its limit."""
    encoder, decoder = make_model(eos_bias=float("-inf"))
    memory = encode(encoder)
    settings = SearchSettings(beam, max_length_ratio=0.5, max_length_offset=1)
    expected = [int(0.5 * length) + 1 for length in memory.lengths.tolist()]
    assert limits(decoder, memory, settings).tolist() == expected
    found = search(decoder, memory, settings)
    assert [len(nbest[0].tokens) for nbest in found] == expected
    widened = search(decoder, memory, settings, Room(2))
    assert [len(nbest[0].tokens) for nbest in widened] == [n + 2 for n in expected]


class Scripted(Decoder):
    """Row r's output is `ends[r]` tokens 4 and then EOS; counts the steps taken."""

    def __init__(self, ends: list[int]):
        super().__init__()
        self.vocab_size, self.ends, self.steps = VOCAB, torch.tensor(ends), 0

    def forward(self, memory: Memory, tgt_in: torch.Tensor, **attention) -> DecoderOutput:
        raise NotImplementedError

    def start(self, memory: Memory, beam_size: int = 1):
        return torch.arange(len(self.ends)), 0  # each row's input, the tokens written

    def step(self, prev_tokens, state):
        inputs, t = state
        self.steps += 1
        logits = torch.zeros(len(inputs), VOCAB)
        logits[:, 4] = 1.0
        logits[self.ends[inputs] == t, EOS] = 2.0
        return logits.log_softmax(-1), (inputs, t + 1), None

    def reorder(self, state, index):
        return state[0][index], state[1]


@pytest.mark.parametrize("shrink", [None, 0.5, 0.0])
def test_greedy_stops_when_its_last_output_ends(shrink):
    """Greedy stops at the step where its last row ends, far short of the limit; keeping every
    row (shrink_below 0) it learns that a step late (`CountInFlight`), so takes one step more."""
    ends = [3, 7, 0, 5]
    decoder = Scripted(ends)
    memory = Memory(torch.zeros(4, 2, 8), torch.ones(4, 2, dtype=torch.bool), torch.zeros(4, 8))
    found = greedy(decoder, memory, 30, shrink_below=shrink)
    assert [(h.tokens, h.finished) for (h,) in found] == [([4] * n, True) for n in ends]
    assert decoder.steps == max(ends) + 1 + (shrink == 0.0)
