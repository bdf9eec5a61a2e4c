"""Decoders: `Memory` + target prefix -> next-token logits (see `Decoder` for the contract)."""

from seqtasks.decoders.bahdanau import BahdanauDecoder
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.decoders.gnmt import GNMTDecoder
from seqtasks.decoders.hard_attention import HardAttentionDecoder
from seqtasks.decoders.luong import LuongDecoder
from seqtasks.decoders.no_attention import NoAttentionDecoder
from seqtasks.decoders.prompted_rnn import PromptedRNNDecoder
from seqtasks.decoders.prompted_transformer import PromptedTransformerDecoder
from seqtasks.decoders.show_attend_tell import SoftAttentionDecoder
from seqtasks.decoders.show_tell import ShowTellDecoder
from seqtasks.decoders.transformer import TransformerDecoder
from seqtasks.decoders.universal import UniversalTransformerDecoder

__all__ = [
    "BahdanauDecoder",
    "Decoder",
    "DecoderOutput",
    "GNMTDecoder",
    "HardAttentionDecoder",
    "LuongDecoder",
    "NoAttentionDecoder",
    "PromptedRNNDecoder",
    "PromptedTransformerDecoder",
    "ShowTellDecoder",
    "SoftAttentionDecoder",
    "TransformerDecoder",
    "UniversalTransformerDecoder",
]
