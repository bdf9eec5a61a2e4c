"""Linear memories (attention/linear_memory.py): each write rule against its equations run one
position at a time in float64 (the gated write, the delta rule, TTT as gradient descent by
autograd on its loss), the chunked causal forward against the step recurrence, padding keys
ignored, TTT's exact relation to linear attention (the deck's "Exactly linear transformer"), the
feature maps of linear attention, the settings refused by name, and each memory chosen in YAML
and trained through the Transformer decoder. The decoder contract (teacher forcing == steps,
beam rows, reorder) is in test_decoders.py's DECODERS."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import two_step_trainer

import seqtasks
from seqtasks.attention import (
    DeltaRuleSelfAttention,
    GatedLinearSelfAttention,
    LinearSelfAttention,
    TTTLinearSelfAttention,
)
from seqtasks.attention.linear import dpfp
from seqtasks.decoders import TransformerDecoder
from seqtasks.layers.memory import Memory

REPO = Path(__file__).resolve().parents[2]
D, H = 16, 2
d = D // H


def heads(x: torch.Tensor) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, d)"""
    return x.unflatten(-1, (H, d)).transpose(1, 2)


def merged(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d) -> (B, T, D)"""
    return x.transpose(1, 2).flatten(2)


def views(reference, x: torch.Tensor):
    """q, k, v (B, H, T, d) of the float64 copy's fused projection."""
    q, k, v = reference.qkv(x).chunk(3, dim=-1)
    return heads(q), heads(k), heads(v)


def dpfp_by_formula(x: torch.Tensor, nu: int) -> torch.Tensor:
    """φ_{2d(j−1)+i}(x) = r_i(x) r_{(i+j) mod 2d}(x), r = [ReLU(x); ReLU(−x)], entry by entry."""
    width = 2 * x.size(-1)
    r = torch.cat([F.relu(x), F.relu(-x)], dim=-1)
    out = x.new_zeros(*x.shape[:-1], width * nu)
    for j in range(1, nu + 1):
        for i in range(width):
            out[..., width * (j - 1) + i] = r[..., i] * r[..., (i + j) % width]
    return out


def delta_by_loop(q, k, v, beta):
    """M_t = M_{t−1} + β_t k_tᵀ (v_t − k_t M_{t−1}), y_t = q_t M_t, one position at a time:
    (B, H, T, ·), β (B, H, T) -> outputs (B, H, T, d) and the last memory."""
    memory = q.new_zeros(q.size(0), H, k.size(-1), v.size(-1))
    outputs = []
    for t in range(q.size(2)):
        kt, vt = k[:, :, t, None], v[:, :, t, None]  # (B, H, 1, ·)
        memory = memory + beta[:, :, t, None, None] * kt.transpose(-1, -2) @ (vt - kt @ memory)
        outputs.append(q[:, :, t, None] @ memory)
    return torch.cat(outputs, dim=2), memory


def stepped(attention, x: torch.Tensor) -> torch.Tensor:
    """`step` one position at a time from `empty_cache`: (B, T, D) -> (B, T, D)."""
    cache = attention.empty_cache(x.size(0), x)
    outputs = []
    for t in range(x.size(1)):
        out, *cache = attention.step(x[:, t : t + 1], *cache)
        outputs.append(out)
    return torch.cat(outputs, dim=1)


