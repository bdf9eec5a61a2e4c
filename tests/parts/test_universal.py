"""The Universal Transformer (Dehghani et al. 2019) against its equations computed another way:
one step without ACT is a one-layer Transformer whose inputs carry the step's sinusoid; T steps
are one layer's weights applied T times to H^{t−1} + P^t (eqs. 1–5, written out in float64,
position by position); ACT's halting, remainder and weighted state by hand (Graves 2016); the
ponder cost τ Σ (N + R) in the task's loss; a halted position's carried state the same in the
teacher-forced pass and in cached steps."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from seqtasks.data.batch import Batch
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.decoders import TransformerDecoder, UniversalTransformerDecoder
from seqtasks.encoders import TransformerEncoder, UniversalTransformerEncoder
from seqtasks.layers.act import Pondering, halting_step
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.search import SearchSettings, search
from seqtasks.translation.task import TranslationTask

V, D, HEADS = 17, 16, 4
SIZES = {"d_model": D, "num_heads": HEADS, "ff_dim": 24, "dropout": 0.0}
SOURCES = [[5, 9, 4, 12, 7, 13, 6], [11, 3, 8], [8, 8, 15, 4, 10]]
TARGETS = torch.tensor([[BOS_ID, 5, 6, 7, 9], [BOS_ID, 8, 9, PAD_ID, PAD_ID], [BOS_ID, 4, 4, 5, 6]])


def padded(sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(map(len, sequences))
    ids = torch.tensor([s + [PAD_ID] * (longest - len(s)) for s in sequences])
    return ids, ids != PAD_ID


def sinusoid(value: float, dim: int = D) -> torch.Tensor:
    """(dim,) sin(value / 10000^(2j/dim)) at 2j, cos at 2j + 1 (Vaswani et al. §3.5)."""
    out = torch.zeros(dim, dtype=torch.float64)
    for j in range(dim // 2):
        out[2 * j] = math.sin(value / 10000 ** (2 * j / dim))
        out[2 * j + 1] = math.cos(value / 10000 ** (2 * j / dim))
    return out


def random_memory() -> Memory:
    g = torch.Generator().manual_seed(3)
    mask = lengths_to_mask(torch.tensor([6, 2, 4]), 6)
    states = torch.randn(3, 6, D, generator=g) * mask[..., None]
    return Memory(states, mask, states.mean(1))


def with_step_signal(part: torch.nn.Module) -> torch.nn.Module:
    """A Transformer whose position table also carries the sinusoid of step t = 1."""
    part.embeddings.table += sinusoid(1.0).float()
    return part


@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
def test_one_step_without_act_is_a_one_layer_transformer_plus_the_step_signal(norm):
    torch.manual_seed(0)
    universal = UniversalTransformerEncoder(V, steps=1, norm=norm, **SIZES).eval()
    transformer = TransformerEncoder(V, num_layers=1, norm=norm, **SIZES).eval()
    weights = {k.replace("layer.", "layers.0."): w for k, w in universal.state_dict().items()}
    transformer.load_state_dict(weights)
    ids, mask = padded(SOURCES)
    with torch.no_grad():
        ours, theirs = universal(ids, mask), with_step_signal(transformer)(ids, mask)
    torch.testing.assert_close(ours.states, theirs.states)
    torch.testing.assert_close(ours.summary, theirs.summary)
    assert ours.auxiliary_loss is None

    decoder = UniversalTransformerDecoder(V, D, steps=1, norm=norm, **SIZES).eval()
    reference = TransformerDecoder(V, D, num_layers=1, norm=norm, **SIZES).eval()
    reference.load_state_dict(decoder.state_dict())  # the same names: `layers.0` is the layer
    with torch.no_grad():
        ours = decoder(random_memory(), TARGETS, need_attention=True)
        theirs = with_step_signal(reference)(random_memory(), TARGETS, need_attention=True)
    torch.testing.assert_close(ours.logits, theirs.logits)
    torch.testing.assert_close(ours.attention, theirs.attention)


def test_weights_are_shared_over_steps_and_the_step_signal_differs_per_step():
    def count(part: torch.nn.Module) -> int:
        return sum(p.numel() for p in part.parameters())

    one_layer = count(TransformerEncoder(V, num_layers=1, **SIZES))
    for act, extra in ((False, 0), (True, D + 1)):  # ACT's halting unit: W (1, D) and b
        for steps in (1, 3, 8):
            assert count(UniversalTransformerEncoder(V, steps=steps, act=act, **SIZES)) == (
                one_layer + extra
            )
    timing = UniversalTransformerEncoder(V, steps=6, **SIZES).recurrence.timing
    torch.testing.assert_close(timing.double(), torch.stack([sinusoid(t) for t in range(1, 7)]))
    assert all(not torch.allclose(timing[a], timing[b]) for a in range(6) for b in range(a))


def layer_norm(x: torch.Tensor, w: dict, name: str) -> torch.Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w[f"{name}.weight"] + w[f"{name}.bias"]


def linear(x: torch.Tensor, w: dict, name: str) -> torch.Tensor:
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def reference_layer(x: torch.Tensor, w: dict) -> torch.Tensor:
    """(S, D) -> (S, D): A = LN(X + MultiHead(X)), H = LN(A + FFN(A)), post-norm, written out."""
    q, k, v = linear(x, w, "layer.self_attention.qkv").chunk(3, -1)
    d = D // HEADS
    heads = []
    for h in range(HEADS):
        part = slice(h * d, (h + 1) * d)
        scores = q[:, part] @ k[:, part].T / math.sqrt(d)
        heads.append(torch.softmax(scores, -1) @ v[:, part])
    attended = linear(torch.cat(heads, -1), w, "layer.self_attention.out")
    a = layer_norm(x + attended, w, "layer.residual_attention.norm")
    inner = torch.relu(linear(a, w, "layer.feed_forward.inner"))
    return layer_norm(a + linear(inner, w, "layer.feed_forward.outer"), w, "layer.residual_ff.norm")


def reference_encoder(encoder: UniversalTransformerEncoder, ids: list[int], act: bool):
    """One unpadded source's annotations (S, D) and each position's N + R, by eqs. 1–5 and,
    with `act`, Graves' halting one position at a time, a halted state copied onward."""
    w = {name: p.detach().double() for name, p in encoder.named_parameters()}
    steps, threshold = encoder.recurrence.steps, encoder.recurrence.threshold
    h = w["embeddings.embedding.weight"][ids] * math.sqrt(D)  # H^0
    positions = torch.stack([sinusoid(i) for i in range(len(ids))])
    halted, total, n, r = [False] * len(ids), [0.0] * len(ids), [0] * len(ids), [0.0] * len(ids)
    out = torch.zeros_like(h)
    for t in range(1, steps + 1):
        new = reference_layer(h + positions + sinusoid(t), w)  # every position, H^{t-1} + P^t
        if not act:
            h = new
            continue
        for j in range(len(ids)):
            if halted[j]:
                continue  # h[j] stays: its state is copied to the next step
            p = float(torch.sigmoid(linear(new[j], w, "recurrence.halting.linear")[0]))
            n[j] += 1
            if total[j] + p >= threshold or t == steps:
                r[j], halted[j] = 1 - total[j], True
                out[j] += r[j] * new[j]
            else:
                total[j] += p
                out[j] += p * new[j]
            h[j] = new[j]
    return (out if act else h), [n[j] + r[j] for j in range(len(ids))]


