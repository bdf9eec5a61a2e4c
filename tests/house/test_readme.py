"""The README runs as written: its `bash` and `python` blocks, in order, in a fresh copy of the
checkout beside a link to ../shared, with only the shortening the README's "Development"
section documents (`SHORTENING` below). A block that fails names itself and its output. Its
blocks come in an order a newcomer can follow, whichever quick start they take."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO
from mutants import copy_tree

BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)
FIT_STEPS = "--trainer.max_steps 5 --trainer.limit_val_batches 2"
SHAPES = " ".join(
    f"--data.init_args.counts.{split} {count}"
    for split, count in {"train": 64, "val": 16, "test": 16, "holdout": 16}.items()
)
# (pattern, replacement): each documented in the README's "Development" section.
SHORTENING = [
    (r"\bpip install ", "pip install --no-deps "),
    (r"(seqtasks fit --config configs/captioning/shapes\S*)", rf"\1 {SHAPES}"),
    (r"(seqtasks fit --config \S+)", rf"\1 {FIT_STEPS}"),
    (r"(seqtasks test --config \S+)", r"\1 --trainer.limit_test_batches 2"),
    (r"data/multi30k/test_2016_flickr\.(de|en)", r"short/test.\1"),
    (r"--gold data/ptb/dev\.mrg", "--gold short/dev.mrg"),
]
# After the data_prep line that writes them, the heads that the shortened commands read.
HEADS = {
    "data_prep/multi30k.py": "mkdir -p short && for l in de en; do "
    "head -n 40 data/multi30k/test_2016_flickr.$l > short/test.$l; done",
    "data_prep/ptb.py": "mkdir -p short && head -n 40 data/ptb/dev.mrg > short/dev.mrg",
}


# The quick start for a machine without a GPU installs PyTorch from PyTorch's own CPU index,
# which cannot be reached from the machines these tests run on (only PyPI can): that block is
# not run. The rest of its one command is the other quick start's, which runs, and
# `test_the_blocks_come_in_an_order_a_newcomer_can_follow` holds the two to each other.
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
CPU_TORCH = f"pip install torch torchvision {CPU_INDEX}"


def readme_blocks(text: str) -> list[tuple[str, str]]:
    """The README's (language, code) blocks in order, without those that run the tests or the
    benchmarks (`pytest`, `make …`) and the one that installs PyTorch from its CPU index."""
    return [
        (language, code)
        for language, code in BLOCK.findall(text)
        if "pytest" not in code and not code.startswith("make ") and CPU_INDEX not in code
    ]


def shortened(code: str, port: int) -> str:
    """`code` with the README's documented shortening; after a data_prep line, the heads of the
    files it wrote that the shortened commands read."""
    lines = []
    for line in code.splitlines():
        for pattern, replacement in SHORTENING:
            line = re.sub(pattern, replacement, line)
        lines.append(line.replace("8000", str(port)))
        lines += [heads for script, heads in HEADS.items() if script in line]
    return "\n".join(lines) + "\n"


def script(blocks: list[tuple[str, str]], port: int) -> str:
    """One bash script that runs every block in order, announcing each, and stops at the first
    that fails (bash blocks as they are, python blocks through `python -`)."""
    lines = ["set -euo pipefail"]
    for number, (language, code) in enumerate(blocks, 1):
        announce = shlex.quote(f"=== README block {number} ({language}) at ")
        lines.append(f'echo {announce}"${{SECONDS}}s" >&2')
        code = shortened(code, port)
        lines.append(f"python - <<'PYTHON'\n{code}PYTHON" if language == "python" else code)
    lines.append('echo "=== README done at ${SECONDS}s" >&2')
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fresh_copy(folder: Path, shared_data: Path) -> Path:
    """The checkout's tracked files in a fresh folder beside ../shared/data (`mutants.
    copy_tree`), committed to a git repository of its own (to see what the README leaves
    behind), and in the copy a `.venv` that finds this environment's dependencies (the README's
    `pip install --no-deps` installs seqtasks)."""
    checkout = copy_tree(folder, shared_data, untracked=False)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run([*git, *command], cwd=checkout, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(checkout / ".venv")], check=True)
    site = next((checkout / ".venv" / "lib").glob("python*/site-packages"))
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return checkout


def test_shortening_changes_only_what_the_readme_says():
    code = (
        "seqtasks fit --config configs/captioning/shapes_soft.yaml\n"
        "seqtasks test --config a.yaml --ckpt_path $CKPT\n"
        "pip install '.[serve]' && curl localhost:8000/health\n"
        "python data_prep/ptb.py --out data/ptb\n"
    )
    lines = shortened(code, 1234).splitlines()
    shapes = "seqtasks fit --config configs/captioning/shapes_soft.yaml"
    assert lines[0] == f"{shapes} {FIT_STEPS} {SHAPES}"
    test = "seqtasks test --config a.yaml --trainer.limit_test_batches 2 --ckpt_path $CKPT"
    assert lines[1] == test
    assert lines[2] == "pip install --no-deps '.[serve]' && curl localhost:1234/health"
    assert lines[3:] == ["python data_prep/ptb.py --out data/ptb", HEADS["data_prep/ptb.py"]]
    blocks = readme_blocks(
        "```bash\npip install -e .\npytest\n```\n```python\nprint(1)\n```\n"
        "```bash\nmake test   # the suite\n```\n"
        f"```bash\n{CPU_TORCH} && pip install .\n```\n"
    )
    assert blocks == [("python", "print(1)\n")]


