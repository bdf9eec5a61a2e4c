"""The decoder-only models: one network reads the source as a prompt and writes the target.

Each is checked against the model written out by hand for one row at a time, with no padding
and no cache: the single RNN is one `nn.GRU`/`nn.LSTM` call over [P m_1 … P m_S, E y_0 …], and
the Transformer a plain causal stack over [P m + p, √D·E y + p] with attention computed as
softmax(q kᵀ/√d) from its own projections, positions 0 … S + T − 1 per row.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from seqtasks.attention import LinearSelfAttention
from seqtasks.attention.recording import recording
from seqtasks.decoders import PromptedRNNDecoder, PromptedTransformerDecoder
from seqtasks.encoders import PromptEncoder
from seqtasks.layers.memory import lengths_to_mask

LENGTHS = torch.tensor([5, 2, 0])  # the last source is empty
S, T, MEM, VOCAB = 5, 4, 6, 11


def batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    mask = lengths_to_mask(LENGTHS, S)
    source = torch.randint(4, 20, (3, S), generator=g) * mask
    target = torch.randint(4, VOCAB, (3, T), generator=g)
    return source, mask, target


def encoded(source, mask):
    torch.manual_seed(1)
    return PromptEncoder(20, MEM, dropout=0.0).eval()(source, mask)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_single_rnn_reads_the_prompt_then_writes_the_target_in_one_recurrence(cell):
    torch.manual_seed(0)
    decoder = PromptedRNNDecoder(
        VOCAB, MEM, embed_dim=8, hidden_size=7, num_layers=2, cell=cell, dropout=0.0
    ).eval()
    source, mask, target = batch()
    memory = encoded(source, mask)
    with torch.no_grad():
        logits = decoder(memory, target).logits
        for row, length in enumerate(LENGTHS.tolist()):
            sequence = torch.cat(
                [decoder.prompt(memory.states[row, :length]), decoder.embedding(target[row])]
            )
            outputs, _ = decoder.rnn(sequence[None])  # one RNN over prompt and target
            expected = decoder.output(outputs[0, length:])
            torch.testing.assert_close(logits[row], expected, atol=1e-6, rtol=1e-5)


def reference_transformer(decoder: PromptedTransformerDecoder, prompt, target, weights=None):
    """One row, (S', MEM) prompt and (T,) target, through a causal stack written out; each
    layer's attention weights (H, S' + T, S' + T) appended to `weights`, if given."""
    d = decoder.embedding.embedding_dim
    length = prompt.size(0)
    table = decoder.embeddings.position_table(0, length + target.size(0))
    x = torch.cat(
        [
            decoder.prompt(prompt) + table[:length],
            decoder.embedding(target) * math.sqrt(d) + table[length:],
        ]
    )
    causal = torch.ones(x.size(0), x.size(0), dtype=torch.bool).tril()
    stream = decoder.stack.begin(x[None])
    for layer in decoder.layers:
        attention = layer.self_attention

        def attend(h, attention=attention):
            q, k, v = (part.unflatten(-1, (attention.heads, -1)).transpose(1, 2)
                       for part in attention.qkv(h).chunk(3, -1))  # fmt: skip
            scores = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).masked_fill(~causal, -1e9)
            probabilities = torch.softmax(scores, -1)
            if weights is not None:
                weights.append(probabilities[0])
            context = probabilities @ v
            return attention.out(context.transpose(1, 2).flatten(-2))

        stream = layer.residual_attention(stream, attend)
        stream = layer.residual_ff(stream, layer.feed_forward)
    return decoder.logits(decoder.stack.end(stream))[0, length:]