@pytest.mark.parametrize("act", [False, True])
def test_steps_apply_one_layer_to_the_state_plus_its_coordinate_embedding(act):
    torch.manual_seed(1)
    encoder = UniversalTransformerEncoder(V, steps=5, act=act, **SIZES).eval()
    if act:  # sharper halting probabilities, so positions halt after different steps
        with torch.no_grad():
            encoder.recurrence.halting.linear.weight.mul_(3)
            encoder.recurrence.halting.linear.bias.zero_()
    ids, mask = padded(SOURCES)
    with torch.no_grad():
        memory = encoder(ids, mask)
    costs = []
    for row, sequence in enumerate(SOURCES):
        states, ponder = reference_encoder(encoder, sequence, act)
        ours = memory.states[row, : len(sequence)].double()
        torch.testing.assert_close(ours, states, atol=1e-5, rtol=1e-5)
        costs.append(ponder)
    if not act:
        assert memory.auxiliary_loss is None
        return
    assert len({int(c) for cost in costs for c in cost}) >= 2, "every position halted alike"
    expected = torch.tensor(
        [encoder.ponder_cost * sum(cost) for cost in costs], dtype=torch.float64
    )
    torch.testing.assert_close(memory.auxiliary_loss.double(), expected, atol=1e-5, rtol=1e-5)


