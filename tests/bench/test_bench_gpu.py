"""bench/gpu.py on the CPU, end to end on a tiny Transformer and a toy corpus: every figure is
reported (null with a reason where a CPU cannot measure it), the tokens it counts are the real
target tokens of the batches it trained on, its FLOPs are those of a hand count of the model's
matrix products, and a second config is compared to the first."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from conftest import REPO, load_script

from seqtasks.data.tokenizer import PAD_ID

CONFIG = str(REPO / "configs/translation/transformer.yaml")
D, FF = 32, 64
TINY = [
    f"--model.init_args.{part}.init_args.{name}={value}"
    for part in ("encoder", "decoder")
    for name, value in (("d_model", D), ("num_heads", 2), ("num_layers", 1), ("ff_dim", FF))
]


def hand_count(batch: int, source: int, target: int, vocab: int) -> int:
    """Forward + backward matmul FLOPs of a one-layer Transformer on a (B, S) source and a
    (B, T) target: 2 per multiply-add, the backward pass twice the forward (a product's
    gradient for each of its two operands), attention over all positions (the math kernel)."""
    b, s, t, d = batch, source, target, D
    encoder = 2 * b * s * (4 * d * d + 2 * d * FF) + 2 * 2 * b * s * s * d
    decoder = (
        2 * b * t * (4 * d * d)  # self-attention: fused Q/K/V, output
        + 2 * b * t * (2 * d * d) + 2 * b * s * (2 * d * d)  # cross: Q and output; K/V of memory
        + 2 * b * t * (2 * d * FF)  # feed-forward
        + 2 * 2 * b * t * t * d + 2 * 2 * b * t * s * d  # QKᵀ and AV, self and cross
        + 2 * b * t * d * vocab  # tied output projection
    )  # fmt: skip
    return 3 * (encoder + decoder)


def test_cpu_run_reports_counts_and_compares(toy_data_dir, capsys):
    bench = load_script("bench/gpu.py")
    threads = torch.get_num_threads()
    argv = ["--config", CONFIG, "--config", f"{CONFIG} --data.init_args.max_tokens 200",
            "--data", str(toy_data_dir), "--max-tokens", "300", "--steps", "2", "--warmup", "1",
            "--split-steps", "2", "--flop-batches", "2", "--sentences", "4", "--beams", "1", "2",
            "--threads", "1", "--matmul-size", "256", "--json", "--", *TINY]  # fmt: skip
    try:
        bench.main(argv)
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["device_type"] == "cpu" and result["host_peak_rss_mb"] > 0
    first, second = result["runs"]
    assert "not measured on cpu" in out and "[1]/[0]" in out

    for run in (first, second):
        assert run["task"] == "translation" and run["precision"] == "32-true"
        train, split = run["train"], run["split"]
        for key in ("tokens_per_s", "examples_per_s", "s_per_step", "loss_first", "loss_last"):
            assert train[key] > 0, key
        assert split["tokens_per_s"] > 0
        assert set(split["ms_per_step"]) == {"data", "forward", "backward", "optimizer"}
        assert abs(sum(split["share"].values()) - 1) < 1e-9
        assert run["matmul"]["dtype"] == "float32" and run["matmul"]["tflops"] > 0
        assert run["matmul_share"] > 0
        assert run["peak_memory_gb"] is None
        assert run["not_measured"]["peak_memory_gb"].startswith("not measured on cpu: ")
        decode = run["decode"]
        assert decode["inputs"] == 4 and not decode["trained"]
        assert set(decode["beams"]) == {"1", "2"}
        for figures in decode["beams"].values():
            assert figures["inputs_per_s"] > 0 and figures["tokens_per_s"] > 0

    # Independently: the same data, batch by batch, in the order the bench drew them.
    for run in (first, second):
        task, datamodule, _, _ = bench.build(CONFIG, run["overrides"], torch.device("cpu"))
        datamodule.setup("fit")
        vocab = datamodule.tgt_tokenizer.vocab_size

        def real(batch) -> int:
            return int((batch.tgt_out != PAD_ID).sum())

        loader = datamodule.train_dataloader()
        assert len(loader) > 5  # all the batches below come from the first epoch
        shapes = list(itertools.islice(loader, 2))  # the FLOP count's batches
        assert run["flops"]["batches"] == [[*b.src.shape, b.tgt_in.size(1)] for b in shapes]
        assert run["flops"]["tokens"] == sum(map(real, shapes))
        assert run["flops"]["flops"] == sum(hand_count(*shape, vocab) for shape in
                                            run["flops"]["batches"])  # fmt: skip
        tokens = [real(b) for b in itertools.islice(loader, 1 + 2 + 2)]  # warm-up, timed, split
        assert run["train"]["tokens"] == sum(tokens[1:3])
        assert run["split"]["tokens"] == sum(tokens[3:5])
    assert second["train"]["mean_batch_tokens"] < first["train"]["mean_batch_tokens"]


def test_padding_beyond_the_longest_sequence_is_not_counted_as_useful_work():
    load_script("bench/gpu.py")  # puts bench/ on the path of its helpers
    import gpu_train

    from seqtasks.data.batch import Batch

    def padded(rows: list[list[int]], length: int) -> torch.Tensor:
        return torch.tensor([row + [PAD_ID] * (length - len(row)) for row in rows])

    src = padded([[5, 6, 2], [7, 2]], 8)  # as if padded to a multiple of 8
    tgt_in, tgt_out = padded([[1, 9], [1, 9, 9]], 8), padded([[9, 2], [9, 9, 2]], 8)
    batch = Batch(src, src != PAD_ID, tgt_in, tgt_out, torch.arange(2), ["a", "b"], ["c", "d"])
    cut = gpu_train.trimmed(batch)
    assert cut.src.shape == cut.src_mask.shape == (2, 3)
    assert torch.equal(cut.tgt_in, tgt_in[:, :3]) and torch.equal(cut.tgt_out, tgt_out[:, :3])
    assert cut.index is batch.index and cut.src_text == ["a", "b"]


def test_the_gpu_session_finds_the_best_checkpoint_in_the_fit_summary(tmp_path, capsys):
    """bench/gpu_session.sh tests and decodes with the checkpoint that `seqtasks fit`'s summary
    names: its own extraction line, run by bash on what `FitSummary` prints (the summary's
    format changed once and the session would have measured an untrained model)."""
    import subprocess
    from types import SimpleNamespace

    from seqtasks.training.callbacks import FitSummary

    path = "/runs/fit/lightning_logs/version_0/checkpoints/step632-bleu38.06.ckpt"
    checkpoint = SimpleNamespace(best_model_path=path, best_model_score=torch.tensor(38.06),
                                 monitor="val/bleu")  # fmt: skip
    summary = FitSummary()
    summary.plots = tmp_path / "no plots"
    summary.on_fit_end(SimpleNamespace(checkpoint_callback=checkpoint, callback_metrics={}), None)
    (tmp_path / "fit.log").write_text("epoch 0  step 2  loss 9.140\n" + capsys.readouterr().out)
    script = (REPO / "bench/gpu_session.sh").read_text().splitlines()
    extraction = next(line.strip() for line in script if line.strip().startswith("BEST=$("))
    found = subprocess.run(
        ["bash", "-c", f'{extraction}; printf %s "$BEST"'], env={"OUT": str(tmp_path)},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert found == path


def test_profile_says_where_a_step_and_a_beam_search_spend_their_time(toy_data_dir, tmp_path):
    """--profile writes, per config, a table and a trace of the training steps and of one pass
    of the widest beam, and their summaries in the JSON: on a CPU the host's self time by kind
    (shares summing to 1, matrix products among them), the top operators by self time, and no
    device busy share, with the reason."""
    import gzip

    bench = load_script("bench/gpu.py")
    threads = torch.get_num_threads()
    folder = tmp_path / "profile"
    argv = ["--config", CONFIG, "--data", str(toy_data_dir), "--max-tokens", "300", "--steps", "1",
            "--warmup", "0", "--split-steps", "1", "--flop-batches", "1", "--sentences", "4",
            "--beams", "1", "2", "--threads", "1", "--matmul-size", "128", "--profile",
            str(folder), "--profile-steps", "2", "--", *TINY]  # fmt: skip
    try:
        result = bench.main(argv)
    finally:
        torch.set_num_threads(threads)
    (run,) = result["runs"]
    train, decode = run["profile"]["train"], run["profile"]["decode"]
    assert (train["name"], train["steps"], decode["name"]) == (
        "0_transformer_train",
        2,
        "0_transformer_beam2",
    )
    assert train["where"] == "host" and train["device_busy_share"] is None
    assert "not measured on cpu" in train["not_measured"]
    assert "matmul" in train["by_kind"] and "matmul" in decode["by_kind"]
    for found in (train, decode):
        assert sum(found["by_kind"].values()) == pytest.approx(1.0, abs=1e-3)
        times = [op["self_ms"] for op in found["top"]]
        assert times and times == sorted(times, reverse=True)
        assert (folder / f"{found['name']}.txt").read_text().count("Self CPU") >= 1
        with gzip.open(folder / f"{found['name']}.json.gz") as trace:
            assert json.load(trace)["traceEvents"]


def test_the_profile_sorts_work_by_kind_and_counts_the_device_busy_once(monkeypatch):
    """Kernel and operator names by kind (the first pattern that matches), and the device's
    busy share as the union of its kernels' and copies' intervals (overlaps counted once, the
    host's events not at all), worked out by hand."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # its neighbours, as bench/gpu.py has them
    profile = load_script("bench/gpu_profile.py")
    names = {
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "matmul",
        "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNN": "matmul",  # cuBLASLt on an H200
        "aten::addmm": "matmul",
        "flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>": "attention",
        "aten::_scaled_dot_product_efficient_attention": "attention",
        "void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>": "element-wise",
        "aten::add_": "element-wise",
        "void multi_tensor_apply_kernel<FusedAdamMathFunctor>": "optimizer",
        "Memcpy HtoD (Pinned -> Device)": "copy/gather",
        "aten::cat": "copy/gather",
        "aten::sigmoid_": "element-wise",
        "aten::topk": "other",
        "aten::native_layer_norm": "norm/softmax",
        "aten::embedding": "other",
    }
    assert {name: profile.kind_of(name) for name in names} == names
    trace = {
        "traceEvents": [
            {"cat": "kernel", "name": "sm90_xmma_gemm", "ts": 0, "dur": 10},
            {"cat": "kernel", "name": "sm90_xmma_gemm", "ts": 5, "dur": 10},  # overlaps: 0-15
            {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 30, "dur": 5},  # 30-35
            {"cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 100},  # the host's
        ]
    }
    assert profile.busy_share(trace, 100.0) == pytest.approx(0.20)
    # device time by kernel, each counted once (not again as the operator that launched it)
    found = profile.summary(profile.device_time(trace), "device")
    assert found["by_kind"] == {"matmul": 0.8, "copy/gather": 0.2}
    assert [(op["name"], op["self_ms"], op["calls"]) for op in found["top"]] == [
        ("sm90_xmma_gemm", 0.02, 2),
        ("Memcpy HtoD", 0.005, 1),
    ]
    assert profile.busy_share({"traceEvents": trace["traceEvents"][3:]}, 100.0) is None


def test_bf16_decoding_says_how_many_outputs_float32_would_give_alike(monkeypatch):
    """In bf16, each beam's figures say the share of outputs that float32 decoding gives piece
    for piece (the bar: outputs equal to fp32's), counted here again through the API, with
    autocast on and off; in float32 there is nothing to compare."""
    import random

    import seqtasks

    monkeypatch.syspath_prepend(str(REPO / "bench"))  # its neighbours, as bench/gpu.py has them
    decode = load_script("bench/gpu_decode.py")
    checkpoint = REPO / "tests/fixtures/pre_redesign/translation_transformer.ckpt"
    rng = random.Random(0)
    months = ["january", "february", "march", "november"]
    inputs = [f"{rng.randint(1, 28)} {rng.choice(months)} {rng.randint(1900, 2030)}"
              for _ in range(40)]  # fmt: skip
    cpu = torch.device("cpu")
    found = decode.measure(checkpoint, "translation", inputs, [1], None, "bf16", cpu)
    model = seqtasks.load(checkpoint, device="cpu")
    float32 = [t.tokens for t in model.translate(inputs, beam=1)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = [t.tokens for t in model.translate(inputs, beam=1)]
    alike = sum(a == b for a, b in zip(float32, bf16)) / len(inputs)
    assert alike < 1.0  # this model's bf16 outputs differ for some of these dates
    assert found["1"]["same_as_fp32"] == pytest.approx(alike)
    assert (
        decode.measure(checkpoint, "translation", inputs[:4], [1], None, "32", cpu)["1"][
            "same_as_fp32"
        ]
        is None
    )
