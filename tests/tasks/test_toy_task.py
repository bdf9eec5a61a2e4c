"""A task added the way docs/architecture.md says: a package of its own that declares itself
(`TASK = TaskEntry(...)` in its `__init__.py`) and is found by an entry point, with no line of
seqtasks changed. The toy task reverses strings of letters; its package, written here into a
folder on PYTHONPATH beside a dist-info that names it, trains with `seqtasks fit`, answers
`seqtasks reverse`, `seqtasks evaluate reversal` and POST /reverse, and `seqtasks.load` gives
its own model class. It builds on translation's classes, as a real task might."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import subprocess_env
from test_serve import Server

pytestmark = pytest.mark.slow

PACKAGE = {
    "__init__.py": '''
"""Reversal: a string of letters in, the same letters backwards out."""

from seqtasks.registry import Command, TaskEntry

TASK = TaskEntry(
    __name__,
    "reversal",
    task=".task.ReversalTask",
    model=".model.Reverser",
    api=("Reverser",),
    data=(".data.ReversalData",),
    command=Command("reverse", "reverse strings of letters, a line each"),
    evaluation=".evaluation",
    endpoint=".endpoint.ReverseEndpoint",
)
''',
    "task.py": """
from seqtasks.translation.task import TranslationTask
from toy_reversal import TASK


class ReversalTask(TranslationTask):
    entry = TASK
""",
    "data.py": """
import random
from pathlib import Path

from seqtasks.data.tokenizer import train_sentencepiece
from seqtasks.translation.data import TranslationData


class ReversalData(TranslationData):
    def __init__(self, data_dir: str, num_train: int = 400, max_tokens: int = 2000):
        path = Path(data_dir)
        if not (path / "spm.out.model").is_file():
            path.mkdir(parents=True, exist_ok=True)
            rng = random.Random(0)
            words = {
                split: ["".join(rng.choices("abcdef", k=rng.randint(1, 6))) for _ in range(n)]
                for split, n in (("train", num_train), ("val", 20), ("test", 20))
            }
            for split, lines in words.items():
                (path / f"{split}.in").write_text("".join(w + "\\n" for w in lines))
                (path / f"{split}.out").write_text("".join(w[::-1] + "\\n" for w in lines))
            for lang in ("in", "out"):
                model = train_sentencepiece(iter(words["train"]), 20, "char")
                (path / f"spm.{lang}.model").write_bytes(model.proto)
        super().__init__(data_dir, src_lang="in", tgt_lang="out", max_tokens=max_tokens,
                         max_length=20, train_split="train", val_split="val", test_split="test")
""",
    "model.py": """
from seqtasks.translation.translator import Translator

__all__ = ["Reverser"]


class Reverser(Translator):
    def reverse(self, strings):
        return [found.text for found in self.translate(strings)]
""",
    "command.py": """
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="seqtasks reverse")
    parser.add_argument("--checkpoint", required=True)
    args = parser.parse_args(argv)
    import seqtasks

    model = seqtasks.load(args.checkpoint, "cpu", task="reversal")
    for text in model.reverse([line.strip() for line in sys.stdin]):
        print(text)
    return 0
""",
    "evaluation.py": '''
"""Exact match of the reversed strings, of a model or of a file of them."""

import json
from pathlib import Path

from seqtasks.cli.arguments import Scored

RUN = ".evaluation.evaluate"  # a small task may score in the module that declares it
HELP = "exact match"
SCORED = Scored("a reversal model", "--said", Path, "reversed strings to score, a line each")
OUTPUT = "write the reversed strings here"


def add_arguments(parser):
    parser.add_argument("--src", required=True, type=Path)


def check(args, error):
    pass


def inputs(args):
    return {"--checkpoint": args.checkpoint, "--src": args.src, "--said": args.said}


def outputs(args):
    return {"--output": args.output}


def evaluate(args):
    import seqtasks

    strings = args.src.read_text().split()
    if args.said:
        said = args.said.read_text().splitlines()
    else:
        said = seqtasks.load(args.checkpoint, args.device, task="reversal").reverse(strings)
    exact = 100.0 * sum(s == w[::-1] for s, w in zip(said, strings)) / len(strings)
    print(f"exact match {exact:.2f} %")
    if args.json:
        print(json.dumps({"exact_match": exact, "strings": len(strings)}))
    return 0
''',
    "endpoint.py": """
from seqtasks.translation.endpoint import TranslateEndpoint


class ReverseEndpoint(TranslateEndpoint):
    path = "/reverse"
    title, prompt, action = "Reversal", "Text to reverse", "Reverse"
