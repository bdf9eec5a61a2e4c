"""The table of docs/architectures.md: every encoder and decoder family trained from its own
config on the same data and tokenisers for the same CPU time, and scored alike.

    python bench/architectures.py --work DIR [--rows NAME …] [--minutes 30] [--pairs]
        [--data data/multi30k] [--ptb data/ptb] [--shapes data/shapes]
    python bench/architectures.py --work DIR --rows NAME … --score-only   # score DIR's again
    python bench/architectures.py --list

A row is a config under configs/ (`translation/transformer`, `parsing/universal_transformer`,
`captioning/shapes_decoder_only`), trained by `seqtasks fit` with `--trainer.max_time` set to
--minutes, its own validation and checkpoints kept, and one thread. With --pairs two rows train
at once, each pinned to a core of its own (`taskset`), as bench/peers_quality.py runs its peers;
otherwise one at a time. Each row is then scored from its best checkpoint (by the config's own
monitored metric), with every core: parameters; training real target tokens/s (the steps'
own clock, bench/peers_clock.py, validation pauses left out); for translation test_2016_flickr
sacreBLEU at beam 5, decoding sentences/s and BLEU by source length (words: 1–8, 9–12, 13–16,
17–20, 21+); for parsing dev F1 at beam 10 (`seqtasks evaluate parsing`); for captioning the
shapes holdout's exact match and BLEU-4. Writes DIR/NAME/score.json per row and prints the
table's rows as Markdown.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from peers import bleu  # noqa: E402
from peers_systems import BENCH, ROOT, Systems  # noqa: E402

LENGTHS = ((1, 8), (9, 12), (13, 16), (17, 20), (21, 10_000))
METRIC = re.compile(r"_(-?[0-9.]+)\.ckpt$")


def rows() -> list[str]:
    """Every config of the three tasks, as `task/name`: all but the GPU-sized (GNMT's own 8 + 8
    layers, the GPU recipes), the sharded and dates copies, Flickr8k, the character parser, and
    the recipes that start from another model (a pre-trained encoder, self-critical training)."""
    names = []
    for task in ("translation", "parsing", "captioning"):
        for config in sorted((ROOT / "configs" / task).glob("*.yaml")):
            if not re.search(r"gpu|shards|dates|_xx|flickr8k|pretrained|scst|^gnmt$", config.stem):
                names.append(f"{task}/{config.stem}")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path)
    p.add_argument("--rows", nargs="+", default=None, help="default: every row (--list)")
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--pairs", action="store_true", help="two rows at once, a core each")
    p.add_argument("--data", type=Path, default=Path("data/multi30k"))
    p.add_argument("--ptb", type=Path, default=Path("data/ptb"))
    p.add_argument("--shapes", type=Path, default=Path("data/shapes"))
    p.add_argument("--score-only", action="store_true")
    p.add_argument("--list", action="store_true")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="for scoring")
    args = p.parse_args(argv)
    known = rows()
    if args.list:
        print("\n".join(known))
        sys.exit(0)
    if args.work is None:
        p.error("--work is required")
    for name in args.rows or []:
        if name not in known:
            p.error(f"no row {name!r}: --list names them")
    args.rows = args.rows or known
    return args


def data_option(task: str, args: argparse.Namespace) -> list[str]:
    folder = {"translation": args.data, "parsing": args.ptb, "captioning": args.shapes}[task]
    return ["--data.init_args.data_dir", str(folder.resolve())]


def fit_command(name: str, folder: Path, args: argparse.Namespace) -> list[str]:
    task = name.split("/")[0]
    minutes = int(args.minutes)
    return [sys.executable, "-m", "seqtasks", "fit", "--config",
            str(ROOT / "configs" / f"{name}.yaml"), *data_option(task, args),
            "--trainer.max_time", f"00:{minutes // 60:02d}:{minutes % 60:02d}:00",
            "--trainer.default_root_dir", str(folder), "--trainer.callbacks+=peers_clock.StepClock",
            f"--trainer.callbacks.path={folder / 'steps.json'}"]  # fmt: skip


def train(names: list[str], args: argparse.Namespace) -> None:
    """Fit each row, two at once on a core each with --pairs; fail if one fails."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(BENCH)}  # fmt: skip
    at_once = 2 if args.pairs else 1
    for start in range(0, len(names), at_once):
        children = {}
        for core, name in enumerate(names[start : start + at_once]):
            folder = args.work / name
            folder.mkdir(parents=True, exist_ok=True)
            cmd = fit_command(name, folder, args)
            if args.pairs:
                cmd = ["taskset", "-c", str(core), *cmd]
            with open(folder / "fit.out", "w") as out:
                children[name] = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out,
                                                  stderr=subprocess.STDOUT)  # fmt: skip
            print(f"{name}: training, log in {folder / 'fit.out'}", flush=True)
        for name, child in children.items():
            if child.wait() != 0:
                raise RuntimeError(f"{name}: seqtasks fit failed, see {args.work / name}/fit.out")