def test_act_halts_each_position_with_its_remainder_by_hand():
    """Four positions' probabilities step by step, with 1 − ε = 0.99 and T = 3: A halts at
    step 2 (0.5 + 0.6 ≥ 0.99; R = 0.5), B at step 1 (R = 1), C runs to T (R = 1 − 0.2 = 0.8),
    D at step 2 (0.25 + 0.75 = 1 ≥ 0.99; R = 0.75)."""
    p = torch.tensor([[0.5, 0.995, 0.1, 0.25], [0.6, 0.3, 0.1, 0.75], [0.7, 0.3, 0.1, 0.9]])
    account, weights = Pondering.start(p[0]), []
    for t in range(3):
        weight, account = halting_step(p[t], account, 0.99, last=t == 2)
        weights.append(weight)
    expected = torch.tensor([[0.5, 1.0, 0.1, 0.25], [0.5, 0.0, 0.1, 0.75], [0.0, 0.0, 0.8, 0.0]])
    torch.testing.assert_close(torch.stack(weights), expected)
    torch.testing.assert_close(account.steps, torch.tensor([2.0, 1.0, 3.0, 2.0]))
    torch.testing.assert_close(account.remainder, torch.tensor([0.5, 1.0, 0.8, 0.75]))
    torch.testing.assert_close(account.cost, torch.tensor([2.5, 2.0, 3.8, 2.75]))
    assert account.halted.all()


def fixed_halting(part: torch.nn.Module, p: float) -> torch.nn.Module:
    """W = 0 and b = logit(p): every position's halting probability is p at every step."""
    with torch.no_grad():
        part.recurrence.halting.linear.weight.zero_()
        part.recurrence.halting.linear.bias.fill_(math.log(p / (1 - p)))
    return part


