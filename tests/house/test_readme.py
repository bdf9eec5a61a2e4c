"""The README runs as written: its `bash` and `python` blocks, in order, in a fresh copy of the
checkout beside a link to ../shared, with only the shortening the README's "Development"
section documents (`SHORTENING` below). A block that fails names itself and its output."""

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
    (r" --index-url \S+", ""),
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


def readme_blocks(text: str) -> list[tuple[str, str]]:
    """The README's (language, code) blocks in order, without those that run the tests or the
    benchmarks (`pytest`, `make …`)."""
    return [
        (language, code)
        for language, code in BLOCK.findall(text)
        if "pytest" not in code and not code.startswith("make ")
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
    cpu = shortened("pip install torch --index-url https://download.pytorch.org/whl/cpu\n", 1)
    assert cpu == "pip install --no-deps torch\n"
    assert lines[3:] == ["python data_prep/ptb.py --out data/ptb", HEADS["data_prep/ptb.py"]]
    blocks = readme_blocks(
        "```bash\npip install -e .\npytest\n```\n```python\nprint(1)\n```\n"
        "```bash\nmake test   # the suite\n```\n"
    )
    assert blocks == [("python", "print(1)\n")]


@pytest.mark.slow
def test_readme_blocks_run_in_order_as_written(tmp_path, shared_data):
    blocks = readme_blocks((REPO / "README.md").read_text())
    assert blocks[0][0] == "bash" and "pip install ." in blocks[0][1]
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
    assert "site-packages" in seqtasks_file  # `pip install .` put it there, not an editable link
