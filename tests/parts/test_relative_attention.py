"""Relative position self-attention (Shaw et al. 2018): `RelativeSelfAttention` against eqs. 3-6
written out pair by pair in float64 (clip(j − i, k) computed on its own), distances beyond k
sharing one vector, the encoder ignoring padding and, without absolute positions, giving the
same states to the same tokens shifted; inside a `TransformerDecoder` the growing caches (`step`)
and the fixed ones (`step_fixed`) decode as it teacher-forces; chosen from YAML; and a fit of
two steps with configs/translation/transformer_relative.yaml that loads back and decodes."""

from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import two_step_trainer

import seqtasks
from seqtasks.attention import RelativeSelfAttention
from seqtasks.decoders import TransformerDecoder
from seqtasks.decoders.fixed_cache import TransformerFixedSteps
from seqtasks.encoders import TransformerEncoder
from seqtasks.layers.memory import Memory
from seqtasks.search import SearchSettings, beam_search

REPO = Path(__file__).resolve().parents[2]
D, H, K = 16, 2, 2  # k = 2: sequences longer than 2k + 1 = 5 reach the clipped distances


def paper(attention: RelativeSelfAttention, x: torch.Tensor, visible) -> torch.Tensor:
    """z_i = Σ_j α_ij (x_j W^V + a^V_ij), α_i = softmax_j(x_i W^Q (x_j W^K + a^K_ij)ᵀ / √d_z),
    a_ij = w_clip(j−i, k), over the keys j in `visible(b, i)`, one pair at a time in float64,
    then the output projection (their eqs. 3-6)."""
    q, k, v = (part.double() for part in attention.qkv(x).chunk(3, dim=-1))
    w_k = attention.relative_keys.double()
    w_v = None if attention.relative_values is None else attention.relative_values.double()
    batch, length, _ = x.shape
    d = D // H
    out = torch.zeros(batch, length, D, dtype=torch.float64)
    for b in range(batch):
        for i in range(length):
            keys = list(visible(b, i))
            for h in range(H):
                s = slice(h * d, (h + 1) * d)
                rows = [max(-K, min(K, j - i)) + K for j in keys]  # clip(j − i, k), as a row
                e = torch.stack([q[b, i, s] @ (k[b, j, s] + w_k[r]) for j, r in zip(keys, rows)])
                alpha = torch.softmax(e / d**0.5, dim=0)
                for a, j, r in zip(alpha, keys, rows):
                    out[b, i, s] += a * (v[b, j, s] + (0.0 if w_v is None else w_v[r]))
    return attention.out(out.float())


def relative(values: bool = True, dropout: float = 0.0) -> RelativeSelfAttention:
    torch.manual_seed(0)
    return RelativeSelfAttention(D, H, dropout, max_distance=K, values=values).eval()


@pytest.mark.parametrize("values", [True, False])
def test_causal_and_masked_forward_is_the_papers_equations_pair_by_pair(values):
    """T = 9 > 2k + 1, so most pairs are clipped; keys only (`values=False`) by the fused kernel
    with the bias as its mask."""
    attention = relative(values)
    x = torch.randn(2, 9, D)
    mask = torch.tensor([[True] * 9, [True] * 6 + [False] * 3])
    with torch.no_grad():
        causal = attention(x, causal=True)
        masked = attention(x, key_mask=mask)
        expected_causal = paper(attention, x, lambda b, i: range(i + 1))
        expected_masked = paper(attention, x, lambda b, i: [j for j in range(9) if mask[b, j]])
    torch.testing.assert_close(causal, expected_causal, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked, expected_masked, atol=1e-5, rtol=1e-5)


def test_distances_beyond_k_share_one_vector():
    """Moving w^K and w^V of distance +k changes a query's output exactly where some key lies
    k or more positions after it; moving those of distance k − 1 only where one lies exactly
    k − 1 after it (no clipping on that row)."""
    attention, x = relative(), torch.randn(1, 10, D)
    with torch.no_grad():
        before = attention(x)
        for row, reached in ((2 * K, lambda i: i + K <= 9), (2 * K - 1, lambda i: i + K - 1 <= 9)):
            moved = copy.deepcopy(attention)
            moved.relative_keys[row] += 1.0
            moved.relative_values[row] += 1.0
            after = moved(x)
            changed = (after - before).abs().amax(-1)[0] > 1e-4  # (T,)
            assert changed.tolist() == [reached(i) for i in range(10)], row


