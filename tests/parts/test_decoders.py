"""Decoders: teacher forcing equals step-by-step decoding, padding is ignored, encoders pack."""

from __future__ import annotations

import functools

import pytest
import torch

from seqtasks.attention import (
    DeltaRuleSelfAttention,
    GatedLinearSelfAttention,
    MultiHeadAttention,
    RelativeSelfAttention,
    TTTLinearSelfAttention,
)
from seqtasks.attention.scores import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    ScaledDotAttention,
)
from seqtasks.decoders import (
    BahdanauDecoder,
    GNMTDecoder,
    LuongDecoder,
    NoAttentionDecoder,
    PromptedRNNDecoder,
    PromptedTransformerDecoder,
    TransformerDecoder,
    UniversalTransformerDecoder,
)
from seqtasks.encoders import RNNEncoder
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.layers.recurrent import rnn_step
from seqtasks.search import greedy

VOCAB, MEM, HID, B, S, T = 13, 16, 16, 3, 7, 6
LENGTHS = torch.tensor([7, 4, 2])

DECODERS = {}
for _attention in (AdditiveAttention, GeneralAttention, DotAttention, ScaledDotAttention):
    for _cell in ("gru", "lstm"):
        for _layers in (1, 2):
            DECODERS[f"bahdanau-{_attention.__name__}-{_cell}-{_layers}"] = functools.partial(
                BahdanauDecoder,
                embed_dim=8,
                hidden_size=HID,
                readout_dim=8,
                attention=_attention,
                cell=_cell,
                num_layers=_layers,
                dropout=0.3,
            )
for _feed in (True, False):
    for _cell in ("gru", "lstm"):
        DECODERS[f"luong-feed{_feed}-{_cell}"] = functools.partial(
            LuongDecoder,
            embed_dim=8,
            hidden_size=HID,
            cell=_cell,
            input_feeding=_feed,
            dropout=0.3,
        )
DECODERS["luong-dot-2layers"] = functools.partial(
    LuongDecoder, embed_dim=8, hidden_size=HID, attention=DotAttention, num_layers=2
)
# Multi-head attention in the recurrent decoders: a context 12 wide (the state's), not MEM.
MULTI_HEAD = functools.partial(MultiHeadAttention, heads=4)
for _cell in ("gru", "lstm"):
    DECODERS[f"bahdanau-MultiHeadAttention-{_cell}-1"] = functools.partial(
        BahdanauDecoder,
        embed_dim=8,
        hidden_size=12,
        readout_dim=8,
        attention=MULTI_HEAD,
        cell=_cell,
        dropout=0.3,
    )
for _feed in (True, False):
    DECODERS[f"luong-MultiHeadAttention-feed{_feed}-gru-2layers"] = functools.partial(
        LuongDecoder,
        embed_dim=8,
        hidden_size=12,
        attention=MULTI_HEAD,
        cell="gru",
        input_feeding=_feed,
        num_layers=2,
        dropout=0.3,
    )
for _cell in ("gru", "lstm"):
    for _layers in (1, 2):
        DECODERS[f"plain-{_cell}-{_layers}"] = functools.partial(
            NoAttentionDecoder,
            embed_dim=8,
            hidden_size=HID,
            readout_dim=8,
            cell=_cell,
            num_layers=_layers,
            dropout=0.3,
        )

for _norm in ("post", "pre", "resi_dual"):
    for _tie in (True, False):
        DECODERS[f"transformer-{_norm}-tie{_tie}"] = functools.partial(
            TransformerDecoder,
            d_model=16,
            num_heads=4,
            num_layers=2,
            ff_dim=32,
            dropout=0.3,
            attention_dropout=0.2,
            norm=_norm,
            tie_embeddings=_tie,
        )
DECODERS["transformer-learned-positions"] = functools.partial(
    TransformerDecoder, d_model=16, num_heads=2, num_layers=1, ff_dim=32, positions="learned"
)
DECODERS["transformer-GeneralAttention-cross"] = functools.partial(
    TransformerDecoder, d_model=MEM, num_heads=2, num_layers=2, cross_attention=GeneralAttention
)
# Shaw et al.'s relative positions, k = 2 < T, so the steps reach the clipped distances.
for _values in (True, False):
    DECODERS[f"transformer-relative-values{_values}"] = functools.partial(
        TransformerDecoder, d_model=16, num_heads=2, num_layers=2, ff_dim=32, dropout=0.3,
        attention_dropout=0.2, positions="none", self_attention=functools.partial(
            RelativeSelfAttention, max_distance=2, values=_values
        ),
    )  # fmt: skip

