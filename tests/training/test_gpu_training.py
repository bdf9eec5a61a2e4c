"""What training on a GPU asks of the Transformer path (issue 29), checked on the CPU where it can
be: batches padded to a few lengths give the losses and outputs of unpadded ones, a vocabulary
padded to a multiple of rows is invisible outside the decoder and exported as V rows, the GPU
recipe parses and trains; and, where a GPU is present, training takes PyTorch's flash or
memory-efficient attention kernels in bf16."""

from __future__ import annotations

import dataclasses
import functools
import random
from pathlib import Path

import ctranslate2
import pytest
import torch
import yaml
from conftest import REPO
from test_export import save, source_pieces, transformer_hparams
from test_translation_task import make_task

from seqtasks.cli.export import main as export
from seqtasks.data.batch import Batch, Padding
from seqtasks.decoders import TransformerDecoder
from seqtasks.encoders import TransformerEncoder
from seqtasks.search import search
from seqtasks.tasks.objective import Objective
from seqtasks.translation.ctranslate2.search import translate_as_seqtasks
from seqtasks.translation.ctranslate2.spec import transformer_spec
from seqtasks.translation.data import Example, TranslationData, collate
from seqtasks.translation.task import TranslationTask
from seqtasks.translation.translator import Translator

RECIPE = REPO / "configs/translation/transformer_gpu.yaml"
SIZES = dict(d_model=32, num_heads=4, num_layers=2, ff_dim=64)


def transformer_task(tokenizers, **settings) -> TranslationTask:
    """A small Transformer translator (`settings` for both parts: `TransformerSettings`)."""
    torch.manual_seed(0)
    src, tgt = tokenizers
    parts = {**SIZES, **settings}
    task = TranslationTask(
        encoder=functools.partial(TransformerEncoder, **parts),
        decoder=functools.partial(TransformerDecoder, **parts),
        src_vocab_size=src.vocab_size,
        tgt_vocab_size=tgt.vocab_size,
    )
    task.set_tokenizers(src, tgt)
    return task


@pytest.fixture(scope="module")
def items(toy_data_dir) -> list:
    """The 20 validation pairs of the toy corpus, as a batch sampler hands them to `collate`."""
    dataset = TranslationData(str(toy_data_dir)).load_split("val", train=False)
    return [dataset[i] for i in range(len(dataset))]


def to(batch: Batch, device: str) -> Batch:
    tensors = {
        f.name: getattr(batch, f.name).to(device)
        for f in dataclasses.fields(batch)
        if isinstance(getattr(batch, f.name), torch.Tensor)
    }
    return dataclasses.replace(batch, **tensors)


PADDINGS = {"multiple_8": Padding(8), "buckets": Padding(8, (24, 40, 64))}