def test_the_encoder_ignores_padding_and_without_absolute_positions_only_distances_count():
    """Padding tokens change nothing; the same tokens after two pads (left-padded) get the
    same states as unshifted when `positions: none`; with sinusoids they do not."""
    tokens = torch.randint(4, 30, (1, 8))
    pad = torch.zeros(1, 2, dtype=torch.long)
    shifted, mask = torch.cat([pad, tokens], 1), torch.tensor([[False] * 2 + [True] * 8])
    for positions in ("none", "sinusoidal"):
        torch.manual_seed(0)
        encoder = TransformerEncoder(
            30, d_model=D, num_heads=H, num_layers=2, ff_dim=32, positions=positions,
            self_attention=functools.partial(RelativeSelfAttention, max_distance=K),
        ).eval()  # fmt: skip
        with torch.no_grad():
            plain = encoder(tokens, torch.ones(1, 8, dtype=torch.bool)).states
            moved = encoder(shifted, mask).states[:, 2:]
            noisy = encoder(torch.cat([torch.full((1, 2), 7), tokens], 1), mask).states[:, 2:]
        torch.testing.assert_close(noisy, moved)  # the padding's tokens are never read
        assert torch.allclose(moved, plain, atol=1e-5) == (positions == "none"), positions


def decoder(values: bool = True) -> TransformerDecoder:
    torch.manual_seed(0)
    return TransformerDecoder(
        20, D, d_model=D, num_heads=H, num_layers=2, ff_dim=32, positions="none",
        self_attention=functools.partial(RelativeSelfAttention, max_distance=K, values=values),
    ).eval()  # fmt: skip


def source() -> Memory:
    g = torch.Generator().manual_seed(3)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    return Memory(torch.randn(2, 5, D, generator=g), mask, summary=torch.zeros(2, D))


