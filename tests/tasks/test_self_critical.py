"""Self-critical sequence training (`tasks.self_critical`): log p of the samples as search
scored them, the two baselines, the gradient's sign, each task's reward, the settings refused
by name, and a fit that starts from a whole trained model."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import sacrebleu
import torch
from conftest import REPO

from seqtasks.captioning.metrics import CiderD, cider_d
from seqtasks.captioning.task import EOS_WORD, CaptioningTask, with_eos
from seqtasks.cli.main import main
from seqtasks.data.tokenizer import BOS_ID, EOS_ID
from seqtasks.decoders import BahdanauDecoder, TransformerDecoder
from seqtasks.encoders import RNNEncoder, TransformerEncoder
from seqtasks.io.checkpoint_files import read_checkpoint
from seqtasks.parsing.data import ParsingData, collate
from seqtasks.parsing.linearisation import linearise
from seqtasks.parsing.scores import sentence_f1
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.trees import read_trees
from seqtasks.search import Hypothesis
from seqtasks.search.by_settings import limits
from seqtasks.search.single_path import sample
from seqtasks.tasks import self_critical
from seqtasks.tasks.self_critical import SelfCritical, self_critical_step, sequence_log_probs
from seqtasks.translation.data import TranslationData
from seqtasks.translation.task import TranslationTask


def translation_task(tokenizers, **settings) -> TranslationTask:
    torch.manual_seed(0)
    src, tgt = tokenizers
    task = TranslationTask(
        encoder=functools.partial(RNNEncoder, embed_dim=16, hidden_size=16, dropout=0.3),
        decoder=functools.partial(BahdanauDecoder, embed_dim=16, hidden_size=32, dropout=0.3),
        src_vocab_size=src.vocab_size,
        tgt_vocab_size=tgt.vocab_size,
        **settings,
    )
    task.set_tokenizers(src, tgt)
    return task


@pytest.fixture(scope="module")
def toy_batch(toy_data_dir):
    data = TranslationData(str(toy_data_dir), max_tokens=400)
    data.setup("fit")
    return next(iter(data.train_dataloader()))


@pytest.fixture(scope="module")
def parsing(ptb_dir):
    data = ParsingData(str(ptb_dir), max_tokens=1024)
    data.setup("fit")
    torch.manual_seed(0)
    layers = {"d_model": 32, "num_heads": 2, "num_layers": 1, "ff_dim": 64, "dropout": 0.0}
    task = ParsingTask(
        functools.partial(TransformerEncoder, **layers),
        functools.partial(TransformerDecoder, **layers),
        data.src_vocab_size,
        data.tgt_vocab_size,
    )
    task.set_vocabulary(data.vocabulary)
    return task.eval(), collate([data.datasets["validate"][i] for i in range(6)])


def stepwise_log_probs(task, memory, drawn, constraint, cut) -> torch.Tensor:
    """log p of each sample by the decoder's own incremental steps, each step's distribution
    renormalised over what the constraint allows: the policy the samples were drawn from."""
    state = task.decoder.start(memory)
    allowed = constraint.start(cut, 1) if constraint is not None else None
    tokens = [h.tokens + [EOS_ID] * h.finished for h in drawn]
    prev, total = torch.full((len(drawn),), BOS_ID), torch.zeros(len(drawn), dtype=torch.float64)
    for t in range(max(map(len, tokens))):
        logits, state, _ = task.decoder.step(prev, state)
        if constraint is not None:
            logits = logits.masked_fill(~constraint.allowed(allowed), float("-inf"))
        chosen = torch.tensor([row[t] if t < len(row) else EOS_ID for row in tokens])
        step = logits.float().log_softmax(-1).gather(1, chosen[:, None])[:, 0]
        total += torch.tensor([float(x) if t < len(row) else 0.0 for x, row in zip(step, tokens)])
        if constraint is not None:
            allowed = constraint.advance(allowed, chosen)
        prev = chosen
    return total.float()


def test_log_p_of_the_samples_is_the_sampling_policys(toy_tokenizers, toy_batch, parsing):
    """One teacher-forced pass gives each sample the log-probability of the policy it was drawn
    from, step by step: without a constraint (translation: what search scored it) and under the
    parser's bracket grammar (renormalised over the tokens it allows)."""
    translator = translation_task(toy_tokenizers).eval()
    parser, trees = parsing
    finished = 0
    for task, batch, grammar in ((translator, toy_batch, False), (parser, trees, True),
                                 (parser, trees, False)):  # fmt: skip
        with torch.no_grad():
            memory = task.encode(batch)
            constraint = task.search_constraint(memory) if grammar else None
            cut = limits(task.decoder, memory, task.test_settings, constraint)
            drawn = [n[0] for n in sample(task.decoder, memory, cut, constraint=constraint,
                                          generator=torch.Generator().manual_seed(1))]  # fmt: skip
            log_p = sequence_log_probs(task.decoder, memory, drawn, constraint, cut)
            reference = stepwise_log_probs(task, memory, drawn, constraint, cut)
        torch.testing.assert_close(log_p, reference, rtol=0, atol=1e-3)
        if constraint is None:  # what search scored them, an EOS's log p included
            scores = torch.tensor([h.score for h in drawn])
            torch.testing.assert_close(log_p, scores, atol=1e-3, rtol=0)
            finished += sum(h.finished for h in drawn)
        else:  # renormalised: likelier than the unconstrained model's log p of the same tokens
            assert all(float(x) > h.score for x, h in zip(log_p, drawn))
    assert finished  # some sample ended with an EOS whose log p counts


