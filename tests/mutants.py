"""Deliberate breakages of the code that decides results, each with the tests that must catch it.

    python tests/mutants.py            # every mutant (about 20 minutes on 2 cores)
    python tests/mutants.py 3 7        # mutants 3 and 7
    python tests/mutants.py --list

Each mutant is one textual change to one file. The tracked files are copied into a temporary
folder (beside a link to ../shared, which the tests read), the named tests are run there once
unbroken (they must pass) and once with the change (at least one must fail), in one process with
PYTHONPATH pointing at the copy, so the checkout others test in is never touched. A mutant that
survives means a result could go wrong without any test noticing: give it a test.
This is not a pytest module (pytest collects `test_*.py` only); docs/testing.md explains it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = [
    Mutant(
        "DDP batch list padded by slicing instead of tiling",
        "seqtasks/data/batching.py",
        "np.resize(numbers, -(-count // world) * world)[rank::world]",
        "numbers[: -(-count // world) * world][rank::world]",
        ("test_batching.py::test_ddp_padding_by_tiling_for_every_world_and_batch_count",),
    ),
    Mutant(
        "Bahdanau's attention queried with s_i instead of s_{i-1} (context recomputed after the "
        "recurrence; teacher forcing still equals step-wise decoding)",
        "seqtasks/decoders/bahdanau.py",
        "        s, hidden = rnn_step(self.rnn, rnn_input, state.hidden)  # (R, H)\n",
        "        s, hidden = rnn_step(self.rnn, rnn_input, state.hidden)  # (R, H)\n"
        "        context, weights = self.attend(s, state)\n",
        ("test_reference_steps.py::test_teacher_forcing_matches_reference",),
    ),
    Mutant(
        "length penalty exponent alpha/2",
        "seqtasks/search/beam.py",
        "return ((5.0 + length) / 6.0) ** alpha",
        "return ((5.0 + length) / 6.0) ** (alpha / 2)",
        ("test_search.py::test_length_penalty_is_wu_et_al",),
    ),
    Mutant(
        "a finished hypothesis' length counted without its EOS",
        "seqtasks/search/beam.py",
        "keep(active[g], row, float(top_scores[g, rank]), t + 1, True)",
        "keep(active[g], row, float(top_scores[g, rank]), t, True)",
        ("test_search.py::test_wide_beam_finds_the_best_normalised_output_by_enumeration",),
    ),
    Mutant(
        "beam states reordered by sorted rows instead of the rows each candidate extends",
        "seqtasks/search/beam.py",
        "rows = (offsets + origin.gather(1, pick)).view(-1)",
        "rows = (offsets + origin.gather(1, pick).sort(dim=1).values).view(-1)",
        ("test_search.py::test_wide_beam_finds_the_best_normalised_output_by_enumeration",),
    ),
    Mutant(
        "the attention padding mask dropped",
        "seqtasks/attention/scores.py",
        '        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))\n',
        "",
        ("test_reference_steps.py::test_attention_matches_reference",),
    ),
    Mutant(
        "scaled dot-product attention without its 1/sqrt(d)",
        "seqtasks/attention/scores.py",
        "keys.transpose(1, 2)) / math.sqrt(query.size(-1))",
        "keys.transpose(1, 2))",
        ("test_reference_steps.py::test_attention_matches_reference",),
    ),
    Mutant(
        "the Transformer's self-attention without its causal mask",
        "seqtasks/attention/multihead.py",
        "is_causal=causal,",
        "is_causal=False,",
        ("test_reference_steps.py",),
    ),
    Mutant(
        "the Transformer decoder's pending beam reorder not composed with a second one",
        "seqtasks/decoders/transformer.py",
        "rows = index if state.rows is None else state.rows.index_select(0, index)",
        "rows = index if state.rows is None else state.rows",
        ("test_contract.py::test_two_reorders_compose_like_one",),
    ),
    Mutant(
        "label smoothing epsilon/2",
        "seqtasks/tasks/objective.py",
        "label_smoothing=label_smoothing,",
        "label_smoothing=label_smoothing / 2,",
        ("test_objective.py::test_label_smoothing_by_hand",),
    ),
    Mutant(
        "the doubly stochastic penalty counts padded source positions",
        "seqtasks/tasks/objective.py",
        "shortfall = ((1 - coverage) ** 2) * source_mask",
        "shortfall = (1 - coverage) ** 2",
        ("test_objective.py",),
    ),
    Mutant(
        "the REINFORCE term's sign flipped",
        "seqtasks/tasks/objective.py",
        "total = total - self.reward_scale * advantage * choices",
        "total = total + self.reward_scale * advantage * choices",
        ("test_objective.py::test_reinforce_estimate_is_unbiased",),
    ),
    Mutant(
        "the REINFORCE baseline updated with the expectation's rows too",
        "seqtasks/tasks/objective.py",
        "0.1 * reward[sampled].mean()",
        "0.1 * reward.mean()",
        (
            "test_objective.py::test_reinforce_by_hand_uses_sampled_examples_and_earlier_batches_only",
        ),
    ),
    Mutant(
        "the REINFORCE baseline started at the first batch's mean",
        "seqtasks/tasks/objective.py",
        "baseline = 0.0 if self.baseline is None else self.baseline",
        "baseline = reward[sampled].mean() if self.baseline is None else self.baseline",
        (
            "test_objective.py::test_reinforce_by_hand_uses_sampled_examples_and_earlier_batches_only",
        ),
    ),
    Mutant(
        "the reward halved",
        "seqtasks/tasks/objective.py",
        "reward = -nll.sum(dim=1).detach()",
        "reward = -nll.sum(dim=1).detach() / 2",
        ("test_objective.py::test_reinforce_estimate_is_unbiased",),
    ),
    Mutant(
        "punctuation deleted by the test tree's own tags",
        "seqtasks/metrics/parseval.py",
        "t = bracketing(test, gold_punctuation if same_words else test_punctuation)",
        "t = bracketing(test, test_punctuation)",
        ("test_parseval.py::test_xx_tagged_gold_trees_score_100",),
    ),
    Mutant(
        "a bracket matched however often the test tree has it (a set, not a multiset)",
        "seqtasks/metrics/parseval.py",
        "matched=sum((g.brackets & t.brackets).values()),",
        "matched=len(set(g.brackets) & set(t.brackets)),",
        ("test_parseval.py",),
    ),
    Mutant(
        "BLEU tokenised 'intl' instead of '13a'",
        "seqtasks/metrics/bleu.py",
        'tokenize: str = "13a",',
        'tokenize: str = "intl",',
        ("test_apps.py::test_evaluate_json_and_length_table",),
    ),
    Mutant(
        "the encoder run twice per validation batch",
        "seqtasks/tasks/translation.py",
        "for nbest in self.search(memory, beam)]",
        "for nbest in self.search(self.encode(batch), beam)]",
        ("test_translation_task.py::test_validation_scores_equal_scores_worked_out_another_way",),
    ),
    Mutant(
        "each caption scored against the batch's first image's references",
        "seqtasks/tasks/captioning.py",
        "                tuple(batch.references[i]),",
        "                tuple(batch.references[0]),",
        ("test_captioning.py::test_validation_scores_what_search_said_about_each_image",),
    ),
    Mutant(
        "the attention bench's colour word read two words before the shape word",
        "bench/shapes_attention.py",
        '"colour word (-1)": -1,',
        '"colour word (-1)": -2,',
        ("test_caption_apps.py::test_bench_shapes_attention_reports_hits_by_word",),
    ),
    Mutant(
        "an attention peak placed at its grid cell's corner instead of its centre",
        "seqtasks/metrics/shapes.py",
        "x = (column + 0.5) * scene.image_size / width",
        "x = column * scene.image_size / width",
        (
            "test_shapes.py::test_attention_hits_and_judgement",
            "test_caption_apps.py::test_bench_shapes_attention_reports_hits_by_word",
        ),
    ),
    Mutant(
        "val/loss divided by sentences instead of target tokens",
        "seqtasks/metrics/split_scores.py",
        '{"loss": sum(record.loss for record in records) / max(tokens, 1)}',
        '{"loss": sum(record.loss for record in records) / max(len(records), 1)}',
        ("test_translation_task.py::test_validation_scores_equal_scores_worked_out_another_way",),
    ),
    Mutant(
        "files written in place instead of through a temporary file",
        "seqtasks/io/files.py",
        "    tmp = path.with_name(_temporary_name(path))\n    try:\n"
        '        with open(tmp, "wb") as f:\n'
        "            yield f\n            f.flush()\n            os.fsync(f.fileno())\n"
        "        tmp.replace(path)\n    finally:\n        tmp.unlink(missing_ok=True)\n",
        '    with open(path, "wb") as f:\n        yield f\n',
        ("test_bad_input.py",),
    ),
    Mutant(
        "an old config's seqtasks.schedules no longer resolves",
        "seqtasks/__init__.py",
        '    "seqtasks.schedules": "seqtasks.training.schedules",\n',
        "",
        ("test_old_checkpoints.py::test_class_paths_of_older_configs_still_resolve",),
    ),
    Mutant(
        "a split's records not de-duplicated by index (DDP's repeated batches counted twice)",
        "seqtasks/metrics/records.py",
        "            unique[record.index] = record",
        "            unique[len(unique)] = record",
        ("test_distributed.py::test_ddp_validation_equals_one_process",),
    ),
    Mutant(
        "the Transformer's attention taken from its first head instead of the heads' mean",
        "seqtasks/attention/multihead.py",
        "weights = alpha.mean(dim=1).reshape(rows, length, -1)",
        "weights = alpha[:, 0].reshape(rows, length, -1)",
        ("test_contract.py::test_attention_has_one_shape_for_every_decoder",),
    ),
    Mutant(
        "an encoder that reads images accepted by a task that gives tokens",
        "seqtasks/tasks/parts.py",
        "if built is not None and built.reads != task.reads:",
        "if built is not None and built.reads != task.reads and False:",
        ("test_matrix.py::test_part_by_part",),
    ),
    Mutant(
        "the objective never asks the decoder for its attention",
        "seqtasks/tasks/objective.py",
        "return bool(self.attention_penalty or self.entropy_weight)",
        "return False",
        ("test_contract.py::test_the_transformer_attention_penalty_acts_on_its_cross_attention",),
    ),
    Mutant(
        "an ensemble averages its members' probabilities instead of their log-probabilities",
        "seqtasks/search/ensemble.py",
        "return log_probs.mean(dim=0), tuple(new for _, new, _ in steps), attention",
        "return log_probs.exp().mean(dim=0).log(), tuple(new for _, new, _ in steps), attention",
        ("test_api.py::test_ensemble_step_is_the_normalised_geometric_mean_of_the_members",),
    ),
    Mutant(
        "an ensemble reorders only its first member's search state",
        "seqtasks/search/ensemble.py",
        "return tuple(member.reorder(own, index) for member, own in zip(self.members, state))",
        "return (self.members[0].reorder(state[0], index), *state[1:])",
        ("test_api.py::test_an_ensemble_of_one_model_twice_is_that_model",),
    ),
    Mutant(
        "the API's n-best alternatives start with the best hypothesis again",
        "seqtasks/api/models.py",
        "return [replace(nbest[0], alternatives=list(nbest[1:])) for nbest in results]",
        "return [replace(nbest[0], alternatives=list(nbest[:-1])) for nbest in results]",
        ("test_api.py::test_translate_equals_the_tasks_search_with_n_best_alternatives",),
    ),
    Mutant(
        "the CTranslate2 export without the embeddings' sqrt(D) scale",
        "seqtasks/export/ctranslate2_spec.py",
        "    spec.scale_embeddings = True",
        "    spec.scale_embeddings = False",
        ("test_export.py::test_plain_greedy_translate_batch_gives_seqtasks_greedy_output",),
    ),
    Mutant(
        "the server batches requests of different beam sizes into one model call",
        "seqtasks/serving/batching.py",
        "groups.setdefault(item.settings, []).append(position)",
        "groups.setdefault(None, []).append(position)",
        ("test_serve.py::test_one_model_call_per_beam_and_each_request_gets_its_own_slice",),
    ),
    Mutant(
        "TensorBoard counts its own version folder instead of joining the CSV logger's",
        "seqtasks/training/loggers.py",
        "        return self.beside.version",
        "        return super().version",
        ("test_logging.py::test_metrics_csv_and_tensorboard_events_share_one_version_folder",),
    ),
    Mutant(
        "a progress line at every step on a non-terminal",
        "seqtasks/training/progress.py",
        "(step % self.every_n_steps == 0 or step >= self._total)",
        "(step % 1 == 0 or step >= self._total)",
        ("test_logging.py::test_without_a_terminal_progress_is_plain_lines_every_n_steps",),
    ),
    Mutant(
        "linear attention's causal parallel form without its lower triangle",
        "seqtasks/attention/linear.py",
        "kernel = (phi_q @ phi_k.transpose(-1, -2)).tril()",
        "kernel = phi_q @ phi_k.transpose(-1, -2)",
        ("test_linear_attention.py::test_causal_parallel_form_is_eq5_over_the_prefix",),
    ),
    Mutant(
        "linear attention's recurrent step ignores beam search's reordering of (M, z)",
        "seqtasks/attention/linear.py",
        "memory, normaliser = memory.index_select(0, rows), normaliser.index_select(0, rows)",
        "pass",
        ("test_linear_attention.py::test_recurrent_form_equals_the_parallel_form_with_reordered_rows",),
    ),
    Mutant(
        "linear attention's feature map elu(x) instead of elu(x) + 1",
        "seqtasks/attention/linear.py",
        "return F.elu(x) + 1.0",
        "return F.elu(x)",
        ("test_linear_attention.py::test_non_causal_form_is_eq5_over_the_real_keys",),
    ),
    Mutant(
        "linear attention lets padded keys into its sums",
        "seqtasks/attention/linear.py",
        "phi_k = phi_k * key_mask[:, None, :, None].to(phi_k.dtype)",
        "phi_k = phi_k",
        ("test_linear_attention.py::test_non_causal_form_is_eq5_over_the_real_keys",),
    ),
    Mutant(
        "the loss watch names the last non-finite loss instead of the first",
        "seqtasks/training/finite.py",
        "first = bad & ~self._bad",
        "first = bad",
        ("test_finite.py::test_the_first_non_finite_loss_is_named_with_its_step_and_batch",),
    ),
    Mutant(
        "batches are never pinned, even for a GPU",
        "seqtasks/data/batch.py",
        'return trainer is not None and trainer.strategy.root_device.type == "cuda"',
        "return False",
        ("test_finite.py::test_batches_are_pinned_only_for_a_cuda_trainer",),
    ),
    Mutant(
        "freed host memory is handed back to the kernel (malloc left as it is)",
        "seqtasks/training/host_memory.py",
        "return mallopt(M_MMAP_THRESHOLD, LARGE) == 1 and ",
        "return True or ",
        ("test_host_memory.py::test_freed_large_tensors_are_reused_without_page_faults",),
    ),
    Mutant(
        "peers' useful FLOPs leave out the backward pass",
        "bench/peers.py",
        "return 3 * flops / tokens",
        "return flops / tokens",
        ("test_bench_peers.py::test_useful_flops_per_token_equal_pytorchs_count_of_a_training_step",),
    ),
    Mutant(
        "peers' tokens/s starts its clock one step late",
        "bench/peers_systems.py",
        "start = steps[warmup - 1][0] if warmup else steps[0][0]",
        "start = steps[warmup][0]",
        ("test_bench_peers.py::test_rate_counts_the_steps_after_the_warmup_from_the_end_of_the_last_warmup_step",),
    ),

    Mutant(
        "the smoothed cross-entropy's gradient without the smoothing's share of every class",
        "seqtasks/layers/cross_entropy.py",
        "block.exp_().sub_(smoothing / vocab)",
        "block.exp_()",
        ("test_cross_entropy.py::test_losses_and_gradients_equal_torchs_cross_entropy",),
    ),
    Mutant(
        "beam search's exact stop waits for K finished hypotheses again",
        "seqtasks/search/beam.py",
        "return not _live_may_win(finished, best_live, (t + 2, max(",
        "return len(finished) >= k and not _live_may_win(finished, best_live, (t + 2, max(",
        ("test_search.py::test_beam_stops_once_no_live_hypothesis_can_change_the_best",),
    ),
    Mutant(
        "beam search's heuristic stop without waiting for K finished",
        "seqtasks/search/beam.py",
        "return len(finished) >= k and not _live_may_win(\n",
        "return not _live_may_win(\n",
        ("test_search.py::test_heuristic_stop_ends_once_k_finished_beat_the_best_live_beam_ending_next",),
    ),
    Mutant(
        "beam search's exact stop judges live beams at the next step's length (heuristically)",
        "seqtasks/search/beam.py",
        "(t + 2, max(limit, t + 2)), alpha",
        "(t + 2, t + 2), alpha",
        (
            "test_search.py::test_heuristic_stop_ends_once_k_finished_beat_the_best_live_beam_ending_next",
            "test_search.py::test_beam_does_not_stop_while_a_live_hypothesis_is_better",
        ),
    ),
]


def copy_tree(destination: Path) -> Path:
    """The tracked (and untracked, not ignored) files in destination/main, ../shared linked."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    root = destination / "main"
    for name in filter(None, files):
        source = REPO / os.fsdecode(name)
        if source.is_file():
            target = root / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (destination / "shared").symlink_to(REPO.parent / "shared")
    return root


