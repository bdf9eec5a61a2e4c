"""`max_tokens="auto"`: 2,000 source tokens a batch on a CPU, on a GPU what its free memory
holds by the search's estimate (`seqtasks.search.budget`), in the API and the apps alike; a
number given wins. The GPU is mocked: `torch.cuda`'s memory figures and the model's device."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO

import seqtasks
from seqtasks.cli import evaluate
from seqtasks.decoders import BahdanauDecoder, TransformerDecoder
from seqtasks.parsing import command as parse
from seqtasks.search.budget import (
    CPU_TOKENS,
    FEWEST_TOKENS,
    MOST_TOKENS,
    batch_tokens,
    bytes_per_token,
)
from seqtasks.search.ensemble import EnsembleDecoder
from seqtasks.tasks.model import Model
from seqtasks.translation import command as translate

FIXTURES = REPO / "tests" / "fixtures" / "pre_redesign"
CUDA = torch.device("cuda")
MB = 10**6


@pytest.fixture
def gpu(monkeypatch):
    """A mocked CUDA device: `set(free, reserved, allocated)` gives its memory figures."""
    figures = {"free": 0, "reserved": 0, "allocated": 0}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (figures["free"], 80_000 * MB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: figures["reserved"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: figures["allocated"])
    return figures


def tiny_transformer(vocab: int = 100) -> TransformerDecoder:
    return TransformerDecoder(vocab, 16, d_model=16, num_heads=2, num_layers=2, ff_dim=32)


def test_bytes_per_token_by_hand():
    """A float32 Transformer, D 16, 2 layers, V 100, beam 5, ratio 1.5, offset 10: positions
    per token p = 1.5 + 10/2 = 6.5; cache 2·2·16 = 64.
        memory   4·(16 + 64 + 16)             =    384
        caches   5·6.5·(2·4·64 + 3·8)         = 17,420
        a step   5/2·(3·4·100 + 8·4·16)       =  4,280
    A recurrent decoder (D 8: its embeddings) has no cache; an ensemble adds its members'."""
    transformer = tiny_transformer()
    assert bytes_per_token(transformer, 16, 5, 1.5, 10) == 384 + 17_420 + 4_280
    rnn = BahdanauDecoder(100, 16, embed_dim=8, hidden_size=16)
    rnn_bytes = 4 * (16 + 8) + 5 * 6.5 * 24 + 2.5 * (1200 + 8 * 4 * 8)
    assert bytes_per_token(rnn, 16, 5, 1.5, 10) == rnn_bytes
    both = EnsembleDecoder([transformer, rnn])
    members = 4 * (32 + 64 + 24) + 5 * 6.5 * (2 * 4 * 64 + 24) + 2.5 * (1200 + 8 * 4 * 24)
    assert bytes_per_token(both, 32, 5, 1.5, 10) == members
    # attention kept for 20 source positions: 5·(1.5·20 + 10)·2·2·4 more
    assert bytes_per_token(transformer, 16, 5, 1.5, 10, 20) == 22_084 + 3_200


def test_auto_is_the_cpu_default_on_a_cpu_and_a_number_wins(gpu):
    per_token = bytes_per_token(tiny_transformer(), 16, 5, 1.5, 10)
    assert batch_tokens("auto", torch.device("cpu"), per_token) == CPU_TOKENS == 2000
    gpu["free"] = 10**12  # a number given is taken, whatever the memory
    assert batch_tokens(3000, CUDA, per_token) == 3000
    assert batch_tokens(3000, torch.device("cpu"), per_token) == 3000


def test_auto_on_a_gpu_follows_the_free_memory_within_bounds(gpu):
    """Half of what is free (the device's, plus what the process's allocator holds unused),
    over 22,084 bytes a token; at least 256 tokens and at most 64,000."""
    decoder = tiny_transformer()

    def tokens(beam: int = 5) -> int:
        return batch_tokens("auto", CUDA, bytes_per_token(decoder, 16, beam, 1.5, 10))

    gpu.update(free=100 * MB, reserved=30 * MB, allocated=10 * MB)
    assert tokens() == int(0.5 * 120 * MB / 22_084) == 2716
    gpu.update(free=200 * MB)
    assert tokens() == int(0.5 * 220 * MB / 22_084)
    assert tokens(beam=1) > 4 * tokens(beam=5)  # fewer rows, smaller caches
    gpu.update(free=10**12)
    assert tokens() == MOST_TOKENS == 64_000
    gpu.update(free=1 * MB, reserved=0, allocated=0)
    assert tokens() == FEWEST_TOKENS == 256


