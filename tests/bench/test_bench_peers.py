"""bench/peers.py's arithmetic: OpenNMT-py's step lines read back, tokens/s over the timed steps,
and useful FLOPs per target token against PyTorch's own FLOP counter on the real model."""

from __future__ import annotations

import sys

import pytest
import torch
from conftest import REPO
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

# Appended, not prepended: bench/ctranslate2.py must not hide the ctranslate2 package.
sys.path.append(str(REPO / "bench"))
from peers import flops_per_token  # noqa: E402
from peers_systems import onmt_steps, rate  # noqa: E402

from seqtasks.decoders import TransformerDecoder  # noqa: E402
from seqtasks.encoders import TransformerEncoder  # noqa: E402

LOG = """\
[2026-11-25 22:10:49,121 INFO] Parsed 2 corpora from -data.
[2026-11-25 22:10:56,816 INFO] Step  1/    5; acc: 0.1; ppl: 6498.6; xent: 8.8; lr: 0.00000; \
sents:     287; bsz: 2870/3985/287; 450/625 tok/s;      6 sec;
[2026-11-25 22:11:00,346 INFO] Step  2/    5; acc: 0.4; ppl: 6347.3; xent: 8.8; lr: 0.00001; \
sents:     230; bsz: 3910/4245/230; 1108/1203 tok/s;     10 sec;
[2026-11-25 22:11:03,820 INFO] Step 10/1000000; acc: 0.2; ppl: 6216.7; xent: 8.7; lr: 0.00001; \
sents:     158; bsz: 4108/ 782/158; 1183/1089 tok/s;     13 sec;
[2026-11-25 22:11:03,900 INFO] Saving checkpoint run/model_step_10.pt
"""


def test_opennmt_step_lines_give_each_steps_time_and_target_tokens():
    steps = onmt_steps(LOG)
    assert [tokens for _, tokens in steps] == [3985, 4245, 782]
    assert steps[1][0] - steps[0][0] == pytest.approx(3.530, abs=1e-6)
    assert steps[2][0] - steps[1][0] == pytest.approx(3.474, abs=1e-6)


def test_rate_counts_the_steps_after_the_warmup_from_the_end_of_the_last_warmup_step():
    steps = [(10.0, 100), (11.0, 200), (13.0, 300), (14.0, 400)]
    assert rate(steps, 1) == pytest.approx((200 + 300 + 400) / (14.0 - 10.0))
    assert rate(steps, 2) == pytest.approx((300 + 400) / (14.0 - 11.0))
    assert rate(steps, 0) == pytest.approx((200 + 300 + 400) / (14.0 - 10.0))
    with pytest.raises(ValueError, match="4 steps timed"):
        rate(steps, 3)


def test_useful_flops_per_token_equal_pytorchs_count_of_a_training_step(tmp_path):
    d, ff, layers, heads, vocab = 16, 32, 2, 2, 50
    pairs = [(6, 4), (3, 8)]  # source and target pieces; the model adds EOS / BOS
    (tmp_path / "train.de.sp").write_text("".join("x " * s + "\n" for s, _ in pairs))
    (tmp_path / "train.en.sp").write_text("".join("y " * t + "\n" for _, t in pairs))
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n  init_args:\n    encoder:\n      init_args:\n"
        f"        {{d_model: {d}, num_heads: {heads}, num_layers: {layers}, ff_dim: {ff}}}\n"
    )
    torch.manual_seed(0)
    settings = dict(d_model=d, num_heads=heads, num_layers=layers, ff_dim=ff, dropout=0.0)
    encoder = TransformerEncoder(40, **settings)
    decoder = TransformerDecoder(vocab, encoder.out_dim, **settings)
    counted, targets = 0, 0
    for s, t in pairs:
        src, tgt = torch.randint(4, 40, (1, s + 1)), torch.randint(4, vocab, (1, t + 1))
        # the math kernel shows the attention's products to the counter (the fused one hides them)
        with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
            memory = encoder(src, torch.ones_like(src, dtype=torch.bool))
            decoder(memory, tgt).logits.sum().backward()
        counted += counter.get_total_flops()
        targets += t + 1
    assert flops_per_token(tmp_path, config, vocab) == pytest.approx(counted / targets, rel=1e-9)