@pytest.mark.parametrize("steps, weights", [(6, [0.3, 0.3, 0.3, 0.1]), (3, [0.3, 0.3, 0.4])])
def test_act_output_is_the_weighted_mean_of_the_steps_states(steps, weights):
    """p = 0.3 at every step: Σ p reaches 0.99 at step N = 4 (0.3 · 4 = 1.2), R = 1 − 0.9 =
    0.1, the state 0.3 H^1 + 0.3 H^2 + 0.3 H^3 + 0.1 H^4, ρ = N + R = 4.1; with T = 3 the
    positions halt at T: R = 0.4, ρ = 3.4. H^t is what t steps without ACT give."""
    ids, mask = padded(SOURCES)
    torch.manual_seed(2)
    encoder = fixed_halting(UniversalTransformerEncoder(V, steps=steps, act=True, **SIZES), 0.3)
    decoder = fixed_halting(UniversalTransformerDecoder(V, D, steps=steps, act=True, **SIZES), 0.3)
    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        memory = encoder(ids, mask)
        output = decoder(random_memory(), TARGETS, need_attention=True)
        plain_states, plain_logits, plain_attention = [], [], []
        for t in range(1, len(weights) + 1):
            plain = UniversalTransformerEncoder(V, steps=t, **SIZES).eval()
            plain.load_state_dict(encoder.state_dict(), strict=False)  # all but the halting unit
            plain_states.append(plain(ids, mask).states)
            plain = UniversalTransformerDecoder(V, D, steps=t, **SIZES).eval()
            plain.load_state_dict(decoder.state_dict(), strict=False)
            plain_output = plain(random_memory(), TARGETS, need_attention=True)
            plain_logits.append(plain_output.logits)
            plain_attention.append(plain_output.attention)

    def mean(states: list[torch.Tensor]) -> torch.Tensor:
        return sum(w * x for w, x in zip(weights, states, strict=True))

    torch.testing.assert_close(memory.states, mean(plain_states), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(output.logits, mean(plain_logits), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(output.attention, mean(plain_attention), atol=1e-6, rtol=1e-5)
    rho = len(weights) + weights[-1]  # N + R
    torch.testing.assert_close(memory.auxiliary_loss, 0.01 * rho * mask.sum(1).float())
    real = (TARGETS != PAD_ID).sum(1).float()
    torch.testing.assert_close(output.auxiliary_loss, 0.01 * rho * real)


def test_the_ponder_cost_is_in_the_tasks_loss_and_trains_the_halting_units():
    """τ = 0.5 against τ = 0: the per-token loss differs by exactly τ · 4.1 · (source + target
    positions) / target tokens, and the halting units get its gradient."""
    ids, mask = padded(SOURCES)
    tgt_out = torch.tensor(
        [[5, 6, 7, 9, EOS_ID], [8, 9, EOS_ID, PAD_ID, PAD_ID], [4, 4, 5, 6, EOS_ID]]
    )
    batch = Batch(ids, mask, TARGETS, tgt_out, torch.arange(3), [""] * 3, [""] * 3)
    losses = []
    for tau in (0.0, 0.5):
        settings = {"steps": 6, "act": True, "ponder_cost": tau, **SIZES}
        torch.manual_seed(4)
        task = TranslationTask(
            encoder=functools.partial(UniversalTransformerEncoder, **settings),
            decoder=functools.partial(UniversalTransformerDecoder, **settings),
            src_vocab_size=V,
            tgt_vocab_size=V,
        )
        for part in (task.encoder, task.decoder):
            fixed_halting(part, 0.3)
        memory, output = task.teacher_forced(batch)
        losses.append(task.loss(output, batch.tgt_out, memory.mask))
    positions = mask.sum() + (TARGETS != PAD_ID).sum()
    expected = 0.5 * 4.1 * positions / (tgt_out != PAD_ID).sum()
    assert float((losses[1] - losses[0]).detach()) == pytest.approx(float(expected), rel=1e-5)
    losses[1].backward()
    for part in (task.encoder, task.decoder):
        assert part.recurrence.halting.linear.bias.grad.abs() > 0


def test_a_halted_positions_carried_state_is_its_cache_in_forward_and_step():
    """With sharp halting, target positions halt after different steps; cached steps give the
    teacher-forced logits and attention, and search runs on them (no fixed-cache steps, CUDA
    graphs asked for or not)."""
    torch.manual_seed(5)
    decoder = UniversalTransformerDecoder(V, D, steps=4, act=True, **SIZES).eval()
    with torch.no_grad():
        decoder.recurrence.halting.linear.weight.mul_(3)
        decoder.recurrence.halting.linear.bias.zero_()
    costs = []
    decoder.recurrence.register_forward_hook(lambda _m, _i, out: costs.append(out.ponder))
    memory = random_memory()
    with torch.no_grad():
        output = decoder(memory, TARGETS, need_attention=True)
        state, logits, attention = decoder.start(memory), [], []
        for t in range(TARGETS.size(1)):
            step_logits, state, weights = decoder.step(TARGETS[:, t], state)
            logits.append(step_logits)
            attention.append(weights)
    assert len(set(costs[0].floor().flatten().tolist())) >= 2, "every position halted alike"
    torch.testing.assert_close(torch.stack(logits, 1), output.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.stack(attention, 1), output.attention, atol=1e-6, rtol=1e-5)
    assert decoder.search_widths() == (2 * 4 * D, D) and decoder.fixed_cache_steps() is None
    for graphs in (False, True):
        found = search(decoder, memory, SearchSettings(beam=2, cuda_graphs=graphs))
        assert len(found) == 3 and all(len(f) == 1 for f in found)


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"num_layers": 3}, "num_layers=3: the Universal Transformer applies one layer"),
        ({"steps": 0}, "steps must be a positive integer, got 0"),
        ({"act_threshold": 1.5}, r"act_threshold must be in \(0, 1\] \(1 − ε\), got 1.5"),
        ({"ponder_cost": -0.1}, "ponder_cost must be at least 0, got -0.1"),
    ],
)
def test_bad_settings_are_refused_when_built(setting, message):
    for build in (
        functools.partial(UniversalTransformerEncoder, V),
        functools.partial(UniversalTransformerDecoder, V, D),
    ):
        with pytest.raises(ValueError, match=message):
            build(**SIZES, **setting)