@pytest.mark.parametrize("model", ["transformer", "rnn"])
@pytest.mark.parametrize("padding", sorted(PADDINGS))
def test_padded_batches_give_the_losses_and_outputs_of_unpadded_ones(
    model, padding, items, toy_tokenizers
):
    """The Transformer (padded keys masked, padded target positions after every real one under
    the causal mask) and the BiGRU + Bahdanau model (padding read after every real token, and
    masked in attention): per-example objective, training loss and greedy outputs alike."""
    task = (transformer_task if model == "transformer" else make_task)(toy_tokenizers).eval()
    plain, padded = collate(items), collate(items, PADDINGS[padding])
    assert padded.src.size(1) % 8 == 0 and padded.tgt_in.size(1) % 8 == 0
    assert padded.src.size(1) > plain.src.size(1) and padded.tgt_in.size(1) > plain.tgt_in.size(1)
    results = []
    for batch in (plain, padded):
        memory, output = task.teacher_forced(batch)
        per_example = task.objective(output, batch.tgt_out, memory.mask)
        loss = task.loss(output, batch.tgt_out, memory.mask)
        tokens = [h[0].tokens for h in search(task.decoder, memory, task.val_settings)]
        results.append((per_example, loss, tokens))
    (example, loss, tokens), (example_padded, loss_padded, tokens_padded) = results
    torch.testing.assert_close(example_padded, example, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss_padded, loss, rtol=1e-5, atol=1e-6)
    assert tokens_padded == tokens


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_a_vocabulary_padded_to_64_rows_is_seen_as_v_outside_the_decoder(tied, items):
    """V = 250 in a table of 256 rows: logits of V columns, equal to those of the same model
    without padding, in teacher forcing and in search steps; the extra rows are never trained."""
    torch.manual_seed(0)
    plain = TransformerDecoder(250, 32, tie_embeddings=tied, **SIZES).eval()
    padded = TransformerDecoder(250, 32, tie_embeddings=tied, vocab_multiple=64, **SIZES).eval()
    table = padded.output.weight if not tied else padded.embedding.weight
    assert table.shape == (256, 32) and padded.vocab_size == 250
    with torch.no_grad():
        for mine, theirs in zip(padded.state_dict().values(), plain.state_dict().values()):
            mine[: theirs.size(0)] = theirs
            mine[theirs.size(0) :] = 3.0  # whatever the extra rows hold, nothing sees it
    batch = collate(items)
    memory = TransformerEncoder(250, **SIZES).eval()(batch.src, batch.src_mask)
    logits = padded(memory, batch.tgt_in).logits
    assert logits.shape == (len(batch), batch.tgt_in.size(1), 250)
    torch.testing.assert_close(logits, plain(memory, batch.tgt_in).logits)
    step, _, _ = padded.step(batch.tgt_in[:, 0], padded.start(memory))
    torch.testing.assert_close(step, plain.step(batch.tgt_in[:, 0], plain.start(memory))[0])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten())
    loss.backward()
    assert table.grad[250:].abs().sum() == 0 and table.grad[:250].abs().sum() > 0


def test_default_vocabulary_tables_keep_v_rows(toy_tokenizers):
    """`vocab_multiple` 1, the default: the tables of every existing checkpoint."""
    task = transformer_task(toy_tokenizers)
    assert task.decoder.embedding.num_embeddings == toy_tokenizers[1].vocab_size == 250
    assert task.encoder.embedding.num_embeddings == toy_tokenizers[0].vocab_size


@pytest.fixture(scope="module")
def padded_export(multi30k_lines, toy_tokenizers, tmp_path_factory):
    """A trained Transformer with 250-subword vocabularies in tables of 256 rows, exported."""
    folder = tmp_path_factory.mktemp("padded")
    pairs = list(zip(multi30k_lines["de"][:300], multi30k_lines["en"][:300]))
    decoder = {"num_layers": 2, "vocab_multiple": 64}
    hparams = transformer_hparams({"num_layers": 2, "vocab_multiple": 64}, decoder)
    task = save(hparams, toy_tokenizers, folder / "model.ckpt", pairs, steps=150)
    assert task.decoder.embedding.num_embeddings == 256
    assert export([str(folder / "model.ckpt"), "--to", "ctranslate2", str(folder / "ct2")]) == 0
    return task, folder / "ct2"


def test_export_writes_only_the_v_real_rows_and_translates_alike(padded_export, multi30k_lines):
    task, out = padded_export
    spec = transformer_spec(task)
    assert spec.encoder.embeddings[0].weight.shape == (250, 32)
    assert spec.decoder.embeddings.weight.shape == (250, 32)
    assert spec.decoder.projection.weight.shape == (250, 32)
    held_out = multi30k_lines["de"][300:340]
    ours = Translator(task, []).translate(held_out, beam=1)
    translator = ctranslate2.Translator(str(out), intra_threads=1)
    settings = task.test_settings
    search = (settings.length_alpha, settings.max_length_ratio, settings.max_length_offset)
    theirs = translate_as_seqtasks(translator, source_pieces(out, held_out), 1, *search)
    assert [t.pieces for t in theirs] == [o.tokens for o in ours]
    assert [t.score for t in theirs] == pytest.approx([o.score for o in ours], abs=2e-3)


