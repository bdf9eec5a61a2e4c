"""`seqtasks export CKPT --to ctranslate2 OUT/`: a Transformer translation checkpoint as a
CTranslate2 model folder, with the sentencepiece models (`source.model`, `target.model`), what
was exported (`seqtasks_export.json`) and a README beside it. The weight mapping is in
`spec.py`; seqtasks' search, set up in CTranslate2, in `search.py`.

Refused, with the checkpoint and the reason named (`ExportError`): captioning and parsing
checkpoints, any other encoder or decoder (RNNs, image encoders), subclasses of the two,
`norm: resi_dual`, whose second residual stream CTranslate2 has no layer for,
`LinearSelfAttention`, and a cross-attention other than `MultiHeadAttention` with the
self-attention's heads. OUT is checked before the checkpoint is read, and the free space for
the model before a byte of it is written (`seqtasks.export.staging`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seqtasks.attention.multihead import MultiHeadAttention, SelfAttention
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, UNK_ID
from seqtasks.decoders.transformer import TransformerDecoder
from seqtasks.encoders.transformer import TransformerEncoder
from seqtasks.export.staging import (
    ExportError,
    prepare_output,
    require_space,
    staged_directory,
)
from seqtasks.model_files.hub import is_hub_name
from seqtasks.model_files.sources import Reference, open_model
from seqtasks.translation import TASK
from seqtasks.translation.ctranslate2 import QUANTIZATIONS
from seqtasks.translation.ctranslate2.spec import layer_norm_epsilons, transformer_spec

# What the weights are, in words, where the option's name does not say it.
WEIGHTS = {"none": "float32, as trained"}
# Room for config.json, seqtasks_export.json, the README and model.bin's variable names.
SMALL_FILES = 1 << 16


def load_translation_task(model: Reference) -> Any:
    """The `TranslationTask` of the checkpoint, model folder or `hf://` name `model`, in eval
    mode on the CPU.

    Raises:
        CheckpointError: for a missing, damaged, newer or foreign model.
        ExportError: for a model of another task.
    """
    source = open_model(model)
    if source.task != TASK.name:
        raise ExportError(
            f"{source.where} is a {source.task} {source.kind} and cannot be exported to "
            f"CTranslate2: only {TASK.name} models can"
        )
    return source.build("cpu")


def refusal(task: Any) -> str | None:
    """Why CTranslate2 cannot run `task`'s model, in words; None if it can."""
    parts = (
        ("encoder", task.encoder, TransformerEncoder),
        ("decoder", task.decoder, TransformerDecoder),
    )
    for role, part, expected in parts:
        if type(part) is not expected:
            return (
                f"its {role} is a {type(part).__name__}, and CTranslate2 runs exactly "
                f"seqtasks' {expected.__name__} (no RNN or other {role})"
            )
        others = {type(layer.self_attention) for layer in part.layers} - {SelfAttention}
        if others:
            return (
                f"its {role} uses self_attention: {min(k.__name__ for k in others)}, which "
                "CTranslate2 has no layer for; only softmax attention (SelfAttention) can be "
                "exported"
            )
        if part.stack.placement not in ("post", "pre"):
            return (
                f"its {role} uses norm: {part.stack.placement} (ResiDual), whose second residual "
                "stream CTranslate2 has no layer for; only norm: post and pre can be exported"
            )
    heads = task.decoder.layers[0].self_attention.heads
    for layer in task.decoder.layers:
        cross = layer.cross_attention
        if type(cross) is not MultiHeadAttention or cross.heads != heads:
            return (
                f"its decoder's cross_attention is a {type(cross).__name__} with {cross.heads} "
                f"heads, and CTranslate2 runs MultiHeadAttention with the self-attention's "
                f"{heads} heads only"
            )
    if len(epsilons := layer_norm_epsilons(task)) != 1:
        return f"its LayerNorms differ in epsilon ({sorted(epsilons)}); CTranslate2 takes one"
    src, tgt = task.src_tokenizer, task.tgt_tokenizer
    special = (UNK_ID, BOS_ID, EOS_ID)
    if src.pieces(special) != tgt.pieces(special):
        return (
            f"its source and target vocabularies name <unk>, <s>, </s> differently "
            f"({src.pieces(special)} and {tgt.pieces(special)}); CTranslate2 takes one name each"
        )
    return None


def converted_spec(task: Any, quantization: str) -> Any:
    """`transformer_spec(task)` validated and with its weights quantised, as CTranslate2's
    `Converter.convert` does before it writes a byte (so the size is known first)."""
    spec = transformer_spec(task)
    spec.validate()
    spec.optimize(quantization=None if quantization == "none" else quantization)
    return spec


def folder_size(spec: Any, task: Any) -> int:
    """About how many bytes the exported folder of `spec` takes: the weights (shared ones
    once), the sentencepiece models and the vocabularies as JSON."""
    weights = sum(v.num_bytes() for v in spec.variables().values() if not isinstance(v, str))
    size = weights + SMALL_FILES
    for tokenizer in (task.src_tokenizer, task.tgt_tokenizer):
        pieces = tokenizer.pieces(range(tokenizer.vocab_size))
        size += len(tokenizer.proto) + len(json.dumps(pieces))
    return size


