"""The weights of a seqtasks Transformer translator in CTranslate2's `TransformerSpec`.

CTranslate2's own converters read OpenNMT-py, fairseq or Marian layouts; this module fills its
`TransformerSpec` from a `TranslationTask` with a `TransformerEncoder` and a
`TransformerDecoder`, part by part (seqtasks -> CTranslate2):

- `embeddings.embedding`, times √D (`scale_embeddings`) -> `embeddings`;
- `embeddings.position_table(0, max_positions)` -> `position_encodings.encodings`: seqtasks'
  own table, written out, since its sinusoids interleave sin and cos (PE(p, 2i) = sin,
  PE(p, 2i+1) = cos) where CTranslate2's built-in table puts every sine before every cosine;
  learned positions are a table too;
- self-attention `qkv` (one Linear, rows [q; k; v]) -> `self_attention.linear[0]`, the same
  fused layout, and `out` -> `linear[1]`;
- cross-attention `q`, `kv` (rows [k; v]), `out` -> `attention.linear[0]`, `[1]`, `[2]`;
- feed-forward `inner`, ReLU, `outer` -> `ffn.linear_0`, `Activation.RELU`, `ffn.linear_1`;
- each sub-layer's `Residual.norm` -> that sub-layer's `layer_norm`, applied after the residual
  sum for `norm: post` (`pre_norm=False`) and to the sub-layer's input for `norm: pre`; the
  stack's final LayerNorm (Pre-LN only) -> `layer_norm`; ε from the modules;
- the output projection: the target embedding, without bias (tied), or `output` with its bias
  -> `projection`;
- of a table padded to a multiple of rows (`vocab_multiple`), and of the output projection, the
  first V rows only: the vocabularies' size.

Vocabularies are the sentencepiece pieces in id order (ids 0-3: <pad>, <unk>, <s>, </s>). The
decoder starts from <s> (seqtasks' BOS) and stops at </s>, and `add_source_eos` appends </s>
to every source as seqtasks does: a user passes `source.model`'s pieces as they come.

Only what `ctranslate2.refusal` accepts is mapped here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from seqtasks.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, SentencePieceTokenizer
from seqtasks.decoders.transformer import TransformerDecoder
from seqtasks.encoders.transformer import TransformerEncoder


def _array(tensor: Tensor) -> np.ndarray:
    """A float32 copy (quantising writes into the arrays it is given)."""
    return tensor.detach().to(torch.float32).cpu().numpy().copy()


def _linear(spec: Any, layer: nn.Linear, rows: int | None = None) -> None:
    """The layer's weight and bias, their first `rows` output rows if given."""
    spec.weight = _array(layer.weight[:rows])
    if layer.bias is not None:
        spec.bias = _array(layer.bias[:rows])


def _norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def _inputs(spec: Any, part: TransformerEncoder | TransformerDecoder) -> None:
    """Token table, √D scale and the position table (seqtasks' own, as it adds it)."""
    embeddings = part.embeddings
    table = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    table.weight = _array(embeddings.embedding.weight[: embeddings.vocab_size])
    spec.scale_embeddings = True  # × √D, D the table's width: seqtasks' `Embeddings.scale`
    positions = embeddings.position_table(0, embeddings.max_positions)  # (max_positions, D)
    spec.position_encodings.encodings = _array(positions)


def _attention(spec: Any, attention: nn.Module, norm: nn.LayerNorm) -> None:
    """Self-attention: fused [q; k; v], out. Cross-attention: q, fused [k; v], out."""
    if hasattr(attention, "qkv"):
        _linear(spec.linear[0], attention.qkv)
    else:
        _linear(spec.linear[0], attention.q)
        _linear(spec.linear[1], attention.kv)
    _linear(spec.linear[-1], attention.out)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec: Any, feed_forward: nn.Module, norm: nn.LayerNorm) -> None:
    _linear(spec.linear_0, feed_forward.inner)
    _linear(spec.linear_1, feed_forward.outer)
    _norm(spec.layer_norm, norm)


def _stack(
    spec_class: Any,
    part: TransformerEncoder | TransformerDecoder,
    fill_layer: Callable[[Any, nn.Module], None],
) -> Any:
    """`spec_class`'s spec of `part`: its inputs, each layer (`fill_layer`) and, for Pre-LN,
    the stack's final LayerNorm."""
    heads = part.layers[0].self_attention.heads
    pre_norm = part.stack.placement == "pre"
    spec = spec_class(len(part.layers), heads, pre_norm=pre_norm)
    _inputs(spec, part)
    for layer_spec, layer in zip(spec.layer, part.layers):
        fill_layer(layer_spec, layer)
    if pre_norm:
        _norm(spec.layer_norm, part.stack.norm)
    return spec


def _encoder_layer(spec: Any, layer: nn.Module) -> None:
    _attention(spec.self_attention, layer.self_attention, layer.residual_attention.norm)
    _feed_forward(spec.ffn, layer.feed_forward, layer.residual_ff.norm)


def _decoder_layer(spec: Any, layer: nn.Module) -> None:
    _attention(spec.self_attention, layer.self_attention, layer.residual_self.norm)
    _attention(spec.attention, layer.cross_attention, layer.residual_cross.norm)
    _feed_forward(spec.ffn, layer.feed_forward, layer.residual_ff.norm)


def encoder_spec(encoder: TransformerEncoder) -> Any:
    from ctranslate2.specs import TransformerEncoderSpec

    return _stack(TransformerEncoderSpec, encoder, _encoder_layer)


def decoder_spec(decoder: TransformerDecoder) -> Any:
    from ctranslate2.specs import TransformerDecoderSpec

    spec = _stack(TransformerDecoderSpec, decoder, _decoder_layer)
    vocab = decoder.vocab_size
    if decoder.output is None:  # tied: logits = x Eᵀ, no bias
        spec.projection.weight = _array(decoder.embedding.weight[:vocab])
    else:
        _linear(spec.projection, decoder.output, vocab)
    return spec


def layer_norm_epsilons(task: Any) -> set[float]:
    """The ε of the model's LayerNorms (CTranslate2 takes one)."""
    return {m.eps for m in task.modules() if isinstance(m, nn.LayerNorm)}


def _pieces(tokenizer: SentencePieceTokenizer) -> list[str]:
    return tokenizer.pieces(range(tokenizer.vocab_size))


def transformer_spec(task: Any) -> Any:
    """The filled `ctranslate2.specs.TransformerSpec` of a `TranslationTask` that `refusal`
    accepts: weights, vocabularies and the special tokens."""
    from ctranslate2.specs import TransformerSpec

    spec = TransformerSpec(encoder_spec(task.encoder), decoder_spec(task.decoder))
    spec.register_source_vocabulary(_pieces(task.src_tokenizer))
    spec.register_target_vocabulary(_pieces(task.tgt_tokenizer))
    unk, bos, eos = task.tgt_tokenizer.pieces((UNK_ID, BOS_ID, EOS_ID))
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = unk, bos, eos
    config.decoder_start_token = bos  # seqtasks decodes from BOS
    config.add_source_eos = True  # seqtasks' sources end in EOS
    (config.layer_norm_epsilon,) = layer_norm_epsilons(task)
    return spec
