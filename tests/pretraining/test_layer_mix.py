"""ELMo's learned mix of an encoder's layers (`layer_mix`, Peters et al. 2018, eq. 1): the mix
equals the equation computed by hand, each share reads the layer it names, and the mix's weights
are the task's: never taken from a pre-trained encoder, trained while the rest is frozen, and
at the task's rate rather than the encoder's."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqtasks.decoders import TransformerDecoder
from seqtasks.encoders import RNNEncoder, TransformerEncoder
from seqtasks.layers.scalar_mix import ScalarMix
from seqtasks.tasks import pretrained
from seqtasks.tasks.pretrained import pretrained_weights
from seqtasks.translation.task import TranslationTask

TINY = {"d_model": 16, "num_heads": 2, "num_layers": 3, "ff_dim": 32, "dropout": 0.0}


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    tokens = torch.randint(1, 20, (3, 7))
    mask = torch.arange(7)[None, :] < torch.tensor([7, 4, 2])[:, None]
    return tokens.masked_fill(~mask, 0), mask


def normalised(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm without weights, written out: (x − mean) / sqrt(var + 1e-5) over features."""
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / ((x - mean).pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()


def test_the_mix_is_elmos_equation():
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.scale.fill_(1.7)
    torch.manual_seed(0)
    layers = [torch.randn(2, 5, 8) * (j + 1) + j for j in range(3)]
    e = torch.exp(torch.tensor([0.5, -1.0, 2.0]))
    shares = e / e.sum()
    expected = 1.7 * sum(shares[j] * normalised(layers[j]) for j in range(3))
    torch.testing.assert_close(mix(layers), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="mixes 3 layers, given 2"):
        mix(layers[:2])


def one_hot(mix: ScalarMix, layer: int) -> None:
    """All the mix's share on `layer`."""
    with torch.no_grad():
        mix.weights.fill_(-1e4)
        mix.weights[layer] = 0.0


@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
def test_each_share_of_the_transformers_mix_reads_the_layer_it_names(norm):
    """Share j on layer j alone gives the normalised output of the encoder's first j layers
    (the embeddings for j = 0; the stack as it ends for j = L), and equal shares are their
    mean: so the mix reads h_0 … h_L in order, none left out or read twice."""
    tokens, mask = inputs()
    torch.manual_seed(0)
    mixed = TransformerEncoder(20, layer_mix=True, norm=norm, **TINY).eval()
    with torch.no_grad():  # the stack's last norm unlike the identity it starts as
        for parameter in mixed.stack.parameters():
            parameter.uniform_(0.5, 1.5)
    plain = TransformerEncoder(20, norm=norm, **TINY).eval()
    plain.load_state_dict(
        {k: v for k, v in mixed.state_dict().items() if not k.startswith("layer_mix.")}
    )
    with torch.no_grad():
        stream = plain.stack.begin(plain.embeddings(tokens))
        layers = [stream[0]]
        for layer in plain.layers:
            stream = layer(stream, mask)
            layers.append(stream[0])
        layers[-1] = plain(tokens, mask).states  # the top as the stack ends it
        for j in range(4):
            one_hot(mixed.layer_mix, j)
            torch.testing.assert_close(
                mixed(tokens, mask).states, normalised(layers[j]), rtol=1e-4, atol=1e-4
            )
        mixed.layer_mix.weights.zero_()
        expected = sum(normalised(h) for h in layers) / 4
        torch.testing.assert_close(mixed(tokens, mask).states, expected, rtol=1e-4, atol=1e-4)


def test_the_birnns_mix_reads_the_token_layer_twice_over_and_every_layer():
    tokens, mask = inputs()
    torch.manual_seed(0)
    mixed = RNNEncoder(20, 8, 8, num_layers=2, cell="lstm", dropout=0.0, layer_mix=True).eval()
    one = RNNEncoder(20, 8, 8, num_layers=1, cell="lstm", dropout=0.0).eval()
    one.load_state_dict(
        {
            k: v
            for k, v in mixed.state_dict().items()
            if not k.endswith("_l1")
            and not k.endswith("_l1_reverse")
            and not k.startswith("layer_mix.")
        }
    )
    plain = RNNEncoder(20, 8, 8, num_layers=2, cell="lstm", dropout=0.0).eval()
    plain.load_state_dict(
        {k: v for k, v in mixed.state_dict().items() if not k.startswith("layer_mix.")}
    )
    real = mask[:, :, None]
    with torch.no_grad():
        embedded = mixed.embedding(tokens)
        expected = [torch.cat([embedded, embedded], -1), one(tokens, mask).states]
        expected.append(plain(tokens, mask).states)
        for j, layer in enumerate(expected):
            one_hot(mixed.layer_mix, j)
            memory = mixed(tokens, mask)
            torch.testing.assert_close(
                memory.states, normalised(layer) * real, rtol=1e-4, atol=1e-4
            )
        assert memory.summary.equal(plain(tokens, mask).summary)  # the summary is the top's


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"embed_dim": 12, "hidden_size": 8}, r"embed_dim equal to hidden_size \(12 and 8\)"),
        (
            {"embed_dim": 8, "hidden_size": 8, "bidirectional_layers": 1},
            r"every layer bidirectional \(bidirectional_layers 1, num_layers 2\)",
        ),
    ],
    ids=["width", "one_way"],
)
def test_a_birnn_whose_layers_differ_in_width_is_refused_a_mix(settings, said):
    with pytest.raises(ValueError, match=said):
        RNNEncoder(20, num_layers=2, layer_mix=True, **settings)


