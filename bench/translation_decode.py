"""How fast does batched, cached beam search translate, against the same search without them,
and are the outputs the same?

    python bench/translation_decode.py [--config configs/translation/transformer.yaml]
        [--checkpoint CKPT] [--data data/multi30k] [--sentences 1000] [--beam 5]
        [--decode-tokens 2000] [--workers N] [--threads 2] [--precisions 32 bf16]
        [--no-reference] [--json] [-- CONFIG OVERRIDES]

One process, on the CPU with --threads threads: beam search of the first --sentences sentences
of the config's test split. Ours: `seqtasks.search.search` over token-bucketed batches of about
--decode-tokens source tokens, shared among --workers one-core threads as
`TranslationTask.translate` shares them. Reference: when the module registered for the decoder
(bench/translation_setup.py's REFERENCES) offers `decoding_like(task)` (the Transformer: the same
weights in nn.Transformer, re-running the prefix at every step, same batches), that; else the
same model's beam search one sentence at a time. Reported: sentences/s, output tokens/s (the
best hypotheses' subwords and their EOS), how many best outputs are identical, peak RSS after
ours and for the whole process; --precisions decodes ours again in each (against float32's
outputs). Without --checkpoint the config's untrained model decodes: its outputs run to the
length limit, so its timings are not a trained model's. With --json the last stdout line is one
JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from precision import PRECISIONS, inference_precision  # noqa: E402

from seqtasks.search import search  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
from translation_setup import (  # noqa: E402
    add_common_arguments,
    architecture,
    log,
    parse,
    peak_rss_mb,
    print_table,
    ratio,
    reference_module,
    setup,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p)
    p.add_argument("--checkpoint", default=None, help="the trained model that decodes")
    p.add_argument("--sentences", type=int, default=1000, help="test sentences to decode")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--decode-tokens", type=int, default=2000,
                   help="source tokens per batch of batched beam search")  # fmt: skip
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="decoding threads taking batches in turn, one core each, ours and the reference "
        "(default: --threads; 1: one batch at a time on all threads)",
    )
    p.add_argument(
        "--precisions",
        nargs="+",
        default=["32"],
        choices=PRECISIONS,
        help="also decode ours in these precisions (the reference runs in 32)",
    )
    args = parse(p, argv)
    if args.sentences < 1 or args.beam < 1:
        p.error("need --sentences >= 1, --beam >= 1")
    return args


def test_sources(model, datamodule, n: int) -> list[list[int]]:
    """The first n test sources, encoded with the decoding model's own tokeniser when it has one
    (a checkpoint carries it), cut to the DataModule's max_length as in evaluation."""
    from seqtasks.data.text import read_lines
    from seqtasks.translation.data import encode_source

    tokenizer = getattr(model, "src_tokenizer", None) or datamodule.src_tokenizer
    split = datamodule.splits["test"]
    path = Path(datamodule.data_dir) / f"{split}.{datamodule.src_lang}"
    lines = read_lines(path)[:n]
    return [encode_source(tokenizer, line.strip(), datamodule.max_length) for line in lines]


def searching(task):
    """`decode(src, src_mask, settings)` as seqtasks searches: `search` from the task's encoding."""

    @torch.no_grad()
    def decode(src, src_mask, settings):
        return search(task.decoder, task.encoder(src, src_mask), settings)

    return decode


def decode_all(
    decode, sources: list[list[int]], settings, max_tokens: int | None, workers: int | None
) -> dict:
    """Search with `decode(src, src_mask, settings)` (`searching(task)` or a reference's) over
    `sources`: token-bucketed batches of about `max_tokens` source tokens, or one sentence at a
    time when `max_tokens` is None, shared among `workers` one-core threads as
    `TranslationTask.translate` shares them (`run_batches`). Returns time, outputs and counts."""
    from seqtasks.data.batch import pad
    from seqtasks.data.batching import TokenBucketSampler
    from seqtasks.data.tokenizer import EOS_ID, PAD_ID
    from seqtasks.search import run_batches

    lengths = [len(s) + 1 for s in sources]
    if max_tokens is None:
        chunks = [[i] for i in range(len(sources))]
    else:
        chunks = TokenBucketSampler(lengths, max_tokens, shuffle=False).batches
    outputs: list[list[int] | None] = [None] * len(sources)
    ended = [False] * len(sources)

    def decode_chunk(chunk) -> None:
        src = pad([sources[i] + [EOS_ID] for i in chunk])
        for i, nbest in zip(chunk, decode(src, src != PAD_ID, settings)):
            outputs[i], ended[i] = nbest[0].tokens, nbest[0].finished

    start = time.perf_counter()
    run_batches(decode_chunk, chunks, workers)
    seconds = time.perf_counter() - start
    finished = sum(ended)
    # Output tokens: the best hypotheses' subwords, plus the EOS of those that emitted one.
    out_tokens = sum(len(o) for o in outputs) + finished
    return {"seconds": seconds, "sents_per_s": len(sources) / seconds,
            "tokens_per_s": out_tokens / seconds, "output_tokens": out_tokens,
            "finished": finished, "batches": len(chunks), "outputs": outputs}  # fmt: skip


