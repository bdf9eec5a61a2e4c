"""Decoders: `Memory` + target prefix -> next-token logits (see `Decoder` for the contract)."""

from seqtasks.decoders.bahdanau import BahdanauDecoder
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.decoders.luong import LuongDecoder
from seqtasks.decoders.no_attention import NoAttentionDecoder
from seqtasks.decoders.transformer import TransformerDecoder

__all__ = [
    "BahdanauDecoder",
    "Decoder",
    "DecoderOutput",
    "LuongDecoder",
    "NoAttentionDecoder",
    "TransformerDecoder",
]