def check_causal_steps_and_whole(attention, x, loop):
    """`loop(reference, x64)` -> (outputs, last memory, read queries) of the equations; the
    causal forward and the steps give its outputs, the non-causal forward its last memory read
    by every query."""
    reference = copy.deepcopy(attention).double()
    outputs, memory, queries = loop(reference, x.double())
    expected = reference.out(merged(outputs)).float()
    whole = reference.out(merged(queries @ memory)).float()
    with torch.no_grad():
        torch.testing.assert_close(attention(x, causal=True), expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(stepped(attention, x), expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(attention(x), whole, atol=1e-5, rtol=1e-4)


# ---- the write rules against their equations -----------------------------------------------


@pytest.mark.parametrize("chunk_size", [2, 16])
def test_gated_write_is_its_equations_position_by_position(chunk_size):
    """S_t = diag(α_t) S_{t−1} + k_tᵀ v_t, α_t = σ(x W_α¹ W_α² + b_α)^{1/τ}, o_t = q_t S_t / √d."""
    torch.manual_seed(0)
    attention = GatedLinearSelfAttention(D, H, 0.0, gate_temperature=1.5, chunk_size=chunk_size)
    x = torch.randn(2, 7, D)

    def loop(reference, x):
        q, k, v = views(reference, x)
        q = q / math.sqrt(d)
        alpha = heads(torch.sigmoid(reference.gate(x)) ** (1 / 1.5))
        memory = x.new_zeros(2, H, d, d)
        outputs = []
        for t in range(x.size(1)):
            memory = alpha[:, :, t, :, None] * memory + k[:, :, t, :, None] * v[:, :, t, None]
            outputs.append(q[:, :, t, None] @ memory)
        assert alpha.min() < 0.5  # the gate forgets at some positions: it is tested
        return torch.cat(outputs, dim=2), memory, q

    check_causal_steps_and_whole(attention.eval(), x, loop)


@pytest.mark.parametrize("feature_map", ["dpfp-1", "elu+1", "dpfp-2"])
@pytest.mark.parametrize("chunk_size", [3, 64])
def test_delta_rule_is_its_equations_position_by_position(feature_map, chunk_size):
    """v̄_t = φ(k_t) M_{t−1}, M_t = M_{t−1} + β_t φ(k_t)ᵀ (v_t − v̄_t), y_t = φ(q_t) M_t with φ
    sum-normalised and β_t = σ(W_β x_t), against the chunked triangular solve."""
    torch.manual_seed(0)
    attention = DeltaRuleSelfAttention(D, H, 0.0, feature_map=feature_map, chunk_size=chunk_size)
    x = torch.randn(2, 7, D)
    nu = int(feature_map[-1]) if feature_map.startswith("dpfp") else 0

    def phi(t: torch.Tensor) -> torch.Tensor:
        features = dpfp_by_formula(t, nu) if nu else F.elu(t) + 1
        return features / (features.sum(-1, keepdim=True) + 1e-6)

    def loop(reference, x):
        q, k, v = views(reference, x)
        beta = torch.sigmoid(reference.beta(x)).transpose(1, 2)  # (B, H, T)
        outputs, memory = delta_by_loop(phi(q), phi(k), v, beta)
        return outputs, memory, phi(q)

    check_causal_steps_and_whole(attention.eval(), x, loop)


@pytest.mark.parametrize("mini_batch", [1, 2, 3, 10])
@pytest.mark.parametrize("learnable_rate", [False, True])
def test_ttt_is_gradient_descent_on_its_loss(mini_batch, learnable_rate):
    """W_t = W_{t−1} − η ∇ℓ(W_{t'}; x_t), ℓ(W; x) = ‖θ_K x W − θ_V x‖², the gradient by
    autograd at the W before t's mini-batch, z_t = θ_Q x_t W_t; η per head."""
    torch.manual_seed(0)
    attention = TTTLinearSelfAttention(
        D, H, 0.0, learning_rate=0.7, mini_batch=mini_batch, learnable_rate=learnable_rate,
        chunk_size=4,
    )  # fmt: skip
    if learnable_rate:
        with torch.no_grad():
            attention.log_rate.copy_(torch.tensor([0.3, -0.5]))
    x = torch.randn(2, 7, D)

    def loop(reference, x):
        q, k, v = views(reference, x)
        eta = 0.7 / d * reference.log_rate.exp()  # (H,)
        weights = x.new_zeros(2, H, d, d)
        outputs = []
        for t in range(x.size(1)):
            if t % mini_batch == 0:
                base = weights.detach().clone().requires_grad_()
            loss = ((k[:, :, t, None] @ base - v[:, :, t, None]) ** 2).sum()
            (gradient,) = torch.autograd.grad(loss, base)
            weights = weights - eta[:, None, None] * gradient
            outputs.append(q[:, :, t, None] @ weights)
        return torch.cat(outputs, dim=2), weights, q

    check_causal_steps_and_whole(attention.eval(), x, loop)


def test_ttt_over_one_mini_batch_is_linear_attention_and_online_is_the_delta_rule():
    """With W_0 = 0 and every gradient at W_0 (b ≥ T), η = 1/2: z_t = Σ_{s≤t} (q_t·k_s) v_s,
    un-normalised linear attention with the identity feature map, at every position. Online
    (b = 1) it is that at the first position only, and the delta rule with β = 2η after."""
    torch.manual_seed(0)
    batch = TTTLinearSelfAttention(D, H, 0.0, learning_rate=d / 2, mini_batch=8).eval()
    online = TTTLinearSelfAttention(D, H, 0.0, learning_rate=d / 2).eval()
    online.load_state_dict(batch.state_dict())
    x = torch.randn(2, 7, D)
    reference = copy.deepcopy(batch).double()
    q, k, v = views(reference, x.double())
    linear = (q @ k.transpose(-1, -2)).tril() @ v  # (B, H, T, d): Σ_{s≤t} (q_t·k_s) v_s
    expected = reference.out(merged(linear)).float()
    delta, _ = delta_by_loop(q, k, v, torch.ones(2, H, 7, dtype=torch.float64))  # β = 2η = 1
    with torch.no_grad():
        torch.testing.assert_close(batch(x, causal=True), expected, atol=1e-5, rtol=1e-4)
        first, rest = online(x, causal=True).split([1, 6], dim=1)
        torch.testing.assert_close(first, expected[:, :1], atol=1e-5, rtol=1e-4)
        assert not torch.allclose(rest, expected[:, 1:], atol=1e-2)
        torch.testing.assert_close(
            torch.cat([first, rest], 1), reference.out(merged(delta)).float(), atol=1e-5, rtol=1e-4
        )


# ---- padding --------------------------------------------------------------------------------

MEMORIES = {
    "gated": lambda: GatedLinearSelfAttention(D, H, 0.0, chunk_size=2),
    "delta": lambda: DeltaRuleSelfAttention(D, H, 0.0, chunk_size=2),
    "ttt": lambda: TTTLinearSelfAttention(D, H, 0.0, chunk_size=2),
}


@pytest.mark.parametrize("name", MEMORIES)
def test_padding_keys_write_and_forget_nothing(name):
    """A row with padding between and after its tokens gives, at its tokens, what the tokens
    alone give, causal and not, whatever the padding holds."""
    torch.manual_seed(0)
    attention = MEMORIES[name]().eval()
    x = torch.randn(2, 7, D)
    mask = torch.tensor([[True] * 7, [True, True, False, True, False, True, False]])
    x[~mask] = 50.0
    alone = x[1:2, mask[1]]
    with torch.no_grad():
        for causal in (True, False):
            padded = attention(x, key_mask=mask, causal=causal)
            torch.testing.assert_close(padded[1:, mask[1]], attention(alone, causal=causal))
            torch.testing.assert_close(padded[:1], attention(x[:1], causal=causal))


# ---- linear attention's feature maps --------------------------------------------------------


@pytest.mark.parametrize("nu", [1, 2, 3])
def test_dpfp_is_r_times_its_shifts(nu):
    x = torch.randn(3, 5, 4)
    torch.testing.assert_close(dpfp(x, nu), dpfp_by_formula(x, nu))


@pytest.mark.parametrize("feature_map", ["relu", "dpfp-2"])
def test_linear_attention_with_another_feature_map_is_eq5_and_steps_as_it_runs(feature_map):
    """V'_i = Σ_{j≤i} φ(q_i)·φ(k_j) v_j / Σ_{j≤i} φ(q_i)·φ(k_j) with the chosen φ (eq. 5 of
    Katharopoulos et al. over the prefix), by the parallel form and by the (M, z) recurrence,
    whose state is d_φ wide; the default is elu + 1, as before the setting."""
    torch.manual_seed(0)
    attention = LinearSelfAttention(D, H, 0.0, feature_map=feature_map).eval()
    phi = F.relu if feature_map == "relu" else lambda t: dpfp_by_formula(t, 2)
    x = torch.randn(2, 6, D)
    q, k, v = views(copy.deepcopy(attention).double(), x.double())
    kernel = (phi(q) @ phi(k).transpose(-1, -2)).tril()
    context = (kernel @ v) / (kernel.sum(-1, keepdim=True) + 1e-6)
    expected = attention.out(merged(context).float())
    width = {"relu": d, "dpfp-2": 4 * d}[feature_map]
    with torch.no_grad():
        torch.testing.assert_close(attention(x, causal=True), expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(stepped(attention, x), expected, atol=1e-5, rtol=1e-4)
        assert attention.empty_cache(2, x)[0].shape == (2, H, width, d)
    assert torch.equal(LinearSelfAttention(D, H, 0.0).phi(x), F.elu(x) + 1.0)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: LinearSelfAttention(D, H, 0.0, feature_map="elu"),
         "LinearSelfAttention's feature_map must be one of "
         "\\['elu\\+1', 'relu', 'dpfp-1', 'dpfp-2', 'dpfp-3'\\], got 'elu'"),
        (lambda: DeltaRuleSelfAttention(D, H, 0.0, feature_map="identity"),
         "DeltaRuleSelfAttention's feature_map must be one of .*, got 'identity'"),
        (lambda: DeltaRuleSelfAttention(D, H, 0.0, chunk_size=0),
         "DeltaRuleSelfAttention's chunk_size must be at least 1, got 0"),
        (lambda: GatedLinearSelfAttention(D, H, 0.0, gate_rank=0),
         "GatedLinearSelfAttention's gate_rank must be at least 1, got 0"),
        (lambda: GatedLinearSelfAttention(D, H, 0.0, gate_temperature=0.0),
         "GatedLinearSelfAttention's gate_temperature must be positive, got 0.0"),
        (lambda: TTTLinearSelfAttention(D, H, 0.0, learning_rate=-1.0),
         "TTTLinearSelfAttention's learning_rate must be positive, got -1.0"),
        (lambda: TTTLinearSelfAttention(D, H, 0.0, mini_batch=0),
         "TTTLinearSelfAttention's mini_batch must be at least 1, got 0"),
    ],
)  # fmt: skip
def test_bad_settings_are_refused_by_name(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# ---- in the Transformer, from YAML ----------------------------------------------------------

CHOSEN = {  # name -> (init_args, what a layer built from them shows of them)
    "GatedLinearSelfAttention": ({"gate_rank": 4}, lambda m: m.gate[0].out_features == 4),
    "DeltaRuleSelfAttention": ({"feature_map": "elu+1"}, lambda m: m.key_width == d),
    "TTTLinearSelfAttention": (
        {"mini_batch": 2, "learnable_rate": True},
        lambda m: m.mini_batch == 2 and isinstance(m.log_rate, torch.nn.Parameter),
    ),
}


@pytest.mark.parametrize("name", CHOSEN)
def test_each_is_chosen_in_yaml_and_trains_in_the_decoder(name):
    """`self_attention: {class_path, init_args}` read through jsonargparse as a checkpoint's
    hyperparameters are; one backward pass reaches every parameter of every memory."""
    from lightning.pytorch.cli import instantiate_module

    from seqtasks.translation.task import TranslationTask

    settings = {"d_model": D, "num_heads": H, "num_layers": 2, "ff_dim": 16}
    init_args, shows = CHOSEN[name]
    chosen = {"class_path": f"seqtasks.attention.{name}", "init_args": init_args}
    hparams = {
        "_class_path": "seqtasks.translation.task.TranslationTask",
        "encoder": {"class_path": "seqtasks.encoders.TransformerEncoder", "init_args": settings},
        "decoder": {
            "class_path": "seqtasks.decoders.TransformerDecoder",
            "init_args": settings | {"self_attention": chosen},
        },
        "src_vocab_size": 20,
        "tgt_vocab_size": 20,
    }
    task = instantiate_module(TranslationTask, hparams)
    decoder: TransformerDecoder = task.decoder
    memories = [layer.self_attention for layer in decoder.layers]
    assert all(type(m).__name__ == name and shows(m) for m in memories)
    assert decoder.fixed_cache_steps() is None  # its step keeps a memory, not keys and values
    torch.manual_seed(0)
    mask = torch.ones(2, 5, dtype=torch.bool)
    memory = task.encoder(torch.randint(4, 20, (2, 5)), mask)
    assert isinstance(memory, Memory)
    tgt = torch.randint(4, 20, (2, 6))
    logits = decoder(memory, tgt).logits
    F.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()
    for m in memories:
        for key, p in m.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, key


@pytest.mark.slow
@pytest.mark.parametrize("config", ["transformer_delta", "transformer_ttt"])
def test_the_config_trains_two_steps_loads_back_and_decodes(
    config, toy_data_dir, tmp_path, monkeypatch
):
    """What the matrix does for a part: `seqtasks fit` from the shipped config (tiny widths),
    its checkpoint loaded by `seqtasks.load`, greedy and beam search through the API."""
    from test_matrix import decode

    from seqtasks.cli.main import main

    settings = yaml.safe_load((REPO / f"configs/translation/{config}.yaml").read_text())
    parts = settings["model"]["init_args"]
    tiny = {"d_model": 8, "num_heads": 2, "num_layers": 1, "ff_dim": 16, "dropout": 0.0}
    for part in ("encoder", "decoder"):
        parts[part]["init_args"] |= tiny
    chosen = parts["decoder"]["init_args"]["self_attention"]["class_path"].rsplit(".", 1)[1]
    settings["trainer"] = two_step_trainer(tmp_path)
    settings["data"]["init_args"] |= {"data_dir": str(toy_data_dir), "max_tokens": 400}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    main(["fit", "--config", str(path)])
    model = seqtasks.load(sorted(tmp_path.glob("**/*.ckpt"))[-1], device="cpu", task="translation")
    assert type(model.task.decoder.layers[0].self_attention).__name__ == chosen
    assert type(model.task.encoder.layers[0].self_attention).__name__ == "SelfAttention"
    decode("translation", model, {})