@pytest.fixture(scope="module")
def translator():
    return seqtasks.load(FIXTURES / "translation_transformer.ckpt", device="cpu")


def given_to_search(model: Model, monkeypatch) -> dict:
    """The settings and the batch budget of the model's last batched search (`batch_tokens`,
    recorded; the batches are then not searched)."""
    calls: dict = {}
    batch_tokens = model.batch_tokens

    def record(max_tokens, settings, attention_sources=None):
        calls.update(
            settings=settings, max_tokens=batch_tokens(max_tokens, settings, attention_sources)
        )
        return calls["max_tokens"]

    monkeypatch.setattr(model, "batch_tokens", record)
    monkeypatch.setattr("seqtasks.tasks.model.run_batches", lambda *args: None)
    return calls


def test_the_api_batches_by_the_device(translator, gpu, monkeypatch):
    calls = given_to_search(translator, monkeypatch)
    translator.translate(["1 January 2000"])
    assert calls["max_tokens"] == 2000
    translator.translate(["1 January 2000"], max_tokens=3000)
    assert calls["max_tokens"] == 3000
    monkeypatch.setattr(Model, "device", property(lambda self: CUDA))
    gpu.update(free=100 * MB)
    translator.translate(["1 January 2000"], beam=4)
    task, settings = translator.task, calls["settings"]
    per_token = bytes_per_token(task.decoder, task.encoder.out_dim, 4, 1.5, 10)
    assert (settings.beam, settings.max_length_ratio, settings.max_length_offset) == (4, 1.5, 10)
    assert calls["max_tokens"] == int(0.5 * 100 * MB / per_token)
    translator.translate(["1 January 2000"], beam=4, attention=True)  # the weights count too
    assert calls["max_tokens"] < int(0.5 * 100 * MB / per_token)
    with pytest.raises(ValueError, match="^max_tokens must be a positive integer, got 'many'"):
        translator.translate(["1 January 2000"], max_tokens="many")


def test_the_parser_lifts_its_cpu_row_cap_for_an_auto_budget_on_a_gpu(gpu, monkeypatch):
    parser = seqtasks.load(FIXTURES / "parsing.ckpt", device="cpu")
    calls = given_to_search(parser, monkeypatch)
    parser.parse(["A dog runs ."], beam=10)
    assert calls["max_tokens"] == 2000  # under the 40,000 rows of beam 10: 4,000 words
    parser.parse(["A dog runs ."], beam=40)
    assert calls["max_tokens"] == 1000  # the rows' cap: 40,000 // 40
    monkeypatch.setattr(Model, "device", property(lambda self: CUDA))
    gpu.update(free=10**12)
    parser.parse(["A dog runs ."], beam=10)
    assert calls["max_tokens"] == 64_000  # no row cap for a budget the device decides
    parser.parse(["A dog runs ."], beam=10, max_tokens=500)
    assert calls["max_tokens"] == 500
    parser.parse(["A dog runs ."], beam=10, max_tokens=9000)
    assert calls["max_tokens"] == 4000


def test_the_apps_take_auto_or_a_number(tmp_path):
    checkpoint = str(FIXTURES / "translation_transformer.ckpt")
    text = tmp_path / "text.txt"
    text.write_text("Ein Hund.\n")
    assert translate.parse_args(["--checkpoint", checkpoint]).max_tokens == "auto"
    assert translate.parse_args(
        ["--checkpoint", checkpoint, "--max-tokens", "auto"]
    ).max_tokens == ("auto")
    assert translate.parse_args(["--checkpoint", checkpoint, "--max-tokens", "300"]).max_tokens == (
        300
    )
    assert parse.parse_args(["--checkpoint", checkpoint]).max_tokens == "auto"
    assert parse.parse_args(["--checkpoint", checkpoint, "--max-tokens", "70"]).max_tokens == 70
    given = ["translation", "--checkpoint", checkpoint, "--src", str(text), "--ref", str(text)]
    assert evaluate.parse_args(given)[0].max_tokens == "auto"
    assert evaluate.parse_args([*given, "--max-tokens", "900"])[0].max_tokens == 900
    with pytest.raises(SystemExit):
        translate.parse_args(["--checkpoint", checkpoint, "--max-tokens", "some"])