real = sequence_log_probs  # the function itself, which a test records calls of


@pytest.mark.parametrize("baseline", ["greedy", "mean"])
def test_the_loss_is_reinforce_with_the_baseline_and_logs_by_hand(
    toy_tokenizers, toy_batch, monkeypatch, baseline
):
    """Rewards of a known function of each output (its length): the step's reward, baseline,
    share better than greedy and loss are those computed here from the same samples."""
    task = translation_task(toy_tokenizers)
    seen = {}

    def rewards(reward, batch, outputs, k):
        seen.setdefault(k, []).append([len(h.tokens) for h in outputs])
        return [float(len(h.tokens)) for h in outputs]

    monkeypatch.setattr(task, "sequence_rewards", rewards)
    logged = []
    monkeypatch.setattr(
        self_critical, "sequence_log_probs",
        lambda *args: logged.append(real(*args)) or logged[-1],
    )  # fmt: skip
    settings = SelfCritical.from_setting({"samples": 3, "baseline": baseline}, task.rewards)
    torch.manual_seed(5)
    step = self_critical_step(task, toy_batch, settings)
    rows = len(toy_batch)
    r = torch.tensor(seen[3][0], dtype=torch.float).view(rows, 3)
    greedy = torch.tensor(seen[1][0], dtype=torch.float).view(rows, 1).expand(rows, 3)
    b = greedy if baseline == "greedy" else (r.sum(1, keepdim=True) - r) / 2
    log_p = logged[0].view(rows, 3)
    assert step.reward == pytest.approx(float(r.mean()))
    assert step.baseline == pytest.approx(float(b.mean()))
    assert step.better == pytest.approx(float((r > greedy).float().mean()))
    assert float(step.loss) == pytest.approx(float(-((r - b) * log_p).mean()), rel=1e-5)
    assert task.training  # the step ran the policy in eval mode and gave training back