@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
def test_the_decoder_only_transformer_equals_a_causal_stack_over_prompt_and_target(norm):
    torch.manual_seed(0)
    decoder = PromptedTransformerDecoder(
        VOCAB, MEM, d_model=8, num_heads=2, num_layers=2, ff_dim=16, dropout=0.0, norm=norm
    ).eval()
    source, mask, target = batch()
    memory = encoded(source, mask)
    with torch.no_grad():
        logits = decoder(memory, target).logits
        state, steps = decoder.start(memory), []
        for t in range(T):
            step_logits, state, _ = decoder.step(target[:, t], state)
            steps.append(step_logits)
        for row, length in enumerate(LENGTHS.tolist()):
            expected = reference_transformer(decoder, memory.states[row, :length], target[row])
            torch.testing.assert_close(logits[row], expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(torch.stack(steps, 1), logits, atol=1e-5, rtol=1e-5)


def test_the_decoder_only_transformers_attention_is_its_one_softmax_block_by_block():
    """Under a recording, each layer's one causal attention is kept as the prompt reading
    itself ("encoder"), the target reading the prompt ("cross") and itself ("decoder"), each
    equal to the hand-written stack's weights, teacher-forced and step by step; its attention
    (as plotted) is the last layer's target-on-prompt block, heads averaged."""
    torch.manual_seed(0)
    decoder = PromptedTransformerDecoder(
        VOCAB, MEM, d_model=8, num_heads=2, num_layers=2, ff_dim=16, dropout=0.0
    ).eval()
    source, mask, target = batch()
    memory = encoded(source, mask)
    with torch.no_grad(), recording({"decoder": decoder}) as log:
        output = decoder(memory, target, need_attention=True, per_head=True)
        forced = {kind: log.layers(kind, T) for kind in ("cross", "decoder")}
        forced["encoder"] = log.layers("encoder")
        assert decoder(memory, target).attention is None  # recorded, but not asked for
    with torch.no_grad(), recording({"decoder": decoder}) as log:
        state, plotted = decoder.start(memory), []
        for t in range(T):
            _, state, weights = decoder.step(target[:, t], state)
            plotted.append(weights)
        grown = [m.records for kind, m in log.modules if kind == "decoder" and m.records]
        stepped = {"cross": log.layers("cross", T), "encoder": log.layers("encoder")}
        stepped["decoder"] = [
            torch.cat([F.pad(w, (0, T - w.size(-1))) for w in records], 2) for records in grown
        ]
    for row, length in enumerate(LENGTHS.tolist()):
        expected = []
        reference_transformer(decoder, memory.states[row, :length], target[row], expected)
        for layer, joint in enumerate(expected):
            blocks = {
                "encoder": (joint[:, :length, :length], slice(length), slice(length)),
                "cross": (joint[:, length:, :length], slice(T), slice(length)),
                "decoder": (joint[:, length:, length:], slice(T), slice(T)),
            }
            for kind, (block, rows, keys) in blocks.items():
                for recorded in forced, stepped:
                    got = recorded[kind][layer][row][:, rows, keys]
                    torch.testing.assert_close(got, block, atol=1e-5, rtol=1e-5)
            assert torch.all(forced["cross"][layer][row][:, :, length:] == 0)  # prompt padding
        last = expected[-1][:, length:, :length]
        torch.testing.assert_close(output.attention[row, :, :, :length], last, atol=1e-5, rtol=0)
        torch.testing.assert_close(
            torch.stack(plotted, 1)[row, :, :length], last.mean(0), atol=1e-5, rtol=0
        )
    shares = forced["cross"][-1].sum(-1) + forced["decoder"][-1].sum(-1)
    torch.testing.assert_close(shares, torch.ones_like(shares))  # one softmax, two blocks


@pytest.mark.parametrize("kind", ["rnn", "transformer"])
def test_the_target_is_conditioned_on_the_prompt_alone_of_its_own_row(kind):
    """Another source changes the logits of its own row only; the logits are the target's."""
    torch.manual_seed(0)
    decoder = (
        PromptedRNNDecoder(VOCAB, MEM, embed_dim=8, hidden_size=7, dropout=0.0)
        if kind == "rnn"
        else PromptedTransformerDecoder(VOCAB, MEM, d_model=8, num_heads=2, num_layers=1, ff_dim=8)
    ).eval()
    source, mask, target = batch()
    other = source.clone()
    other[0, :3] = torch.tensor([7, 8, 9])
    with torch.no_grad():
        a = decoder(encoded(source, mask), target).logits
        b = decoder(encoded(other, mask), target).logits
    assert a.shape == (3, T, VOCAB)
    assert not torch.allclose(a[0], b[0])
    torch.testing.assert_close(a[1:], b[1:])


def test_a_self_attention_without_a_padding_mask_is_refused_in_one_line():
    with pytest.raises(ValueError, match="LinearSelfAttention does not take") as error:
        PromptedTransformerDecoder(
            VOCAB, MEM, d_model=8, num_heads=2, self_attention=LinearSelfAttention
        )
    assert "\n" not in str(error.value)