@pytest.mark.slow
def test_readme_blocks_run_in_order_as_written(tmp_path, shared_data):
    blocks = readme_blocks((REPO / "README.md").read_text())
    assert blocks[0] == ("bash", QUICK_START + "\n")  # the quick start with PyPI's PyTorch
    checkout = fresh_copy(tmp_path, shared_data)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(  # the README's own `.venv`, not this one, once activated
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix)
    )
    run = subprocess.run(
        ["bash", "-c", script(blocks, free_port())],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    announced = re.findall(r"=== README block (\d+ \(\w+\))", run.stderr)
    where = f"README block {announced[-1] if announced else '?'} failed"
    assert run.returncode == 0, f"{where}:\n{run.stdout[-4000:]}\n{run.stderr[-6000:]}"
    print("\n".join(line for line in run.stderr.splitlines() if line.startswith("=== README")))
    assert "=== README done" in run.stderr
    # What the README says the blocks leave behind.
    dates = checkout / "runs/dates/lightning_logs/version_0"
    assert (dates / "attention/example0.png").is_file()
    assert (dates / "checkpoints/last.ckpt").is_file() and (dates / "config.yaml").is_file()
    assert len(list((dates / "checkpoints").glob("epoch*.ckpt"))) == 1  # the best, beside last
    assert "test/bleu" in run.stdout + run.stderr  # `seqtasks test` printed its score
    assert (checkout / "runs/de-en-ct2/model.bin").is_file()
    assert (checkout / "models/de-en/model.safetensors").is_file()
    assert any((checkout / "runs/maps").iterdir())
    assert len((checkout / "runs/predicted.mrg").read_text().splitlines()) == 40
    # Following the README leaves the checkout as git sees it (every output ignored), but for
    # the test's own shortened files.
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True
    ).stdout.splitlines()
    assert status == ["?? short/"], status
    seqtasks_file = subprocess.run(
        [str(checkout / ".venv/bin/python"), "-c", "import seqtasks; print(seqtasks.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the serving block's `pip install -e`, like the tests': an editable install of the checkout
    assert seqtasks_file.strip() == str(checkout / "seqtasks" / "__init__.py")


VENV = "python3 -m venv .venv && . .venv/bin/activate"
QUICK_START = f"{VENV} && pip install . && seqtasks fit --config configs/translation/dates.yaml"


def test_the_blocks_come_in_an_order_a_newcomer_can_follow():
    """Two quick starts, each one command: first the one for a machine without a GPU, which
    installs PyTorch's CPU build before `pip install .` (run after the other, it would change
    nothing: pip keeps the PyTorch it has), then the same without it; then the tests, in that
    environment, as CI runs them; and no later block replaces their editable install with a
    copy (`pip install '.[serve]'` did)."""
    text = (REPO / "README.md").read_text()
    blocks = [code for _, code in BLOCK.findall(text)]
    cpu, default, tests = blocks[:3]
    assert default == QUICK_START + "\n"
    assert cpu == QUICK_START.replace("pip install .", f"{CPU_TORCH} && pip install .") + "\n"
    commands = cpu.strip().split(" && ")
    assert commands.index(CPU_TORCH) < commands.index("pip install .")
    assert "\n" not in cpu.strip() and ";" not in cpu  # one command, stopping at a failure
    assert tests == f"{VENV} && pip install -e '.[dev]' && python -m pytest -n auto\n"
    ci = (REPO / ".ci/run").read_text().replace("pip install -q ", "pip install ")
    assert tests in ci, "the tests block is the command .ci/run runs"
    later = text[text.index(tests) + len(tests) :]
    installs = re.findall(r"pip install ([^`\n]*)", later)
    checkout = [line for line in installs if re.search(r"(^| )'?\.(\[|'| |$)", line)]
    assert checkout and all(line.startswith("-e ") for line in checkout), checkout
