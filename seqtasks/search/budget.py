"""How many source tokens one decoding batch holds: `max_tokens="auto"` of the API, the apps
and the server, decided here for all of them.

On a CPU, 2,000, which measured fastest on a 2-core CPU (docs/transformer.md, "Speed"): the
batches, and so the outputs, are what they were. On a CUDA device a step costs about the same
for a few rows as for thousands, so a batch holds as many tokens as the device memory free for
it holds by `bytes_per_token`, between 256 and 64,000 (beam 5 on test_2016_flickr ran 1,335
sentences/s at 64,000 against 880 at 2,000 on an H200, issue 29). A number given instead wins.
"""

from __future__ import annotations

import argparse
from typing import Literal

import torch

from seqtasks.decoders.base import Decoder

TokenBudget = int | Literal["auto"]

CPU_TOKENS = 2000
FEWEST_TOKENS = 256  # a long sentence or two: below this a batch does too little per step
MOST_TOKENS = 64_000  # the budget measured on an H200 (issue 29); more gains little
MEMORY_SHARE = 0.5  # of the memory free: the rest for fragmentation and the estimate's misses
SHORTEST_SOURCE = 2  # one subword and EOS: the most output positions and rows per token


def check_max_tokens(max_tokens: object, name: str = "max_tokens") -> TokenBudget:
    """`max_tokens` if it is "auto" or a positive integer; else a ValueError naming `name`."""
    if max_tokens == "auto":
        return "auto"
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"{name} must be a positive integer, got {max_tokens!r} (or 'auto')")
    return max_tokens


def max_tokens_option(text: str) -> TokenBudget:
    """An argparse type for `--max-tokens`: "auto" or a positive integer."""
    if text == "auto":
        return "auto"
    try:
        return check_max_tokens(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}") from None


def bytes_per_token(
    decoder: Decoder,
    memory_dim: int,
    beam: int,
    ratio: float,
    offset: int,
    attention_sources: int | None = None,
) -> float:
    """The device memory a search takes per source token, at its peak, for the batches that
    take most: those of the shortest sources (`SHORTEST_SOURCE` tokens), which have the most
    rows (K per source) and output positions (p = ratio + offset / 2 per token) per token.
    With e bytes per element (the decoder's parameters'), cache and D of its `search_widths`,
    V the vocabulary:

        e·(memory_dim + cache + D)         the memory, and its keys and values per layer, once
                                           per input (for a recurrent decoder, its keys)
      + K·p·(2·e·cache + 3·8)              each row's caches, twice: a step writes the longer
                                           cache beside the old one; its token history
      + K/2·(3·4·V + 8·e·D)                one step of K/2 rows: logits, log-probabilities and
                                           candidates in float32, the layers' activations
      + K·p'·2·2·4 (attention asked for)   the weights over each of S ≤ `attention_sources`
                                           positions, per row and in the results, with p' the
                                           output positions per token of a source of S

    For the Transformer of configs/translation/transformer.yaml (3 layers, D 256, V 6,000,
    float32) at beam 5, ratio 1.5, offset 10: 0.61 MB a token, 39 GB for 64,000 tokens, so the
    full 64,000 on an H100 (78 GiB) or an H200 with little else on it; greedy, 0.13 MB.
    """
    element = next(decoder.parameters()).element_size()
    cache, width = decoder.search_widths()
    positions = ratio + offset / SHORTEST_SOURCE
    total = element * (memory_dim + cache + width)
    total += beam * positions * (2 * element * cache + 3 * 8)
    total += beam / SHORTEST_SOURCE * (3 * 4 * decoder.vocab_size + 8 * element * width)
    if attention_sources is not None:
        total += beam * (ratio * attention_sources + offset) * 2 * 2 * 4
    return total


def batch_tokens(max_tokens: TokenBudget, device: torch.device, per_token: float) -> int:
    """The source tokens per batch for `max_tokens`: itself when a number; for "auto", on a
    CUDA device what `MEMORY_SHARE` of its free memory holds at `per_token` bytes a token
    (`bytes_per_token`; free: what the device has free plus what this process's allocator
    holds unused), within `FEWEST_TOKENS` … `MOST_TOKENS`; elsewhere `CPU_TOKENS`."""
    if max_tokens != "auto":
        return max_tokens
    if device.type != "cuda":
        return CPU_TOKENS
    free, _ = torch.cuda.mem_get_info(device)
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int(min(max(MEMORY_SHARE * free / per_token, FEWEST_TOKENS), MOST_TOKENS))