def best_checkpoint(folder: Path) -> Path:
    """The checkpoint of the best monitored score (its file name ends in it)."""
    scored = [(float(m[1]), p) for p in folder.glob("**/checkpoints/epoch*.ckpt")
              if (m := METRIC.search(p.name))]  # fmt: skip
    if not scored:
        raise RuntimeError(f"no scored checkpoint under {folder}: did a validation run?")
    return max(scored)[1]


def tokens_per_second(steps: list[list[float]]) -> float:
    """Real target tokens over the steps' own time, leaving out the steps that waited for a
    validation or a checkpoint (over 3x the median step)."""
    spans = [(b[0] - a[0], b[1]) for a, b in zip(steps, steps[1:])]
    usual = 3 * statistics.median(span for span, _ in spans)
    kept = [(span, tokens) for span, tokens in spans if span <= usual]
    return sum(tokens for _, tokens in kept) / sum(span for span, _ in kept)


def by_length(sources: list[str], hypotheses: list[str], references: list[str]) -> dict:
    """sacreBLEU of the sentences whose source has 1–8, 9–12, … words."""
    import sacrebleu

    scores = {}
    for low, high in LENGTHS:
        chosen = [i for i, s in enumerate(sources) if low <= len(s.split()) <= high]
        if chosen:
            hyp, ref = [hypotheses[i] for i in chosen], [references[i] for i in chosen]
            label = f"{low}+" if high > 1000 else f"{low}-{high}"
            scores[label] = {"bleu": sacrebleu.corpus_bleu(hyp, [ref]).score, "n": len(chosen)}
    return scores


def score(name: str, args: argparse.Namespace) -> dict:
    import seqtasks

    task, folder = name.split("/")[0], args.work / name
    checkpoint = best_checkpoint(folder)
    model = seqtasks.load(checkpoint, device="cpu")
    result = {"row": name, "checkpoint": str(checkpoint.relative_to(args.work)),
              "parameters": sum(p.numel() for p in model.task.parameters()),
              "train_tokens_per_s": tokens_per_second(json.loads((folder / "steps.json").read_text()))}  # noqa: E501  # fmt: skip
    evaluate = [sys.executable, "-m", "seqtasks", "evaluate", task, "--checkpoint", str(checkpoint)]
    if task == "translation":
        source, reference = args.data / "test_2016_flickr.de", args.data / "test_2016_flickr.en"
        systems = Systems(Path("/nonexistent"), args.data, folder, args.threads)
        out = folder / "test.beam5.pieces"
        decoded = systems.decode("seqtasks", str(checkpoint), source, out, 5)
        result["bleu"] = bleu(out, reference, args.data / "spm.en.model")
        result["sentences_per_s"] = decoded["sentences_per_s"]
        import sentencepiece as spm

        target = spm.SentencePieceProcessor(model_file=str(args.data / "spm.en.model"))
        hypotheses = [target.decode_pieces(line.split()) for line in out.read_text().splitlines()]
        sources, references = source.read_text().splitlines(), reference.read_text().splitlines()
        result["bleu_by_source_length"] = by_length(sources, hypotheses, references)
    elif task == "parsing":
        gold = args.ptb / "dev.mrg"
        report = run_json([*evaluate, "--gold", str(gold), "--beam", "10", "--json"], args)
        result["dev_f1"] = report["f1"]
    else:
        report = run_json([*evaluate, "--source", str(args.shapes), "--split", "holdout",
                           "--json"], args)  # fmt: skip
        result |= {"exact_match": report.get("exact_match"), "bleu4": report["bleu4"]}
    (folder / "score.json").write_text(json.dumps(result, indent=1))
    return result


def run_json(cmd: list[str], args: argparse.Namespace) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(result: dict) -> str:
    """One table row: name, parameters (M), tokens/s, the task's score(s)."""
    cells = [result["row"], f"{result['parameters'] / 1e6:.1f} M",
             f"{result['train_tokens_per_s']:,.0f}"]  # fmt: skip
    if "bleu" in result:
        lengths = " / ".join(f"{v['bleu']:.1f}" for v in result["bleu_by_source_length"].values())
        cells += [f"{result['bleu']:.2f}", f"{result['sentences_per_s']:.1f}", lengths]
    elif "dev_f1" in result:
        cells += [f"{result['dev_f1']:.2f}"]
    else:
        cells += [f"{result['exact_match']}", f"{result['bleu4']:.2f}"]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    args.work, args.data = args.work.resolve(), args.data.resolve()
    args.ptb, args.shapes = args.ptb.resolve(), args.shapes.resolve()
    if not args.score_only:
        train(args.rows, args)
    results = [score(name, args) for name in args.rows]
    for result in results:
        print(markdown(result), flush=True)
    return results


if __name__ == "__main__":
    main()