def run_tests(root: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_WAIT_POLICY": "PASSIVE"}
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-x", "-q", "--no-header"]
    return subprocess.run(
        [*command, *(f"tests/{t}" for t in tests)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def failed_tests(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("FAILED ")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("numbers", nargs="*", type=int, help="mutants to run (1-based)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    args = parser.parse_args()
    chosen = args.numbers or range(1, len(MUTANTS) + 1)
    if args.list:
        for n in chosen:
            print(f"{n:2d}. {MUTANTS[n - 1].what}: {MUTANTS[n - 1].path}")
        return 0
    survivors = 0
    for n in chosen:
        mutant = MUTANTS[n - 1]
        with tempfile.TemporaryDirectory(prefix="seqtasks-mutant-") as folder:
            root = copy_tree(Path(folder))
            path = root / mutant.path
            text = path.read_text()
            if text.count(mutant.old) != 1:
                print(f"{n:2d}. STALE: {mutant.path} holds its text {text.count(mutant.old)}×")
                survivors += 1
                continue
            clean = run_tests(root, mutant.tests)
            if clean.returncode != 0:
                print(f"{n:2d}. BROKEN: the unmutated tests fail: {failed_tests(clean.stdout)}")
                survivors += 1
                continue
            path.write_text(text.replace(mutant.old, mutant.new))
            broken = run_tests(root, mutant.tests)
            caught = failed_tests(broken.stdout)
            if broken.returncode == 0:
                print(f"{n:2d}. SURVIVED: {mutant.what}")
                survivors += 1
            elif not caught:  # pytest itself failed: the mutant does not even import
                print(
                    f"{n:2d}. ERROR: {mutant.what}\n{broken.stdout[-2000:]}{broken.stderr[-2000:]}"
                )
                survivors += 1
            else:
                print(f"{n:2d}. killed: {mutant.what}\n    by {', '.join(caught)}")
        sys.stdout.flush()
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
