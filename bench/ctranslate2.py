"""BLEU and speed of a translation checkpoint exported to CTranslate2, against seqtasks' own search.

    flock /work/bench.lock python bench/ctranslate2.py --checkpoint CKPT \\
        --src data/multi30k/test_2016_flickr.de --ref data/multi30k/test_2016_flickr.en \\
        [--beam 5] [--threads 2] [--rounds 3] [--json]

In one process, on the CPU: the checkpoint is exported twice (`seqtasks.export`, float32 and
int8 weights, into a temporary folder), then --src is translated by
  A. seqtasks: `seqtasks.load(CKPT).translate(lines, beam)` (its default batches, one per core);
  B. CTranslate2, float32 weights, and
  C. CTranslate2, int8 weights, both set up as seqtasks' search (`translate_as_seqtasks`: the
     same per-sentence length limit, Wu et al.'s length penalty on its 2·beam finished
     hypotheses), tokenising with `source.model` and detokenising with `target.model`;
  D, E. the same two called plainly, as CTranslate2's users do (`plain_system`: batches of
     2,000 source tokens, its own length normalisation and limits).
Each is scored with sacreBLEU (cased, 13a, as apps/evaluate.py) and counted against A's output
(identical lines). Then all are timed in --rounds interleaved rounds (A B C D E A B C D E …,
after the untimed first pass), text in to text out:
sentences/s and output subwords/s (EOS not counted), min/median/max. torch and CTranslate2 get
--threads threads (`torch.set_num_threads`; CTranslate2's `intra_threads`, or with
--ctranslate2-threads inter its `inter_threads`, batches side by side as seqtasks' workers);
OMP_WAIT_POLICY=PASSIVE is set before either is loaded. With --json the last stdout line is one
JSON object.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Run as `python bench/ctranslate2.py`, this file's folder comes first on sys.path, and
# `import ctranslate2` would import this script instead of the package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import ctranslate2  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402

import seqtasks  # noqa: E402
from seqtasks.data.text import read_lines  # noqa: E402
from seqtasks.search import SearchSettings  # noqa: E402
from seqtasks.translation.bleu import score_corpus  # noqa: E402
from seqtasks.translation.ctranslate2.export import export_ctranslate2  # noqa: E402
from seqtasks.translation.ctranslate2.search import translate_as_seqtasks  # noqa: E402
from seqtasks.translation.translator import Translator  # noqa: E402

System = Callable[[list[str]], tuple[list[str], int]]  # lines -> (translations, output subwords)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, type=Path)
    p.add_argument("--src", required=True, type=Path, help="one source sentence a line")
    p.add_argument("--ref", required=True, type=Path, help="the references, line-aligned")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--ctranslate2-threads",
        choices=["intra", "inter"],
        default="intra",
        help="intra: one batch at a time on --threads threads (intra_threads); inter: --threads "
        "batches side by side on one thread each (inter_threads), as seqtasks' workers",
    )
    p.add_argument("--rounds", type=int, default=3, help="timed interleaved rounds")
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    return p.parse_args(argv)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seqtasks_system(translator: Translator, beam: int) -> System:
    def run(lines: list[str]) -> tuple[list[str], int]:
        best = translator.translate(lines, beam=beam)
        return [t.text for t in best], sum(len(t.tokens) for t in best)

    return run


def load_translator(folder: Path, threads: int, layout: str) -> ctranslate2.Translator:
    """`threads` threads on one batch (layout "intra") or on `threads` batches ("inter")."""
    if layout == "inter":
        return ctranslate2.Translator(str(folder), inter_threads=threads, intra_threads=1)
    return ctranslate2.Translator(str(folder), inter_threads=1, intra_threads=threads)


def ctranslate2_system(
    folder: Path, settings: SearchSettings, beam: int, translator: ctranslate2.Translator
) -> System:
    source = spm.SentencePieceProcessor(model_file=str(folder / "source.model"))
    target = spm.SentencePieceProcessor(model_file=str(folder / "target.model"))
    search = (settings.length_alpha, settings.max_length_ratio, settings.max_length_offset)

    def run(lines: list[str]) -> tuple[list[str], int]:
        pieces = source.encode([line.strip() for line in lines], out_type=str)
        decoded = translate_as_seqtasks(translator, pieces, beam, *search)
        return [target.decode(d.pieces) for d in decoded], sum(len(d.pieces) for d in decoded)

    return run


def plain_system(
    folder: Path, settings: SearchSettings, beam: int, translator: ctranslate2.Translator
) -> System:
    """CTranslate2 as its users call it: batches of about 2,000 source tokens (as seqtasks'),
    its own length normalisation (score / length^α) and limits (256 subwords, at least 1)."""
    source = spm.SentencePieceProcessor(model_file=str(folder / "source.model"))
    target = spm.SentencePieceProcessor(model_file=str(folder / "target.model"))

    def run(lines: list[str]) -> tuple[list[str], int]:
        results = translator.translate_batch(
            source.encode([line.strip() for line in lines], out_type=str),
            beam_size=beam,
            length_penalty=settings.length_alpha,
            max_batch_size=2000,
            batch_type="tokens",
        )
        best = [r.hypotheses[0] for r in results]
        return [target.decode(pieces) for pieces in best], sum(map(len, best))

    return run


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    lines, references = read_lines(args.src), read_lines(args.ref)
    translator = seqtasks.load(args.checkpoint, device="cpu", task="translation")
    settings = translator.task.test_settings
    results: dict = {
        "checkpoint": str(args.checkpoint),
        "sentences": len(lines),
        "beam": args.beam,
        "threads": args.threads,
        "ctranslate2_threads": args.ctranslate2_threads,
        "cpu": cpu_name(),
        "torch": torch.__version__,
        "ctranslate2": ctranslate2.__version__,
        "length_alpha": settings.length_alpha,
        "systems": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-ct2-") as folder:
        systems: dict[str, System] = {"seqtasks": seqtasks_system(translator, args.beam)}
        for weights in ("none", "int8"):
            start = time.perf_counter()
            out = export_ctranslate2(args.checkpoint, Path(folder) / weights, weights)
            log(f"exported {weights} in {time.perf_counter() - start:.1f} s")
            name = f"ctranslate2 {'float32' if weights == 'none' else weights}"
            loaded = load_translator(out, args.threads, args.ctranslate2_threads)
            systems[name] = ctranslate2_system(out, settings, args.beam, loaded)
            systems[f"{name}, plain"] = plain_system(out, settings, args.beam, loaded)
        reference_output = None
        for name, system in systems.items():  # the untimed first pass: BLEU and agreement
            hypotheses, _ = system(lines)
            reference_output = reference_output or hypotheses
            same = sum(a == b for a, b in zip(hypotheses, reference_output))
            bleu = score_corpus(hypotheses, references)
            results["systems"][name] = {"bleu": bleu.bleu, "same_as_seqtasks": same}
            results["signature"] = bleu.bleu_signature
            log(f"{name}: BLEU {bleu.bleu:.2f}, {same}/{len(lines)} lines as seqtasks")
        timings = {name: [] for name in systems}
        for round_ in range(args.rounds):
            for name, system in systems.items():
                start = time.perf_counter()
                _, tokens = system(lines)
                seconds = time.perf_counter() - start
                timings[name].append((seconds, tokens))
                log(f"round {round_ + 1} {name}: {len(lines) / seconds:.1f} sentences/s")
    base = None
    for name, runs in timings.items():
        entry = results["systems"][name]
        entry["sentences_per_s"] = spread([len(lines) / s for s, _ in runs])
        entry["tokens_per_s"] = spread([t / s for s, t in runs])
        entry["output_tokens"] = runs[0][1]
        base = base or entry
        entry["speed_ratio"] = (
            entry["sentences_per_s"]["median"] / base["sentences_per_s"]["median"]
        )
    print_table(results)
    if args.json:
        print(json.dumps(results))
    return 0


def print_table(results: dict) -> None:
    print(
        f"{results['checkpoint']}: {results['sentences']} sentences, beam {results['beam']}, "
        f"{results['threads']} threads (CTranslate2: {results['ctranslate2_threads']}), "
        f"{results['cpu']}, torch {results['torch']}, ctranslate2 {results['ctranslate2']}"
    )
    print(f"{'':30} {'BLEU':>6} {'same':>5}  {'sentences/s (min-max)':>24}  "
          f"{'tokens/s (min-max)':>22}  ratio")  # fmt: skip
    for name, entry in results["systems"].items():
        s, t = entry["sentences_per_s"], entry["tokens_per_s"]
        print(
            f"{name:30} {entry['bleu']:6.2f} {entry['same_as_seqtasks']:5d}  "
            f"{s['median']:7.1f} ({s['min']:6.1f}-{s['max']:6.1f})  "
            f"{t['median']:6.0f} ({t['min']:6.0f}-{t['max']:6.0f})  {entry['speed_ratio']:5.2f}"
        )
    print(results["signature"])


if __name__ == "__main__":
    sys.exit(main())