for _cell, _layers in (("gru", 1), ("lstm", 2)):
    DECODERS[f"prompted-rnn-{_cell}-{_layers}"] = functools.partial(
        PromptedRNNDecoder,
        embed_dim=8,
        hidden_size=HID,
        cell=_cell,
        num_layers=_layers,
        dropout=0.3,
    )
for _norm in ("post", "pre"):
    DECODERS[f"prompted-transformer-{_norm}"] = functools.partial(
        PromptedTransformerDecoder, d_model=16, num_heads=4, num_layers=2, ff_dim=32, dropout=0.3,
        attention_dropout=0.2, norm=_norm,
    )  # fmt: skip

# GNMT's stack: attention from the bottom layer, its context into every layer, residuals.
for _cell, _layers, _residual in (("gru", 3, 2), ("lstm", 4, 3)):
    DECODERS[f"gnmt-{_cell}-{_layers}-residual-from-{_residual}"] = functools.partial(
        GNMTDecoder, embed_dim=8, hidden_size=HID, num_layers=_layers, cell=_cell,
        residual_from=_residual, dropout=0.3,
    )  # fmt: skip
DECODERS["gnmt-MultiHeadAttention-lstm-3"] = functools.partial(
    GNMTDecoder, embed_dim=8, hidden_size=12, num_layers=3, attention=MULTI_HEAD, dropout=0.3
)
# The Universal Transformer: one layer applied `steps` times, a cache per step; with ACT the
# positions halt (after two steps here) and later steps cache their carried states (halting
# after different steps: test_universal.py).
for _norm, _act in (("post", False), ("post", True), ("pre", True), ("resi_dual", True)):
    DECODERS[f"universal-{_norm}-act{_act}"] = functools.partial(
        UniversalTransformerDecoder, d_model=16, num_heads=4, ff_dim=32, steps=4, act=_act,
        dropout=0.3, attention_dropout=0.2, norm=_norm,
    )  # fmt: skip
# Linear memories as the self-attention (attention/linear_memory.py): chunks of 4 < T, so the
# causal forward carries its memory from chunk to chunk; TTT online and in mini-batches of 2.
for _name, _memory in (
    ("gated", functools.partial(GatedLinearSelfAttention, chunk_size=4)),
    ("delta", functools.partial(DeltaRuleSelfAttention, chunk_size=4)),
    ("ttt", functools.partial(TTTLinearSelfAttention, chunk_size=4)),
    ("ttt-mini-batch-2", functools.partial(TTTLinearSelfAttention, chunk_size=4, mini_batch=2)),
):
    DECODERS[f"transformer-{_name}"] = functools.partial(
        TransformerDecoder, d_model=16, num_heads=2, num_layers=2, ff_dim=32, dropout=0.3,
        self_attention=_memory,
    )  # fmt: skip


def teacher_forced(decoder, memory: Memory, tgt_in: torch.Tensor):
    """The teacher-forced pass, asking for attention weights (optional for some decoders)."""
    return decoder(memory, tgt_in, need_attention=True)


def random_memory(seed: int = 0, lengths: torch.Tensor = LENGTHS) -> Memory:
    g = torch.Generator().manual_seed(seed)
    mask = lengths_to_mask(lengths, S)
    states = torch.randn(len(lengths), S, MEM, generator=g) * mask[:, :, None]
    return Memory(states=states, mask=mask, summary=torch.randn(len(lengths), MEM, generator=g))


def make_decoder(name: str):
    torch.manual_seed(0)
    return DECODERS[name](VOCAB, MEM).eval()


ATTENTIVE = [name for name in DECODERS if make_decoder(name).gives_attention]


