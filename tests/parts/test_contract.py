"""The decoder contract: one attention shape for every decoder, asked for or per head, the same
step by step as teacher-forced, and refused where a task needs it but the decoder has none."""

from __future__ import annotations

import functools

import pytest
import torch
from test_matrix import DECODERS, tiny

from seqtasks.attention import MultiHeadAttention
from seqtasks.captioning.task import CaptioningTask
from seqtasks.data.tokenizer import BOS_ID, PAD_ID
from seqtasks.decoders import (
    BahdanauDecoder,
    LuongDecoder,
    PromptedTransformerDecoder,
    ShowTellDecoder,
    SoftAttentionDecoder,
    TransformerDecoder,
)
from seqtasks.encoders import PatchEncoder, RNNEncoder
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.translation.attention_plots import AttentionPlots
from seqtasks.translation.task import TranslationTask

B, S, T, V, D = 3, 5, 4, 11, 8


def memory() -> Memory:
    lengths = torch.tensor([5, 3, 1])
    states = torch.randn(B, S, D, generator=torch.Generator().manual_seed(1))
    mask = lengths_to_mask(lengths, S)
    return Memory(states * mask[..., None], mask, states.mean(1))


def build(decoder_class: type):
    torch.manual_seed(0)
    return decoder_class(V, D, **tiny(decoder_class)).eval()


# Every decoder as the matrix builds it, and the recurrent ones with multi-head attention.
MULTI_HEAD = functools.partial(MultiHeadAttention, heads=2)
PARTS = {cls.__name__: functools.partial(cls, **tiny(cls)) for cls in DECODERS} | {
    f"{cls.__name__}-MultiHeadAttention": functools.partial(cls, **tiny(cls), attention=MULTI_HEAD)
    for cls in (BahdanauDecoder, LuongDecoder, SoftAttentionDecoder)
}

TARGETS = torch.tensor([[BOS_ID, 5, 6, 7], [BOS_ID, 8, 9, PAD_ID], [BOS_ID, 4, PAD_ID, PAD_ID]])


@pytest.mark.parametrize("name", PARTS)
def test_attention_has_one_shape_for_every_decoder(name):
    torch.manual_seed(0)
    decoder, m = PARTS[name](V, D).eval(), memory()
    with torch.no_grad():
        output = decoder(m, TARGETS, need_attention=True)
        heads = decoder(m, TARGETS, need_attention=True, per_head=True).attention
    if not decoder.gives_attention:
        assert output.attention is None and heads is None
        return
    alpha = output.attention
    assert alpha.shape == (B, T, S)
    if decoder.attention_sums_to_one:
        assert torch.allclose(alpha.sum(-1), torch.ones(B, T), atol=1e-5)
    else:  # one softmax over the memory and the decoder's past: its share on the memory
        assert torch.all((alpha.sum(-1) > 0) & (alpha.sum(-1) < 1))
    assert (alpha.masked_select(~m.mask[:, None, :].expand(B, T, S)) == 0).all()
    if isinstance(decoder, TransformerDecoder):
        attention = decoder.layers[-1].cross_attention
    elif isinstance(decoder, PromptedTransformerDecoder):
        attention = decoder.layers[-1].self_attention  # the one attention, over the prompt
    else:
        attention = decoder.attention
    assert heads.shape == (B, attention.heads, T, S)
    assert torch.allclose(heads.mean(1), alpha, atol=1e-6)
    # step by step, each row's attention is the teacher-forced one
    state = decoder.start(m)
    for t in range(T):
        _, state, weights = decoder.step(TARGETS[:, t], state)
        assert torch.allclose(weights, alpha[:, t], atol=1e-5), t


def test_the_transformer_gives_attention_only_when_asked():
    decoder, m = build(TransformerDecoder), memory()
    assert decoder(m, TARGETS).attention is None
    assert decoder(m, TARGETS, need_attention=True).attention is not None


def test_heads_differ_and_average_to_the_plotted_weights():
    decoder, m = build(TransformerDecoder), memory()
    heads = decoder(m, TARGETS, need_attention=True, per_head=True).attention  # (B, H, T, S)
    assert heads.size(1) == 2 and not torch.allclose(heads[:, 0], heads[:, 1])


def caption_task(decoder, **kwargs) -> CaptioningTask:
    torch.manual_seed(0)
    return CaptioningTask(
        encoder=functools.partial(PatchEncoder, patch=8, channels=(8, 8)),
        decoder=decoder,
        tgt_vocab_size=V,
        **kwargs,
    )


