"""The two ways a recurrent decoder runs its teacher-forced pass give the same numbers.

1. Whole sequence (`recur`: one fused-RNN call, cuDNN's kernel on a GPU) against step by step
   (`step`, the path search takes): the decoders whose recurrent input is known beforehand
   (Luong without input feeding, no attention, Show and Tell), in eval mode and in training
   mode (dropout 0, so that both draw nothing), logits and every parameter's gradient.
2. The decoders that feed attention back run a `CellStack`; each is compared with a copy of the
   loop they ran before it (kept here as `reference_*`: the stack of states rebuilt every step,
   Luong's context widened to D and W_c applied to [c; h]), logits, attention and gradients.
3. `CellStack` itself: T steps equal the stacked module over the sequence, and its dropout
   between layers draws a fresh mask per step at the right rate.
4. The GPU recipes train the models of their CPU configs.

Dimensions (tiny): B = 3 inputs, S = 5 positions (the last input has 2 real ones), D = 7
annotation width, T = 6 target positions, V = 11, E = 4, H = 6.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
import yaml
from conftest import REPO
from torch import Tensor, nn

from seqtasks.attention import MultiHeadAttention
from seqtasks.attention.scores import AdditiveAttention, DotAttention, GeneralAttention
from seqtasks.decoders import (
    BahdanauDecoder,
    HardAttentionDecoder,
    LuongDecoder,
    NoAttentionDecoder,
    ShowTellDecoder,
    SoftAttentionDecoder,
)
from seqtasks.layers.dropout import dropout
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.layers.recurrent import CellStack, Hidden, layer_weights, recur, top_layer

B, S, D, T, V, E, H = 3, 5, 7, 6, 11, 4, 6
SIZES = dict(embed_dim=E, hidden_size=H)
MULTI_HEAD = partial(MultiHeadAttention, heads=2)


def memory(seed: int = 0) -> Memory:
    g = torch.Generator().manual_seed(seed)
    mask = lengths_to_mask(torch.tensor([5, 4, 2]), S)
    states = torch.randn(B, S, D, generator=g) * mask[:, :, None]
    return Memory(states, mask, torch.randn(B, D, generator=g))


def targets(seed: int = 1) -> Tensor:
    tgt = torch.randint(4, V, (B, T), generator=torch.Generator().manual_seed(seed))
    tgt[:, 0] = 2
    return tgt


def build(factory, mode: str) -> nn.Module:
    """The decoder in `mode` ("train": without dropout; "eval"), parameters from seed 0."""
    torch.manual_seed(0)
    return factory(V, D, dropout=0.0 if mode == "train" else 0.3).train(mode == "train")


def gradients(decoder: nn.Module, logits: Tensor) -> dict[str, Tensor]:
    """d(Σ logits · fixed weights)/dθ for every parameter (zero where it gets none)."""
    g = torch.Generator().manual_seed(3)
    (logits * torch.randn(logits.shape, generator=g)).sum().backward()
    grads = {n: p.grad.clone() for n, p in decoder.named_parameters() if p.grad is not None}
    decoder.zero_grad(set_to_none=True)
    return grads


def assert_same(decoder: nn.Module, ours: Tensor, reference: Tensor) -> None:
    """The same logits and the same gradient for every parameter."""
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-4)
    ours_grads, reference_grads = gradients(decoder, ours), gradients(decoder, reference)
    assert ours_grads.keys() == reference_grads.keys()
    for name, grad in ours_grads.items():
        torch.testing.assert_close(grad, reference_grads[name], atol=1e-5, rtol=1e-4, msg=name)


# ---- 1. whole sequence against step by step ------------------------------------------------

WHOLE_SEQUENCE = {
    f"{name}-{cell}-{layers}": partial(cls, cell=cell, num_layers=layers, **SIZES)
    for cell in ("gru", "lstm")
    for layers in (1, 2)
    for name, cls in (
        ("luong-no-feeding", partial(LuongDecoder, input_feeding=False)),
        ("no-attention", partial(NoAttentionDecoder, readout_dim=4)),
    )
}
WHOLE_SEQUENCE["luong-no-feeding-additive"] = partial(
    LuongDecoder, input_feeding=False, attention=AdditiveAttention, **SIZES
)
WHOLE_SEQUENCE["luong-no-feeding-multi-head"] = partial(
    LuongDecoder, input_feeding=False, attention=MULTI_HEAD, **SIZES
)
WHOLE_SEQUENCE["show-tell"] = partial(ShowTellDecoder, **SIZES)


def stepwise(decoder: nn.Module, memory: Memory, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
    """Logits (B, T, V) and attention (B, T, S) or None from `start` and T calls of `step`."""
    state, logits, weights = decoder.start(memory), [], []
    for tokens in tgt_in.unbind(1):
        step_logits, state, alpha = decoder.step(tokens, state)
        logits.append(step_logits)
        weights.append(alpha)
    return torch.stack(logits, 1), None if weights[0] is None else torch.stack(weights, 1)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name", WHOLE_SEQUENCE)
def test_whole_sequence_equals_steps(name: str, mode: str) -> None:
    decoder = build(WHOLE_SEQUENCE[name], mode)
    output = decoder(memory(), targets())
    logits, weights = stepwise(decoder, memory(), targets())
    if weights is not None:
        torch.testing.assert_close(output.attention, weights, atol=1e-6, rtol=1e-5)
    assert_same(decoder, output.logits, logits)


# ---- 2. feedback decoders against the loop they ran before ---------------------------------


def reference_rnn_step(rnn: nn.LSTM | nn.GRU, x: Tensor, hidden: Hidden) -> tuple[Tensor, Hidden]:
    """The `rnn_step` the decoders' loops called before `CellStack` (kept as it was): layers
    read out of and stacked back into (layers, R, H) at every step."""
    lstm = isinstance(hidden, tuple)
    outputs, cells = [], []
    for layer in range(rnn.num_layers):
        if layer > 0:
            x = dropout(x, rnn.dropout, rnn.training)
        weights = layer_weights(rnn, layer)
        if lstm:
            x, c = torch.lstm_cell(x, (hidden[0][layer], hidden[1][layer]), *weights)
            cells.append(c)
        else:
            x = torch.gru_cell(x, hidden[layer], *weights)
        outputs.append(x)
    h = torch.stack(outputs)  # (layers, R, H)
    return x, ((h, torch.stack(cells)) if lstm else h)


def attend(decoder: nn.Module, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
    """(B, H) query -> context (B, D) over the annotations themselves (for a score function;
    multi-head attention's is H wide), weights (B, S)."""
    projected = decoder.attention.project_memory(memory.states, memory.mask)
    context, weights = decoder.attention(query[:, None], projected)
    return context[:, 0], weights[:, 0]


def reference_luong(decoder: LuongDecoder, memory: Memory, tgt_in: Tensor):
    """The input-feeding loop as it was: h̃_i = tanh(W_c [c_i; h_i]) with c_i D wide."""
    hidden = decoder.initial_hidden(memory.summary)
    feed = memory.states.new_zeros(B, decoder.out.in_features)  # h̃_0 = 0
    embedded = decoder.dropout(decoder.embedding(tgt_in))
    attentionals, alphas = [], []
    for embedded_i in embedded.unbind(1):
        h, hidden = reference_rnn_step(decoder.rnn, torch.cat([embedded_i, feed], -1), hidden)
        context, alpha = attend(decoder, h, memory)
        feed = torch.tanh(decoder.combine(torch.cat([context, h], dim=-1)))
        attentionals.append(feed)
        alphas.append(alpha)
    logits = decoder.out(decoder.dropout(torch.stack(attentionals, 1)))
    return logits, torch.stack(alphas, 1)


def reference_bahdanau(decoder: BahdanauDecoder, memory: Memory, tgt_in: Tensor):
    """Attend with s_{i−1}, then step on [E y_{i−1}; c_i]; the readout after the loop."""
    hidden = decoder.initial_hidden(memory.summary)
    embedded = decoder.dropout(decoder.embedding(tgt_in))
    states, contexts, alphas = [], [], []
    for embedded_i in embedded.unbind(1):
        context, alpha = attend(decoder, top_layer(hidden), memory)
        s, hidden = reference_rnn_step(decoder.rnn, torch.cat([embedded_i, context], -1), hidden)
        states.append(s)
        contexts.append(context)
        alphas.append(alpha)
    features = torch.cat([torch.stack(states, 1), embedded, torch.stack(contexts, 1)], dim=-1)
    return decoder.readout(features), torch.stack(alphas, 1)


def reference_soft(decoder: SoftAttentionDecoder, memory: Memory, tgt_in: Tensor):
    """ẑ_t = σ(f_β(h_{t−1})) Σ_i α_ti a_i from h_{t−1}, then the LSTM on [E y_{t−1}; ẑ_t]."""
    state = decoder.start(memory)  # for hard attention's `glimpse`: memory, sampling
    hidden = decoder.initial_hidden(memory.summary)
    embedded = decoder.embedding(tgt_in)
    hs, zs, alphas = [], [], []
    for embedded_t in embedded.unbind(1):
        h_prev = top_layer(hidden)
        context, alpha, _ = decoder.glimpse(h_prev, state)
        z = torch.sigmoid(decoder.f_beta(h_prev)) * context
        h, hidden = reference_rnn_step(decoder.rnn, torch.cat([embedded_t, z], dim=-1), hidden)
        hs.append(h)
        zs.append(z)
        alphas.append(alpha)
    return decoder.readout(embedded, torch.stack(hs, 1), torch.stack(zs, 1)), torch.stack(alphas, 1)


FEEDBACK = {
    "luong-lstm-3": partial(LuongDecoder, attention=AdditiveAttention, num_layers=3, **SIZES),
    "luong-gru-general": partial(LuongDecoder, attention=GeneralAttention, cell="gru", **SIZES),
    "luong-dot": partial(LuongDecoder, attention=DotAttention, embed_dim=E, hidden_size=D),
    "bahdanau-gru-2": partial(BahdanauDecoder, num_layers=2, readout_dim=4, **SIZES),
    "bahdanau-lstm-1": partial(BahdanauDecoder, cell="lstm", readout_dim=4, **SIZES),
    "soft": partial(SoftAttentionDecoder, **SIZES),
    "hard": partial(HardAttentionDecoder, **SIZES),
    "luong-multi-head": partial(LuongDecoder, attention=MULTI_HEAD, **SIZES),
    "bahdanau-multi-head": partial(BahdanauDecoder, attention=MULTI_HEAD, readout_dim=4, **SIZES),
    "soft-multi-head": partial(SoftAttentionDecoder, attention=MULTI_HEAD, **SIZES),
}
REFERENCES = {  # hard attention is soft attention with another `glimpse`
    LuongDecoder: reference_luong,
    BahdanauDecoder: reference_bahdanau,
    SoftAttentionDecoder: reference_soft,
}


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name", FEEDBACK)
def test_feedback_loop_equals_the_loop_it_replaced(name: str, mode: str) -> None:
    decoder = build(FEEDBACK[name], mode)
    reference = next(f for cls, f in REFERENCES.items() if isinstance(decoder, cls))
    torch.manual_seed(5)  # hard attention samples in training: the same draws both times
    output = decoder(memory(), targets())
    torch.manual_seed(5)
    logits, weights = reference(decoder, memory(), targets())
    torch.testing.assert_close(output.attention, weights, atol=1e-6, rtol=1e-5)
    assert_same(decoder, output.logits, logits)


def test_luong_attention_reads_annotations_projected_once() -> None:
    """The state's values are W_cc h̄_j (H wide): W_c [c; h] = W_cc c + W_ch h."""
    decoder = build(FEEDBACK["luong-lstm-3"], "eval")
    values = decoder.start(memory()).memory.values  # (B, S, H)
    torch.testing.assert_close(values, memory().states @ decoder.combine.weight[:, :D].T)


# ---- 3. the cell stack ---------------------------------------------------------------------


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_cell_stack_equals_the_module_over_a_sequence(cell: str, layers: int) -> None:
    """T steps of a `CellStack` = `recur` (the module's whole-sequence kernel), outputs, final
    state and gradients, in eval mode."""
    torch.manual_seed(0)
    rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(E, H, layers, batch_first=True).eval()
    x = torch.randn(B, T, E, requires_grad=True)
    h0 = torch.randn(layers, B, H)
    hidden = (h0, torch.randn(layers, B, H)) if cell == "lstm" else h0
    stack = CellStack(rnn, hidden, steps=T)
    outputs = torch.stack([stack.step(x_t) for x_t in x.unbind(1)], 1)
    expected, expected_hidden = recur(rnn, x, hidden)
    torch.testing.assert_close(stack.hidden, expected_hidden)
    torch.testing.assert_close(outputs, expected)
    (grad_ours,) = torch.autograd.grad(outputs.sum(), x)
    (grad_expected,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(grad_ours, grad_expected)


def test_cell_stack_dropout_is_fresh_every_step_at_its_rate() -> None:
    """Between layers each step has its own mask (not one for the sequence, which would be
    variational dropout), zeroing about p of the units and scaling the rest by 1/(1 − p); and
    the steps apply exactly those masks."""
    torch.manual_seed(0)
    rows, p = 400, 0.25
    rnn = nn.GRU(E, H, 2, dropout=p).train()
    stack = CellStack(rnn, torch.zeros(2, rows, H), steps=T)
    masks = torch.stack(stack.masks[1])  # (T, rows, H)
    assert masks.shape == (T, rows, H) and stack.masks[0] == []
    zeros = (masks == 0).float().mean()
    assert abs(zeros - p) < 0.02  # 14,400 units: 5 standard deviations
    torch.testing.assert_close(masks[masks > 0], torch.full_like(masks[masks > 0], 1 / (1 - p)))
    for t in range(1, T):
        agree = ((masks[t] == 0) == (masks[0] == 0)).float().mean()
        assert agree < 0.7  # independent masks agree on 1 − 2p(1 − p) = 62.5% of units
    h1 = h2 = torch.zeros(rows, H)
    for t in range(T):  # step t applies mask t, by hand
        x = torch.randn(rows, E)
        h1 = torch.gru_cell(x, h1, *layer_weights(rnn, 0))
        h2 = torch.gru_cell(h1 * masks[t], h2, *layer_weights(rnn, 1))
        torch.testing.assert_close(stack.step(x), h2)


# ---- 4. the GPU recipes --------------------------------------------------------------------

CONFIGS = REPO / "configs"
RECIPES = {"parsing/lstm_attention_gpu.yaml": "parsing/lstm_attention_fast.yaml",
           "captioning/shapes_soft_gpu.yaml": "captioning/shapes_soft.yaml"}  # fmt: skip


@pytest.mark.parametrize("gpu, cpu", RECIPES.items())
def test_gpu_recipe_trains_the_cpu_configs_model(gpu: str, cpu: str) -> None:
    """Same encoder, decoder, loss terms and data; only the optimiser, batches, workers (and a
    cache of the decoded images, which gives the same pixels), precision and the schedule of
    training and validation differ."""
    ours, theirs = (yaml.safe_load((CONFIGS / c).read_text()) for c in (gpu, cpu))

    def without(config: dict, *keys: str) -> dict:
        return {k: v for k, v in config.items() if k not in keys}

    model = without(ours["model"]["init_args"], "optimizer")
    assert model == without(theirs["model"]["init_args"], "optimizer")
    assert ours["data"]["class_path"] == theirs["data"]["class_path"]
    batches = ("max_tokens", "batch_size", "num_workers", "image_cache")
    data = without(ours["data"]["init_args"], *batches)
    assert data == without(theirs["data"]["init_args"], *batches)
    trainer = ours["trainer"]
    assert (trainer["accelerator"], trainer["precision"]) == ("gpu", "bf16-mixed")