def target_inputs(seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(4, VOCAB, (B, T), generator=g)
    tgt[:, 0] = 2  # BOS
    return tgt


def run_steps(decoder, memory: Memory, tgt_in: torch.Tensor):
    state = decoder.start(memory)
    logits, weights = [], []
    for i in range(tgt_in.size(1)):
        step_logits, state, alpha = decoder.step(tgt_in[:, i], state)
        logits.append(step_logits)
        weights.append(alpha)
    stacked = None if weights[0] is None else torch.stack(weights, 1)
    return torch.stack(logits, 1), stacked


@pytest.mark.parametrize("name", DECODERS)
def test_teacher_forcing_equals_stepwise_decoding(name):
    decoder = make_decoder(name)
    memory, tgt_in = random_memory(), target_inputs()
    with torch.no_grad():
        output = teacher_forced(decoder, memory, tgt_in)
        logits, weights = run_steps(decoder, memory, tgt_in)
    assert output.logits.shape == (B, T, VOCAB)
    torch.testing.assert_close(output.logits, logits, atol=1e-5, rtol=1e-5)
    if not decoder.gives_attention:
        assert output.attention is None and weights is None
    else:
        assert output.attention.shape == (B, T, S)
        torch.testing.assert_close(output.attention, weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_an_rnn_decoder_with_multi_head_attention_trains_and_steps_as_it_teacher_forces(cell):
    """One optimiser step on a batch lowers its loss, reaches every attention parameter, and
    the trained decoder still decodes step by step as it teacher-forces, per head too."""
    decoder = make_decoder(f"bahdanau-MultiHeadAttention-{cell}-1")
    memory, tgt_in = random_memory(), target_inputs()
    targets = torch.roll(tgt_in, -1, dims=1)

    def loss() -> torch.Tensor:
        logits = decoder(memory, tgt_in).logits
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())

    optimiser = torch.optim.SGD(decoder.parameters(), lr=0.5)
    with torch.no_grad():
        before = loss()
    decoder.train()
    loss().backward()
    for name, p in decoder.attention.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    optimiser.step()
    decoder.eval()
    with torch.no_grad():
        assert loss() < before
        output = decoder(memory, tgt_in, per_head=True)
        logits, weights = run_steps(decoder, memory, tgt_in)
    torch.testing.assert_close(output.logits, logits, atol=1e-5, rtol=1e-5)
    assert output.attention.shape == (B, 4, T, S)
    torch.testing.assert_close(output.attention.mean(1), weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", DECODERS)
def test_padding_in_memory_is_ignored(name):
    decoder = make_decoder(name)
    memory, tgt_in = random_memory(), target_inputs()
    noisy = Memory(
        states=memory.states + 100.0 * (~memory.mask[:, :, None]).float(),
        mask=memory.mask,
        summary=memory.summary,
    )
    with torch.no_grad():
        clean_out = teacher_forced(decoder, memory, tgt_in)
        noisy_out = teacher_forced(decoder, noisy, tgt_in)
        noisy_steps, _ = run_steps(decoder, noisy, tgt_in)
    torch.testing.assert_close(noisy_out.logits, clean_out.logits)
    torch.testing.assert_close(noisy_steps, clean_out.logits, atol=1e-5, rtol=1e-5)
    if not decoder.gives_attention:
        return
    padded = ~memory.mask[:, None, :].expand(B, T, S)
    assert torch.all(clean_out.attention[padded] == 0)
    shares = clean_out.attention.sum(-1)
    if decoder.attention_sums_to_one:
        torch.testing.assert_close(shares, torch.ones(B, T))
    else:  # one softmax over the memory and its past: the share on the memory
        assert torch.all((shares > 0) & (shares < 1))


@pytest.mark.parametrize("name", DECODERS)
def test_rows_are_independent(name):
    """A row decodes the same alone as inside a batch (no leakage across the batch)."""
    decoder = make_decoder(name)
    memory, tgt_in = random_memory(), target_inputs()
    with torch.no_grad():
        batched = decoder(memory, tgt_in).logits
        alone = decoder(memory.index_select(torch.tensor([1])), tgt_in[1:2]).logits
    torch.testing.assert_close(alone[0], batched[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", DECODERS)
def test_beam_rows_decode_like_repeated_inputs(name):
    """start(memory, K) holds K identical hypotheses per input, rows b·K … b·K+K−1."""
    decoder = make_decoder(name)
    memory, k = random_memory(), 2
    tokens = torch.tensor([[4, 5, 6, 7, 8, 9], [9, 9, 8, 8, 7, 7]])  # (steps, B·K)
    with torch.no_grad():
        beams = decoder.start(memory, beam_size=k)
        rows = torch.arange(memory.states.size(0)).repeat_interleave(k)  # 0, 0, 1, 1, …
        repeated = decoder.start(memory.index_select(rows))
        for step in tokens:
            logits_a, beams, alpha_a = decoder.step(step, beams)
            logits_b, repeated, alpha_b = decoder.step(step, repeated)
            torch.testing.assert_close(logits_a, logits_b, atol=1e-5, rtol=1e-5)
            if alpha_a is not None:
                torch.testing.assert_close(alpha_a, alpha_b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", DECODERS)
def test_reorder_moves_hypotheses(name):
    """Decoding after `reorder` equals decoding the permuted hypotheses from the start."""
    decoder = make_decoder(name)
    memory = random_memory().index_select(torch.tensor([0, 1]))
    first = torch.tensor([4, 5, 6, 7])
    swap = torch.tensor([1, 0, 3, 2])  # swap the two beams of each input
    second = torch.tensor([8, 8, 9, 9])
    with torch.no_grad():
        _, state, _ = decoder.step(first, decoder.start(memory, beam_size=2))
        logits_a, _, _ = decoder.step(second, decoder.reorder(state, swap))
        _, state_b, _ = decoder.step(first[swap], decoder.start(memory, beam_size=2))
        logits_b, _, _ = decoder.step(second, state_b)
        unswapped, _, _ = decoder.step(second, state)
    torch.testing.assert_close(logits_a, logits_b, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits_a, unswapped), "reorder changed nothing"


@pytest.mark.parametrize("name", DECODERS)
def test_reorder_can_drop_finished_inputs(name):
    """Dropping whole inputs (and permuting within the kept ones) leaves the others intact."""
    decoder = make_decoder(name)
    memory, k = random_memory(), 2  # 3 inputs, 6 rows
    first = torch.tensor([4, 5, 6, 7, 8, 9])
    keep = torch.tensor([1, 0, 4, 5])  # input 0 with its beams swapped, and input 2
    second = torch.tensor([10, 11, 12, 4])
    with torch.no_grad():
        _, state, _ = decoder.step(first, decoder.start(memory, beam_size=k))
        kept, _, kept_alpha = decoder.step(second, decoder.reorder(state, keep))
        # The same hypotheses decoded from the start without input 1.
        fresh = decoder.start(memory.index_select(torch.tensor([0, 2])), beam_size=k)
        _, fresh, _ = decoder.step(first[keep], fresh)
        expected, _, expected_alpha = decoder.step(second, fresh)
    torch.testing.assert_close(kept, expected, atol=1e-5, rtol=1e-5)
    if kept_alpha is not None:
        assert kept_alpha.shape == (4, S)
        torch.testing.assert_close(kept_alpha, expected_alpha, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["bahdanau-AdditiveAttention-gru-1", "luong-feedTrue-lstm"])
def test_dropout_active_in_training_only(name):
    decoder = make_decoder(name)
    memory, tgt_in = random_memory(), target_inputs()
    with torch.no_grad():
        eval_a, eval_b = decoder(memory, tgt_in).logits, decoder(memory, tgt_in).logits
        decoder.train()
        train_out = decoder(memory, tgt_in).logits
    torch.testing.assert_close(eval_a, eval_b)
    assert not torch.allclose(train_out, eval_a)


@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_rnn_step_equals_the_module_on_one_time_step(cell, num_layers):
    """`rnn_step` runs fused cells with the module's own weights: the same output and state as
    the stacked `nn.LSTM`/`nn.GRU` on a sequence of length 1."""
    torch.manual_seed(0)
    rnn = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(6, 5, num_layers, batch_first=True)
    x = torch.randn(4, 6)
    h0 = torch.randn(num_layers, 4, 5)
    hidden = (h0, torch.randn(num_layers, 4, 5)) if cell == "lstm" else h0
    output, new_hidden = rnn_step(rnn, x, hidden)
    expected, expected_hidden = rnn(x[:, None, :], hidden)
    torch.testing.assert_close(output, expected[:, 0])
    torch.testing.assert_close(new_hidden, expected_hidden)


# ---- encoders -------------------------------------------------------------------------------

ENCODER_CELLS = ["gru", "lstm"]


def make_encoder(cell: str, num_layers: int = 1) -> RNNEncoder:
    torch.manual_seed(0)
    return RNNEncoder(
        VOCAB, embed_dim=8, hidden_size=8, num_layers=num_layers, cell=cell, dropout=0.2
    ).eval()


def padded_sources(seed: int = 2):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (B, S), generator=g)
    mask = lengths_to_mask(LENGTHS, S)
    return src.masked_fill(~mask, 0), mask


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("cell", ENCODER_CELLS)
def test_encoder_ignores_padding(cell, num_layers):
    encoder = make_encoder(cell, num_layers)
    src, mask = padded_sources()
    with torch.no_grad():
        memory = encoder(src, mask)
        assert memory.states.shape == (B, S, encoder.out_dim)
        assert memory.summary.shape == (B, encoder.out_dim)
        for b, length in enumerate(LENGTHS.tolist()):
            alone = encoder(src[b : b + 1, :length], mask[b : b + 1, :length])
            torch.testing.assert_close(memory.states[b, :length], alone.states[0])
            torch.testing.assert_close(memory.summary[b], alone.summary[0])
            assert torch.all(memory.states[b, length:] == 0)
    # The summary joins the forward direction's last real state and the backward's first.
    half = encoder.out_dim // 2
    b, length = 1, int(LENGTHS[1])
    torch.testing.assert_close(memory.summary[b, :half], memory.states[b, length - 1, :half])
    torch.testing.assert_close(memory.summary[b, half:], memory.states[b, 0, half:])


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("cell", ENCODER_CELLS)
def test_encoder_equals_packed_bidirectional_rnn(cell, num_layers):
    """The per-direction padded passes give what the bidirectional `nn.LSTM`/`nn.GRU` gives on
    a `PackedSequence`: the same annotations, summary and parameter gradients."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    encoder = make_encoder(cell, num_layers)
    encoder.dropout.p = encoder.rnn.dropout = 0.0
    encoder.train()
    src, mask = padded_sources()
    memory = encoder(src, mask)
    (memory.states.sum() + memory.summary.pow(2).sum()).backward()
    ours = {name: p.grad.clone() for name, p in encoder.named_parameters()}
    encoder.zero_grad()

    packed = pack_padded_sequence(encoder.embedding(src), LENGTHS, True, enforce_sorted=False)
    outputs, final = encoder.rnn(packed)
    states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)
    h_n = final[0] if isinstance(final, tuple) else final
    summary = torch.cat([h_n[-2], h_n[-1]], dim=-1)
    (states.sum() + summary.pow(2).sum()).backward()

    torch.testing.assert_close(memory.states, states)
    torch.testing.assert_close(memory.summary, summary)
    for name, p in encoder.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, msg=name)


def decoder_factories():
    return {
        "bahdanau": functools.partial(BahdanauDecoder, embed_dim=8, hidden_size=12, readout_dim=8),
        "bahdanau-general-lstm": functools.partial(
            BahdanauDecoder,
            embed_dim=8,
            hidden_size=12,
            readout_dim=8,
            attention=GeneralAttention,
            cell="lstm",
        ),
        "luong": functools.partial(LuongDecoder, embed_dim=8, hidden_size=12),
        "luong-dot": functools.partial(
            LuongDecoder, embed_dim=8, hidden_size=16, attention=DotAttention
        ),
        "bahdanau-multi-head": functools.partial(
            BahdanauDecoder, embed_dim=8, hidden_size=12, readout_dim=8, attention=MULTI_HEAD
        ),
        "plain": functools.partial(NoAttentionDecoder, embed_dim=8, hidden_size=12, readout_dim=8),
        "transformer": functools.partial(
            TransformerDecoder, d_model=16, num_heads=2, num_layers=2, ff_dim=32
        ),
    }


@pytest.mark.parametrize("decoder_name", list(decoder_factories()))
@pytest.mark.parametrize("cell", ENCODER_CELLS)
def test_encoder_decoder_matrix(cell, decoder_name):
    encoder = make_encoder(cell)
    decoder = decoder_factories()[decoder_name](VOCAB, encoder.out_dim)
    encoder.train()
    src, mask = padded_sources()
    tgt_in = target_inputs()
    output = decoder(encoder(src, mask), tgt_in)
    assert output.logits.shape == (B, T, VOCAB)
    loss = torch.nn.functional.cross_entropy(output.logits.flatten(0, 1), tgt_in.flatten())
    loss.backward()
    grads = [p.grad for p in [*encoder.parameters(), *decoder.parameters()]]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert encoder.embedding.weight.grad.abs().sum() > 0, "no gradient reached the encoder"
    encoder.eval(), decoder.eval()
    results = greedy(decoder, encoder(src, mask), 5)
    assert len(results) == B and all(len(r) == 1 and len(r[0].tokens) <= 5 for r in results)