def test_the_transformer_attention_penalty_acts_on_its_cross_attention():
    """λ = 0 and λ = 20 give losses that differ by exactly 20 Σ_i (1 − Σ_t α_ti)² / tokens, with
    α the last layer's cross-attention averaged over heads (it used to be skipped)."""
    decoder = functools.partial(
        TransformerDecoder, d_model=16, num_heads=2, num_layers=1, ff_dim=16, dropout=0.0
    )
    plain, penalised = (
        caption_task(decoder, attention_penalty=0.0),
        caption_task(decoder, attention_penalty=20.0),
    )
    penalised.load_state_dict(plain.state_dict())
    images = torch.rand(B, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    tgt_out = torch.cat([TARGETS[:, 1:], torch.full((B, 1), PAD_ID)], dim=1)
    tgt_out[0, -1] = 3  # EOS after the full row
    losses = []
    for task in (plain, penalised):
        task.train()
        memory_ = task.encoder(images)
        output = task.decoder(memory_, TARGETS, need_attention=task.objective.needs_attention)
        losses.append(task.loss(output, tgt_out, memory_.mask))
    alpha = plain.decoder(plain.encoder(images), TARGETS, need_attention=True).attention
    alpha = alpha * (tgt_out != PAD_ID)[:, :, None]
    shortfall = ((1 - alpha.sum(dim=1)) ** 2).sum()
    tokens = (tgt_out != PAD_ID).sum()
    difference = float(losses[1] - losses[0])
    assert difference == pytest.approx(float(20 * shortfall / tokens), rel=1e-4)
    assert difference > 1.0


@pytest.mark.parametrize("setting", [{"attention_penalty": 1.0}, {"entropy_weight": 0.01}])
def test_a_task_that_needs_attention_refuses_a_decoder_without(setting):
    name, value = next(iter(setting.items()))
    message = (
        f"CaptioningTask with {name}={value} needs attention weights, "
        "but ShowTellDecoder has no attention"
    )
    with pytest.raises(ValueError, match=message):
        caption_task(
            functools.partial(ShowTellDecoder, embed_dim=8, hidden_size=8),
            **{"attention_penalty": 0.0, **setting},
        )


def test_a_term_that_reads_attention_as_a_distribution_refuses_the_decoder_only_model():
    """The decoder-only Transformer's weights on its prompt share one softmax with its own
    past: no distribution over the memory for a penalty or an entropy to read."""
    decoder = functools.partial(
        PromptedTransformerDecoder, d_model=8, num_heads=2, num_layers=1, ff_dim=8
    )
    with pytest.raises(ValueError, match="shares one softmax between the memory and its own past"):
        caption_task(decoder, attention_penalty=1.0)
    assert caption_task(decoder, attention_penalty=0.0).decoder.gives_attention


def test_attention_plots_refuse_a_decoder_without_attention():
    from seqtasks.decoders import NoAttentionDecoder

    task = TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=8, hidden_size=8),
        decoder=functools.partial(NoAttentionDecoder, embed_dim=8, hidden_size=8, readout_dim=8),
        src_vocab_size=V,
        tgt_vocab_size=V,
    )
    with pytest.raises(
        ValueError,
        match="AttentionPlots draws attention weights, but NoAttentionDecoder has no attention",
    ):
        AttentionPlots().setup(None, task, "fit")


def test_attention_plots_refuse_a_task_that_does_not_translate():
    task = caption_task(functools.partial(TransformerDecoder, d_model=8, num_heads=2, num_layers=1))
    with pytest.raises(ValueError, match="AttentionPlots draws a translation model's attention"):
        AttentionPlots().setup(None, task, "fit")


@pytest.mark.parametrize("decoder_class", DECODERS, ids=lambda c: c.__name__)
def test_two_reorders_compose_like_one(decoder_class):
    """Row r of a reordered state continues old row index[r], whatever reorders came before
    the next step: reordering by a then b equals reordering once by a[b] (the Transformer
    keeps a pending reorder until its next step, and must compose a second one with it)."""
    decoder, m = build(decoder_class), memory()
    first = torch.tensor([5, 6, 7, 8, 9, 4])  # R = B·K = 6 rows, K = 2
    a, b = torch.tensor([1, 0, 3, 2, 5, 4]), torch.tensor([0, 0, 3, 2, 4, 5])
    with torch.no_grad():
        _, state, _ = decoder.step(first, decoder.start(m, beam_size=2))
        twice = decoder.step(first, decoder.reorder(decoder.reorder(state, a), b))
        once = decoder.step(first, decoder.reorder(state, a[b]))
    torch.testing.assert_close(twice[0], once[0])
    if decoder_class.gives_attention:
        torch.testing.assert_close(twice[2], once[2])


def test_search_reads_a_decoders_cache_and_fixed_steps_from_the_contract():
    """What search and its budget need of a decoder (`search_widths`, `fixed_cache_steps`):
    a Transformer's self-attention keys and values, 2·layers·D a position, and steps over fixed
    caches where every self-attention keeps keys and values (softmax, relative); a recurrent
    decoder's state does not grow and has no fixed-cache steps; an ensemble's widths are its
    members' summed."""
    from seqtasks.attention import LinearSelfAttention, RelativeSelfAttention
    from seqtasks.decoders import BahdanauDecoder, TransformerDecoder
    from seqtasks.search.ensemble import EnsembleDecoder

    transformer = TransformerDecoder(30, 16, d_model=16, num_heads=2, num_layers=3, ff_dim=32)
    assert transformer.search_widths() == (2 * 3 * 16, 16)
    assert transformer.fixed_cache_steps() is not None
    linear = TransformerDecoder(30, 16, d_model=16, num_heads=2, num_layers=1, ff_dim=32,
                                self_attention=LinearSelfAttention)  # fmt: skip
    assert linear.fixed_cache_steps() is None
    relative = TransformerDecoder(30, 16, d_model=16, num_heads=2, num_layers=1, ff_dim=32,
                                  self_attention=RelativeSelfAttention)  # fmt: skip
    assert relative.fixed_cache_steps() is not None  # it writes its own step_fixed
    rnn = BahdanauDecoder(30, 16, embed_dim=8, hidden_size=16)
    assert rnn.search_widths() == (0, 8) and rnn.fixed_cache_steps() is None
    assert EnsembleDecoder([transformer, rnn]).search_widths() == (96, 24)
    assert EnsembleDecoder([transformer, rnn]).fixed_cache_steps() is None
