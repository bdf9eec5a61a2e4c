"""Every attention and decoder against its paper's equations, computed another way.

`test_decoders.py` checks that teacher forcing equals step-wise decoding, which stays true when
both paths share a bug (Bahdanau attention queried with s_i instead of s_{i−1}, say). Here the
logits and attention weights are recomputed from the published equations, one input and one
position at a time: explicit loops over source positions, the GRU/LSTM gates written out from
PyTorch's documented formulas, sigmoid, softmax and LayerNorm by hand, multi-head attention
head by head. Only the parameter tensors are the module's own, and every parameter is redrawn
at random first, so no bias is zero and no LayerNorm is the identity. All in float64.

Dimensions (tiny on purpose):
    B = 2 inputs, S = 4 source positions (the second input has 2 real ones, then padding);
        images: a 2 × 3 grid of L = 6 cells, no padding
    D = 6 annotation width (7 in the attention tests, so no width can stand in for another)
    T = 3 target positions, V = 9 target vocabulary
    E = 5 embedding width, H = 6 decoder state width (equal to D, for dot attention; 4 with
        multi-head attention, whose context is then 4 wide)
    A = 4 hidden width of additive attention, L = 3 maxout units (pools of 2)
    Transformer: d = 8 model width, 2 heads of d_k = 4, F = 12 feed-forward units, 2 layers
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import pytest
import torch
from torch import Tensor, nn

from seqtasks.attention.multihead import MultiHeadAttention, SelfAttention
from seqtasks.attention.scores import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    ScaledDotAttention,
    ScoredAttention,
)
from seqtasks.decoders import (
    BahdanauDecoder,
    Decoder,
    HardAttentionDecoder,
    LuongDecoder,
    NoAttentionDecoder,
    ShowTellDecoder,
    SoftAttentionDecoder,
    TransformerDecoder,
)
from seqtasks.decoders.rnn import RNNDecoder
from seqtasks.layers.memory import Memory, lengths_to_mask

B, S, D, T, V = 2, 4, 6, 3, 9
E, H, A, L = 5, 6, 4, 3
LENGTHS = [4, 2]
TOKENS = [[2, 5, 7], [2, 8, 4]]  # (B, T) target inputs: BOS, then two tokens
F64 = torch.float64

Layers = list[tuple[Tensor, Tensor | None]]  # per RNN layer (h, c); c is None for a GRU
Output = tuple[Tensor, Tensor | None]  # logits (T, V) and attention (T, S) or None


class Source(NamedTuple):
    """One input as the references see it: annotations (S, D) of which the first `length` are
    real, the summary vector (D,), and the image grid or None."""

    annotations: Tensor
    length: int
    summary: Tensor
    grid: tuple[int, int] | None


def randomise(module: nn.Module, seed: int = 0) -> nn.Module:
    """Float64, eval mode, no gradients, every parameter drawn from N(0, 0.5²)."""
    module.double().eval().requires_grad_(False)
    g = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=F64))
    return module


def make_memory(grid: tuple[int, int] | None = None, seed: int = 1) -> Memory:
    """B inputs of S annotations: text padded as LENGTHS with a random summary c, or an
    unpadded image grid whose summary is the mean annotation ā (as the image encoders)."""
    g = torch.Generator().manual_seed(seed)
    positions = grid[0] * grid[1] if grid else S
    mask = lengths_to_mask(torch.tensor([positions] * B if grid else LENGTHS), positions)
    states = torch.randn(B, positions, D, generator=g, dtype=F64) * mask[:, :, None]
    summary = states.mean(1) if grid else torch.randn(B, D, generator=g, dtype=F64)
    return Memory(states, mask, summary, grid)


def sources(memory: Memory) -> list[Source]:
    """The B inputs of `memory`, one by one."""
    return [
        Source(memory.states[b], int(memory.mask[b].sum()), memory.summary[b], memory.grid)
        for b in range(memory.states.size(0))
    ]


# ---- plain operations ------------------------------------------------------------------------


def sigmoid(x: Tensor) -> Tensor:
    """σ(x) = 1 / (1 + e^−x)."""
    return 1 / (1 + torch.exp(-x))


def softmax(scores: list[float]) -> list[float]:
    """exp(e_j) / Σ_k exp(e_k), shifted by the maximum."""
    top = max(scores)
    exps = [math.exp(e - top) for e in scores]
    return [x / sum(exps) for x in exps]


def linear(layer: nn.Linear, x: Tensor) -> Tensor:
    """W x + b for one vector x."""
    return layer.weight @ x + (0 if layer.bias is None else layer.bias)


def layer_norm(norm: nn.LayerNorm, x: Tensor) -> Tensor:
    """γ ∘ (x − μ) / √(σ² + ε) + β, σ² the biased variance (Ba et al. 2016)."""
    mean = sum(x.tolist()) / x.numel()
    variance = sum((v - mean) ** 2 for v in x.tolist()) / x.numel()
    return norm.weight * (x - mean) / math.sqrt(variance + norm.eps) + norm.bias


def sinusoid(position: int, width: int) -> Tensor:
    """PE(p, 2i) = sin(p / 10000^(2i/width)), PE(p, 2i+1) = cos(p / 10000^(2i/width)) (§3.5)."""
    angles = [position / 10000 ** (2 * (k // 2) / width) for k in range(width)]
    values = [math.sin(a) if k % 2 == 0 else math.cos(a) for k, a in enumerate(angles)]
    return torch.tensor(values, dtype=F64)


# ---- recurrent cells, from the formulas in PyTorch's nn.GRU / nn.LSTM documentation -------------


def gru_cell(rnn: nn.GRU, layer: int, x: Tensor, h: Tensor) -> Tensor:
    """Weight rows in gate order r, z, n:

    r = σ(W_ir x + b_ir + W_hr h + b_hr)      z = σ(W_iz x + b_iz + W_hz h + b_hz)
    n = tanh(W_in x + b_in + r ∘ (W_hn h + b_hn))      h' = (1 − z) ∘ n + z ∘ h
    """
    W_ir, W_iz, W_in = getattr(rnn, f"weight_ih_l{layer}").split(rnn.hidden_size)
    W_hr, W_hz, W_hn = getattr(rnn, f"weight_hh_l{layer}").split(rnn.hidden_size)
    b_ir, b_iz, b_in = getattr(rnn, f"bias_ih_l{layer}").split(rnn.hidden_size)
    b_hr, b_hz, b_hn = getattr(rnn, f"bias_hh_l{layer}").split(rnn.hidden_size)
    r = sigmoid(W_ir @ x + b_ir + W_hr @ h + b_hr)
    z = sigmoid(W_iz @ x + b_iz + W_hz @ h + b_hz)
    n = torch.tanh(W_in @ x + b_in + r * (W_hn @ h + b_hn))
    return (1 - z) * n + z * h


def lstm_cell(rnn: nn.LSTM, layer: int, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """Weight rows in gate order i, f, g, o:

    i = σ(W_ii x + b_ii + W_hi h + b_hi)   f = σ(W_if x + b_if + W_hf h + b_hf)
    g = tanh(W_ig x + b_ig + W_hg h + b_hg)   o = σ(W_io x + b_io + W_ho h + b_ho)
    c' = f ∘ c + i ∘ g      h' = o ∘ tanh(c')
    """
    W_ii, W_if, W_ig, W_io = getattr(rnn, f"weight_ih_l{layer}").split(rnn.hidden_size)
    W_hi, W_hf, W_hg, W_ho = getattr(rnn, f"weight_hh_l{layer}").split(rnn.hidden_size)
    b_ii, b_if, b_ig, b_io = getattr(rnn, f"bias_ih_l{layer}").split(rnn.hidden_size)
    b_hi, b_hf, b_hg, b_ho = getattr(rnn, f"bias_hh_l{layer}").split(rnn.hidden_size)
    i = sigmoid(W_ii @ x + b_ii + W_hi @ h + b_hi)
    f = sigmoid(W_if @ x + b_if + W_hf @ h + b_hf)
    g = torch.tanh(W_ig @ x + b_ig + W_hg @ h + b_hg)
    o = sigmoid(W_io @ x + b_io + W_ho @ h + b_ho)
    c = f * c + i * g
    return o * torch.tanh(c), c


def recur(rnn: nn.GRU | nn.LSTM, x: Tensor, layers: Layers) -> tuple[Tensor, Layers]:
    """One step of the stack: layer l reads layer l−1's new h. Returns the top h, the states."""
    new = []
    for layer, (h, c) in enumerate(layers):
        if c is None:
            h = gru_cell(rnn, layer, x, h)
        else:
            h, c = lstm_cell(rnn, layer, x, h, c)
        new.append((h, c))
        x = h
    return x, new


def initial_state(decoder: RNNDecoder, summary: Tensor) -> Layers:
    """s_0 = tanh(W_s c + b_s), one H-wide slice per layer; an LSTM's cells start at
    c_0 = tanh(W_c c + b_c) with `init_cell` (Xu et al.), else at 0."""
    size = decoder.rnn.hidden_size
    hs = torch.tanh(linear(decoder.init_hidden, summary)).split(size)
    if decoder.cell == "gru":
        return [(h, None) for h in hs]
    if decoder.init_cell is None:
        return [(h, torch.zeros(size, dtype=F64)) for h in hs]
    cs = torch.tanh(linear(decoder.init_cell, summary)).split(size)
    return list(zip(hs, cs, strict=True))


# ---- attention -------------------------------------------------------------------------------


def additive_score(attention: AdditiveAttention, s: Tensor, h: Tensor) -> float:
    """Bahdanau et al. App. A.1.2: e = vᵀ tanh(W s + U h + b)."""
    return float(
        attention.v.weight[0] @ torch.tanh(linear(attention.W, s) + linear(attention.U, h))
    )


def dot_score(attention: DotAttention, s: Tensor, h: Tensor) -> float:
    """Luong et al. §3.1 'dot': e = Σ_k s_k h_k."""
    return sum(a * b for a, b in zip(s.tolist(), h.tolist(), strict=True))


def general_score(attention: GeneralAttention, s: Tensor, h: Tensor) -> float:
    """Luong et al. §3.1 'general': e = sᵀ W h."""
    return float(s @ (attention.W.weight @ h))


def scaled_dot_score(attention: ScaledDotAttention, s: Tensor, h: Tensor) -> float:
    """Vaswani et al. §3.2.1, one head: e = sᵀ h / √d."""
    return dot_score(attention, s, h) / math.sqrt(s.numel())


SCORES: dict[type, Callable[[ScoredAttention, Tensor, Tensor], float]] = {
    AdditiveAttention: additive_score,
    DotAttention: dot_score,
    GeneralAttention: general_score,
    ScaledDotAttention: scaled_dot_score,
}


def attend(
    attention: ScoredAttention | MultiHeadAttention, query: Tensor, source: Source
) -> tuple[Tensor, Tensor]:
    """α_j = softmax_j(score(query, h_j)) over the real positions j < length (α_j = 0 on the
    padding), c = Σ_j α_j h_j. Returns c (D,) and α (S,). Multi-head attention: its output
    W_O MultiHead(q, k_j, v_j) (`cross_attention`, below) and α averaged over heads."""
    real = range(source.length)
    if isinstance(attention, MultiHeadAttention):
        memory = [source.annotations[j] for j in real]
        (context,), (alpha,) = cross_attention(attention, [query], memory)
        return context, padded(alpha, source)
    score = SCORES[type(attention)]
    alpha = softmax([score(attention, query, source.annotations[j]) for j in real])
    context = sum(a * source.annotations[j] for j, a in zip(real, alpha, strict=True))
    return context, padded(alpha, source)


def padded(alpha: list[float], source: Source) -> Tensor:
    """(S,) the weights of the real positions, then zeros for the padding."""
    return torch.tensor(alpha + [0.0] * (source.annotations.size(0) - source.length), dtype=F64)


def maxout(t: Tensor) -> Tensor:
    """t_k = max(t̃_{2k}, t̃_{2k+1}): pools of two adjacent units (Goodfellow et al. 2013)."""
    return torch.stack([torch.maximum(t[2 * k], t[2 * k + 1]) for k in range(t.numel() // 2)])


# ---- reference decoders ----------------------------------------------------------------------


def bahdanau_reference(decoder: BahdanauDecoder, source: Source, tokens: list[int]) -> Output:
    """Bahdanau et al. (2015) §3.1 and App. A.2, the query being the state *before* the update:

    s_0 = tanh(W_s c)
    α_ij = softmax_j score(s_{i−1}, h_j)      c_i = Σ_j α_ij h_j
    s_i = f(s_{i−1}, [E y_{i−1}; c_i])
    t̃_i = U_o s_i + V_o E y_{i−1} + C_o c_i      t_i = maxout(t̃_i)      logits_i = W_o t_i

    The deep output reads s_i, as eq. (4) and the class docstring say; App. A.2.2 and the
    authors' GroundHog code read s_{i−1} there.
    """
    readout = decoder.readout
    widths = [decoder.rnn.hidden_size, E, decoder.attention.out_dim]  # [s_i; E y_{i−1}; c_i]
    U_o, V_o, C_o = readout.hidden.weight.split(widths, dim=1)
    layers = initial_state(decoder, source.summary)
    logits, alphas = [], []
    for y in tokens:
        embedded = decoder.embedding.weight[y]
        context, alpha = attend(decoder.attention, layers[-1][0], source)  # query s_{i−1}
        s, layers = recur(decoder.rnn, torch.cat([embedded, context]), layers)
        t = maxout(U_o @ s + V_o @ embedded + C_o @ context + readout.hidden.bias)
        logits.append(linear(readout.out, t))
        alphas.append(alpha)
    return torch.stack(logits), torch.stack(alphas)


def luong_reference(decoder: LuongDecoder, source: Source, tokens: list[int]) -> Output:
    """Luong et al. (2015) §3 and §3.3, attending with the state *after* the update:

    h_i = f(h_{i−1}, [E y_{i−1}; h̃_{i−1}])   (input feeding, h̃_0 = 0; without it E y_{i−1})
    α_ij = softmax_j score(h_i, h̄_j)      c_i = Σ_j α_ij h̄_j
    h̃_i = tanh(W_c [c_i; h_i])      logits_i = W_s h̃_i + b_s
    """
    hidden = decoder.rnn.hidden_size
    W_cc, W_ch = decoder.combine.weight.split([decoder.attention.out_dim, hidden], dim=1)
    layers = initial_state(decoder, source.summary)
    h_tilde = torch.zeros(hidden, dtype=F64)
    logits, alphas = [], []
    for y in tokens:
        embedded = decoder.embedding.weight[y]
        x = torch.cat([embedded, h_tilde]) if decoder.input_feeding else embedded
        h, layers = recur(decoder.rnn, x, layers)
        context, alpha = attend(decoder.attention, h, source)  # query h_i
        h_tilde = torch.tanh(W_cc @ context + W_ch @ h)
        logits.append(linear(decoder.out, h_tilde))
        alphas.append(alpha)
    return torch.stack(logits), torch.stack(alphas)


def no_attention_reference(
    decoder: NoAttentionDecoder, source: Source, tokens: list[int]
) -> Output:
    """Cho et al. (2014) §2.2, the fixed vector c at every step and in the output:

    s_0 = tanh(W_s c)      s_i = f(s_{i−1}, [E y_{i−1}; c])
    logits_i = W_o maxout(U_o s_i + V_o E y_{i−1} + C_o c)
    """
    readout = decoder.readout
    U_o, V_o, C_o = readout.hidden.weight.split([H, E, D], dim=1)
    c = source.summary
    layers = initial_state(decoder, c)
    logits = []
    for y in tokens:
        embedded = decoder.embedding.weight[y]
        s, layers = recur(decoder.rnn, torch.cat([embedded, c]), layers)
        t = maxout(U_o @ s + V_o @ embedded + C_o @ c + readout.hidden.bias)
        logits.append(linear(readout.out, t))
    return torch.stack(logits), None


def show_attend_tell_reference(
    decoder: SoftAttentionDecoder,
    source: Source,
    tokens: list[int],
    test_context: str = "expectation",
) -> Output:
    """Xu et al. (2015) §3.1.2, §4.1 and §4.2, eqs. 1–7; the context is the expectation (soft
    attention, and hard attention at test time) or, with `test_context="argmax"`, the
    annotation at the peak of α:

    h_0 = tanh(f_init,h(ā))      c_0 = tanh(f_init,c(ā))      ā the memory summary
    α_t = softmax_i f_att(a_i, h_{t−1})      β_t = σ(f_β(h_{t−1}))
    ẑ_t = β_t Σ_i α_ti a_i   or   β_t a_{argmax_i α_ti}
    h_t, c_t = LSTM([E y_{t−1}; ẑ_t], h_{t−1}, c_{t−1})
    logits_t = L_o(E y_{t−1} + L_h h_t + L_z ẑ_t)
    """
    out = decoder.readout
    layers = initial_state(decoder, source.summary)
    logits, alphas = [], []
    for y in tokens:
        embedded = decoder.embedding.weight[y]
        h_prev = layers[-1][0]
        expected, alpha = attend(decoder.attention, h_prev, source)
        glimpse = (
            expected if test_context == "expectation" else source.annotations[int(alpha.argmax())]
        )
        z = sigmoid(linear(decoder.f_beta, h_prev)) * glimpse
        h, layers = recur(decoder.rnn, torch.cat([embedded, z]), layers)
        logits.append(linear(out.L_o, embedded + linear(out.L_h, h) + linear(out.L_z, z)))
        alphas.append(alpha)
    return torch.stack(logits), torch.stack(alphas)


def show_tell_reference(decoder: ShowTellDecoder, source: Source, tokens: list[int]) -> Output:
    """Show-Attend-Tell's control without attention: the image only sets the initial state.

    h_0 = tanh(f_init,h(ā))   c_0 = tanh(f_init,c(ā))   h_t, c_t = LSTM(E y_{t−1}, h_{t−1}, c_{t−1})
    logits_t = L_o(E y_{t−1} + L_h h_t)
    """
    out = decoder.readout
    layers = initial_state(decoder, source.summary)
    logits = []
    for y in tokens:
        embedded = decoder.embedding.weight[y]
        h, layers = recur(decoder.rnn, embedded, layers)
        logits.append(linear(out.L_o, embedded + linear(out.L_h, h)))
    return torch.stack(logits), None


def multi_head(
    q: Tensor, keys: list[Tensor], values: list[Tensor], heads: int
) -> tuple[Tensor, list[float]]:
    """Head by head on the d_k-wide slices: α^h_j = softmax_j(q^h · k^h_j / √d_k),
    out^h = Σ_j α^h_j v^h_j; returns the heads concatenated and α averaged over heads."""
    d_k = q.numel() // heads
    outs, mean = [], [0.0] * len(keys)
    for head in range(heads):
        part = slice(head * d_k, (head + 1) * d_k)
        alpha = softmax([float(q[part] @ k[part]) / math.sqrt(d_k) for k in keys])
        outs.append(sum(a * v[part] for a, v in zip(alpha, values, strict=True)))
        mean = [m + a / heads for m, a in zip(mean, alpha, strict=True)]
    return torch.cat(outs), mean


def self_attention(module: SelfAttention, xs: list[Tensor]) -> list[Tensor]:
    """Position t attends to positions 0…t only (the causal mask):
    W_O MultiHead(q_t, k_≤t, v_≤t)."""
    W_q, W_k, W_v = module.qkv.weight.split(len(xs[0]))
    b_q, b_k, b_v = module.qkv.bias.split(len(xs[0]))
    q = [W_q @ x + b_q for x in xs]
    k = [W_k @ x + b_k for x in xs]
    v = [W_v @ x + b_v for x in xs]
    heads = [multi_head(q[t], k[: t + 1], v[: t + 1], module.heads)[0] for t in range(len(xs))]
    return [linear(module.out, x) for x in heads]


def cross_attention(
    module: MultiHeadAttention, xs: list[Tensor], memory: list[Tensor]
) -> tuple[list[Tensor], list[list[float]]]:
    """Every position attends to the real memory positions: W_O MultiHead(q_t, k_j, v_j).
    Returns the outputs and, per position, α averaged over heads."""
    W_k, W_v = module.kv.weight.split(len(xs[0]))
    b_k, b_v = module.kv.bias.split(len(xs[0]))
    k = [W_k @ m + b_k for m in memory]
    v = [W_v @ m + b_v for m in memory]
    outs, alphas = [], []
    for x in xs:
        out, alpha = multi_head(linear(module.q, x), k, v, module.heads)
        outs.append(linear(module.out, out))
        alphas.append(alpha)
    return outs, alphas


def transformer_reference(
    decoder: TransformerDecoder, source: Source, tokens: list[int], norm: str, tied: bool
) -> Output:
    """Vaswani et al. (2017) §3, with the residual placement `norm` (`seqtasks.layers.transformer`):

    x_t = √d E y_t + PE(t)      memory m_j = h_j (+ 2-D positions [PE(row); PE(column)] on a grid)
    each layer: masked self-attention, cross-attention over the real m_j, and
        FFN(x) = W_2 max(0, W_1 x + b_1) + b_2, each sub-layer F placed as
        post:      x ← LN(x + F(x))
        pre:       x ← x + F(LN(x)), and LN at the end of the stack
        resi_dual: x ← LN(x + F(x)), d ← d + F(x) with d_0 = x_0, and x + LN(d) at the end
    logits_t = E x_t when tied (§3.4), else W x_t + b. Attention: the last layer's
    cross-attention averaged over heads.
    """
    d = decoder.embedding.embedding_dim
    learned = decoder.embeddings.learned
    positions = [
        sinusoid(t, d) if learned is None else learned.weight[t] for t in range(len(tokens))
    ]
    xs = [
        math.sqrt(d) * decoder.embedding.weight[y] + p
        for y, p in zip(tokens, positions, strict=True)
    ]
    memory = list(source.annotations[: source.length])
    if source.grid is not None:
        width, half = source.grid[1], D // 2
        for j in range(len(memory)):
            row, column = divmod(j, width)
            memory[j] = memory[j] + torch.cat([sinusoid(row, half), sinusoid(column, D - half)])
    duals = list(xs)
    alphas: list[list[float]] = []

    def residual(ln: nn.LayerNorm, sublayer: Callable[[list[Tensor]], list[Tensor]]) -> None:
        nonlocal xs, duals
        if norm == "pre":
            xs = [x + y for x, y in zip(xs, sublayer([layer_norm(ln, x) for x in xs]), strict=True)]
            return
        ys = sublayer(xs)
        if norm == "resi_dual":
            duals = [a + y for a, y in zip(duals, ys, strict=True)]
        xs = [layer_norm(ln, x + y) for x, y in zip(xs, ys, strict=True)]

    def cross(module: MultiHeadAttention, inputs: list[Tensor]) -> list[Tensor]:
        nonlocal alphas
        outs, alphas = cross_attention(module, inputs, memory)
        return outs

    def feed_forward(module: nn.Module, inputs: list[Tensor]) -> list[Tensor]:
        return [linear(module.outer, linear(module.inner, x).clamp(min=0)) for x in inputs]

    for layer in decoder.layers:
        residual(layer.residual_self.norm, partial(self_attention, layer.self_attention))
        residual(layer.residual_cross.norm, partial(cross, layer.cross_attention))
        residual(layer.residual_ff.norm, partial(feed_forward, layer.feed_forward))
    if norm == "pre":
        xs = [layer_norm(decoder.stack.norm, x) for x in xs]
    elif norm == "resi_dual":
        xs = [x + layer_norm(decoder.stack.norm, a) for x, a in zip(xs, duals, strict=True)]
    table = decoder.embedding.weight if tied else decoder.output.weight
    bias = 0 if tied else decoder.output.bias
    return (
        torch.stack([table @ x + bias for x in xs]),
        torch.stack([padded(alpha, source) for alpha in alphas]),
    )


# ---- the tests -------------------------------------------------------------------------------

ATTENTIONS: dict[str, tuple[Callable[[int, int], ScoredAttention], int, int]] = {
    "additive": (partial(AdditiveAttention, attention_dim=A), H, D + 1),
    "general": (GeneralAttention, H, D + 1),
    "dot": (DotAttention, D, D),
    "scaled-dot": (ScaledDotAttention, D, D),
}


@pytest.mark.parametrize("name", ATTENTIONS)
def test_attention_matches_reference(name: str) -> None:
    """`score` at every position, and the masked weights and context of `Attention.forward`
    (padding annotations are random here, so a leak would show)."""
    build, query_dim, memory_dim = ATTENTIONS[name]
    attention = randomise(build(query_dim, memory_dim))
    g = torch.Generator().manual_seed(2)
    query = torch.randn(B, T, query_dim, generator=g, dtype=F64)
    values = torch.randn(B, S, memory_dim, generator=g, dtype=F64)
    mask = lengths_to_mask(torch.tensor(LENGTHS), S)
    projected = attention.project_memory(values, mask)
    scores = attention.score(query, projected.keys)
    context, weights = attention(query, projected)
    score = SCORES[type(attention)]
    for b, length in enumerate(LENGTHS):
        source = Source(values[b], length, values[b].mean(0), None)
        for t in range(T):
            expected = [score(attention, query[b, t], values[b, j]) for j in range(S)]
            torch.testing.assert_close(scores[b, t], torch.tensor(expected, dtype=F64))
            expected_context, alpha = attend(attention, query[b, t], source)
            torch.testing.assert_close(weights[b, t], alpha)
            torch.testing.assert_close(context[b, t], expected_context)


@dataclass(frozen=True)
class Case:
    """A decoder, built as `build(V, D)`, with its reference; `grid` gives it an image memory."""

    build: Callable[[int, int], Decoder]
    reference: Callable[[Decoder, Source, list[int]], Output]
    grid: tuple[int, int] | None = None


RNN = dict(embed_dim=E, hidden_size=H)
MAXOUT = dict(RNN, readout_dim=L)
ADDITIVE = partial(AdditiveAttention, attention_dim=A)
MULTI_HEAD = partial(MultiHeadAttention, heads=2)
NARROW = dict(embed_dim=E, hidden_size=4)  # a multi-head context, 4 wide, is not D wide
GRID = (2, 3)
TRANSFORMER = dict(d_model=8, num_heads=2, num_layers=2, ff_dim=12)


def transformer_case(
    norm: str, tied: bool = True, grid: tuple[int, int] | None = None, **kwargs: str
) -> Case:
    return Case(
        partial(TransformerDecoder, norm=norm, tie_embeddings=tied, **TRANSFORMER, **kwargs),
        partial(transformer_reference, norm=norm, tied=tied),
        grid,
    )


CASES = {
    "bahdanau": Case(partial(BahdanauDecoder, attention=ADDITIVE, **MAXOUT), bahdanau_reference),
    "bahdanau-general-lstm-2layers": Case(
        partial(BahdanauDecoder, attention=GeneralAttention, cell="lstm", num_layers=2, **MAXOUT),
        bahdanau_reference,
    ),
    "luong": Case(partial(LuongDecoder, **RNN), luong_reference),
    "luong-no-feeding": Case(partial(LuongDecoder, input_feeding=False, **RNN), luong_reference),
    "luong-dot-gru-2layers": Case(
        partial(LuongDecoder, attention=DotAttention, cell="gru", num_layers=2, **RNN),
        luong_reference,
    ),
    "luong-scaled-dot": Case(
        partial(LuongDecoder, attention=ScaledDotAttention, **RNN), luong_reference
    ),
    "bahdanau-multi-head-gru": Case(
        partial(BahdanauDecoder, attention=MULTI_HEAD, readout_dim=L, **NARROW),
        bahdanau_reference,
    ),
    "luong-multi-head": Case(
        partial(LuongDecoder, attention=MULTI_HEAD, **NARROW), luong_reference
    ),
    "luong-multi-head-gru-no-feeding": Case(
        partial(LuongDecoder, attention=MULTI_HEAD, cell="gru", input_feeding=False, **NARROW),
        luong_reference,
    ),
    "no-attention": Case(partial(NoAttentionDecoder, **MAXOUT), no_attention_reference),
    "no-attention-lstm-2layers": Case(
        partial(NoAttentionDecoder, cell="lstm", num_layers=2, **MAXOUT), no_attention_reference
    ),
    "soft-attention": Case(
        partial(SoftAttentionDecoder, attention=ADDITIVE, **RNN), show_attend_tell_reference, GRID
    ),
    "hard-attention-expectation": Case(
        partial(HardAttentionDecoder, attention=ADDITIVE, **RNN), show_attend_tell_reference, GRID
    ),
    "hard-attention-argmax": Case(
        partial(HardAttentionDecoder, attention=ADDITIVE, test_context="argmax", **RNN),
        partial(show_attend_tell_reference, test_context="argmax"),
        GRID,
    ),
    "soft-attention-multi-head": Case(
        partial(SoftAttentionDecoder, attention=MULTI_HEAD, **NARROW),
        show_attend_tell_reference,
        GRID,
    ),
    "show-tell": Case(partial(ShowTellDecoder, **RNN), show_tell_reference, GRID),
    "transformer-post": transformer_case("post"),
    "transformer-pre": transformer_case("pre"),
    "transformer-resi_dual": transformer_case("resi_dual"),
    "transformer-untied-learned-positions": transformer_case("post", False, positions="learned"),
    "transformer-image-grid": transformer_case("pre", grid=GRID),
}


def build(name: str) -> tuple[Decoder, Memory]:
    """The decoder of case `name` with random float64 parameters, and its memory."""
    case = CASES[name]
    return randomise(case.build(V, D)), make_memory(case.grid)


def reference_batch(name: str, decoder: Decoder, memory: Memory) -> Output:
    """The reference for every input of the batch: logits (B, T, V), attention (B, T, S)."""
    reference = CASES[name].reference
    outputs = [reference(decoder, *pair) for pair in zip(sources(memory), TOKENS, strict=True)]
    logits = torch.stack([logits for logits, _ in outputs])
    return logits, None if outputs[0][1] is None else torch.stack([a for _, a in outputs])


@pytest.mark.parametrize("name", CASES)
def test_teacher_forcing_matches_reference(name: str) -> None:
    """`forward` on T positions: logits and attention as the paper's equations give them."""
    decoder, memory = build(name)
    logits, alpha = reference_batch(name, decoder, memory)
    outputs = [decoder(memory, torch.tensor(TOKENS))]
    if isinstance(decoder, TransformerDecoder):  # the explicit weights, not the fused kernel
        outputs.append(decoder(memory, torch.tensor(TOKENS), need_attention=True))
    for output in outputs:
        torch.testing.assert_close(output.logits, logits)
    if alpha is None:
        assert outputs[-1].attention is None
    else:
        torch.testing.assert_close(outputs[-1].attention, alpha)


@pytest.mark.parametrize("name", CASES)
def test_steps_match_reference(name: str) -> None:
    """`start` and T calls of `step`: each step's logits and attention."""
    decoder, memory = build(name)
    logits, alpha = reference_batch(name, decoder, memory)
    state = decoder.start(memory)
    for i, tokens in enumerate(torch.tensor(TOKENS).unbind(1)):
        step_logits, state, step_alpha = decoder.step(tokens, state)
        torch.testing.assert_close(step_logits, logits[:, i])
        if alpha is None:
            assert step_alpha is None
        else:
            torch.testing.assert_close(step_alpha, alpha[:, i])


@pytest.mark.parametrize("name", CASES)
def test_reordered_beams_match_reference(name: str) -> None:
    """K = 2 rows per input, reordered between two steps (a row duplicated, a pair swapped):
    each row's second step equals the reference on that row's own prefix, so every part of
    the state (RNN states, the fed h̃, key/value caches) moved with its row."""
    decoder, memory = build(name)
    first, second = torch.tensor([4, 5, 6, 7]), torch.tensor([8, 6, 5, 4])
    index = torch.tensor([1, 1, 3, 2])
    _, state, _ = decoder.step(first, decoder.start(memory, beam_size=2))
    logits, _, alpha = decoder.step(second, decoder.reorder(state, index))
    inputs = sources(memory)
    for row in range(len(index)):
        prefix = [int(first[index[row]]), int(second[row])]
        expected, expected_alpha = CASES[name].reference(decoder, inputs[row // 2], prefix)
        torch.testing.assert_close(logits[row], expected[-1])
        if expected_alpha is not None:
            torch.testing.assert_close(alpha[row], expected_alpha[-1])