@pytest.fixture
def pretrained_without_a_mix(monkeypatch) -> dict[str, torch.Tensor]:
    """A pre-trained model (as `open_model` reads one) whose TransformerEncoder has no mix."""
    torch.manual_seed(3)
    encoder = TransformerEncoder(20, **TINY)
    weights = {f"encoder.{k}": v for k, v in encoder.state_dict().items()}

    class Source:
        spec = {
            "init_args": {
                "encoder": {"class_path": "seqtasks.encoders.transformer.TransformerEncoder"}
            }
        }
        task = "pretraining"
        entries = {}

        def weights(self):
            return weights

    monkeypatch.setattr(pretrained, "open_model", lambda reference: Source())
    return encoder.state_dict()


def test_a_pretrained_encoder_without_a_mix_fills_a_config_with_one(pretrained_without_a_mix):
    """Every weight of the pre-trained encoder is taken; the mix keeps the config's fresh
    weights (equal shares, γ = 1)."""
    mixed = TransformerEncoder(20, layer_mix=True, **TINY)
    mixed.load_state_dict(pretrained_weights("m", mixed, None))
    ours = mixed.state_dict()
    assert all(ours[k].equal(v) for k, v in pretrained_without_a_mix.items())
    assert ours["layer_mix.weights"].equal(torch.zeros(4))
    assert ours["layer_mix.scale"].equal(torch.tensor(1.0))


def test_a_pretrained_mix_is_its_own_tasks_and_is_not_taken(monkeypatch):
    torch.manual_seed(3)
    theirs = TransformerEncoder(20, layer_mix=True, **TINY)
    with torch.no_grad():
        theirs.layer_mix.weights.fill_(2.0)
    weights = {f"encoder.{k}": v for k, v in theirs.state_dict().items()}

    class Source:
        spec = {"init_args": {"encoder": {"class_path": "seqtasks.encoders.TransformerEncoder"}}}
        task, entries = "pretraining", {}

        def weights(self):
            return weights

    monkeypatch.setattr(pretrained, "open_model", lambda reference: Source())
    plain = TransformerEncoder(20, **TINY)
    taken = pretrained_weights("m", plain, None)
    assert taken.keys() == plain.state_dict().keys()  # no mix for a config without one
    mixed = TransformerEncoder(20, layer_mix=True, **TINY)
    assert pretrained_weights("m", mixed, None)["layer_mix.weights"].equal(torch.zeros(4))


def test_the_mix_trains_at_the_tasks_rate_and_while_the_encoder_is_frozen():
    task = TranslationTask(
        partial(TransformerEncoder, layer_mix=True, **TINY),
        partial(TransformerDecoder, **TINY),
        40,
        40,
        encoder_lr=1e-5,
        frozen_encoder_steps=2,
    )
    encoder, rest = task.parameter_groups()
    mix = {id(p) for p in task.encoder.layer_mix.parameters()}
    assert not mix & {id(p) for p in encoder["params"]} and mix <= {id(p) for p in rest["params"]}
    read = {id(p) for p in task.encoder.parameters()} - mix
    assert {id(p) for p in encoder["params"]} == read
    seen = []
    for step in (0, 2):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(type(task), "global_step", property(lambda self, s=step: s))
            task.on_train_batch_start(None, 0)
        frozen = {name: p.requires_grad for name, p in task.encoder.named_parameters()}
        seen.append(
            (
                {v for k, v in frozen.items() if not k.startswith("layer_mix.")},
                {v for k, v in frozen.items() if k.startswith("layer_mix.")},
            )
        )
    assert seen == [({False}, {True}), ({True}, {True})]