def test_training_on_a_reward_makes_its_outputs_likelier(toy_tokenizers, toy_batch, monkeypatch):
    """Reward the share of a chosen token in each output: a few self-critical steps make the
    model write it more (the gradient ascends the reward, not the reverse)."""
    task = translation_task(toy_tokenizers)
    token = 10
    monkeypatch.setattr(
        task, "sequence_rewards",
        lambda reward, batch, outputs, k: [
            h.tokens.count(token) / max(1, len(h.tokens)) for h in outputs
        ],
    )  # fmt: skip
    settings = SelfCritical.from_setting({"samples": 4, "baseline": "mean"}, task.rewards)
    optimiser = torch.optim.Adam(task.parameters(), lr=0.01)
    torch.manual_seed(0)
    rewards = []
    for _ in range(12):
        step = self_critical_step(task, toy_batch, settings)
        optimiser.zero_grad()
        step.loss.backward()
        optimiser.step()
        rewards.append(step.reward)
    assert sum(rewards[-3:]) / 3 > 2 * sum(rewards[:3]) / 3 + 0.05, rewards


def test_each_task_rewards_its_own_metric(toy_tokenizers, toy_batch, parsing):
    translator = translation_task(toy_tokenizers)
    reference = toy_batch.tgt_text[0]
    shorter = " ".join(reference.split()[:-2])  # the reference less its last two words
    outputs = [Hypothesis(translator.tgt_tokenizer.encode(t), 0.0) for t in (reference, shorter)]
    scores = {}
    for reward, metric in (("bleu", sacrebleu.sentence_bleu), ("chrf", sacrebleu.sentence_chrf)):
        scores[reward] = translator.sequence_rewards(reward, toy_batch, outputs, 2)
        texts = [translator.tgt_tokenizer.decode(h.tokens) for h in outputs]
        expected = [metric(t, [reference]).score / 100 for t in texts]
        assert scores[reward] == pytest.approx(expected)
        assert scores[reward][0] > 0.9 > scores[reward][1]
    assert scores["bleu"][1] != pytest.approx(scores["chrf"][1])  # two metrics, not one
    task, batch = parsing
    gold = read_trees(batch.tgt_text[0])[0]
    written = task.vocabulary.target.encode_tree(gold)
    xx = task.vocabulary.target.ids["XX"]  # one bracket around the words: only its own right
    flat = [written[0], *(t for t in written if t == xx), written[-1]]
    rows = [Hypothesis(written, 0.0), Hypothesis(flat, 0.0)]
    scores = task.sequence_rewards("f1", SimpleNamespace(tgt_text=batch.tgt_text[:1]), rows, 2)
    pieces = task.vocabulary.target.pieces
    assert scores == [sentence_f1(batch.tgt_text[0], pieces(h.tokens)) for h in rows]
    assert scores[0] == 1.0 > scores[1]


def test_sentence_f1_against_a_worked_example():
    """Gold (S (NP a) (VP b (NP c))): brackets S[0,3] NP[0,1] VP[1,3] NP[2,3]. The written
    (S (NP a b) (VP c)) has S[0,3] NP[0,2] VP[2,3]: 1 of 3 matched out of 4 gold brackets,
    F1 = 2·1 / (4 + 3) = 2/7 (EVALB counts S too)."""
    gold = "(TOP (S (NP (DT a)) (VP (VB b) (NP (NN c)))))"
    written = ["(S", "(NP", "XX", "XX", ")NP", "(VP", "XX", ")VP", ")S"]
    assert sentence_f1(gold, written) == pytest.approx(2 / 7)
    assert sentence_f1(gold, linearise(read_trees(gold)[0])) == 1.0