def timed(decode, sources: list[list[int]], max_tokens: int | None, model, args) -> dict:
    """decode_all with the model's test settings and --beam, after an untimed warm-up on the
    first two sources."""
    settings = model.test_settings.override(beam=args.beam)
    decode_all(decode, sources[:2], settings, max_tokens, args.workers)
    return decode_all(decode, sources, settings, max_tokens, args.workers)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    task, datamodule, _ = setup(args)
    model = task
    if args.checkpoint:
        model = type(task).load_from_checkpoint(args.checkpoint, map_location="cpu")
    model.eval()
    note = f"checkpoint {args.checkpoint}" if args.checkpoint else "NO checkpoint: untrained"
    sources = test_sources(model, datamodule, args.sentences)
    log(f"decoding: beam {args.beam}, {len(sources)} test sentences, {note}")

    ours = timed(searching(model), sources, args.decode_tokens, model, args)
    log(f"  ours, batched: {ours['batches']} batches of <= {args.decode_tokens} source tokens, "
        f"{ours['seconds']:.2f} s, {ours['sents_per_s']:.1f} sentences/s, "
        f"{ours['output_tokens']:,} output tokens, ended with EOS {ours['finished']}/"
        f"{len(sources)}")  # fmt: skip
    rss_ours = peak_rss_mb()
    precisions = {}
    for precision in (p for p in args.precisions if p != "32"):
        with inference_precision("cpu", precision):
            run = timed(searching(model), sources, args.decode_tokens, model, args)
        run["same_as_32"] = sum(a == b for a, b in zip(ours["outputs"], run["outputs"]))
        precisions[precision] = run
        log(f"  ours in {precision}: {run['sents_per_s']:.1f} sentences/s, "
            f"{run['tokens_per_s']:,.0f} output tokens/s; best outputs identical to float32: "
            f"{run['same_as_32']}/{len(sources)}")  # fmt: skip

    ref_module = reference_module(model, args)
    ref = same = None
    how = "none"
    if ref_module is not None and hasattr(ref_module, "decoding_like"):
        how = f"{ref_module.__name__}, same weights and batches"
        ref = timed(ref_module.decoding_like(model), sources, args.decode_tokens, model, args)
    elif not args.no_reference:
        how = "same model, batch of 1"
        ref = timed(searching(model), sources, None, model, args)
    if ref is not None:
        same = sum(a == b for a, b in zip(ours["outputs"], ref["outputs"]))
        log(f"  reference ({how}): {ref['seconds']:.2f} s, {ref['sents_per_s']:.1f} "
            f"sentences/s; best outputs identical to ours: {same}/{len(sources)}")  # fmt: skip
    peak = peak_rss_mb()

    rows = [
        (f"beam-{args.beam} sentences/s", ours["sents_per_s"], ref and ref["sents_per_s"], 2),
        (f"beam-{args.beam} output tokens/s", ours["tokens_per_s"], ref and ref["tokens_per_s"], 1),
    ]  # fmt: skip
    for precision, run in precisions.items():
        name = f"beam-{args.beam} {{}}, {precision}"
        rows.append((name.format("sentences/s"), run["sents_per_s"], None, 2))
        rows.append((name.format("output tokens/s"), run["tokens_per_s"], None, 1))
    print_table(rows)
    log(f"peak RSS: {rss_ours:,.0f} MB after ours, {peak:,.0f} MB for the whole process")
    result = {
        "model": Path(args.config).stem,
        "architecture": architecture(model),
        "config": args.config,
        "overrides": args.overrides,
        "checkpoint": args.checkpoint,
        "beam_sents_per_s": ours["sents_per_s"],
        "ref_beam_sents_per_s": ref and ref["sents_per_s"],
        "beam_ratio": ratio(ours["sents_per_s"], ref and ref["sents_per_s"]),
        "beam_tokens_per_s": ours["tokens_per_s"],
        "ref_beam_tokens_per_s": ref and ref["tokens_per_s"],
        "beam_output_tokens": ours["output_tokens"],
        "beam_finished": ours["finished"],
        "beam_identical_outputs": same,
        "ref_decoding": how,
        **{
            f"beam_{key}_{precision}": run[key]
            for precision, run in precisions.items()
            for key in ("sents_per_s", "tokens_per_s", "same_as_32")
        },
        "peak_rss_mb_ours": rss_ours,
        "peak_rss_mb": peak,
        "sentences": len(sources),
        "beam": args.beam,
        "threads": args.threads,
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
