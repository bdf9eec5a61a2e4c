"""Recurrent stacks whole or step by step: the pieces that the recurrent encoder and decoders
share.

`recur` runs a stacked `nn.LSTM`/`nn.GRU` over a whole sequence in one call (cuDNN's
whole-sequence kernel on a GPU, oneDNN's on a CPU); a `CellStack` (and `rnn_step`, one step of
it) runs it one time step at a time with fused cells. All read the module's own weights
(`layer_weights`), so a model is one `nn.LSTM`/`nn.GRU` whichever way it runs. The rule, on
every device: a teacher-forced pass calls `recur` wherever its recurrent input is known for all
steps beforehand; the cells run only where attention feeds back, and in search. (On a 2-core
CPU too, `recur` trains the decoders' stacks 1.2–2.5× faster than the cells over a whole
sequence, bench/rnn_gpu_paths.py; the cells win for one step, bench/rnn_kernels.py.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from seqtasks.layers.dropout import dropout

Hidden = Tensor | tuple[Tensor, Tensor]  # GRU: (layers, B, H); LSTM: (h, c)
LayerState = Tensor | tuple[Tensor, Tensor]  # one layer's: GRU (B, H); LSTM (h, c)


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


class CellStack:
    """A stacked `nn.LSTM`/`nn.GRU` run one time step at a time, each layer a fused cell
    (`torch.lstm_cell`, `torch.gru_cell`) with the module's own weights: for search, and for a
    teacher-forced pass whose input at step t needs step t−1's output (attention fed back), which
    the whole-sequence kernel (`recur`) cannot run. (In every decoder here that feeds attention
    back, the fed value enters the first layer and is computed from the top one, so all layers
    step inside the loop.)

    Each layer's state is kept apart between steps: stacking them into (layers, R, H) at every
    step, as search's state needs (`hidden`), would cost two copies per step forward and, for
    each layer read back out of the stack, a zero fill and a copy backward. The dropout between
    layers draws the masks of all `steps` steps at once, each step's as likely as a fresh one.

    Args:
        rnn: the module whose weights and dropout the cells use.
        hidden: its state before the first step, (layers, R, H), or (h, c) for an LSTM.
        steps: how many times `step` will be called (the masks drawn up front).
    """

    def __init__(self, rnn: nn.LSTM | nn.GRU, hidden: Hidden, steps: int = 1):
        self.weights = [layer_weights(rnn, layer) for layer in range(rnn.num_layers)]
        lstm = isinstance(hidden, tuple)
        self.states: list[LayerState] = (
            list(zip(*(h.unbind(0) for h in hidden))) if lstm else list(hidden.unbind(0))
        )
        # per layer, a (R, H) mask per step, or none (the first layer, eval mode, no dropout)
        self.masks: list[Sequence[Tensor]] = [[] for _ in range(rnn.num_layers)]
        if rnn.training and rnn.dropout > 0:
            h0 = hidden[0] if lstm else hidden  # (layers, R, H)
            ones = h0.new_ones(steps, *h0.shape[1:])  # (steps, R, H)
            self.masks[1:] = [dropout(ones, rnn.dropout).unbind(0) for _ in self.masks[1:]]
        self.t = 0

    @property
    def top(self) -> Tensor:
        """(R, H) the top layer's output h of the last step (its initial state before any)."""
        state = self.states[-1]
        return state[0] if isinstance(state, tuple) else state

    @property
    def hidden(self) -> Hidden:
        """The state as the module holds it: (layers, R, H), or (h, c) for an LSTM."""
        if isinstance(self.states[0], tuple):
            return tuple(torch.stack(s) for s in zip(*self.states))  # type: ignore[return-value]
        return torch.stack(self.states)

    def step(self, x: Tensor) -> Tensor:
        """(R, input) the input of the next step -> (R, H) the top layer's output."""
        for layer, (state, weights) in enumerate(zip(self.states, self.weights)):
            if self.masks[layer]:
                x = x * self.masks[layer][self.t]  # dropout between layers
            if isinstance(state, tuple):
                state = torch.lstm_cell(x, state, *weights)
                x = state[0]
            else:
                state = x = torch.gru_cell(x, state, *weights)
            self.states[layer] = state
        self.t += 1
        return x


def rnn_step(rnn: nn.LSTM | nn.GRU, x: Tensor, hidden: Hidden) -> tuple[Tensor, Hidden]:
    """One time step of a stacked `nn.LSTM`/`nn.GRU` (a `CellStack`): (R, input) and hidden of
    (layers, R, H) -> the top layer's output (R, H) and the new hidden.

    Calling the module on a sequence of length 1 gives the same numbers, but on a CPU its
    fused-RNN kernel has a large fixed cost per call: on a training batch of 24 rows the cells
    are 1.4× faster forward and backward (`bench/rnn_kernels.py`, 2 threads).
    """
    stack = CellStack(rnn, hidden)
    return stack.step(x), stack.hidden


def select_rows(hidden: Hidden, index: Tensor) -> Hidden:
    if isinstance(hidden, tuple):
        return tuple(h.index_select(1, index) for h in hidden)  # type: ignore[return-value]
    return hidden.index_select(1, index)
