"""Bidirectional recurrent text encoder (Bahdanau et al. 2015, §3.2), and GNMT's stack of it
(Wu et al. 2016, §3, Fig. 1: a bidirectional bottom layer, one-way layers above, residuals)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from seqtasks.encoders.base import Encoder
from seqtasks.layers.dropout import Dropout, dropout
from seqtasks.layers.memory import Memory
from seqtasks.layers.recurrent import recur
from seqtasks.layers.scalar_mix import ScalarMix


class RNNEncoder(Encoder):
    """Embeddings and a bidirectional GRU/LSTM over padded sequences.

    The annotation of token j concatenates both directions, h_j = [→h_j; ←h_j], so it summarises
    the whole sentence with a focus on the words around j. The summary c = [→h_S; ←h_1] joins the
    last state of each direction of the top layer.

    GNMT's encoder (Wu et al. 2016, §3.1–3.2 and Fig. 1; `../shared/seeds/001…`, "Google Neural
    Machine Translation (Wu et al. (2016))") is `bidirectional_layers=1, residual_from=3`: the
    bottom layer reads both ways, the layers above read its [→h_j; ←h_j] left to right, and
    from the third layer up each layer k adds its input to its output (§3.1's
    x^k_t = m^k_t + x^{k−1}_t). The annotations are then the top one-way layer's, `hidden_size`
    wide, and the summary c = →h_S is its state at the last real token.

    Args:
        vocab_size: source vocabulary size V (given by the task, from the data).
        embed_dim: width of the token embeddings.
        hidden_size: width of each direction; `out_dim` is twice this when the top layer reads
            both ways, else this.
        num_layers: stacked layers.
        cell: "gru" (Bahdanau et al.) or "lstm".
        dropout: on the embeddings, between layers and on the annotations.
        pad_id: the padding token, whose embedding stays zero.
        bidirectional_layers: how many layers, from the bottom, read both ways (None: all);
            the ones above read left to right.
        residual_from: the first layer, counting from 1 at the bottom, that adds its input to
            its output: o^k = RNN_k(o^{k−1}) + o^{k−1} for every k ≥ residual_from (GNMT: 3;
            None: no residuals). Dropout between layers falls on the RNN's input only, so the
            residual adds o^{k−1} as it was. A layer whose output is not as wide as its input
            (the first, or the first one-way layer) cannot take one.
        layer_mix: the annotations are ELMo's mix of the token layer and every layer's output
            (Peters et al. 2018, eq. 1, `ScalarMix`), with weights that are the task's own. As in
            ELMo's biLM every layer must read both ways and the embeddings be `hidden_size`
            wide, so that the token layer, [x_j; x_j], is as wide as the layers above.

    Each bidirectional layer runs its two directions as two one-direction passes over the padded
    batch: the forward pass reads the sequence as it is (the padding comes after every real
    token, so it changes no real state) and the backward pass reads every sequence reversed
    within its own length. This gives exactly what `nn.LSTM` gives on a `PackedSequence`, but on
    a CPU the packed path falls back to one matrix product per time step: a 2-layer BiLSTM 256
    over 64 sentences trains 1.3× faster this way (`bench/rnn_kernels.py`, 2 threads), more on
    longer batches. The weights stay those of one bidirectional `nn.LSTM`/`nn.GRU` (`rnn`), and
    of one one-way module for the layers above (`upper`, None when every layer reads both ways).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 256,
        hidden_size: int = 256,
        num_layers: int = 1,
        cell: Literal["gru", "lstm"] = "gru",
        dropout: float = 0.2,
        pad_id: int = 0,
        bidirectional_layers: int | None = None,
        residual_from: int | None = None,
        layer_mix: bool = False,
    ):
        super().__init__()
        both_ways = num_layers if bidirectional_layers is None else bidirectional_layers
        if not 1 <= both_ways <= num_layers:
            raise ValueError(
                f"bidirectional_layers must be between 1 and num_layers ({num_layers}), "
                f"got {bidirectional_layers}"
            )
        if layer_mix and (both_ways < num_layers or embed_dim != hidden_size):
            raise ValueError(
                "layer_mix mixes layers of one width, as ELMo's biLM: every layer bidirectional "
                f"(bidirectional_layers {bidirectional_layers}, num_layers {num_layers}) and "
                f"embed_dim equal to hidden_size ({embed_dim} and {hidden_size})"
            )
        _check_residuals(residual_from, embed_dim, hidden_size, num_layers, both_ways)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        rnn_class = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = rnn_class(
            embed_dim, hidden_size, num_layers=both_ways, batch_first=True, bidirectional=True
        )
        # The rate between all layers, which `forward` applies (set after building: nn.LSTM
        # warns of a rate on a single layer, where it would apply none itself).
        self.rnn.dropout = dropout if num_layers > 1 else 0.0
        self.upper = None
        if both_ways < num_layers:
            self.upper = rnn_class(
                2 * hidden_size, hidden_size, num_layers - both_ways, batch_first=True
            )
        self.dropout = Dropout(dropout)
        self.num_layers, self.residual_from = num_layers, residual_from
        self.out_dim = hidden_size if self.upper is not None else 2 * hidden_size
        self.layer_mix = ScalarMix(num_layers + 1) if layer_mix else None

    def forward(self, inputs: Tensor, mask: Tensor) -> Memory:
        """(B, S) token ids and (B, S) mask -> Memory with states (B, S, D), summary (B, D).

        The annotations of padding positions are zero."""
        lengths = mask.sum(dim=1)  # (B,)
        positions = torch.arange(inputs.size(1), device=inputs.device)
        # reverse[b, j] = the position that j swaps with when sequence b is read backwards
        # (its own inverse; padding stays in place).
        reverse = torch.where(mask, lengths[:, None] - 1 - positions, positions)  # (B, S)
        x = self.dropout(self.embedding(inputs))  # (B, S, E)
        mixing = self.layer_mix is not None
        # The token layer [x_j; x_j] and every layer's output, kept for the layer mix alone.
        layers = [torch.cat([x, x], dim=-1)] if mixing else []
        both_ways = self.rnn.num_layers
        for layer in range(self.num_layers):
            below = x
            if layer > 0:
                x = dropout(x, self.rnn.dropout, self.training)
            if layer < both_ways:
                ahead = self._run(self.rnn, x, layer, "")
                back = self._run(self.rnn, _gather_time(x, reverse), layer, "_reverse")
                x = torch.cat([ahead, _gather_time(back, reverse)], dim=-1)  # (B, S, 2H)
            else:
                x = self._run(self.upper, x, layer - both_ways, "")  # (B, S, H)
            if self.residual_from is not None and layer + 1 >= self.residual_from:
                x = x + below
            if mixing:
                layers.append(x)
        states = (self.layer_mix(layers) if mixing else x) * mask[:, :, None]
        last = (lengths - 1).clamp(min=0)[:, None, None].expand(-1, 1, x.size(-1))
        summary = x.gather(1, last)[:, 0]  # (B, D): the top layer at the last real token
        if self.upper is None:  # [→h_S; ←h_1]
            half = self.rnn.hidden_size
            summary = torch.cat([summary[:, :half], x[:, 0, half:]], dim=-1)
        return Memory(states=self.dropout(states), mask=mask, summary=summary)

    def task_specific(self, key: str) -> bool:
        """The layer mix's weights are the task's."""
        return key.startswith("layer_mix.")

    def _run(self, rnn: nn.LSTM | nn.GRU, x: Tensor, layer: int, suffix: str) -> Tensor:
        """One direction of one layer of `rnn` over (B, S, D) inputs, with that direction's
        weights: (B, S, H) outputs."""
        h0 = x.new_zeros(1, x.size(0), rnn.hidden_size)
        hidden = (h0, h0) if isinstance(rnn, nn.LSTM) else h0
        return recur(rnn, x, hidden, layer, suffix)[0]


def _check_residuals(
    residual_from: int | None, embed_dim: int, hidden_size: int, num_layers: int, both_ways: int
) -> None:
    """Refuse a residual on a layer whose input and output differ in width."""
    if residual_from is None:
        return
    if residual_from < 1:
        raise ValueError(f"residual_from counts layers from 1, got {residual_from}")
    for k in range(residual_from, num_layers + 1):  # layer k, counted from 1
        wide = 2 * hidden_size
        inputs = embed_dim if k == 1 else (wide if k - 1 <= both_ways else hidden_size)
        outputs = wide if k <= both_ways else hidden_size
        if inputs != outputs:
            raise ValueError(
                f"residual_from={residual_from} adds layer {k}'s input ({inputs} wide) to its "
                f"output ({outputs} wide); start the residuals above layer {k}"
            )


def _gather_time(x: Tensor, index: Tensor) -> Tensor:
    """(B, S, D) -> (B, S, D) with out[b, j] = x[b, index[b, j]]."""
    return x.gather(1, index[:, :, None].expand_as(x))
