"""`make bench` prepares data/multi30k only where a file of it is missing: the README's
Multi30k block has prepared it by then, and preparing it again took 24 s on the dev machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, load_script

MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="no make on this machine")
PREPARE = "data_prep/multi30k.py --source ../shared/data/multi30k --out data/multi30k"


def dry_run(folder: Path, target: str) -> str:
    """The commands `make TARGET` would run in `folder`, with this checkout's Makefile."""
    command = [MAKE, "-n", "-f", str(REPO / "Makefile"), target]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, check=True).stdout


def test_make_bench_prepares_multi30k_only_where_a_file_of_it_is_missing(tmp_path):
    prep = load_script("data_prep/multi30k.py")
    names = [f"{split}.{lang}" for split in prep.SPLITS for lang in ("de", "en")]
    names += ["spm.de.model", "spm.en.model"]  # what it writes, at its default --langs de en
    benches = [line for line in dry_run(tmp_path, "bench").splitlines() if "bench/" in line]
    assert len(benches) == 4 and PREPARE in dry_run(tmp_path, "bench")
    (tmp_path / "data/multi30k").mkdir(parents=True)
    for name in names:
        (tmp_path / "data/multi30k" / name).write_text("")
    assert PREPARE not in dry_run(tmp_path, "bench")
    assert [line for line in dry_run(tmp_path, "bench").splitlines() if "bench/" in line] == benches
    for name in names:
        (tmp_path / "data/multi30k" / name).rename(tmp_path / name)
        assert PREPARE in dry_run(tmp_path, "bench"), f"{name} missing"
        (tmp_path / name).rename(tmp_path / "data/multi30k" / name)
