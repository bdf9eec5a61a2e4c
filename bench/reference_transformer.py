"""The plain-PyTorch reference for the Transformer benchmark: `torch.nn.Transformer` used the way
the PyTorch tutorial "Language Translation with nn.Transformer and torchtext" uses it.

Kept as in the tutorial:
  * token embeddings × √d plus a sinusoidal positional-encoding buffer, then dropout;
  * `nn.Transformer(batch_first=True)` with its own dropout everywhere it puts it (attention
    weights, the feed-forward activation, sub-layer outputs) and its final LayerNorms;
  * padded batches with `src_key_padding_mask`, `tgt_key_padding_mask`,
    `memory_key_padding_mask` and a square causal `tgt_mask`;
  * decoding re-runs the decoder over the whole prefix at every step (no key/value cache);
  * Xavier-uniform initialisation of every matrix.

Changed, to compare like with like: the output projection is tied to the target embeddings as in
seqtasks' TransformerDecoder (the tutorial has a separate Linear, +1.5M parameters), and the
layer sizes, norm placement (Post-LN / Pre-LN = `norm_first`) and dropout rate are read from the
seqtasks model. Decoding uses seqtasks' batched beam search over a decoder that re-runs the
prefix, with the seqtasks model's weights copied in: the same model and the same search, so the
outputs must agree and the timing difference is the cache (and our layers).

Interface used by bench/translation_train.py and bench/translation_decode.py:
    build_like(task) -> nn.Module          same sizes as the seqtasks model `task`
    make_batch(src_ids, tgt_ids, pad_id, bos_id, eos_id) -> (src, trg)  batch-major LongTensors
    batch_loss(model, src, trg, label_smoothing, pad_id) -> (loss, real target tokens)
    decoding_like(task) -> decode(src, src_mask, settings) -> list[list[Hypothesis]]
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.layers.memory import Memory
from seqtasks.search import SearchSettings, beam_search
from seqtasks.search.hypothesis import max_lengths

SUMMARY = (
    "torch.nn.Transformer as in the PyTorch tutorial, padded batches, decoding re-runs the "
    "decoder over the prefix"
)


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding.unsqueeze(0))

    def forward(self, token_embedding: Tensor) -> Tensor:
        return self.dropout(token_embedding + self.pos_embedding[:, : token_embedding.size(1)])


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size,
                 tgt_vocab_size, dim_feedforward, dropout, norm_first):  # fmt: skip
        super().__init__()
        self.transformer = nn.Transformer(
            d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward,
            dropout=dropout, batch_first=True, norm_first=norm_first,
        )  # fmt: skip
        self.src_tok_emb = nn.Embedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = nn.Embedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout)
        self.scale = math.sqrt(emb_size)
        for p in self.parameters():  # the tutorial's initialisation
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: Tensor, src_padding_mask: Tensor) -> Tensor:
        src_emb = self.positional_encoding(self.src_tok_emb(src) * self.scale)
        return self.transformer.encoder(src_emb, src_key_padding_mask=src_padding_mask)

    def decode(self, tgt: Tensor, memory: Tensor, memory_padding_mask: Tensor,
               tgt_padding_mask: Tensor | None = None) -> Tensor:  # fmt: skip
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(tgt) * self.scale)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        outs = self.transformer.decoder(
            tgt_emb, memory, tgt_mask=tgt_mask, tgt_is_causal=True,
            tgt_key_padding_mask=tgt_padding_mask, memory_key_padding_mask=memory_padding_mask,
        )  # fmt: skip
        return F.linear(outs, self.tgt_tok_emb.weight)  # tied output projection

    def forward(self, src: Tensor, tgt: Tensor, pad_id: int) -> Tensor:
        src_padding_mask = src == pad_id
        memory = self.encode(src, src_padding_mask)
        return self.decode(tgt, memory, src_padding_mask, tgt == pad_id)


# ---- the interface the translation benches use --------------------------------------------
def build_like(task) -> Seq2SeqTransformer:
    """A reference of the same sizes as the seqtasks TransformerEncoder + TransformerDecoder."""
    enc, dec = task.encoder, task.decoder
    first = enc.layers[0]
    norm = first.residual_attention.placement
    if norm == "resi_dual":
        raise ValueError("nn.Transformer has no ResiDual layer; benchmark a post or pre config")
    if dec.output is not None:
        raise ValueError("the reference ties the output projection; use tie_embeddings: true")
    return Seq2SeqTransformer(
        num_encoder_layers=len(enc.layers),
        num_decoder_layers=len(dec.layers),
        emb_size=enc.out_dim,
        nhead=first.self_attention.heads,
        src_vocab_size=enc.embedding.num_embeddings,
        tgt_vocab_size=dec.embedding.num_embeddings,
        dim_feedforward=first.feed_forward.inner.out_features,
        dropout=first.residual_attention.dropout.p,
        norm_first=norm == "pre",
    )


def make_batch(src_ids: list[list[int]], tgt_ids: list[list[int]], pad_id: int, bos_id: int,
               eos_id: int) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Batch-major padded (src = tokens + EOS, trg = BOS + tokens + EOS)."""

    def pad(seqs: list[list[int]]) -> Tensor:
        out = torch.full((len(seqs), max(map(len, seqs))), pad_id, dtype=torch.long)
        for row, ids in enumerate(seqs):
            out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return out

    return pad([s + [eos_id] for s in src_ids]), pad([[bos_id] + t + [eos_id] for t in tgt_ids])