def test_an_untied_padded_projection_is_exported_as_its_v_real_rows(toy_tokenizers):
    task = transformer_task(toy_tokenizers, vocab_multiple=64)
    untied = TransformerDecoder(250, 32, tie_embeddings=False, vocab_multiple=64, **SIZES)
    task.decoder = untied
    assert untied.output.weight.shape == (256, 32)
    spec = transformer_spec(task)
    projection = untied.output
    torch.testing.assert_close(
        torch.as_tensor(spec.decoder.projection.weight), projection.weight[:250]
    )
    torch.testing.assert_close(torch.as_tensor(spec.decoder.projection.bias), projection.bias[:250])


def recipe_cli(toy_data_dir: Path, tmp_path: Path, *overrides: str):
    """The GPU recipe as `seqtasks fit` builds it, on the CPU and the toy corpus."""
    from seqtasks.cli.main import SeqtasksCLI

    return SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=["--config", str(RECIPE), "--data.init_args.data_dir", str(toy_data_dir),
              "--trainer.accelerator", "cpu", "--trainer.default_root_dir", str(tmp_path),
              *overrides],
    )  # fmt: skip


def test_the_gpu_recipe_is_the_cpu_configs_model_with_gpu_batches(toy_data_dir, tmp_path):
    """Same model sizes as transformer.yaml; bf16, a GPU, the larger batches and workers; a
    fused AdamW (clipped by seqtasks.training.clipping) under a warm-up. Its step on the CPU,
    under bf16 with clipping: test_cli.py::test_config_fast_dev_run."""
    recipe, cpu = (
        yaml.safe_load(p.read_text()) for p in (RECIPE, RECIPE.parent / "transformer.yaml")
    )
    for part in ("encoder", "decoder"):
        sizes = ("d_model", "num_heads", "num_layers", "ff_dim", "norm")
        mine, theirs = (c["model"]["init_args"][part]["init_args"] for c in (recipe, cpu))
        assert {k: mine[k] for k in sizes} == {k: theirs[k] for k in sizes}
    assert recipe["trainer"]["accelerator"] == "gpu"
    cli = recipe_cli(toy_data_dir, tmp_path)
    assert cli.trainer.precision == "bf16-mixed"
    data = cli.datamodule
    assert data.max_tokens >= 16384 and data.num_workers >= 2 and data.prefetch_factor >= 2
    optimizer = cli.model.configure_optimizers()
    assert optimizer["optimizer"].defaults["fused"] is True  # one kernel for the update
    warmup = optimizer["lr_scheduler"]["scheduler"].warmup_steps
    assert 100 <= warmup <= 1000


def random_items(count: int = 64, vocab: int = 250, seed: int = 0) -> list:
    """Pairs of 2–40 random subwords each, as a batch sampler hands them to `collate` (no
    corpus needed: the GPU machine may have none)."""
    rng = random.Random(seed)

    def ids() -> list[int]:
        return [rng.randrange(4, vocab) for _ in range(rng.randint(2, 40))]

    return [(i, Example(ids(), ids(), "", "")) for i in range(count)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run where one is)")
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_training_on_a_gpu_takes_the_flash_or_efficient_attention_kernels(norm):
    """The encoder's and the cross-attention's key padding masks, the decoder's causal mask,
    forward and backward in bf16 autocast, with only the fused kernels allowed: PyTorch raises
    where neither applies (the math kernel would materialise the weights)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    sizes = dict(d_model=256, num_heads=4, ff_dim=1024, norm=norm, vocab_multiple=64)
    encoder = TransformerEncoder(250, **sizes).cuda().train()
    decoder = TransformerDecoder(250, 256, **sizes).cuda().train()
    batch = to(collate(random_items(), Padding(8)), "cuda")
    kernels = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    with sdpa_kernel(kernels), torch.autocast("cuda", torch.bfloat16):
        memory = encoder(batch.src, batch.src_mask)
        output = decoder(memory, batch.tgt_in)
        loss = Objective(label_smoothing=0.1).per_token(output, batch.tgt_out, memory.mask)
        loss.backward()
    assert output.logits.dtype == torch.bfloat16 and output.logits.size(-1) == 250
    parameters = [*encoder.parameters(), *decoder.parameters()]
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in parameters)