def test_captions_are_rewarded_by_cider_d_with_their_eos():
    """CIDEr-D over a corpus equals the mean of its per-caption scores; an EOS word counts in
    the reward: a caption that ended scores higher against references that end."""
    corpus = [["a dog runs on grass", "a brown dog runs"], ["two men play chess"]]
    tokens = [[with_eos(c) for c in refs] for refs in corpus]
    scorer = CiderD(tokens)
    hyps = [with_eos("a dog runs"), with_eos("two men play")]
    assert cider_d(hyps, tokens) == pytest.approx(
        sum(CiderD(tokens).score(h, r) for h, r in zip(hyps, tokens)) / 2
    )
    ended = scorer.score(["a", "dog", "runs", EOS_WORD], tokens[0])
    cut = scorer.score(["a", "dog", "runs"], tokens[0])
    assert ended > cut > 0
    words = ["<pad>", "a", "dog", "runs"]  # the captioner's: a caption that ended, one cut short
    captioner = SimpleNamespace(
        cider_d=scorer,
        tokenizer=SimpleNamespace(decode=lambda ids: " ".join(words[i] for i in ids)),
    )
    outputs = [
        Hypothesis([1, 2, 3], 0.0, finished=True),
        Hypothesis([1, 2, 3], 0.0, finished=False),
    ]
    batch = SimpleNamespace(references=corpus[:1])
    assert CaptioningTask.sequence_rewards(captioner, "cider_d", batch, outputs, 2) == [
        pytest.approx(ended),
        pytest.approx(cut),
    ]


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"reward": "cider_d"}, r"self_critical\.reward 'cider_d': this task rewards bleu or chrf"),
        ({"baseline": "best"}, r"self_critical\.baseline 'best': greedy or mean"),
        ({"baseline": "mean", "samples": 1}, r"self_critical\.samples 1: .* 2 for the mean"),
        ({"sample": 5}, r"self_critical has no 'sample': it takes baseline, cross_entropy"),
        ({"cross_entropy": -1}, r"self_critical\.cross_entropy -1: 0 or more"),
    ],
)
def test_settings_it_cannot_take_are_refused_by_name(toy_tokenizers, setting, said):
    with pytest.raises(ValueError, match=said):
        translation_task(toy_tokenizers, self_critical=setting)
    assert translation_task(toy_tokenizers, self_critical={}).self_critical.reward == "bleu"


def test_the_signature_names_the_reward_as_sacreeos_does():
    captions = SelfCritical.from_setting({"baseline": "mean"}, ("cider_d",))
    assert captions.signature() == "STANDARD_wInit+Cider-D[n4,s6.0]+average[nspi5]+1.0.0"


@pytest.mark.slow
def test_a_self_critical_fit_starts_from_the_whole_trained_model(toy_data_dir, tmp_path, capsys):
    """`pretrained_model`: a 2-step cross-entropy fit, then a self-critical fit from its last
    checkpoint with a rate of 0 ends with its very weights; a model of another task is
    refused in one line before a step."""
    layers = {"d_model": 32, "num_heads": 2, "num_layers": 1, "ff_dim": 64}
    tiny = [
        f"--model.init_args.{part}.init_args.{k}={v}"
        for part in ("encoder", "decoder")
        for k, v in layers.items()
    ]
    common = [
        *("fit", "--config", str(REPO / "configs/translation/transformer.yaml"), *tiny),
        f"--data.init_args.data_dir={toy_data_dir}",
        "--data.init_args.max_tokens=512",
        "--trainer.max_steps=2",
        "--trainer.val_check_interval=2",
        "--trainer.limit_val_batches=1",
    ]
    main([*common, f"--trainer.default_root_dir={tmp_path / 'xe'}"])
    (start,) = (tmp_path / "xe").rglob("last.ckpt")
    main(
        [
            *common[:2],
            str(REPO / "configs/translation/transformer_scst.yaml"),
            *common[3:],
            f"--model.init_args.pretrained_model={start}",
            "--model.init_args.optimizer.init_args.lr=0",
            "--model.init_args.optimizer.init_args.weight_decay=0",
            f"--trainer.default_root_dir={tmp_path / 'scst'}",
        ]
    )
    (end,) = (tmp_path / "scst").rglob("last.ckpt")
    before, after = (read_checkpoint(p)["state_dict"] for p in (start, end))
    assert set(before) == set(after) and all(before[k].equal(after[k]) for k in before)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*common, f"--model.init_args.pretrained_model={REPO / 'nothing.ckpt'}",
              f"--trainer.default_root_dir={tmp_path / 'bad'}"])  # fmt: skip
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: model.init_args.pretrained_model {REPO / 'nothing.ckpt'}:")
