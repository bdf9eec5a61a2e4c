"""GNMT's stack (Wu et al. 2016, §3, Fig. 1) against its equations computed another way: the
encoder's layers run one by one as plain `nn.LSTM`/`nn.GRU` modules over each unpadded
sentence (a bidirectional bottom, one-way layers above, residuals from layer 3); the decoder as
a loop of `nn.LSTMCell`/`nn.GRUCell` steps with additive attention written out position by
position, queried by the bottom layer's previous output, its context fed to every layer. Only
the parameter tensors are the modules' own, redrawn at random first (no bias is zero), in
float64. Then what search needs: one cell step per layer and step, and beam search's scores
equal to the teacher-forced log-probabilities of what it found.

Dimensions: B = 2 inputs (lengths 5 and 2), S = 5, E = 4 embeddings, H = 5 states, D = 6
annotations, V = 9 target vocabulary, T = 4 target positions.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from seqtasks.data.tokenizer import BOS_ID, EOS_ID
from seqtasks.decoders import BahdanauDecoder, GNMTDecoder
from seqtasks.encoders import RNNEncoder
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.search import SearchSettings, search

B, S, E, H, D, V = 2, 5, 4, 5, 6, 9
LENGTHS = [5, 2]
TOKENS = torch.tensor([[BOS_ID, 5, 7, 4], [BOS_ID, 8, 4, 6]])  # (B, T) target inputs
F64 = torch.float64


def redrawn(module: nn.Module) -> nn.Module:
    """`module` in float64 with every parameter drawn again, so that no bias is zero."""
    torch.manual_seed(3)
    module = module.double().eval()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return module


def copy_layer(into: nn.Module, rnn: nn.Module, layer: int, suffixes: tuple[str, ...]) -> None:
    """Give `into` (an RNN module's layer 0, or a cell) `rnn`'s weights of `layer`."""
    cell = isinstance(into, nn.RNNCellBase)
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        for suffix in suffixes:
            target = name if cell else f"{name}_l0{suffix}"
            getattr(into, target).data.copy_(getattr(rnn, f"{name}_l{layer}{suffix}"))


# ---- the encoder -----------------------------------------------------------------------------


def encoder_reference(encoder: RNNEncoder, ids: list[int]) -> tuple[Tensor, Tensor]:
    """(n, D) annotations and (D,) summary of one unpadded sentence, a module per layer."""
    rnn_class = nn.LSTM if isinstance(encoder.rnn, nn.LSTM) else nn.GRU
    both_ways, hidden = encoder.rnn.num_layers, encoder.rnn.hidden_size
    x = encoder.embedding.weight[ids]  # (n, E)
    for k in range(encoder.num_layers):  # layer k + 1 of the paper's count
        if k < both_ways:
            layer = rnn_class(x.size(-1), hidden, bidirectional=True).double()
            copy_layer(layer, encoder.rnn, k, ("", "_reverse"))
        else:
            layer = rnn_class(x.size(-1), hidden).double()
            copy_layer(layer, encoder.upper, k - both_ways, ("",))
        out = layer(x[:, None])[0][:, 0]  # (n, 2H) or (n, H): the sentence alone, seq-first
        residual = encoder.residual_from is not None and k + 1 >= encoder.residual_from
        x = out + x if residual else out
    if encoder.upper is None:
        return x, torch.cat([x[-1, :hidden], x[0, hidden:]])  # [→h_n; ←h_1]
    return x, x[-1]  # →h_n


def padded_sources() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(2)
    mask = lengths_to_mask(torch.tensor(LENGTHS), S)
    return torch.randint(4, 13, (B, S), generator=g).masked_fill(~mask, 0), mask


ENCODERS = {  # cell, num_layers, bidirectional_layers, residual_from
    "gnmt-lstm": ("lstm", 4, 1, 3),
    "gnmt-gru": ("gru", 4, 1, 3),
    "two-both-ways-then-one": ("lstm", 3, 2, None),
    "all-both-ways-residual-from-2": ("gru", 3, None, 2),
}


@pytest.mark.parametrize("name", ENCODERS)
def test_the_encoder_matches_its_layers_run_by_hand(name):
    """States and summary of every row of a padded batch equal the layers run one by one on
    the row alone (so the bidirectional layer reads no padding), and padding stays zero."""
    cell, layers, both_ways, residual_from = ENCODERS[name]
    encoder = RNNEncoder(
        13, E, H, layers, cell, dropout=0.3, bidirectional_layers=both_ways,
        residual_from=residual_from,
    )  # fmt: skip
    encoder = redrawn(encoder)
    src, mask = padded_sources()
    with torch.no_grad():
        memory = encoder(src, mask)
        for b, n in enumerate(LENGTHS):
            states, summary = encoder_reference(encoder, src[b, :n].tolist())
            torch.testing.assert_close(memory.states[b, :n], states)
            torch.testing.assert_close(memory.summary[b], summary)
            assert memory.states[b, n:].abs().sum() == 0


def test_a_bottom_bidirectional_stack_is_one_direction_wide_and_pairs_with_the_decoders():
    src, mask = padded_sources()
    every = RNNEncoder(13, E, H, num_layers=3)
    bottom = RNNEncoder(13, E, H, num_layers=3, bidirectional_layers=1, residual_from=3)
    assert every.upper is None and every.out_dim == 2 * H
    assert bottom.out_dim == H
    assert bottom.rnn.num_layers == 1 and bottom.rnn.bidirectional  # layer 1, both ways
    assert bottom.upper.num_layers == 2 and not bottom.upper.bidirectional
    assert bottom.upper.weight_ih_l0.shape == (3 * H, 2 * H)  # layer 2 reads [→h; ←h]
    assert bottom.upper.weight_ih_l1.shape == (3 * H, H)
    for encoder in (every, bottom):
        memory = encoder(src, mask)
        assert memory.states.shape == (B, S, encoder.out_dim)
        assert memory.summary.shape == (B, encoder.out_dim)
        for decoder in (
            GNMTDecoder(V, encoder.out_dim, embed_dim=E, hidden_size=H, num_layers=3),
            BahdanauDecoder(V, encoder.out_dim, embed_dim=E, hidden_size=H, readout_dim=4),
        ):
            assert decoder(memory, TOKENS).logits.shape == (B, TOKENS.size(1), V)


def test_the_default_encoder_is_one_bidirectional_rnn_as_before():
    """No option given: every layer both ways, no residual, no module beside the one
    bidirectional RNN (its parameter names and shapes), and the same numbers as the options
    spelt out."""
    torch.manual_seed(0)
    default = RNNEncoder(13, E, H, num_layers=2, cell="lstm").eval()
    torch.manual_seed(0)
    spelt = RNNEncoder(13, E, H, 2, "lstm", bidirectional_layers=2, residual_from=None).eval()
    plain = nn.LSTM(E, H, 2, bidirectional=True)
    assert default.upper is None
    assert {n: p.shape for n, p in default.rnn.named_parameters()} == {
        n: p.shape for n, p in plain.named_parameters()
    }
    assert [n for n, _ in default.named_parameters()] == [
        "embedding.weight",
        *(f"rnn.{n}" for n, _ in plain.named_parameters()),
    ]
    src, mask = padded_sources()
    a, b = default(src, mask), spelt(src, mask)
    assert torch.equal(a.states, b.states) and torch.equal(a.summary, b.summary)


def test_bad_settings_are_refused_by_name():
    with pytest.raises(
        ValueError, match=r"bidirectional_layers must be between 1 and num_layers \(3\), got 0"
    ):
        RNNEncoder(13, num_layers=3, bidirectional_layers=0)
    with pytest.raises(ValueError, match=r"bidirectional_layers .* got 4"):
        RNNEncoder(13, num_layers=3, bidirectional_layers=4)
    with pytest.raises(ValueError, match="residual_from=2 adds layer 2's input .512 wide. to its"):
        RNNEncoder(13, hidden_size=256, num_layers=3, bidirectional_layers=1, residual_from=2)
    with pytest.raises(ValueError, match="residual_from=1 adds layer 1's input .8 wide."):
        RNNEncoder(13, embed_dim=8, hidden_size=8, num_layers=2, residual_from=1)
    with pytest.raises(ValueError, match="residual_from counts layers from 1, got 0"):
        RNNEncoder(13, num_layers=2, residual_from=0)
    with pytest.raises(ValueError, match="residual_from must be at least 2 .*, got 1"):
        GNMTDecoder(V, D, residual_from=1)
    with pytest.raises(ValueError, match="num_layers must be at least 1, got 0"):
        GNMTDecoder(V, D, num_layers=0)


# ---- the decoder -----------------------------------------------------------------------------


def source_memory() -> Memory:
    g = torch.Generator().manual_seed(1)
    mask = lengths_to_mask(torch.tensor(LENGTHS), S)
    states = torch.randn(B, S, D, generator=g, dtype=F64) * mask[:, :, None]
    return Memory(states, mask, torch.randn(B, D, generator=g, dtype=F64))


def decoder_reference(decoder: GNMTDecoder, memory: Memory) -> tuple[Tensor, Tensor]:
    """(B, T, V) logits and (B, T, S) attention, one input and one step at a time."""
    lstm = isinstance(decoder.rnn[0], nn.LSTM)
    attention, layers = decoder.attention, decoder.num_layers
    W, U, v = attention.W.weight, attention.U, attention.v.weight[0]
    cells = []
    for rnn in decoder.rnn:
        cell = (nn.LSTMCell if lstm else nn.GRUCell)(rnn.input_size, rnn.hidden_size).double()
        copy_layer(cell, rnn, 0, ("",))
        cells.append(cell)
    logits, alphas = (
        torch.zeros(B, TOKENS.size(1), V, dtype=F64),
        torch.zeros(B, TOKENS.size(1), S, dtype=F64),
    )
    for b, n in enumerate(LENGTHS):
        x = memory.states[b, :n]  # (n, D) the real annotations only
        s0 = torch.tanh(decoder.init_hidden(memory.summary[b])).view(layers, -1)  # s_0 per layer
        h = list(s0.unbind(0))
        c = [torch.zeros_like(s) for s in h]
        for i, y in enumerate(TOKENS[b].tolist()):
            query = h[0]  # the bottom layer's output at step i − 1
            e = torch.stack([v @ torch.tanh(W @ query + U(x[t])) for t in range(n)])
            alpha = torch.softmax(e, 0)  # (n,)
            a = (alpha[:, None] * x).sum(0)  # (D,)
            below, inputs = None, torch.cat([decoder.embedding.weight[y], a])
            for k in range(layers):
                if lstm:
                    hk, ck = cells[k](inputs[None], (h[k][None], c[k][None]))
                    h[k], c[k] = hk[0], ck[0]
                else:
                    h[k] = cells[k](inputs[None], h[k][None])[0]
                residual = decoder.residual_from is not None and k + 1 >= decoder.residual_from
                below = h[k] + below if residual else h[k]
                inputs = torch.cat([below, a])  # every layer reads the context
            logits[b, i] = decoder.out(below)
            alphas[b, i, :n] = alpha
    return logits, alphas


DECODER_SETTINGS = {  # cell, num_layers, residual_from
    "gnmt-lstm-4-residual-from-3": ("lstm", 4, 3),
    "gnmt-gru-4-residual-from-2": ("gru", 4, 2),
    "lstm-3-no-residual": ("lstm", 3, None),
}


def gnmt_decoder(name: str) -> GNMTDecoder:
    cell, layers, residual_from = DECODER_SETTINGS[name]
    return redrawn(
        GNMTDecoder(
            V,
            D,
            embed_dim=E,
            hidden_size=H,
            num_layers=layers,
            cell=cell,
            residual_from=residual_from,
            dropout=0.3,
        )  # fmt: skip
    )


@pytest.mark.parametrize("name", DECODER_SETTINGS)
def test_the_decoder_matches_a_loop_of_cells(name):
    """Teacher-forced and step-by-step logits and attention equal the reference loop."""
    decoder, memory = gnmt_decoder(name), source_memory()
    with torch.no_grad():
        expected_logits, expected_alpha = decoder_reference(decoder, memory)
        output = decoder(memory, TOKENS)
        torch.testing.assert_close(output.logits, expected_logits)
        torch.testing.assert_close(output.attention, expected_alpha)
        state = decoder.start(memory)
        for i in range(TOKENS.size(1)):
            logits, state, alpha = decoder.step(TOKENS[:, i], state)
            torch.testing.assert_close(logits, expected_logits[:, i])
            torch.testing.assert_close(alpha, expected_alpha[:, i])


def test_a_search_step_is_one_cell_step_per_layer(monkeypatch):
    """Each step runs each layer's cell once, no whole-sequence pass (no prefix read again),
    and the state stays the same size however long the output."""
    decoder, memory = gnmt_decoder("gnmt-lstm-4-residual-from-3"), source_memory()
    cells = []
    lstm_cell = torch.lstm_cell
    monkeypatch.setattr(torch, "lstm_cell", lambda *args: cells.append(1) or lstm_cell(*args))
    monkeypatch.setattr(torch, "lstm", lambda *args: pytest.fail("a whole-sequence pass"))
    with torch.no_grad():
        state = decoder.start(memory, beam_size=3)
        for step in range(1, 7):
            _, state, _ = decoder.step(torch.full((B * 3,), 5), state)
            assert len(cells) == step * decoder.num_layers
            assert state.hidden[0].shape == state.hidden[1].shape == (4, B * 3, H)


def test_beam_search_scores_are_the_teacher_forced_log_probabilities():
    """Batched beam search over the GNMT pair through `search`: each hypothesis's score (α = 0:
    its raw log-probability) is what the teacher-forced pass gives its tokens."""
    torch.manual_seed(0)
    encoder = RNNEncoder(13, E, H, 4, "lstm", bidirectional_layers=1, residual_from=3).eval()
    decoder = GNMTDecoder(V, encoder.out_dim, embed_dim=E, hidden_size=H, num_layers=4).eval()
    src, mask = padded_sources()
    with torch.no_grad():
        memory = encoder(src, mask)
        found = search(decoder, memory, SearchSettings(beam=3, n_best=3, length_alpha=0.0))
        for b, hypotheses in enumerate(found):
            assert len(hypotheses) == 3
            for hypothesis in hypotheses:
                targets = hypothesis.tokens + ([EOS_ID] if hypothesis.finished else [])
                tgt_in = torch.tensor([[BOS_ID, *targets[:-1]]])
                logits = decoder(memory.index_select(torch.tensor([b])), tgt_in).logits[0]
                log_p = torch.log_softmax(logits, -1)[torch.arange(len(targets)), targets]
                assert hypothesis.score == pytest.approx(log_p.sum().item(), abs=1e-4)


def test_the_gnmt_pair_trains_under_cpu_bfloat16_autocast_as_in_float32():
    """Under `--trainer.precision bf16-mixed` on a CPU (the one-way layers through `recur`'s
    bfloat16 path, the cells beside autocast's matrix products): close to float32, forward and
    backward, every parameter reached."""

    def run(bf16: bool) -> tuple[Tensor, list[Tensor]]:
        torch.manual_seed(0)
        encoder = RNNEncoder(13, E, H, 4, "lstm", 0.0, bidirectional_layers=1, residual_from=3)
        decoder = GNMTDecoder(V, H, embed_dim=E, hidden_size=H, num_layers=4, dropout=0.0)
        src, mask = padded_sources()
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            logits = decoder(encoder(src, mask), TOKENS).logits
        logits.float().square().mean().backward()
        parameters = [*encoder.parameters(), *decoder.parameters()]
        return logits.float(), [p.grad for p in parameters]

    reference, reference_grads = run(bf16=False)
    output, grads = run(bf16=True)
    torch.testing.assert_close(output, reference, atol=0.05, rtol=0.05)
    for grad, expected in zip(grads, reference_grads, strict=True):
        assert grad is not None and torch.isfinite(grad).all()
        torch.testing.assert_close(grad.float(), expected, atol=0.05, rtol=0.1)


def test_dropout_acts_in_training_only_on_both_sides():
    torch.manual_seed(0)
    encoder = RNNEncoder(13, E, H, 4, "lstm", 0.3, bidirectional_layers=1, residual_from=3)
    decoder = GNMTDecoder(V, H, embed_dim=E, hidden_size=H, num_layers=4, dropout=0.3)
    src, mask = padded_sources()
    with torch.no_grad():
        for part in (encoder, decoder):  # each alone in training
            encoder.eval(), decoder.eval()
            a = decoder(encoder(src, mask), TOKENS).logits
            b = decoder(encoder(src, mask), TOKENS).logits
            assert torch.equal(a, b)
            part.train()
            assert not torch.allclose(decoder(encoder(src, mask), TOKENS).logits, a)
