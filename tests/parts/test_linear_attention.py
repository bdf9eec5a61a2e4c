"""Linear attention (Katharopoulos et al. 2020): its parallel and recurrent forms against each
other and against eq. 5 written out position by position, the Transformer with
`self_attention: LinearSelfAttention` through the decoder contract, and the older string form
`self_attention: linear` still read, as checkpoints hold it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqtasks.attention.linear import LinearSelfAttention
from seqtasks.attention.multihead import SelfAttention
from seqtasks.decoders import TransformerDecoder
from seqtasks.encoders import TransformerEncoder
from seqtasks.layers.memory import Memory
from seqtasks.search import SearchSettings, beam_search
from seqtasks.translation.task import TranslationTask

D, H = 16, 2


def eq5(attention: LinearSelfAttention, x: torch.Tensor, visible) -> torch.Tensor:
    """V'_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j) over the keys `visible(b, i)`, one
    position at a time in float64, then the output projection."""
    q, k, v = (part.double() for part in attention.qkv(x).chunk(3, dim=-1))
    phi = lambda t: F.elu(t) + 1  # noqa: E731
    batch, length, _ = x.shape
    out = torch.zeros(batch, length, D, dtype=torch.float64)
    for b in range(batch):
        for i in range(length):
            for h in range(H):
                s = slice(h * D // H, (h + 1) * D // H)
                keys = visible(b, i)
                weights = torch.stack([phi(q[b, i, s]) @ phi(k[b, j, s]) for j in keys])
                values = torch.stack([v[b, j, s] for j in keys])
                out[b, i, s] = (weights[:, None] * values).sum(0) / weights.sum()
    return attention.out(out.float())


@pytest.fixture
def attention() -> LinearSelfAttention:
    torch.manual_seed(0)
    return LinearSelfAttention(D, H, dropout=0.0).eval()


def test_causal_parallel_form_is_eq5_over_the_prefix(attention):
    x = torch.randn(2, 6, D)
    expected = eq5(attention, x, lambda b, i: range(i + 1))
    assert torch.allclose(attention(x, causal=True), expected, atol=1e-5)


def test_non_causal_form_is_eq5_over_the_real_keys(attention):
    x = torch.randn(2, 5, D)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    expected = eq5(attention, x, lambda b, i: [j for j in range(5) if mask[b, j]])
    assert torch.allclose(attention(x, key_mask=mask), expected, atol=1e-5)


def test_recurrent_form_equals_the_parallel_form_with_reordered_rows(attention):
    """Step by step with (M, z), rows reordered between steps as beam search does, gives the
    causal parallel form of each row's own history."""
    x = torch.randn(3, 5, D)
    order = [torch.tensor([2, 0, 1]), torch.tensor([0, 0, 2]), torch.tensor([1, 2, 0])]
    memory, normaliser = attention.empty_cache(3, x)
    history = torch.arange(3)[:, None]  # which input row each position came from
    outputs = []
    for t in range(5):
        rows = order[t - 1] if 0 < t <= len(order) else None
        if rows is not None:
            history = history[rows]
        step_in = x[history[:, -1] if t else torch.arange(3), t][:, None]
        out, memory, normaliser = attention.step(step_in, memory, normaliser, rows)
        assert memory.shape == (3, H, D // H, D // H) and normaliser.shape == (3, H, D // H)
        outputs.append(out)
        history = torch.cat([history, history[:, -1:]], dim=1)
    # each final row's inputs: position t from the row its history names at t
    sequences = torch.stack([x[history[:, t], t] for t in range(5)], dim=1)
    parallel = attention(sequences, causal=True)
    stepped = torch.cat(outputs, dim=1)
    assert torch.allclose(stepped[:, -1], parallel[:, -1], atol=1e-5)


def test_a_linear_transformer_decodes_step_by_step_as_it_teacher_forces():
    torch.manual_seed(0)
    settings = dict(d_model=D, num_heads=H, num_layers=2, ff_dim=32, dropout=0.0)
    encoder = TransformerEncoder(40, self_attention=LinearSelfAttention, **settings).eval()
    decoder = TransformerDecoder(30, D, self_attention=LinearSelfAttention, **settings).eval()
    src = torch.randint(4, 40, (2, 7))
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    memory: Memory = encoder(src, mask)
    tgt_in = torch.randint(4, 30, (2, 6))
    forced = decoder(memory, tgt_in).logits
    state = decoder.start(memory)
    for t in range(6):
        logits, state, _ = decoder.step(tgt_in[:, t], state)
        assert torch.allclose(logits, forced[:, t], atol=1e-4), t
    assert state.self_keys[0].shape == (2, H, D // H, D // H)  # the same size at every length
    (best,), _ = beam_search(decoder, memory, SearchSettings(3), 8)
    assert best.tokens is not None


def test_an_unknown_self_attention_is_refused_by_name():
    with pytest.raises(ValueError, match="self_attention must be 'softmax' or 'linear'"):
        TransformerDecoder(30, D, d_model=D, num_heads=H, self_attention="performer")


@pytest.mark.parametrize(
    "name, chosen", [("softmax", SelfAttention), ("linear", LinearSelfAttention)]
)
def test_checkpoint_hparams_with_the_string_form_still_build(name, chosen):
    """Hyperparameters saved as `self_attention: softmax | linear` go through jsonargparse, as
    Lightning's `load_from_checkpoint` sends them, to the class the name stood for."""
    from lightning.pytorch.cli import instantiate_module

    settings = {"d_model": D, "num_heads": H, "num_layers": 1, "ff_dim": 16}
    hparams = {
        "_class_path": "seqtasks.translation.task.TranslationTask",
        "encoder": {
            "class_path": "seqtasks.encoders.TransformerEncoder",
            "init_args": {**settings, "self_attention": name},
        },
        "decoder": {
            "class_path": "seqtasks.decoders.TransformerDecoder",
            "init_args": {**settings, "self_attention": name},
        },
        "src_vocab_size": 20,
        "tgt_vocab_size": 20,
    }
    task = instantiate_module(TranslationTask, hparams)
    for part in (task.encoder, task.decoder):
        assert type(part.layers[0].self_attention) is chosen
