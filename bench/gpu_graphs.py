"""Translation decoding with and without CUDA graphs (`SearchSettings.cuda_graphs`), in float32
and bf16, through the API the apps use (`seqtasks.load(...).translate`): sentences per second,
and the share of outputs that are float32's without graphs, piece for piece (the reference).

    python bench/gpu_graphs.py --checkpoint BEST.ckpt --src data/multi30k/test_2016_flickr.de

Every variant decodes all sentences once untimed, then `--rounds` times interleaved with the
others; the median is reported. Each call captures its graphs anew (per batch), so their
capture is inside the timed passes. On a CPU the setting changes nothing (it is measured all
the same, as a check of the script).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial
from pathlib import Path

import torch
from gpu_profile import print_summary, profiled
from gpu_train import synchronize
from precision import inference_precision

import seqtasks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="a translation checkpoint or model folder")
    p.add_argument("--src", type=Path, required=True, help="sources, one sentence a line")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    p.add_argument("--precisions", nargs="+", default=["32", "bf16"], choices=["32", "bf16"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="also profile one greedy pass of each variant: tables and traces here",
    )
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args()
    device = torch.device(args.device)
    model = seqtasks.load(args.checkpoint, device=str(device))
    sources = args.src.read_text(encoding="utf-8").splitlines()[: args.sentences]

    def translate(beam: int, precision: str, graphs: bool) -> list[list[str]]:
        settings = model.search_settings(beam=beam).override(cuda_graphs=graphs)
        with inference_precision(device, precision):
            found = model.translate(sources, settings=settings)
        synchronize(device)
        return [t.tokens for t in found]

    results = []
    for beam in args.beams:
        reference = translate(beam, "32", False)  # float32 without graphs
        variants = [
            (precision, graphs) for precision in args.precisions for graphs in (False, True)
        ]
        outputs = {v: translate(beam, *v) for v in variants}  # untimed: warm-up, and compared
        seconds: dict[tuple[str, bool], list[float]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            for v in variants:
                start = time.perf_counter()
                translate(beam, *v)
                seconds[v].append(time.perf_counter() - start)
        for (precision, graphs), times in seconds.items():
            same = sum(a == b for a, b in zip(outputs[precision, graphs], reference, strict=True))
            row = {
                "beam": beam, "precision": precision, "cuda_graphs": graphs,
                "sentences_per_s": len(sources) / statistics.median(times),
                "seconds": times, "same_as_fp32": same / len(sources),
            }  # fmt: skip
            results.append(row)
            print(f"beam {beam}  {precision:>4}  graphs {'on ' if graphs else 'off'}  "
                  f"{row['sentences_per_s']:>10,.1f} sentences/s  "
                  f"outputs as float32's without graphs: {100 * row['same_as_fp32']:.1f} %",
                  flush=True)  # fmt: skip
    if args.profile is not None:  # where each variant's time goes, greedy
        for precision in args.precisions:
            for graphs in (False, True):
                stem = f"greedy_{precision}_graphs_{'on' if graphs else 'off'}"
                run = partial(translate, 1, precision, graphs)
                print_summary(profiled(run, device, args.profile, stem))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{len(sources)} sentences of {args.src}, {name}, torch {torch.__version__}")
    if args.json:
        print(json.dumps({"device": name, "runs": results}))


if __name__ == "__main__":
    main()
