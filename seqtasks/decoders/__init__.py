"""Decoders: `Memory` + target prefix -> next-token logits (see `Decoder` for the contract)."""

from seqtasks.decoders.bahdanau import BahdanauDecoder
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.decoders.hard_attention import HardAttentionDecoder
from seqtasks.decoders.luong import LuongDecoder
from seqtasks.decoders.no_attention import NoAttentionDecoder
from seqtasks.decoders.show_attend_tell import SoftAttentionDecoder
from seqtasks.decoders.show_tell import ShowTellDecoder
from seqtasks.decoders.transformer import TransformerDecoder

__all__ = [
    "BahdanauDecoder",
    "Decoder",
    "DecoderOutput",
    "HardAttentionDecoder",
    "LuongDecoder",
    "NoAttentionDecoder",
    "ShowTellDecoder",
    "SoftAttentionDecoder",
    "TransformerDecoder",
]