def batch_loss(model: Seq2SeqTransformer, src: Tensor, trg: Tensor, label_smoothing: float,
               pad_id: int) -> tuple[Tensor, int]:  # fmt: skip
    """The tutorial's loss: logits for trg[:, :-1], cross-entropy against trg[:, 1:]."""
    logits = model(src, trg[:, :-1], pad_id)
    target = trg[:, 1:].reshape(-1)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target, ignore_index=pad_id,
                           label_smoothing=label_smoothing)  # fmt: skip
    return loss, int((target != pad_id).sum())


@torch.no_grad()
def copy_weights(task, reference: Seq2SeqTransformer) -> None:
    """Put the seqtasks model's weights into the reference (same layers, PyTorch's names)."""
    enc, dec = task.encoder, task.decoder
    reference.src_tok_emb.weight.copy_(enc.embedding.weight)
    reference.tgt_tok_emb.weight.copy_(dec.embedding.weight)
    for ours, theirs in zip(enc.layers, reference.transformer.encoder.layers, strict=True):
        theirs.self_attn.in_proj_weight.copy_(ours.self_attention.qkv.weight)
        theirs.self_attn.in_proj_bias.copy_(ours.self_attention.qkv.bias)
        theirs.self_attn.out_proj.load_state_dict(ours.self_attention.out.state_dict())
        theirs.linear1.load_state_dict(ours.feed_forward.inner.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.outer.state_dict())
        theirs.norm1.load_state_dict(ours.residual_attention.norm.state_dict())
        theirs.norm2.load_state_dict(ours.residual_ff.norm.state_dict())
    for ours, theirs in zip(dec.layers, reference.transformer.decoder.layers, strict=True):
        theirs.self_attn.in_proj_weight.copy_(ours.self_attention.qkv.weight)
        theirs.self_attn.in_proj_bias.copy_(ours.self_attention.qkv.bias)
        theirs.self_attn.out_proj.load_state_dict(ours.self_attention.out.state_dict())
        cross, attention = theirs.multihead_attn, ours.cross_attention
        cross.in_proj_weight.copy_(torch.cat([attention.q.weight, attention.kv.weight]))
        cross.in_proj_bias.copy_(torch.cat([attention.q.bias, attention.kv.bias]))
        cross.out_proj.load_state_dict(attention.out.state_dict())
        theirs.linear1.load_state_dict(ours.feed_forward.inner.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.outer.state_dict())
        theirs.norm1.load_state_dict(ours.residual_self.norm.state_dict())
        theirs.norm2.load_state_dict(ours.residual_cross.norm.state_dict())
        theirs.norm3.load_state_dict(ours.residual_ff.norm.state_dict())
    stacks = (reference.transformer.encoder, reference.transformer.decoder)
    if enc.stack.norm is None:  # Post-LN has no final LayerNorm; nn.Transformer always does
        for stack in stacks:
            stack.norm = nn.Identity()
    else:
        for stack, ours in zip(stacks, (enc.stack, dec.stack), strict=True):
            stack.norm.load_state_dict(ours.norm.state_dict())


class PrefixRerunDecoder(Decoder):
    """Search through the reference: each step runs its decoder over the whole prefix of every
    hypothesis and keeps the last position. The memory is repeated per hypothesis."""

    def __init__(self, model: Seq2SeqTransformer):
        super().__init__()
        self.model = model
        self.vocab_size = model.tgt_tok_emb.num_embeddings

    def forward(self, memory: Memory, tgt_in: Tensor, **attention) -> DecoderOutput:
        """Teacher forcing through the reference (no attention weights)."""
        return DecoderOutput(self.model.decode(tgt_in, memory.states, ~memory.mask))

    def start(self, memory: Memory, beam_size: int = 1):
        rows = torch.arange(memory.states.size(0)).repeat_interleave(beam_size)
        prefix = torch.zeros(len(rows), 0, dtype=torch.long)
        return memory.states[rows], memory.mask[rows], prefix

    def step(self, prev_tokens: Tensor, state):
        states, mask, prefix = state
        prefix = torch.cat([prefix, prev_tokens[:, None]], dim=1)
        logits = self.model.decode(prefix, states, ~mask)
        return logits[:, -1], (states, mask, prefix), None

    def reorder(self, state, index: Tensor):
        return tuple(part.index_select(0, index) for part in state)


def decoding_like(task):
    """The reference decoder with `task`'s weights, and a `decode` like `task.decode`'s."""
    reference = build_like(task).eval()
    copy_weights(task, reference)
    decoder = PrefixRerunDecoder(reference)

    @torch.no_grad()
    def decode(src: Tensor, src_mask: Tensor, settings: SearchSettings):
        states = reference.encode(src, ~src_mask)
        memory = Memory(states=states, mask=src_mask, summary=states.mean(1))
        limit = max_lengths(memory, settings.max_length_ratio, settings.max_length_offset)
        return beam_search(decoder, memory, settings, limit)

    return decode