def unsupported_here(quantization: str) -> str | None:
    """Why no device of this machine can compute with `quantization`'s weights as stored, or
    None if one can. The folder is still right for a machine that can (float16 types: a GPU):
    CTranslate2 loads it here too (compute_type "default") by converting the weights."""
    import ctranslate2

    weights = "float32" if quantization == "none" else quantization
    devices = {"CPU": ctranslate2.get_supported_compute_types("cpu")}
    if ctranslate2.get_cuda_device_count() > 0:
        devices["GPU"] = ctranslate2.get_supported_compute_types("cuda")
    if any(weights in types for types in devices.values()):
        return None
    supported = "; ".join(f"{', '.join(sorted(t))} on its {d}" for d, t in devices.items())
    no_gpu = "" if "GPU" in devices else ", and it has no CUDA GPU"
    return (
        f"this machine cannot compute in {weights} (CTranslate2 supports {supported}{no_gpu}): "
        "the folder is for a machine that can; loaded here, CTranslate2 converts the weights to "
        f"a type this one supports, and compute_type={weights!r} fails"
    )


def metadata(task: Any, checkpoint: Reference, quantization: str) -> dict[str, Any]:
    """What `seqtasks_export.json` records: the source, the architecture, seqtasks' search."""
    import ctranslate2

    encoder, decoder, search = task.encoder, task.decoder, task.test_settings
    return {
        "exported_from": str(checkpoint),
        "task": task.entry.name,
        "ctranslate2": ctranslate2.__version__,
        "quantization": quantization,
        "encoder": {
            "layers": len(encoder.layers),
            "d_model": encoder.out_dim,
            "norm": encoder.stack.placement,
            "positions": "learned" if encoder.embeddings.learned is not None else "sinusoidal",
        },
        "decoder": {
            "layers": len(decoder.layers),
            "d_model": decoder.embedding.embedding_dim,
            "norm": decoder.stack.placement,
            "positions": "learned" if decoder.embeddings.learned is not None else "sinusoidal",
            "tied_output": decoder.output is None,
        },
        "share_embeddings": bool(task.hparams.get("share_embeddings", False)),
        "source_eos_added_by_model": True,
        "seqtasks_search": {
            "length_alpha": search.length_alpha,
            "length_penalty": "Wu et al. 2016: ((5 + |Y|) / 6) ** length_alpha",
            "max_length": "int(max_length_ratio * (source pieces + 1)) + max_length_offset",
            "max_length_ratio": search.max_length_ratio,
            "max_length_offset": search.max_length_offset,
        },
    }


README = """# CTranslate2 model exported by `seqtasks export`

From `{checkpoint}` (weights {quantization}). `source.model` and `target.model` are the
sentencepiece models; the model appends `</s>` to every source itself (`add_source_eos`).

```python
import ctranslate2, sentencepiece as spm

source = spm.SentencePieceProcessor(model_file="{name}/source.model")
target = spm.SentencePieceProcessor(model_file="{name}/target.model")
translator = ctranslate2.Translator("{name}")
pieces = source.encode(["Ein Hund rennt durch den Schnee."], out_type=str)
results = translator.translate_batch(pieces, beam_size={beam})
print(target.decode(results[0].hypotheses[0]))
```

`seqtasks_export.json` records the architecture and seqtasks' own search settings (length
penalty, length limit); `seqtasks.translation.ctranslate2.search.translate_as_seqtasks` decodes
with them as seqtasks does.
"""


def export_ctranslate2(
    checkpoint: Reference, out: str | Path, quantization: str = "none", force: bool = False
) -> Path:
    """Write the CTranslate2 model of the translation checkpoint `checkpoint` to the folder
    `out`, with `source.model`, `target.model`, `seqtasks_export.json` and a README beside it.

    `out` is checked before the checkpoint is read (`prepare_output`: it must not be or hold
    the checkpoint, and must be writable), built in a hidden sibling folder and renamed into
    place when complete; an existing non-empty `out` is replaced only with `force`.

    Raises:
        CheckpointError: for a missing, damaged or foreign checkpoint.
        ExportError: for a model CTranslate2 cannot run (the reason named), an `out` that must
            not or cannot be written, or too little free space for it.
    """
    out = Path(out)
    if quantization not in QUANTIZATIONS:
        raise ExportError(f"unknown quantization {quantization!r}; choose from {QUANTIZATIONS}")
    local = None if is_hub_name(checkpoint) else Path(checkpoint)
    folder = prepare_output(out, local, force)  # before a large checkpoint's minutes
    task = load_translation_task(checkpoint)
    why = refusal(task)
    if why is not None:
        raise ExportError(f"{checkpoint} cannot be exported to CTranslate2: {why}")
    spec = converted_spec(task, quantization)
    require_space(folder, folder_size(spec, task))
    with staged_directory(folder, force) as staging:
        spec.save(str(staging))
        (staging / "source.model").write_bytes(task.src_tokenizer.proto)
        (staging / "target.model").write_bytes(task.tgt_tokenizer.proto)
        stored = metadata(task, checkpoint, quantization)
        (staging / "seqtasks_export.json").write_text(json.dumps(stored, indent=2) + "\n")
        weights = WEIGHTS.get(quantization, quantization)
        readme = README.format(
            checkpoint=str(checkpoint).rstrip("/").rsplit("/", 1)[-1],
            quantization=weights,
            name=folder.name,
            beam=task.test_settings.beam,  # the checkpoint's `test_beam`
        )
        (staging / "README.md").write_text(readme, encoding="utf-8")
    return out
