"""Timed beam search of one system on one file, for `bench/peers.py` (run in its own process, so
that its peak memory is its own).

    python bench/peers_decode.py seqtasks CKPT SOURCE OUT [--beam 5] [--threads 2]
        [--stop exact|heuristic]
    python bench/peers_decode.py ctranslate2 MODEL_DIR PIECES OUT [--beam 5] [--threads 2]
        [--compute-type float32|int8]

seqtasks reads raw sentences and tokenises them itself; CTranslate2 reads sentencepiece pieces,
one sentence a line. The clock runs from the first sentence handed over to the last output
returned (loading the model is outside it). OUT gets the output pieces, one sentence a line;
stdout ends with one JSON line: seconds, sentences, output tokens (pieces, end of sentence
not counted).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Run as a script, this file's folder (bench/, which holds ctranslate2.py) comes first on
# sys.path, and `import ctranslate2` would import that script instead of the package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402


def seqtasks_decode(args: argparse.Namespace, lines: list[str]) -> tuple[float, list[list[str]]]:
    import torch

    import seqtasks

    torch.set_num_threads(args.threads)
    translator = seqtasks.load(args.model, device="cpu")
    start = time.perf_counter()
    results = translator.translate(
        lines, beam=args.beam, max_tokens=args.max_tokens, stop=args.stop
    )
    return time.perf_counter() - start, [r.tokens for r in results]


def ctranslate2_decode(args: argparse.Namespace, lines: list[str]) -> tuple[float, list[list[str]]]:
    """One batch per core (`inter_threads`), batches of about `max_tokens` source pieces: the
    way seqtasks shares its cores, and CTranslate2's faster setting on 2 cores
    (docs/deployment.md)."""
    import ctranslate2

    translator = ctranslate2.Translator(
        str(args.model), device="cpu", compute_type=args.compute_type,
        inter_threads=args.threads, intra_threads=1,
    )  # fmt: skip
    pieces = [line.split() for line in lines]
    start = time.perf_counter()
    results = translator.translate_batch(
        pieces, beam_size=args.beam, max_batch_size=args.max_tokens, batch_type="tokens",
        max_decoding_length=args.max_length,
    )  # fmt: skip
    return time.perf_counter() - start, [r.hypotheses[0] for r in results]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("system", choices=["seqtasks", "ctranslate2"])
    parser.add_argument("model", type=Path)
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=2000, help="source tokens a batch")
    parser.add_argument("--compute-type", default="float32")
    parser.add_argument("--max-length", type=int, default=250, help="CTranslate2's output limit")
    parser.add_argument("--stop", help="seqtasks' beam stopping rule (default: the model's)")
    args = parser.parse_args(argv)
    lines = args.source.read_text(encoding="utf-8").splitlines()
    decode = seqtasks_decode if args.system == "seqtasks" else ctranslate2_decode
    seconds, outputs = decode(args, lines)
    args.out.write_text("".join(" ".join(o) + "\n" for o in outputs), encoding="utf-8")
    result = {"seconds": seconds, "sentences": len(lines),
              "tokens": sum(len(o) for o in outputs)}  # fmt: skip
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