@pytest.mark.parametrize("values", [True, False])
def test_growing_and_fixed_caches_decode_as_the_decoder_teacher_forces(values):
    """Nine steps (beyond 2k + 1) with beam search's reordering between them: `step`
    (distances to a cache of t positions) and `step_fixed` (a cache of L positions, position
    `at`, the rest hidden) give each row the teacher-forced logits of its own history."""
    model, memory, beam, steps = decoder(values), source(), 2, 9
    rows = 2 * beam
    g = torch.Generator().manual_seed(5)
    fixed = TransformerFixedSteps(model)
    growing_state, fixed_state = model.start(memory, beam), fixed.start(memory, beam, 12)
    history = torch.randint(4, 20, (rows, 1), generator=g)  # each row's tokens so far
    with torch.no_grad():
        for t in range(steps):
            logits, growing_state, _ = model.step(history[:, -1], growing_state)
            fixed_logits, _ = fixed.step(history[:, -1], fixed_state, need_weights=False)
            forced = model(memory.index_select(torch.arange(rows) // beam), history).logits
            torch.testing.assert_close(logits, forced[:, -1], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(fixed_logits, logits, atol=1e-5, rtol=1e-5)
            index = torch.arange(rows) // beam * beam + torch.randint(0, beam, (rows,), generator=g)
            growing_state = model.reorder(growing_state, index)
            fixed.reorder(fixed_state, index, prefix=t + 1)
            history = torch.cat([history[index], torch.randint(4, 20, (rows, 1), generator=g)], 1)
    (best, *_), _ = beam_search(model, memory, SearchSettings(beam=3, n_best=2), 8)
    assert best.tokens is not None


def test_every_distance_learns_and_the_future_none():
    """The encoder's vectors of every distance −k … k get a gradient; the causal decoder's only
    those of −k … 0 (a key after the query is never read, through a^K or a^V)."""
    torch.manual_seed(0)
    encoder = TransformerEncoder(
        20, d_model=D, num_heads=H, num_layers=1, ff_dim=32, positions="none",
        self_attention=functools.partial(RelativeSelfAttention, max_distance=K),
    )  # fmt: skip
    model, tgt_in = decoder(), torch.randint(4, 20, (2, 9))
    src, mask = torch.randint(4, 20, (2, 7)), torch.ones(2, 7, dtype=torch.bool)
    model(encoder(src, mask), tgt_in).logits.square().mean().backward()
    for part, reached in ((encoder, [True] * (2 * K + 1)), (model, [True] * (K + 1) + [False] * K)):
        for layer in part.layers:
            attention = layer.self_attention
            for table in (attention.relative_keys, attention.relative_values):
                assert (table.grad.abs().sum(-1) > 0).tolist() == reached


@pytest.mark.parametrize("values", [True, False])
def test_attention_dropout_acts_in_training_only(values):
    attention, x = relative(values, dropout=0.5), torch.randn(2, 9, D)
    with torch.no_grad():
        evaluated = attention(x, causal=True)
        torch.testing.assert_close(attention(x, causal=True), evaluated)
        assert not torch.allclose(attention.train()(x, causal=True), evaluated)


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="max_distance must be at least 0, got -1"):
        RelativeSelfAttention(D, H, 0.0, max_distance=-1)
    with pytest.raises(ValueError, match="positions must be 'sinusoidal', 'learned' or 'none'"):
        TransformerEncoder(30, d_model=D, num_heads=H, positions="relative")


def test_yaml_chooses_it_with_its_settings_as_checkpoints_rebuild_it():
    """The `self_attention:` of the shipped config, with `values: false` added, read through
    jsonargparse as Lightning's `load_from_checkpoint` sends a checkpoint's hyperparameters."""
    from lightning.pytorch.cli import instantiate_module

    from seqtasks.translation.task import TranslationTask

    config = yaml.safe_load((REPO / "configs/translation/transformer_relative.yaml").read_text())
    parts = config["model"]["init_args"]
    layers = parts["encoder"]["init_args"] | {"d_model": D, "num_heads": H, "num_layers": 1}
    layers["self_attention"]["init_args"] |= {"values": False}
    hparams = {
        "_class_path": "seqtasks.translation.task.TranslationTask",
        "encoder": {"class_path": parts["encoder"]["class_path"], "init_args": layers},
        "decoder": {"class_path": parts["decoder"]["class_path"], "init_args": layers},
        "src_vocab_size": 20,
        "tgt_vocab_size": 20,
    }
    task = instantiate_module(TranslationTask, hparams)
    for part in (task.encoder, task.decoder):
        attention = part.layers[0].self_attention
        assert type(attention) is RelativeSelfAttention and attention.max_distance == 16
        assert attention.relative_keys.shape == (33, D // H) and attention.relative_values is None
        assert not part.embeddings.table.any()  # positions: none


@pytest.mark.slow
def test_the_relative_config_trains_two_steps_loads_back_and_decodes(
    toy_data_dir, tmp_path, monkeypatch
):
    """What the matrix does for a part: `seqtasks fit` from the shipped config (tiny widths),
    its checkpoint loaded by `seqtasks.load`, greedy and beam search through the API."""
    from test_matrix import decode

    from seqtasks.cli.main import main

    config = yaml.safe_load((REPO / "configs/translation/transformer_relative.yaml").read_text())
    layers = config["model"]["init_args"]["encoder"]["init_args"]
    layers |= {"d_model": 8, "num_heads": 2, "num_layers": 1, "ff_dim": 16, "dropout": 0.0}
    config["trainer"] = two_step_trainer(tmp_path)
    config["data"]["init_args"] |= {"data_dir": str(toy_data_dir), "max_tokens": 400}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    main(["fit", "--config", str(path)])
    model = seqtasks.load(sorted(tmp_path.glob("**/*.ckpt"))[-1], device="cpu", task="translation")
    for part in (model.task.encoder, model.task.decoder):
        assert type(part.layers[0].self_attention) is RelativeSelfAttention
    decode("translation", model, {})
