"""Recurrent stacks step by step: the pieces that the recurrent encoder and decoders share.

`recur` runs a stacked `nn.LSTM`/`nn.GRU` over a whole sequence, `rnn_step` one time step of
it with fused cells; both read the module's own weights (`layer_weights`), so a model is one
`nn.LSTM`/`nn.GRU` whichever way it runs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqtasks.layers.dropout import dropout

Hidden = Tensor | tuple[Tensor, Tensor]  # GRU: (layers, B, H); LSTM: (h, c)


def recur(
    rnn: nn.LSTM | nn.GRU, x: Tensor, hidden: Hidden, layer: int | None = None, suffix: str = ""
) -> tuple[Tensor, Hidden]:
    """Run `rnn` over (B, T, D) batch-first inputs from `hidden` -> (B, T, H) outputs of the
    top layer and the final hidden: all its layers (one direction) with its dropout between
    them in training, or only `layer` with the weights of direction `suffix` ("_reverse" for
    the backward one) and no dropout.

    Under CPU autocast an LSTM runs on inputs, weights and state cast to the autocast dtype
    with autocast off. Autocast's own path for `torch.lstm` fails on CPUs without AVX-512
    ("could not create a primitive descriptor for the LSTM forward propagation primitive",
    torch 2.14 on an AVX2 AMD EPYC); the same operation on bfloat16 tensors runs everywhere.
    """
    lstm = isinstance(rnn, nn.LSTM)
    layers = range(rnn.num_layers) if layer is None else [layer]
    weights = [w for i in layers for w in layer_weights(rnn, i, suffix)]
    dropout = rnn.dropout if layer is None else 0.0
    args = (len(layers), dropout, rnn.training, False, True)  # layers, p, train, bidi, batch first
    if not lstm:
        return torch.gru(x, hidden, weights, True, *args)
    if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        dtype = torch.get_autocast_dtype("cpu")
        x, hidden = x.to(dtype), tuple(h.to(dtype) for h in hidden)
        weights = [w.to(dtype) for w in weights]
        with torch.autocast("cpu", enabled=False):
            outputs, h, c = torch.lstm(x, hidden, weights, True, *args)
    else:
        outputs, h, c = torch.lstm(x, hidden, weights, True, *args)
    return outputs, (h, c)


def layer_weights(rnn: nn.LSTM | nn.GRU, layer: int, suffix: str = "") -> list[Tensor]:
    """W_ih, W_hh, b_ih, b_hh of one layer of `rnn`, of its backward direction with suffix
    "_reverse": the arguments `torch.lstm_cell`, `torch.gru_cell` and a one-layer
    `torch.lstm`/`torch.gru` take."""
    return [
        getattr(rnn, f"{name}_l{layer}{suffix}")
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    ]


def top_layer(hidden: Hidden) -> Tensor:
    """(B, H) the top layer's hidden state s (h for an LSTM)."""
    h = hidden[0] if isinstance(hidden, tuple) else hidden
    return h[-1]


def rnn_step(rnn: nn.LSTM | nn.GRU, x: Tensor, hidden: Hidden) -> tuple[Tensor, Hidden]:
    """One time step of a stacked `nn.LSTM`/`nn.GRU`, with its weights and, in training, its
    dropout between layers: (R, input) and hidden of (layers, R, H) -> the top layer's output
    (R, H) and the new hidden.

    Each layer runs as one fused cell (`torch.lstm_cell`, `torch.gru_cell`). Calling the module
    on a sequence of length 1 gives the same numbers, but on a CPU its fused-RNN kernel has a
    large fixed cost per call: on a training batch of 24 rows the cells are 1.4× faster forward
    and backward (`bench/rnn_kernels.py`, 2 threads).
    """
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


def select_rows(hidden: Hidden, index: Tensor) -> Hidden:
    if isinstance(hidden, tuple):
        return tuple(h.index_select(1, index) for h in hidden)  # type: ignore[return-value]
    return hidden.index_select(1, index)