""",
}
CONFIG = """
seed_everything: 1
trainer:
  max_steps: 150
  max_epochs: 30
  logger: false
  enable_checkpointing: true
  callbacks: []
  accelerator: cpu
  default_root_dir: {root}
model:
  class_path: toy_reversal.task.ReversalTask
  init_args:
    encoder:
      class_path: seqtasks.encoders.RNNEncoder
      init_args: {{embed_dim: 16, hidden_size: 32, cell: gru, dropout: 0.0}}
    decoder:
      class_path: seqtasks.decoders.BahdanauDecoder
      init_args: {{embed_dim: 16, hidden_size: 32, readout_dim: 32, dropout: 0.0}}
    label_smoothing: 0.0
    optimizer: {{class_path: torch.optim.Adam, init_args: {{lr: 0.01}}}}
    val_beam: 1
    test_beam: 1
data:
  class_path: toy_reversal.data.ReversalData
  init_args: {{data_dir: {data}}}
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A folder holding the toy package and a dist-info whose entry point names it, as
    `pip install` of a package declaring `[project.entry-points."seqtasks.tasks"]` leaves."""
    site = tmp_path_factory.mktemp("site")
    package = site / "toy_reversal"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(text.lstrip())
    info = site / "toy_reversal-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-reversal\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[seqtasks.tasks]\nreversal = toy_reversal\n")
    return site


def on_path(site: Path) -> str:
    """PYTHONPATH with the toy package's folder first (and what it held, e.g. a copy of the
    checkout under test)."""
    return os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])


def run(site: Path, args: list[str], stdin: str = "", cwd: Path | None = None) -> str:
    """`seqtasks ARGS` with the toy package on PYTHONPATH; its standard output."""
    env = subprocess_env() | {"PYTHONPATH": on_path(site)}
    done = subprocess.run(
        [sys.executable, "-m", "seqtasks", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )
    assert done.returncode == 0, f"seqtasks {args[0]}: {done.stderr[-3000:]}"
    return done.stdout


def test_a_task_in_a_package_of_its_own_trains_evaluates_and_serves(
    installed, tmp_path, monkeypatch
):
    site = installed
    listing = run(site, ["--help"])
    assert "reverse    reverse strings of letters, a line each" in listing
    config = tmp_path / "reversal.yaml"
    config.write_text(CONFIG.format(root=tmp_path / "run", data=tmp_path / "data"))
    run(site, ["fit", "--config", str(config)])
    (checkpoint,) = (tmp_path / "run").rglob("*.ckpt")

    strings = (tmp_path / "data" / "test.in").read_text().split()
    said = run(site, ["reverse", "--checkpoint", str(checkpoint)], "\n".join(strings) + "\n")
    reversed_right = sum(s == w[::-1] for s, w in zip(said.split("\n"), strings))
    assert reversed_right >= 15, f"{reversed_right} of {len(strings)} reversed: {said}"

    src = tmp_path / "data" / "test.in"
    report = run(site, ["evaluate", "reversal", "--checkpoint", str(checkpoint), "--src", str(src)]
                 + ["--json", "--device", "cpu"])  # fmt: skip
    scores = json.loads(report.strip().splitlines()[-1])
    assert scores == {"exact_match": 100.0 * reversed_right / len(strings), "strings": 20}
    written = tmp_path / "said.txt"
    written.write_text(said)
    report = run(
        site, ["evaluate", "reversal", "--said", str(written), "--src", str(src), "--json"]
    )
    assert json.loads(report.strip().splitlines()[-1]) == scores  # the file scores as the model

    assert "--checkpoint" in run(site, ["translate", "--help"])  # the built-in tasks stay
    probe = "import seqtasks, sys; m = seqtasks.load(sys.argv[1], 'cpu'); print(type(m).__name__)"
    env = subprocess_env() | {"PYTHONPATH": on_path(site)}
    loaded = subprocess.run(
        [sys.executable, "-c", probe, str(checkpoint)], capture_output=True, text=True, env=env
    )
    assert loaded.stdout.split() == ["Reverser"], loaded.stderr[-2000:]
    stored = torch.load(checkpoint, map_location="cpu", weights_only=False)["seqtasks"]["task"]
    assert stored == "reversal"

    monkeypatch.setenv("PYTHONPATH", on_path(site))  # the server's processes find it too
    server = Server([str(checkpoint)], tmp_path)
    try:
        server.wait_until_healthy()
        status, answer = server.post("/reverse", {"sentences": strings[:3]})
        assert status == 200, answer
        assert [t["text"] for t in answer["results"]] == said.split("\n")[:3]
        status, answer = server.post("/translate", {"sentences": ["abc"]})
        assert status == 404 and "it serves POST /reverse" in answer["detail"]
    finally:
        assert server.stop() == 0, server.output()
