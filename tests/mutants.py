"""Deliberate breakages of the code that decides results, each with the tests that must catch it.

    python tests/mutants.py            # every mutant (about 20 minutes on 2 cores)
    python tests/mutants.py 3 7        # mutants 3 and 7
    python tests/mutants.py --list

Each mutant is one textual change at one site, named rather than given by path so that code and
tests may move between files and folders. A Python site is the dotted name of the innermost
function or class holding the text (`length_penalty`, `TransformerDecoder.reorder`), or, at
module level, of the assignment holding it (`STAGE_SPLITS`); it is looked up with `ast` in every
`.py` file under seqtasks/, bench/, apps/ and data_prep/, and exactly one definition of that
name must hold the text, exactly once. Any other file's site is its name (`sections.js`), or the end
of its path where the name is not unique, found anywhere in the tree. Only the project's own
files are searched (`project_files`: git's tracked and untracked-not-ignored files), never what
a build, an install or a run left beside them (`pip install .` leaves build/lib/…). A named test
(`test_search.py::test_x[param]`) is the function `test_x` in any `test_*.py` under tests/, the
file named so first where several define it. A site or test not found, or not uniquely, makes
the mutant STALE, with one line saying why (`locate`, `find_test`).

The tracked files are copied into a temporary folder (beside a link to ../shared/data, which the
tests read), the named tests are run there once unbroken (they must pass) and once with the
change (at least one must fail), in one process with PYTHONPATH pointing at the copy, so the
checkout others test in is never touched. A mutant that survives means a result could go wrong
without any test noticing: give it a test.
This is not a pytest module (pytest collects `test_*.py` only); docs/testing.md explains it.
"""

from __future__ import annotations

import argparse
import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where Python sites are looked for, and the names that make a site a file rather than a definition.
SOURCE_FOLDERS = ("seqtasks", "bench", "apps", "data_prep")
FILE_SUFFIXES = {".py", ".js", ".css", ".html", ".sh", ".yaml", ".yml", ".md", ".toml", ".json"}
NOT_SEARCHED = {"__pycache__", "node_modules"}  # and hidden folders (.git, .venv)
# What a build or an install leaves at the tree's top (and *.egg-info anywhere), never searched,
# even where git does not ignore it.
BUILT = {"build", "dist"}


@dataclass(frozen=True)
class Mutant:
    what: str
    site: str  # `Class.method`, `function`, `MODULE_CONSTANT`, or a file's name: `sections.js`
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = [
    Mutant(
        "DDP batch list padded by slicing instead of tiling",
        "TokenBucketSampler._rank_batches",
        "np.resize(numbers, -(-count // world) * world)[rank::world]",
        "numbers[: -(-count // world) * world][rank::world]",
        ("test_batching.py::test_ddp_padding_by_tiling_for_every_world_and_batch_count",),
    ),
    Mutant(
        "Bahdanau's attention queried with s_i instead of s_{i-1} (context recomputed after the "
        "recurrence; teacher forcing still equals step-wise decoding)",
        "BahdanauDecoder._recur",
        "        s = stack.step(torch.cat([embedded, context], dim=-1))  # (R, H)\n",
        "        s = stack.step(torch.cat([embedded, context], dim=-1))  # (R, H)\n"
        "        context, weights = self.attend(stack.top, state)\n",
        ("test_reference_steps.py::test_teacher_forcing_matches_reference",),
    ),
    Mutant(
        "length penalty exponent alpha/2",
        "length_penalty",
        "return ((5.0 + length) / 6.0) ** alpha",
        "return ((5.0 + length) / 6.0) ** (alpha / 2)",
        ("test_search.py::test_length_penalty_is_wu_et_al",),
    ),
    Mutant(
        "a finished hypothesis' length counted without its EOS",
        "beam_search",
        "hit_score = (top_scores[:, :k].double() / lp)",
        "hit_score = (top_scores[:, :k].double() / length_penalty(t, alpha))",
        ("test_search.py::test_wide_beam_finds_the_best_normalised_output_by_enumeration",),
    ),
    Mutant(
        "beam states reordered by sorted rows instead of the rows each candidate extends",
        "beam_search",
        "rows = (offsets + origin.gather(1, pick)).view(-1)",
        "rows = (offsets + origin.gather(1, pick).sort(dim=1).values).view(-1)",
        ("test_search.py::test_wide_beam_finds_the_best_normalised_output_by_enumeration",),
    ),
    Mutant(
        "the attention padding mask dropped",
        "ScoredAttention.attend_heads",
        '        scores = scores.masked_fill(~memory.mask[:, None, :], float("-inf"))\n',
        "",
        ("test_reference_steps.py::test_attention_matches_reference",),
    ),
    Mutant(
        "scaled dot-product attention without its 1/sqrt(d)",
        "ScaledDotAttention.score",
        "keys.transpose(1, 2)) / math.sqrt(query.size(-1))",
        "keys.transpose(1, 2))",
        ("test_reference_steps.py::test_attention_matches_reference",),
    ),
    Mutant(
        "the Transformer's self-attention without its causal mask",
        "SelfAttention.forward",
        "is_causal=causal,",
        "is_causal=False,",
        ("test_reference_steps.py",),
    ),
    Mutant(
        "the Transformer decoder's pending beam reorder not composed with a second one",
        "TransformerDecoder.reorder",
        "rows = index if state.rows is None else state.rows.index_select(0, index)",
        "rows = index if state.rows is None else state.rows",
        ("test_contract.py::test_two_reorders_compose_like_one",),
    ),
    Mutant(
        "label smoothing epsilon/2",
        "Objective.forward",
        "nll = token_nll(output.logits, targets, self.label_smoothing)",
        "nll = token_nll(output.logits, targets, self.label_smoothing / 2)",
        ("test_objective.py::test_label_smoothing_by_hand",),
    ),
    Mutant(
        "the doubly stochastic penalty counts padded source positions",
        "Objective.forward",
        "shortfall = ((1 - coverage) ** 2) * source_mask",
        "shortfall = (1 - coverage) ** 2",
        ("test_objective.py",),
    ),
    Mutant(
        "the REINFORCE term's sign flipped",
        "Objective.forward",
        "total = total - self.reward_scale * advantage * choices",
        "total = total + self.reward_scale * advantage * choices",
        ("test_objective.py::test_reinforce_estimate_is_unbiased",),
    ),
    Mutant(
        "the REINFORCE baseline updated with the expectation's rows too",
        "Objective.forward",
        "0.1 * reward[sampled].mean()",
        "0.1 * reward.mean()",
        (
            "test_objective.py::test_reinforce_by_hand_uses_sampled_examples_and_earlier_batches_only",
        ),
    ),
    Mutant(
        "the REINFORCE baseline started at the first batch's mean",
        "Objective.forward",
        "baseline = 0.0 if self.baseline is None else self.baseline",
        "baseline = reward[sampled].mean() if self.baseline is None else self.baseline",
        (
            "test_objective.py::test_reinforce_by_hand_uses_sampled_examples_and_earlier_batches_only",
        ),
    ),
    Mutant(
        "the reward halved",
        "Objective.forward",
        "reward = -nll.sum(dim=1).detach()",
        "reward = -nll.sum(dim=1).detach() / 2",
        ("test_objective.py::test_reinforce_estimate_is_unbiased",),
    ),
    Mutant(
        "punctuation deleted by the test tree's own tags",
        "score_sentence",
        "t = bracketing(test, gold_punctuation if same_words else test_punctuation)",
        "t = bracketing(test, test_punctuation)",
        ("test_parseval.py::test_xx_tagged_gold_trees_score_100",),
    ),
    Mutant(
        "a bracket matched however often the test tree has it (a set, not a multiset)",
        "score_sentence",
        "matched=sum((g.brackets & t.brackets).values()),",
        "matched=len(set(g.brackets) & set(t.brackets)),",
        ("test_parseval.py",),
    ),
    Mutant(
        "BLEU tokenised 'intl' instead of '13a'",
        "score_corpus",
        'tokenize: str = "13a",',
        'tokenize: str = "intl",',
        ("test_apps.py::test_evaluate_json_and_length_table",),
    ),
    Mutant(
        "the encoder run twice per validation batch",
        "EncoderDecoderTask._evaluate",
        "found = search(self.decoder, memory, settings,",
        "found = search(self.decoder, self.encode(batch), settings,",
        ("test_translation_task.py::test_validation_scores_equal_scores_worked_out_another_way",),
    ),
    Mutant(
        "each caption scored against the batch's first image's references",
        "CaptioningTask.evaluation_records",
        "                tuple(batch.references[i]),",
        "                tuple(batch.references[0]),",
        ("test_captioning.py::test_validation_scores_what_search_said_about_each_image",),
    ),
    Mutant(
        "the attention bench's colour word read two words before the shape word",
        "SHIFTS",
        '"colour word (-1)": -1,',
        '"colour word (-1)": -2,',
        ("test_caption_apps.py::test_bench_shapes_attention_reports_hits_by_word",),
    ),
    Mutant(
        "an attention peak placed at its grid cell's corner instead of its centre",
        "attention_hits",
        "x = (column + 0.5) * scene.image_size / width",
        "x = column * scene.image_size / width",
        (
            "test_shapes.py::test_attention_hits_and_judgement",
            "test_caption_apps.py::test_bench_shapes_attention_reports_hits_by_word",
        ),
    ),
    Mutant(
        "val/loss divided by sentences instead of target tokens",
        "loss_per_token",
        '{"loss": sum(record.loss for record in records) / max(tokens, 1)}',
        '{"loss": sum(record.loss for record in records) / max(len(records), 1)}',
        ("test_translation_task.py::test_validation_scores_equal_scores_worked_out_another_way",),
    ),
    Mutant(
        "files written in place instead of through a temporary file",
        "open_atomic",
        "    tmp = path.with_name(_temporary_name(path))\n    try:\n"
        '        with _naming(path), open(tmp, "wb") as f:\n'
        "            yield f\n            f.flush()\n            os.fsync(f.fileno())\n"
        "        tmp.replace(path)\n    finally:\n        tmp.unlink(missing_ok=True)\n",
        '    with _naming(path), open(path, "wb") as f:\n        yield f\n',
        ("test_bad_input.py",),
    ),
    Mutant(
        "an old config's seqtasks.schedules no longer resolves",
        "MOVED",
        '    "seqtasks.schedules": "seqtasks.training.schedules",\n',
        "",
        ("test_old_checkpoints.py::test_class_paths_of_older_configs_still_resolve",),
    ),
    Mutant(
        "a split's records not de-duplicated by index (DDP's repeated batches counted twice)",
        "RecordMetric.records",
        "            unique[record.index] = record",
        "            unique[len(unique)] = record",
        ("test_distributed.py::test_ddp_validation_equals_one_process",),
    ),
    Mutant(
        "the Transformer's attention taken from its first head instead of the heads' mean",
        "Attention.forward",
        "return context, alpha.mean(dim=1).reshape(rows, length, -1)",
        "return context, alpha[:, 0].reshape(rows, length, -1)",
        ("test_contract.py::test_attention_has_one_shape_for_every_decoder",),
    ),
    Mutant(
        "an encoder that reads images accepted by a task that gives tokens",
        "check_encoder",
        "if built is not None and built.reads != task.reads:",
        "if built is not None and built.reads != task.reads and False:",
        ("test_matrix.py::test_part_by_part",),
    ),
    Mutant(
        "the objective never asks the decoder for its attention",
        "Objective.needs_attention",
        "return bool(self.attention_penalty or self.entropy_weight)",
        "return False",
        ("test_contract.py::test_the_transformer_attention_penalty_acts_on_its_cross_attention",),
    ),
    Mutant(
        "an ensemble averages its members' probabilities instead of their log-probabilities",
        "EnsembleDecoder.step",
        "return log_probs.mean(dim=0), tuple(new for _, new, _ in steps), attention",
        "return log_probs.exp().mean(dim=0).log(), tuple(new for _, new, _ in steps), attention",
        ("test_api.py::test_ensemble_step_is_the_normalised_geometric_mean_of_the_members",),
    ),
    Mutant(
        "an ensemble reorders only its first member's search state",
        "EnsembleDecoder.reorder",
        "return tuple(member.reorder(own, index) for member, own in zip(self.members, state))",
        "return (self.members[0].reorder(state[0], index), *state[1:])",
        ("test_api.py::test_an_ensemble_of_one_model_twice_is_that_model",),
    ),
    Mutant(
        "the API's n-best alternatives start with the best hypothesis again",
        "with_alternatives",
        "    return replace(best, alternatives=others)",
        "    return replace(best, alternatives=list(nbest[:-1]))",
        ("test_api.py::test_translate_equals_the_tasks_search_with_n_best_alternatives",),
    ),
    Mutant(
        "the CTranslate2 export without the embeddings' sqrt(D) scale",
        "_inputs",
        "    spec.scale_embeddings = True",
        "    spec.scale_embeddings = False",
        ("test_export.py::test_plain_greedy_translate_batch_gives_seqtasks_greedy_output",),
    ),
    Mutant(
        "the server batches requests of different beam sizes into one model call",
        "BatchedEndpoint.predict",
        "groups.setdefault(item.group, []).append(position)",
        "groups.setdefault(None, []).append(position)",
        ("test_serve.py::test_one_model_call_per_beam_and_each_request_gets_its_own_slice",),
    ),
    Mutant(
        "TensorBoard counts its own version folder instead of joining the CSV logger's",
        "TensorBoardBeside.version",
        "        return self.beside.version",
        "        return super().version",
        ("test_logging.py::test_metrics_csv_and_tensorboard_events_share_one_version_folder",),
    ),
    Mutant(
        "a progress line at every step on a non-terminal",
        "LineProgress.on_train_batch_end",
        "counted = step % self.every_n_steps == 0 or step >= self._total",
        "counted = step % 1 == 0 or step >= self._total",
        ("test_logging.py::test_without_a_terminal_progress_is_plain_lines_every_n_steps",),
    ),
    Mutant(
        "linear attention's causal parallel form without its lower triangle",
        "LinearSelfAttention.forward",
        "kernel = kernel.tril() if causal else kernel",
        "kernel = kernel",
        ("test_linear_attention.py::test_causal_parallel_form_is_eq5_over_the_prefix",),
    ),
    Mutant(
        "linear attention's recurrent step ignores beam search's reordering of (M, z)",
        "LinearSelfAttention.step",
        "memory, normaliser = memory.index_select(0, rows), normaliser.index_select(0, rows)",
        "pass",
        (
            "test_linear_attention.py::test_recurrent_form_equals_the_parallel_form_with_reordered_rows",
        ),
    ),
    Mutant(
        "linear attention's feature map elu(x) instead of elu(x) + 1",
        "feature_map",
        "return F.elu(x) + 1.0",
        "return F.elu(x)",
        ("test_linear_attention.py::test_non_causal_form_is_eq5_over_the_real_keys",),
    ),
    Mutant(
        "linear attention lets padded keys into its sums",
        "LinearSelfAttention.forward",
        "phi_k = phi_k * key_mask[:, None, :, None].to(phi_k.dtype)",
        "phi_k = phi_k",
        ("test_linear_attention.py::test_non_causal_form_is_eq5_over_the_real_keys",),
    ),
    Mutant(
        "the loss watch names the last non-finite loss instead of the first",
        "LossWatch.observe",
        "first = bad & ~self._bad",
        "first = bad",
        ("test_finite.py::test_the_first_non_finite_loss_is_named_with_its_step_and_batch",),
    ),
    Mutant(
        "batches are never pinned, even for a GPU",
        "pin_for",
        'return trainer is not None and trainer.strategy.root_device.type == "cuda"',
        "return False",
        ("test_finite.py::test_batches_are_pinned_only_for_a_cuda_trainer",),
    ),
    Mutant(
        "freed host memory is handed back to the kernel (malloc left as it is)",
        "keep_freed_memory",
        "return mallopt(M_MMAP_THRESHOLD, LARGE) == 1 and ",
        "return True or ",
        ("test_host_memory.py::test_freed_large_tensors_are_reused_without_page_faults",),
    ),
    Mutant(
        "peers' useful FLOPs leave out the backward pass",
        "flops_per_token",
        "return 3 * flops / tokens",
        "return flops / tokens",
        (
            "test_bench_peers.py::test_useful_flops_per_token_equal_pytorchs_count_of_a_training_step",
        ),
    ),
    Mutant(
        "peers' tokens/s starts its clock one step late",
        "rate",
        "start = steps[warmup - 1][0] if warmup else steps[0][0]",
        "start = steps[warmup][0]",
        (
            "test_bench_peers.py::test_rate_counts_the_steps_after_the_warmup_from_the_end_of_the_last_warmup_step",
        ),
    ),
    Mutant(
        "the smoothed cross-entropy's gradient without the smoothing's share of every class",
        "SmoothedCrossEntropy.backward",
        "block.exp_().sub_(smoothing / vocab)",
        "block.exp_()",
        ("test_cross_entropy.py::test_losses_and_gradients_equal_torchs_cross_entropy",),
    ),
    Mutant(
        "beam search's exact stop waits for K finished hypotheses again",
        "_input_done",
        'return ~may_win if stop == "exact" else',
        'return (groups.count >= k) & ~may_win if stop == "exact" else',
        ("test_search.py::test_beam_stops_once_no_live_hypothesis_can_change_the_best",),
    ),
    Mutant(
        "beam search's heuristic stop without waiting for K finished",
        "_input_done",
        "else (groups.count >= k) & ~may_win",
        "else ~may_win",
        (
            "test_search.py::test_heuristic_stop_ends_once_k_finished_beat_the_best_live_beam_ending_next",
        ),
    ),
    Mutant(
        "beam search's exact stop judges live beams at the next step's length (heuristically)",
        "_input_done",
        "lp = groups.limit_lp.masked_fill(groups.limit < t + 2, next_lp).clamp(min=next_lp)",
        "lp = next_lp",
        (
            "test_search.py::test_heuristic_stop_ends_once_k_finished_beat_the_best_live_beam_ending_next",
            "test_search.py::test_beam_does_not_stop_while_a_live_hypothesis_is_better",
        ),
    ),
    Mutant(
        "an output compared with the inputs by the name given, not the file it is",
        "same_path",
        "        return os.path.samefile(a, b)\n",
        "        return a == b\n",
        ("test_outputs.py::test_an_output_that_is_an_input_by_any_name_is_refused",),
    ),
    Mutant(
        "the apps no longer comparing one output with the one written before it",
        "check_outputs",
        "        written[f\"the {option} {'folder' if option in folders else 'file'}\"] = paths\n",
        "",
        (
            "test_outputs.py::test_translate_refuses_to_write_over_its_input_or_checkpoint",
            "test_outputs.py::test_evaluate_refuses_outputs_over_its_inputs_or_each_other",
        ),
    ),
    Mutant(
        "evaluate.py checking --output as given instead of the files several checkpoints write",
        "outputs",
        "written = output_paths(args.output, names) if args.output else None",
        "written = args.output",
        ("test_outputs.py::test_evaluate_refuses_outputs_over_its_inputs_or_each_other",),
    ),
    Mutant(
        "caption.py writing attention maps without looking for the images they would replace",
        "parse_args",
        "        if path.resolve() in inputs:\n",
        "        if False:\n",
        ("test_outputs.py::test_caption_refuses_to_write_over_an_image",),
    ),
    Mutant(
        "a CUDA device taken on trust when torch sees no GPU",
        "check_device",
        "    if not torch.cuda.is_available():\n        raise DeviceError(",
        "    if False:\n        raise DeviceError(",
        ("test_devices.py",),
    ),
    Mutant(
        "search allowed more steps than the decoder has positions",
        "max_lengths",
        "return limits if most is None else limits.clamp(max=most)",
        "return limits",
        ("test_api.py::test_sources_and_outputs_stay_within_the_positions_a_transformer_has",),
    ),
    Mutant(
        "a source cut at the asked max_length even beyond the encoder's positions",
        "Model.source_limit",
        "return max_length if positions is None else min(max_length, positions - 1)",
        "return max_length",
        ("test_api.py::test_sources_and_outputs_stay_within_the_positions_a_transformer_has",),
    ),
    Mutant(
        "sentences handed to the tokeniser without checking they are valid Unicode",
        "sentences_of",
        '        check_text(sentence, f"sentence {i}")\n    return sentences',
        "        pass\n    return sentences",
        ("test_api.py::test_text_a_tokeniser_cannot_read_is_refused_naming_the_sentence",),
    ),
    Mutant(
        "a parse token holding white space other than a space let through",
        "check_tokens",
        "        if token.split() != [token]:",
        '        if " " in token:',
        ("test_api.py::test_tokens_that_cannot_be_leaves_of_a_tree_are_refused",),
    ),
    Mutant(
        "export: OUT not checked against the checkpoint",
        "prepare_output",
        '{"the checkpoint": checkpoint}, folder=True, replaces=True)',
        '{"the checkpoint": checkpoint.parent / "other"}, folder=True, replaces=True)',
        ("test_export.py::test_refuses_an_out_that_would_replace_the_checkpoint",),
    ),
    Mutant(
        "export: OUT's own folder not checked",
        "prepare_output",
        '            check_output(real.parent, "OUT\'s folder", folder=True)',
        "            pass",
        ("test_export.py::test_refuses_an_out_that_cannot_be_written",),
    ),
    Mutant(
        "export: the staging folders of killed exports not cleaned",
        "clean_interrupted",
        "    remove_stale_temporaries(parent)\n",
        "",
        ("test_export.py::test_staging_of_a_killed_export_is_removed_and_a_running_ones_kept",),
    ),
    Mutant(
        "temporaries of running processes counted stale",
        "stale_temporaries",
        '        if not _running(int(match["pid"])):',
        "        if True:",
        ("test_export.py::test_staging_of_a_killed_export_is_removed_and_a_running_ones_kept",),
    ),
    Mutant(
        "export: an OUT moved aside by a killed export not put back",
        "clean_interrupted",
        "            os.rename(moved[0], parent / moved[0].name)",
        "            pass",
        ("test_export.py::test_out_moved_aside_by_a_killed_export_is_put_back",),
    ),
    Mutant(
        "export: the old OUT removed under its .old name (a half-removed one could come back)",
        "_move_into_place",
        "    os.rename(aside, garbage)\n    shutil.rmtree(garbage, ignore_errors=True)",
        "    shutil.rmtree(aside, ignore_errors=True)",
        ("test_export.py::test_old_out_half_removed_by_a_killed_export_is_never_put_back",),
    ),
    Mutant(
        "export: the old OUT not moved back when the rename into place fails",
        "_move_into_place",
        "            os.rename(aside / out.name, out)\n        except OSError:",
        "            pass\n        except OSError:",
        ("test_export.py::test_failed_rename_into_place_keeps_the_old_out",),
    ),
    Mutant(
        "export: free space not checked before writing",
        "export_ctranslate2",
        "    require_space(folder, folder_size(spec, task))",
        "",
        ("test_export.py::test_refuses_too_little_free_space_before_writing",),
    ),
    Mutant(
        "export: a symlinked OUT not followed to the folder it names",
        "prepare_output",
        "        real = Path(os.path.realpath(out))",
        "        real = Path(os.path.abspath(out))",
        ("test_export.py::test_a_link_to_a_folder_is_followed",),
    ),
    Mutant(
        "export: an OSError while writing left as a traceback",
        "staged_directory",
        "    except OSError as error:\n        raise ExportError(",
        "    except ZeroDivisionError as error:\n        raise ExportError(",
        (
            "test_export.py::test_existing_out_is_replaced_only_with_force_and_never_half_written",
            "test_export.py::test_failed_rename_into_place_keeps_the_old_out",
        ),
    ),
    Mutant(
        "serve: a check that raises unexpectedly let out of decode_request (fails the batch)",
        "BatchedEndpoint.decode_request",
        "        except Exception as error:  # it depends on the request alone",
        "        except RequestError as error:  # it depends on the request alone",
        ("test_serve_requests.py::test_no_request_fails_the_others_whatever_it_makes_fail",),
    ),
    Mutant(
        "serve: non-finite scores written as they are (JSON refuses them)",
        "BatchedEndpoint.encode_response",
        "return JSONResponse(finite(self.respond(output)))",
        "return JSONResponse(self.respond(output))",
        ("test_serve_requests.py::test_no_request_fails_the_others_whatever_it_makes_fail",),
    ),
    Mutant(
        "serve: a model call short of results not retried one request at a time",
        "BatchedEndpoint.predict",
        "                if len(results) != len(inputs):",
        "                if len(results) < 0:",
        ("test_serve_requests.py::test_no_request_fails_the_others_whatever_it_makes_fail",),
    ),
    Mutant(
        "serve: parse tokens that cannot be leaves accepted",
        "ParseRequest.valid_words",
        '            check_tokens(sentence, f"sentence {i}")',
        "            pass",
        (
            "test_serve_requests.py::test_text_no_model_can_read_is_refused_naming_the_sentence_and_token",
        ),
    ),
    Mutant(
        "serve: lone surrogates reach the translator's tokeniser",
        "TranslateRequest.valid_text",
        '            check_text(sentence, f"sentence {i}")\n        return sentences',
        "            pass\n        return sentences",
        (
            "test_serve_requests.py::test_text_no_model_can_read_is_refused_naming_the_sentence_and_token",
            "test_serve.py::test_bad_requests_batched_with_good_ones_fail_alone[lone surrogate]",
        ),
    ),
    Mutant(
        "serve: the 422 echoing a NaN input as it is",
        "short_value",
        "    if isinstance(value, float) and math.isfinite(value):",
        "    if isinstance(value, float):",
        (
            "test_serve_requests.py::test_a_refused_body_is_answered_with_short_json_safe_problems",
            "test_serve_fuzz.py::test_fuzzed_bodies_are_refused_with_a_message_and_never_raise_anything_else",
        ),
    ),
    Mutant(
        "serve: FastAPI's own 422 handler (500 on NaN, bad UTF-8, deep nesting)",
        "install",
        "    app.add_exception_handler(RequestValidationError, validation_error_answer)\n",
        "",
        ("test_serve.py::test_bad_requests_batched_with_good_ones_fail_alone[beam NaN]",),
    ),
    Mutant(
        "serve: a form field given twice, the last one winning",
        "_read_form",
        "        if name in files or name in fields:",
        "        if name in ():",
        (
            "test_serve_requests.py::test_forms_the_mime_parser_reads_loosely_are_refused_saying_why",
            "test_serve.py::test_bad_requests_batched_with_good_ones_fail_alone"
            "[form with beam twice]",
        ),
    ),
    Mutant(
        "serve: a form cut short read as if whole",
        "_read_form",
        "isinstance(defect, CloseBoundaryNotFoundDefect) for defect",
        "isinstance(defect, type(None)) for defect",
        (
            "test_serve_requests.py::test_forms_the_mime_parser_reads_loosely_are_refused_saying_why",
        ),
    ),
    Mutant(
        "serve: form numbers read with str.isdigit (int('²') raises)",
        "form_settings",
        "int(v) if NUMBER.fullmatch(v) else v",
        "int(v) if v.isdigit() else v",
        (
            "test_serve_requests.py::test_form_numbers_must_be_ascii_digits",
            "test_serve_fuzz.py::test_fuzzed_bodies_are_refused_with_a_message_and_never_raise_anything_else",
        ),
    ),
    Mutant(
        "serve: the pixel limit not applied before decoding",
        "read_image",
        "    if pixels is not None and pixels > max_pixels:",
        "    if pixels is not None and pixels > 100 * max_pixels:",
        (
            "test_serve_requests.py::test_images_are_refused_by_size_before_decoding_and_by_reason_after",
        ),
    ),
    Mutant(
        "serve: only OSError from Pillow taken as the image's 422",
        "read_image",
        '    except Exception as error:  # OSError "cannot',
        '    except OSError as error:  # OSError "cannot',
        (
            "test_serve_requests.py::test_an_image_pillow_fails_on_in_an_unexpected_way_is_still_that_requests_422",
        ),
    ),
    Mutant(
        "serve: serving once any worker is ready",
        "wait_for_workers",
        "        if states and all(state == WorkerSetupStatus.READY for state in states):",
        "        if states and any(state == WorkerSetupStatus.READY for state in states):",
        (
            "test_serve_requests.py::test_the_server_waits_for_every_worker_and_ends_with_a_failed_ones_reason",
        ),
    ),
    Mutant(
        "serve: LitServe's own worker check at start-up (hangs, or serves with a worker down)",
        "CheckedServer.verify_worker_status",
        "            wait_for_workers(self.workers_setup_status,",
        "            return super().verify_worker_status()\n"
        "            wait_for_workers(self.workers_setup_status,",
        ("test_serve.py::test_a_worker_that_cannot_set_up_ends_the_server_with_its_reason",),
    ),
    Mutant(
        "serve: --max-length allowed to fill the positional table (no room for EOS)",
        "ModelEndpoint.check_positions",
        "        if positions is not None and self.limits.max_length > positions - 1:",
        "        if positions is not None and self.limits.max_length > positions:",
        (
            "test_serve_requests.py::test_a_max_length_over_what_the_encoder_reads_is_refused_naming_both",
        ),
    ),
    Mutant(
        "serve: the device not checked in the command (hangs without a GPU)",
        "main",
        "        check_device(settings.device)\n",
        "",
        ("test_serve_requests.py::test_a_gpu_that_is_not_here_is_refused_before_anything_starts",),
    ),
    Mutant(
        "evaluate.py captioning ending without its scores when the baseline cannot be scored",
        "evaluate",
        '            unscored = fail(f"nearest-neighbour baseline: {error}; the model',
        '            return fail(f"nearest-neighbour baseline: {error}; the model',
        (
            "test_caption_apps.py::"
            "test_a_baseline_that_cannot_be_scored_leaves_the_models_scores_and_captions",
        ),
    ),
    Mutant(
        "a checkpoint of another model loaded without comparing names and shapes",
        "check_weights",
        "    if difference is not None:\n        raise CheckpointError(message)",
        "    if False:\n        raise CheckpointError(message)",
        (
            "test_fit_checks.py::test_a_checkpoint_of_another_model_is_refused_naming_the_first_difference",
        ),
    ),
    Mutant(
        "a resume into another optimiser or schedule let through",
        "check_resumable",
        "    if difference is not None:\n        raise CheckpointError(\n",
        "    if False:\n        raise CheckpointError(\n",
        (
            "test_fit_checks.py::test_resuming_into_another_optimiser_or_schedule_is_refused_naming_it",
        ),
    ),
    Mutant(
        "LightningCLI reading the model's settings from --ckpt_path over the config's again",
        "SeqtasksCLI",
        "                _exit_with(str(error))\n\n    def _run_subcommand",
        "                _exit_with(str(error))\n        super()._parse_ckpt_path()\n\n"
        "    def _run_subcommand",
        (
            "test_fit_checks.py::test_ckpt_path_file_keeps_the_settings_the_command_line_gives",
            "test_fit_checks.py::test_a_checkpoint_of_another_model_is_refused_naming_the_first_difference",
        ),
    ),
    Mutant(
        "--ckpt_path best left to Lightning (a traceback in a new process)",
        "SeqtasksCLI._before_run",
        '        elif restored == "best":',
        "        elif False:",
        ("test_fit_checks.py::test_ckpt_path_best_is_the_best_of_the_newest_run",),
    ),
    Mutant(
        "the run's folders not checked before it starts",
        "check_run_outputs",
        "        check_output(folder, key, folder=True)",
        "        pass",
        ("test_fit_checks.py::test_a_place_the_run_cannot_write_is_refused_before_training",),
    ),
    Mutant(
        "a prediction file not compared with the data's files",
        "check_run_outputs",
        "            check_output(output, key, inputs)",
        "            check_output(output, key)",
        (
            "test_fit_checks.py::test_a_prediction_file_that_would_replace_an_input_or_cannot_be_written_is_refused",
        ),
    ),
    Mutant(
        "--ckpt_path not among the inputs a prediction file must not replace",
        "check_run_outputs",
        '        inputs["--ckpt_path"] = ckpt_path',
        "        pass",
        (
            "test_fit_checks.py::test_a_prediction_file_that_would_replace_an_input_or_cannot_be_written_is_refused",
        ),
    ),
    Mutant(
        "the accelerator and devices left to Lightning",
        "SeqtasksCLI.instantiate_trainer",
        '            check_accelerator(trainer.get("accelerator"), trainer.get("devices"))',
        "            pass",
        (
            "test_fit_checks.py::test_devices_that_are_not_here_are_refused_naming_them",
            "test_fit_checks.py::test_more_gpus_than_there_are_are_refused",
        ),
    ),
    Mutant(
        "more GPUs asked for than torch sees let through",
        "_check_gpus",
        "        if requested > count:",
        "        if requested > count + 8:",
        ("test_fit_checks.py::test_more_gpus_than_there_are_are_refused",),
    ),
    Mutant(
        "a model's positions not checked against the data",
        "EncoderDecoderTask.configure_model",
        "            check_positions(self.encoder, self.decoder, trainer.datamodule, stage)",
        "            pass",
        (
            "test_fit_checks.py::test_a_transformer_too_short_for_the_training_data_is_refused_by_the_position_it_needs",
            "test_fit_checks.py::test_evaluation_splits_kept_whole_count_too",
        ),
    ),
    Mutant(
        "positions counted without EOS/BOS",
        "check_positions",
        "            if limit is None or tokens + 1 <= limit:",
        "            if limit is None or tokens <= limit:",
        (
            "test_fit_checks.py::test_a_transformer_too_short_for_the_training_data_is_refused_by_the_position_it_needs",
        ),
    ),
    Mutant(
        "fit checking the training split's lengths alone",
        "STAGE_SPLITS",
        'STAGE_SPLITS = {"fit": ("fit", "validate"),',
        'STAGE_SPLITS = {"fit": ("fit",),',
        ("test_fit_checks.py::test_evaluation_splits_kept_whole_count_too",),
    ),
    Mutant(
        "an explicit --ckpt_path checked only if it is a file",
        "SeqtasksCLI._parse_ckpt_path",
        "        if _local(ckpt_path):",
        "        if _local(ckpt_path) and os.path.isfile(ckpt_path):",
        (
            "test_fit_checks.py::test_a_ckpt_path_that_is_no_file_is_refused_before_anything_is_built",
        ),
    ),
    Mutant(
        "Lightning's misconfiguration of a run left as a traceback",
        "SeqtasksCLI._run_subcommand",
        "        except (PositionsError, MisconfigurationException) as error:",
        "        except PositionsError as error:",
        ("test_fit_checks.py::test_resuming_past_max_epochs_is_one_line",),
    ),
    Mutant(
        "parameter groups of a resume not counted",
        "training_difference",
        "        if len(saved_groups) != len(groups):",
        "        if False:",
        (
            "test_fit_checks.py::test_resuming_into_another_optimiser_or_schedule_is_refused_naming_it",
        ),
    ),
    Mutant(
        "learning-rate schedulers of a resume not compared",
        "training_difference",
        '    if saved["schedulers"] != len(names) or (saved["lr_scheduler"] and before != now):',
        "    if False:",
        (
            "test_fit_checks.py::test_resuming_into_another_optimiser_or_schedule_is_refused_naming_it",
        ),
    ),
    Mutant(
        "a model a trainer restores described as built from its hyperparameters",
        "CheckpointHooks.load_state_dict",
        "from_config=self._trainer is not None",
        "from_config=False",
        (
            "test_fit_checks.py::test_a_checkpoint_of_another_model_is_refused_naming_the_first_difference",
        ),
    ),
    Mutant(
        "export: the model folder left readable by its owner alone (mkdtemp's mode)",
        "temporary_folder",
        "    folder.chmod(0o777 & ~_umask())",
        "    pass",
        ("test_export.py::test_folder_holds_vocabularies_tokenisers_and_metadata",),
    ),
    Mutant(
        "an atomic write renaming a file over a pipe or device instead of writing into it",
        "open_atomic",
        "    if path.exists() and not path.is_file() and not path.is_dir():\n"
        "        with _naming(path), open(",
        "    if False:\n        with _naming(path), open(",
        (
            "test_outputs.py::test_writing_goes_through_a_link_and_into_a_pipe_without_replacing_them",
        ),
    ),
    Mutant(
        "a parse sentence longer than a Transformer encoder reads handed to the model",
        "Parser.parse",
        "            if self.max_words is not None and len(ids) > self.max_words:",
        "            if False:",
        (
            "test_api.py::"
            "test_a_sentence_longer_than_a_transformer_parser_reads_is_refused_or_skipped",
        ),
    ),
    # ---- issue 29: the GPU paths (each checked on the CPU) -----------------------------------
    Mutant(
        "a fused optimiser's gradients left unclipped where nothing scales them",
        "clip_gradients",
        "    if not value or scaler is not None or not fused:",
        "    if not value or scaler is not None or fused:",
        ("test_clipping.py::test_a_fused_optimiser_is_clipped_to_the_norm_without_a_scaler",),
    ),
    Mutant(
        "lengths rounded down to the multiple instead of up",
        "Padding.lengths",
        "rounded = -(-lengths // self.multiple) * self.multiple",
        "rounded = lengths // self.multiple * self.multiple",
        ("test_batching.py::test_padding_rounds_to_the_multiple_or_the_first_bucket_that_holds",),
    ),
    Mutant(
        "a padded vocabulary's logits not cut back to V",
        "TransformerDecoder.logits",
        "            logits = logits[..., : self.vocab_size]",
        "            pass",
        (
            "test_gpu_training.py::"
            "test_a_vocabulary_padded_to_64_rows_is_seen_as_v_outside_the_decoder",
        ),
    ),
    Mutant(
        "the same inter-layer dropout mask at every step of a cell stack",
        "CellStack.step",
        "                x = x * self.masks[layer][self.t]  # dropout between layers",
        "                x = x * self.masks[layer][0]  # dropout between layers",
        ("test_rnn_paths.py::test_cell_stack_dropout_is_fresh_every_step_at_its_rate",),
    ),
    Mutant(
        "a cell stack's layer state not carried to the next step",
        "CellStack.step",
        "            self.states[layer] = state\n",
        "            self.states[layer] = state if layer == 0 else self.states[layer]\n",
        ("test_rnn_paths.py::test_cell_stack_equals_the_module_over_a_sequence",),
    ),
    Mutant(
        "greedy's scores summed in float32",
        "_read_back",
        "sums = F.pad(log_probs.double().cumsum(1), (1, 0))",
        "sums = F.pad(log_probs.float().cumsum(1), (1, 0))",
        ("test_search_equivalence.py::test_greedy_equals_the_reference",),
    ),
    Mutant(
        "the decoding budget on a GPU not capped at 64,000 tokens",
        "batch_tokens",
        "    return int(min(max(MEMORY_SHARE * free / per_token, FEWEST_TOKENS), MOST_TOKENS))",
        "    return int(max(MEMORY_SHARE * free / per_token, FEWEST_TOKENS))",
        ("test_decode_budget.py::test_auto_on_a_gpu_follows_the_free_memory_within_bounds",),
    ),
    Mutant(
        "bench/gpu.py counting padded target positions as trained tokens",
        "Step.load",
        "        tokens, examples = int((batch.tgt_out != PAD_ID).sum()), len(batch)",
        "        tokens, examples = batch.tgt_out.numel(), len(batch)",
        ("test_bench_gpu.py::test_cpu_run_reports_counts_and_compares",),
    ),
    Mutant(
        "the decoding bench's prefix-rerunning reference allowed one more output token than ours",
        "decoding_like.decode",
        "limit = max_lengths(memory, settings.max_length_ratio, settings.max_length_offset)",
        "limit = max_lengths(memory, settings.max_length_ratio, settings.max_length_offset + 1)",
        ("test_bench_translation.py::test_decoding_bench_finds_the_references_outputs",),
    ),
    Mutant(
        "the streaming speed bench timing the in-memory path twice instead of the shards",
        "compare",
        'child(["--config", args.config, *shard_dir, *common], args.threads)',
        'child(["--config", args.config_memory, *common], args.threads)',
        ("test_bench_streaming.py::test_prepare_then_compare_both_paths_on_the_same_batches",),
    ),
    Mutant(
        "search's hypotheses attend to the memory of the wrong input (rows grouped by stride)",
        "Attention.forward",
        "grouped = query.reshape(memory.mask.size(0), -1, query.size(-1))  # (B, K·T, D_q)",
        "grouped = query.reshape(-1, memory.mask.size(0), query.size(-1)).transpose(0, 1)",
        ("test_attention.py::test_hypotheses_attend_like_inputs_repeated",),
    ),
    Mutant(
        "Luong's multi-head context taken as W_cc c, without W_c's context half",
        "LuongDecoder._attentional",
        "        if not self.attention.values_are_annotations:\n            return torch.tanh(",
        "        if False:\n            return torch.tanh(",
        ("test_reference_steps.py::test_teacher_forcing_matches_reference",),
    ),
    Mutant(
        "the older `self_attention: linear` read as softmax attention",
        "named_self_attention",
        'names = {"softmax": SelfAttention, "linear": LinearSelfAttention}',
        'names = {"softmax": SelfAttention, "linear": SelfAttention}',
        ("test_linear_attention.py::test_checkpoint_hparams_with_the_string_form_still_build",),
    ),
    Mutant(
        "progress lines by steps only: silent for minutes when steps are slow",
        "LineProgress.on_train_batch_end",
        "if step != self._last_step and (counted or self._due()):",
        "if step != self._last_step and counted:",
        ("test_logging.py::test_lines_come_by_time_too_the_first_early",),
    ),
    Mutant(
        "a preparation silent between its first and last line",
        "Preparation.advance",
        "        if self.clock() - self._last_line >= self.every:",
        "        if False:",
        (
            "test_logging.py::test_a_preparation_says_when_it_starts_how_far_it_got_and_when_it_is_done",
        ),
    ),
    Mutant(
        "exact match printed as a bare 16-digit number",
        "format_score",
        '        return f"{value:.2f} %"',
        "        return str(value)",
        ("test_logging.py::test_every_score_is_shown_with_its_unit_and_sensible_digits",),
    ),
    Mutant(
        "the LeafSpec FutureWarning filter naming the wrong module",
        "silence_known_noise",
        'module=r"lightning\\.pytorch\\.utilities\\._pytree",',
        'module=r"lightning\\.pytorch\\.utilities\\.pytree",',
        (
            "test_logging.py::test_lightnings_leafspec_futurewarning_is_silenced_and_no_other_warning",
        ),
    ),
    Mutant(
        "plateau schedulers stepped by the sanity check and by validate runs too",
        "TrainingHooks.on_validation_epoch_end",
        '        if self.trainer.state.fn == "fit" and not self.trainer.sanity_checking:',
        "        if True:",
        (
            "test_training_hooks.py::test_a_plateau_scheduler_steps_after_each_validation_of_a_fit_only",
        ),
    ),
    Mutant(
        "the task's training step no longer watches its loss",
        "EncoderDecoderTask.training_step",
        "        self.watch_loss(loss, batch_idx)\n",
        "",
        ("test_resume.py::test_a_numerical_fault_stops_the_run_before_any_nan_checkpoint",),
    ),
    Mutant(
        "a data module's padding settings ignored",
        "BucketedData.__init__",
        "        self.padding = Padding(pad_to_multiple, tuple(length_buckets))",
        "        self.padding = Padding()",
        ("test_batching.py::test_token_budget_counts_the_padded_lengths",),
    ),
    Mutant(
        "the seqtasks command importing Lightning before it knows the command",
        "USAGE",  # the import it adds goes above the first module-level assignment
        'USAGE = "usage: seqtasks COMMAND [ARGS ...]"\n',
        'import seqtasks.cli.main  # noqa: F401\n\nUSAGE = "usage: seqtasks COMMAND [ARGS ...]"\n',
        ("test_commands.py::test_help_imports_nothing_heavy",),
    ),
    Mutant(
        "--beam defaulting to a number instead of the checkpoint's own beam",
        "add_search_options",
        '        "--beam", type=positive_int, help=',
        '        "--beam", type=positive_int, default=5, help=',
        ("test_commands.py::test_search_options_reach_the_api_only_when_given",),
    ),
    Mutant(
        "a call without a beam searching with the validation settings, not the test ones",
        "Model.search_settings",
        "        return self.task.test_settings.override(",
        "        return self.task.val_settings.override(",
        ("test_api.py::test_a_call_searches_with_the_checkpoints_settings_but_for_what_it_gives",),
    ),
    Mutant(
        "an n_best one over the beam let through to beam search",
        "SearchSettings.__post_init__",
        "        if self.n_best > self.beam:",
        "        if self.n_best > self.beam + 1:",
        ("test_search_settings.py::test_settings_that_cannot_work_are_refused_naming_them",),
    ),
    Mutant(
        "search keeps the attention memory of the first inputs, not of those still searched",
        "AttentionMemory.select",
        "return AttentionMemory(*(part.index_select(0, inputs) for part in self))",
        "return AttentionMemory(*(part[: inputs.numel()] for part in self))",
        (
            "test_attention.py::test_hypotheses_attend_like_inputs_repeated",
            "test_search_equivalence.py::test_beam_search_equals_the_reference",
        ),
    ),
    Mutant(
        "every Transformer layer reads the first layer's cross-attention memory once inputs drop",
        "TransformerDecoder.reorder",
        "memory=[m.select(inputs) for m in state.memory]",
        "memory=[state.memory[0].select(inputs) for m in state.memory]",
        ("test_search_equivalence.py::test_beam_search_equals_the_reference",),
    ),
    Mutant(
        "attention on a GPU left on cuDNN's kernel (a plan built for every new shape)",
        "fused_attention",
        "        torch.backends.cuda.enable_cudnn_sdp(False)\n",
        "        pass\n",
        ("test_transformer.py::test_attention_on_a_gpu_keeps_off_cudnn_for_that_call_only",),
    ),
    Mutant(
        "cuDNN's attention left off after a kernel that raised",
        "fused_attention",
        "    try:\n        return F.scaled_dot_product_attention(\n"
        "            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal\n"
        "        )\n    finally:\n",
        "    if True:\n        out = F.scaled_dot_product_attention(\n"
        "            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal\n"
        "        )\n    if True:\n",
        ("test_transformer.py::test_attention_on_a_gpu_keeps_off_cudnn_for_that_call_only",),
    ),
    Mutant(
        "cuDNN's attention switched back on after a caller had switched it off",
        "fused_attention",
        "    off = cuda and torch.backends.cuda.cudnn_sdp_enabled()",
        "    off = cuda",
        ("test_transformer.py::test_attention_on_a_gpu_keeps_off_cudnn_for_that_call_only",),
    ),
    Mutant(
        "the page's source pieces lighting their targets on hover only, not on keyboard focus",
        "views.js",
        "      map.dataset.col = j;\n    };\n"
        '    button.addEventListener("mouseenter", show); button.addEventListener("focus", show);',
        '      map.dataset.col = j;\n    };\n    button.addEventListener("mouseenter", show);',
        ("test_serve.py::test_the_page_works_from_the_keyboard_alone",),
    ),
    Mutant(
        "the page's drop area dropping the file it is given",
        "sections.js",
        "choose(e.dataTransfer.files[0]);",
        "choose(null);",
        ("test_serve.py::test_the_page_captions_an_image_dropped_on_it",),
    ),
    Mutant(
        "the page's word overlays showing the photo with no alt text",
        "views.js",
        'frame.append(el("img", { src: url, alt: "" }));',
        'frame.append(el("img", { src: url }));',
        ("test_serve.py::test_the_page_captions_an_upload_with_one_overlay_per_word",),
    ),
    Mutant(
        "the page's drop area not opening the file chooser on Enter",
        "sections.js",
        'if (e.key === "Enter" || e.key === " ")',
        'if (e.key === " ")',
        ("test_serve.py::test_the_page_works_from_the_keyboard_alone",),
    ),
    Mutant(
        "the page's requests sent without the API key typed into it",
        "sections.js",
        '  return key ? { ...init, headers: { ...init.headers, "X-API-Key": key } } : init;',
        "  return init;",
        ("test_serve.py::test_the_page_translates_and_draws_the_attention",),
    ),
    Mutant(
        "a setting left out of the comparison of specifications (num_heads free on resume)",
        "PART_SETTINGS",
        '        "attention_dropout",\n',
        '        "attention_dropout",\n        "num_heads",\n',
        (
            "test_model_identity.py::test_a_model_of_another_number_of_heads_is_refused",
            "test_model_identity.py::test_every_setting_is_compared_but_those_that_may_change_on_resume",
        ),
    ),
    Mutant(
        "a part's class left out of the comparison of specifications",
        "_leaves",
        '        yield (*path, "class_path"), canonical(value["class_path"])\n',
        "",
        ("test_model_identity.py::test_a_part_of_another_class_is_named_by_its_class_alone",),
    ),
    Mutant(
        "tokeniser fingerprints compared by their size alone (kind and hash left out)",
        "fingerprint_difference",
        "        if before != after:\n            shown",
        "        if (before and before.size) != (after and after.size):\n            shown",
        (
            "test_model_identity.py::test_averaging_checkpoints_of_other_tokenisers_is_refused",
            "test_model_identity.py::test_evaluating_on_data_of_another_tokeniser_is_refused",
            "test_api.py::test_ensemble_members_must_share_task_and_vocabularies",
        ),
    ),
    Mutant(
        "the data's tokenisers not compared with the checkpoint's on resume",
        "check_identity",
        "        if why is not None:\n"
        '            raise CheckpointError(f"the checkpoint was trained',
        '        if False:\n            raise CheckpointError(f"the checkpoint was trained',
        (
            "test_model_identity.py::test_evaluating_on_data_of_another_tokeniser_is_refused",
            "test_model_identity.py::test_resuming_on_data_of_another_tokeniser_of_the_same_size_is_refused",
        ),
    ),
    Mutant(
        "the checkpoint's specification not compared with the config's on resume",
        "check_identity",
        '        why = difference(checked(source).resolved, config, ("checkpoint", "config"))',
        "        why = None",
        ("test_model_identity.py::test_a_model_of_another_number_of_heads_is_refused",),
    ),
    Mutant(
        "the identity compared only once Lightning restores the checkpoint (after the run wrote "
        "its config.yaml)",
        "SeqtasksCLI._before_run",
        "            self._check_identity(restored)",
        "            pass",
        ("test_model_identity.py::test_a_model_of_another_number_of_heads_is_refused",),
    ),
    Mutant(
        "a checkpoint's stored tokenisers not checked against its identity record",
        "identity_of",
        "    mismatch = fingerprint_difference("
        'identity.fingerprints, found, ("recorded", "stored"))',
        "    mismatch = None",
        (
            "test_model_identity.py::test_a_checkpoint_whose_tokeniser_was_replaced_afterwards_is_refused",
        ),
    ),
    Mutant(
        "a model file of the next format read as this one",
        "from_record",
        '    if record["format"] > FORMAT:',
        '    if record["format"] > FORMAT + 1:',
        ("test_model_identity.py::test_a_checkpoint_of_a_newer_seqtasks_is_refused_in_one_line",),
    ),
    Mutant(
        "a model of a newer seqtasks refused without naming the version that wrote it",
        "ModelSource.parsed",
        '                    f"{self.where} was written by {self.identity.written_by} '
        'and names what "',
        '                    f"{self.where} names what "',
        ("test_model_identity.py::test_a_checkpoint_of_a_newer_seqtasks_is_refused_in_one_line",),
    ),
    Mutant(
        "a model folder's file sizes not checked",
        "check_file",
        '    if size != expected.get("size"):',
        "    if False:",
        ("test_model_folders.py::test_a_bad_folder_is_named_in_one_line",),
    ),
    Mutant(
        "a model folder's file hashes not checked",
        "check_file",
        '    if found != expected.get("sha256"):',
        "    if False:",
        ("test_model_folders.py::test_a_bad_folder_is_named_in_one_line",),
    ),
    Mutant(
        "a model folder's tokenisers not checked against its identity's fingerprints",
        "read_folder",
        '    if mismatch is not None:\n        raise CheckpointError(f"{where}: its files',
        '    if False:\n        raise CheckpointError(f"{where}: its files',
        ("test_model_folders.py::test_a_bad_folder_is_named_in_one_line",),
    ),
    Mutant(
        "a function named by a model file's setting left to jsonargparse",
        "_check_names",
        "            raise _refused(path, value)",
        "            pass",
        ("test_model_folders.py::test_a_bad_folder_is_named_in_one_line",),
    ),
    Mutant(
        "checkpoints of other models averaged (specifications not compared)",
        "difference",
        "    return spec_difference(first.resolved, other.resolved, names) or "
        "fingerprint_difference(",
        "    return fingerprint_difference(",
        ("test_model_identity.py::test_averaging_a_2_head_with_a_4_head_checkpoint_is_refused",),
    ),
    Mutant(
        "a resumed run going on with the checkpoint's optimiser settings over the config's",
        "CheckpointHooks.on_train_start",
        "            settings.apply(self.trainer.optimizers, schedulers, *self._changed)",
        "            pass",
        ("test_model_identity.py::test_what_may_change_on_resume_is_taken_and_takes_effect",),
    ),
    Mutant(
        "a schedule's rate at the resumed step not worked out from the config's learning rate",
        "ConfigSettings.apply",
        "                _set_rates(scheduler)",
        "                pass",
        ("test_model_identity.py::test_what_may_change_on_resume_is_taken_and_takes_effect",),
    ),
    Mutant(
        "Lightning's start-up lines written before a run's one-line refusal",
        "_exit_with",
        "    STARTUP.drop()\n",
        "",
        (
            "test_model_identity.py::test_resuming_on_data_of_another_tokeniser_of_the_same_size_is_refused",
        ),
    ),
    Mutant(
        "Hub downloads drawing progress bars into a log",
        "download",
        "        with progress_bars(_is_terminal(sys.stderr)):",
        "        with progress_bars(True):",
        ("test_hub.py::test_commands_and_serve_take_a_hub_name",),
    ),
    Mutant(
        "a model folder's search settings ignored when it is loaded",
        "ModelSource.build",
        "        if self.search:  # {} for a model that does not search",
        "        if False:",
        ("test_model_folders.py::test_a_folder_is_its_checkpoint",),
    ),
    Mutant(
        "tied weights kept once in a folder not tied again when it is loaded",
        "_with_shared",
        "            weights[name] = weights[first]",
        "            pass",
        ("test_model_folders.py::test_a_folder_is_its_checkpoint",),
    ),
    Mutant(
        "the server's key compared with == (in time that tells how much of it a guess got right)",
        "KeyCheck.__call__",
        "        if hmac.compare_digest(given, self.key):",
        "        if given == self.key:",
        ("test_serve.py::test_the_key_is_compared_in_constant_time_before_the_body_is_read",),
    ),
    Mutant(
        "what the server holds (/models) answered without the key",
        "PUBLIC",
        'PUBLIC = {"/", "/favicon.ico"}',
        'PUBLIC = {"/", "/favicon.ico", "/models"}',
        ("test_serve.py::test_the_key_guards_every_route_but_the_page",),
    ),
    Mutant(
        "a blank LIT_SERVER_API_KEY taken for a key",
        "server_key",
        "    if key is not None and not key.strip():",
        "    if key is not None and not key:",
        ("test_serve.py::test_an_empty_key_refuses_to_start_unless_an_open_server_is_asked_for",),
    ),
    Mutant(
        "FastAPI's generated docs pages (scripts from a CDN) served",
        "build_server",
        "        disable_openapi_url=True,",
        "        disable_openapi_url=False,",
        ("test_serve.py::test_the_key_guards_every_route_but_the_page",),
    ),
    Mutant(
        "an attention answer of any size",
        "ModelEndpoint.check",
        "        self.check_attention(request, lengths)\n",
        "",
        (
            "test_serve.py::test_an_attention_answer_over_the_servers_limit_is_refused_before_any_search",
        ),
    ),
    Mutant(
        "the page sending a beam and n-best of its own (0 for an empty field)",
        "sections.js",
        '    if (value !== "") chosen[name] = Number(value);',
        "    chosen[name] = Number(value);",
        ("test_serve.py::test_the_page_translates_and_draws_the_attention",),
    ),
    Mutant(
        "the page drawing the parse from the bracket string, not the tree the server read",
        "sections.js",
        "readTree(result.tree)",
        "readTree(result.text)",
        ("test_serve.py::test_the_page_draws_the_parse_as_a_tree",),
    ),
    Mutant(
        "the heat map's cells below a lit row left unveiled",
        "views.js",
        "      veil(veils[1], 0, (i + 1) * cell, width, height - (i + 1) * cell);\n",
        "",
        ("test_serve.py::test_the_page_works_from_the_keyboard_alone",),
    ),
    Mutant(
        "standard output written in one write a pipe may take only part of",
        "write_stdout",
        "        data = data[len(data) if written is None else written :]",
        "        data = data[len(data) :]",
        ("test_streams.py::test_a_pipe_closed_after_one_line_ends_the_command_with_141",),
    ),
    Mutant(
        "a reader that went away ending the command with status 1",
        "at_the_edges",
        "        return BROKEN_PIPE",
        "        return 1",
        ("test_streams.py::test_a_reader_that_goes_away_ends_the_command_quietly",),
    ),
    Mutant(
        "a closed standard output found only after the translating",
        "main",
        "        require_stdout()\n",
        "        pass\n",
        ("test_streams.py::test_a_closed_standard_output_is_said_before_any_work",),
    ),
    Mutant(
        "a failed write to a device not naming the file",
        "open_atomic",
        '        with _naming(path), open(path, "wb") as f:',
        '        with open(path, "wb") as f:',
        ("test_streams.py::test_a_full_disk_is_one_line_naming_what_could_not_be_written",),
    ),
    Mutant(
        'the default "auto" budget checked by importing torch before a usage error',
        "max_tokens",
        '    if text == "auto":\n        return text\n    from seqtasks.search.budget',
        "    from seqtasks.search.budget",
        (
            "test_commands.py::test_argument_errors_are_said_at_once_without_importing_anything_heavy",
        ),
    ),
    Mutant(
        "an unknown option refused without saying which is near",
        "CommandParser.error",
        '            message += did_you_mean(words[0].split("=")[0], '
        'self._options()) if words else ""',
        '            message += ""',
        (
            "test_commands.py::test_argument_errors_are_said_at_once_without_importing_anything_heavy",
        ),
    ),
    Mutant(
        "evaluate parsing unable to read the empty line seqtasks parse writes",
        "read_predicted",
        "    if any(not line.strip() for line in lines)"
        " and len(trees) == sum(map(_one_tree, lines)):",
        "    if False:",
        ("test_parsing.py::test_evaluate_reads_what_parse_writes_a_sentence_not_parsed_included",),
    ),
    Mutant(
        "evaluate captioning --pred unable to match a caption file's copy of the images by name",
        "read_predicted_captions",
        "        if image is None and len(by_name.get(named.name, [])) == 1:",
        "        if image is None and len(by_name.get(named.name, [])) == 0:",
        (
            "test_caption_apps.py::"
            "test_evaluate_captioning_scores_what_caption_wrote_as_it_scores_the_model",
        ),
    ),
    Mutant(
        "seqtasks caption refusing --output, as translate and evaluate spell it",
        "parse_args",
        '"--out", "--output", type=Path, help="write the JSON lines here (default: stdout)"',
        '"--out", type=Path, help="write the JSON lines here (default: stdout)"',
        ("test_commands.py::test_every_command_takes_output_as_translate_spells_it",),
    ),
    Mutant(
        "Ctrl-C ending a command in a traceback of wherever it landed",
        "at_the_edges",
        "    except KeyboardInterrupt:\n",
        "    except ZeroDivisionError:\n",
        ("test_streams.py::test_ctrl_c_ends_the_command_with_130_and_no_traceback",),
    ),
    Mutant(
        "evaluate translation writing its translations before its report (lost with a full disk)",
        "evaluate",
        "            written[outputs[number]] = ",
        "            write_atomic(outputs[number], 'x')\n            written[outputs[number]] = ",
        ("test_streams.py::test_a_full_disk_is_one_line_naming_what_could_not_be_written",),
    ),
    Mutant(
        "a task outside seqtasks, named by an entry point, not found",
        "_outside",
        "        points = entry_points(group=ENTRY_POINTS)",
        "        points = []",
        ("test_toy_task.py::test_a_task_in_a_package_of_its_own_trains_evaluates_and_serves",),
    ),
    Mutant(
        "a task built on another task's class taken for that other task",
        "task_of",
        "    return min(found)[1] if found else None",
        "    return found[0][1] if found else None",
        ("test_registry.py::test_a_task_built_on_another_tasks_class_is_itself",),
    ),
    Mutant(
        "search's limits leaving out the room the output grammar needs",
        "limits",
        "    return found if constraint is None else constraint.room(found)",
        "    return found",
        (
            "test_search.py::"
            "test_search_ends_outputs_at_the_settings_limits_and_the_room_a_constraint_needs",
        ),
    ),
    Mutant(
        "search running greedy whatever the beam",
        "search",
        "    if settings.greedy:",
        "    if True:",
        ("test_api.py::test_a_call_searches_with_the_checkpoints_settings_but_for_what_it_gives",),
    ),
    Mutant(
        "seqtasks evaluate skipping a task's own rules for its options",
        "parse_args",
        "    module.check(args, task.error)\n",
        "    args.groups = [[p] for p in args.checkpoint or []]\n",
        ("test_commands.py::test_a_report_refuses_what_its_options_cannot_do_together",),
    ),
    Mutant(
        "a model file's specification naming a class that is no task, built all the same",
        "_parser",
        "        if not isinstance(found, type) or task_of(found) is None:",
        "        if not isinstance(found, type):",
        ("test_registry.py::test_a_model_file_naming_a_class_that_is_no_task_is_refused",),
    ),
    Mutant(
        "evaluate captioning asking a model without attention for its attention (shapes world)",
        "evaluate",
        "        hits = model.gives_attention and all(image.scene is not None for image in split)",
        "        hits = all(image.scene is not None for image in split)",
        (
            "test_caption_apps.py::"
            "test_a_model_without_attention_is_scored_on_the_shapes_world_without_hits",
        ),
    ),
    Mutant(
        "every endpoint's answer without the rest of its n-best list",
        "result",
        '"alternatives": [{"text": a.text, "score": float(a.score)} for a in found.alternatives],',
        '"alternatives": [],',
        ("test_serve.py::test_translate_answers_as_the_python_api_does",),
    ),
    Mutant(
        "serve: a group's failed model call not made again for each request alone",
        "BatchedEndpoint.predict",
        "                    todo += [[p] for p in positions]",
        "                    todo += []",
        ("test_serve.py::test_a_request_that_makes_the_model_fail_fails_alone",),
    ),
    Mutant(
        "the page never showing attention over source pieces (the heat map kept hidden)",
        "sections.js",
        'find("pieces-view").hidden = !(attention && attention.columns);',
        'find("pieces-view").hidden = true;',
        ("test_serve.py::test_the_page_works_from_the_keyboard_alone",),
    ),
    Mutant(
        "the page asking every endpoint for the attention, one that takes none too",
        "sections.js",
        "...(attention ? { attention } : {})",
        "attention: true",
        ("test_serve.py::test_the_page_draws_the_parse_as_a_tree",),
    ),
    Mutant(
        "the page keeping the inputs of every kind in a section (a text box in an image form)",
        "sections.js",
        "if (n.dataset.reads !== form.reads) n.remove();",
        'if (n.dataset.reads === "none") n.remove();',
        ("test_serve.py::test_the_page_captions_an_upload_with_one_overlay_per_word",),
    ),
    Mutant(
        "/models saying a request may ask for attention where the endpoint takes none",
        "describe",
        '"attention": served.attention and forms[task]["attention"],',
        '"attention": served.attention,',
        ("test_serve.py::test_the_server_serves_the_page_and_says_what_each_model_is",),
    ),
    Mutant(
        "a search batch budgeted without the attention weights it keeps",
        "Model.search_sources",
        "limit + 1 if attention else None",
        "None",
        ("test_decode_budget.py::test_the_api_batches_by_the_device",),
    ),
    Mutant(
        "the parser's row cap kept for a budget a GPU decides",
        "Model.batch_tokens",
        'if self.max_rows is None or (max_tokens == "auto" and self.device.type == "cuda"):',
        "if self.max_rows is None:",
        (
            "test_decode_budget.py::"
            "test_the_parser_lifts_its_cpu_row_cap_for_an_auto_budget_on_a_gpu",
        ),
    ),
    Mutant(
        "a checkpoint written after a non-finite loss when the checkpoint hooks come first",
        "TrainingHooks.on_save_checkpoint",
        "        self.loss_watch.check()\n        super().on_save_checkpoint(checkpoint)",
        "        super().on_save_checkpoint(checkpoint)",
        ("test_training_hooks.py::test_the_training_and_checkpoint_hooks_hold_in_either_order",),
    ),
    Mutant(
        "a layer added on the way from POST /translate to the search loop",
        "TranslateEndpoint.run",
        "nbests = model.search_sources(inputs, settings, attention=bool(attention))",
        "nbests = (lambda *a, **k: model.search_sources(*a, **k))(\n"
        "            inputs, settings, attention=bool(attention)\n"
        "        )",
        ("test_call_paths.py::test_post_translate_reaches_the_search_loop_in_six_calls",),
    ),
    Mutant(
        "a translation checkpoint keeping its source tokeniser only",
        "TranslationTask",
        'stored_keys, stored_as = ("src_tokenizer", "tgt_tokenizer"), "tokenisers"',
        'stored_keys, stored_as = ("src_tokenizer",), "tokenisers"',
        ("test_api.py::test_a_call_searches_with_the_checkpoints_settings_but_for_what_it_gives",),
    ),
    Mutant(
        "cached images scaled by 1/256 rather than 1/255",
        "PixelCache.__getitem__",
        "return as_pixels(torch.from_numpy(np.array(row)))",
        "return as_pixels(torch.from_numpy(np.array(row))) * 255 / 256",
        ("test_pixel_cache.py::test_cached_jpegs_give_the_pixels_decoding_gives",),
    ),
    Mutant(
        "the image cache blind to an image that changed",
        "PixelCache.__init__",
        "files = [(p, s.st_size, s.st_mtime_ns) for p, s in zip(self.paths, stats, strict=True)]",
        "files = [(p, s.st_size) for p, s in zip(self.paths, stats, strict=True)]",
        ("test_pixel_cache.py::test_the_cache_is_read_and_made_again_only_when_an_image_changes",),
    ),
    Mutant(
        "a failed fill of the image cache leaving its temporary file",
        "PixelCache.fill",
        "            tmp.unlink(missing_ok=True)",
        "            pass",
        ("test_pixel_cache.py::test_a_fill_that_fails_leaves_no_file",),
    ),
    Mutant(
        "the profile's device busy share counting overlapping kernels twice",
        "busy_share",
        "            end = max(end, e)",
        "            busy, start, end = busy + end - start, s, e",
        ("test_bench_gpu.py::test_the_profile_sorts_work_by_kind_and_counts_the_device_busy_once",),
    ),
    Mutant(
        "bf16 decoding compared with itself rather than with float32",
        "measure",
        "with torch.autocast(device.type, enabled=False):",
        "with torch.autocast(device.type, enabled=True):",
        ("test_bench_gpu.py::test_bf16_decoding_says_how_many_outputs_float32_would_give_alike",),
    ),
    Mutant(
        "the fixed-cache step attending to positions not yet written",
        "SelfAttention.step_fixed",
        "context = fused_attention(q, keys, values, attn_mask=visible)",
        "context = fused_attention(q, keys, values)",
        ("test_captured.py::test_fixed_cache_steps_give_the_growing_caches_logits_and_attention",),
    ),
    Mutant(
        "the fixed-cache step not seeing its own position",
        "step_fixed",
        "visible = (state.positions[:length] <= state.at)[None]",
        "visible = (state.positions[:length] < state.at.clamp(min=1))[None]",
        ("test_captured.py::test_fixed_cache_steps_give_the_growing_caches_logits_and_attention",),
    ),
    Mutant(
        "the fixed-cache step not moving on to the next position",
        "step_fixed",
        "    state.at += 1",
        "    state.at += 0",
        ("test_captured.py::test_fixed_cache_steps_give_the_growing_caches_logits_and_attention",),
    ),
    Mutant(
        "beam search's reordering not applied to the fixed caches",
        "reorder_fixed",
        "written.copy_(written.index_select(0, rows))",
        "written.copy_(written)",
        ("test_captured.py::test_fixed_cache_steps_give_the_growing_caches_logits_and_attention",),
    ),
    Mutant(
        "the fixed-cache step embedding every token at position 0",
        "Embeddings.at",
        "table.index_select(0, position)",
        "table.index_select(0, position * 0)",
        ("test_captured.py::test_fixed_cache_steps_give_the_growing_caches_logits_and_attention",),
    ),
    Mutant(
        "linear self-attention taken for the softmax one's fixed cache",
        "keeps_keys_and_values",
        "kind.step is SelfAttention.step or kind.step_fixed is not SelfAttention.step_fixed",
        "issubclass(kind, SelfAttention)",
        ("test_captured.py::test_only_softmax_self_attention_transformers_take_fixed_caches",),
    ),
    Mutant(
        "a batch not moved by its to(): left where it was",
        "Travels.to",
        "return moved(self, device)",
        "return self",
        ("test_batching.py::test_batches_move_their_tensors_and_share_their_texts",),
    ),
    Mutant(
        "a captioning batch walked field by field again (no to())",
        "CaptionBatch",
        "class CaptionBatch(Travels):",
        "class CaptionBatch:",
        ("test_batching.py::test_batches_move_their_tensors_and_share_their_texts",),
    ),
    Mutant(
        "a captured step reading a prefix that ends before its position",
        "CapturedSteps.step",
        "prefix = min(self.length, (self.steps // self.bucket + 1) * self.bucket)",
        "prefix = min(self.length, self.steps // self.bucket * self.bucket + self.bucket // 2)",
        ("test_captured.py::test_fixed_cache_steps_give_the_growing_caches_logits_and_attention",),
    ),
    Mutant(
        "a shapes world taking a negative count",
        "Counts.__post_init__",
        "or count < 0:",
        "or count < -1:",
        (
            "test_shapes.py::test_counts_keep_the_defaults_of_the_splits_not_given_and_name_what_they_refuse",
        ),
    ),
    Mutant(
        "a shapes world taking a bool for a count",
        "Counts.__post_init__",
        "if isinstance(count, bool) or not isinstance(count, int)",
        "if not isinstance(count, int)",
        (
            "test_shapes.py::test_counts_keep_the_defaults_of_the_splits_not_given_and_name_what_they_refuse",
        ),
    ),
    Mutant(
        "ShapesData ignoring the counts it is given",
        "ShapesData.__init__",
        "sizes = asdict(counts)",
        "sizes = asdict(DEFAULT_COUNTS)",
        (
            "test_shapes.py::test_shapes_data_reads_its_counts_from_yaml_by_split_and_refuses_an_unknown_one",
            "test_shapes.py::test_shapes_data_writes_once_and_refuses_another_world",
        ),
    ),
    Mutant(
        "greedy keeping every row never stopping before its limit",
        "_one_path",
        "            if none_live:\n                break\n",
        "            if none_live:\n                pass\n",
        ("test_search.py::test_greedy_stops_when_its_last_output_ends",),
    ),
    Mutant(
        "greedy keeping every row reading the count of this step, waiting for the device",
        "_one_path",
        "in_flight = CountInFlight(live.sum())",
        "in_flight = CountInFlight(live.sum()); none_live = not in_flight.read()",
        ("test_search.py::test_greedy_stops_when_its_last_output_ends",),
    ),
    Mutant(
        "an outside task package whose import fails taking every command down",
        "_declared_outside",
        "    except (Exception, SystemExit) as error:  # noqa: BLE001 (any "
        "failure of an outside import)",
        "    except ZeroDivisionError as error:",
        (
            "test_registry.py::test_an_outside_package_that_fails_is_left_out_alone_with_one_warning_each",
        ),
    ),
    Mutant(
        "two outside packages declaring one task name, the first taken",
        "_found",
        "        if len(claims) == 1:",
        "        if claims:",
        (
            "test_registry.py::test_an_outside_package_that_fails_is_left_out_alone_with_one_warning_each",
        ),
    ),
    Mutant(
        "a built-in task found by reading every package (a broken one's "
        "warnings, every task imported)",
        "task_entry",
        "    if name in BUILT_IN:\n        return declared(BUILT_IN[name])\n",
        "",
        ("test_registry.py::test_a_built_in_task_is_found_without_reading_any_other_package",),
    ),
    Mutant(
        "a model file's class not checked against the task it declares",
        "_parser",
        "        if not (isinstance(found, type) and issubclass(found, declared)):",
        "        if not isinstance(found, type):",
        (
            "test_edited_folders.py::"
            "test_an_edited_folder_is_refused_in_one_line_by_every_caller[its class relabelled]",
        ),
    ),
    Mutant(
        "a folder relabelled as another task, its entries not checked against that task's",
        "checked",
        '    if keys is not None and sorted(source.entries.keys() - {"task"}) != sorted(keys):',
        "    if False:",
        (
            "test_edited_folders.py::"
            "test_an_edited_folder_is_refused_in_one_line_by_every_caller[relabelled as parsing]",
        ),
    ),
    Mutant(
        "a setting its part refuses ending the load in jsonargparse's account, the folder unnamed",
        "ModelSource.build",
        "        except SpecError as error:  # a setting its part refuses: the file was edited",
        "        except ZeroDivisionError as error:",
        (
            "test_edited_folders.py::test_an_edited_folder_is_refused_in_one_line_by_every_caller"
            "[heads that do not divide the width]",
        ),
    ),
    Mutant(
        "a folder's tokeniser file taken without loading it as a sentencepiece model",
        "entry_from_file",
        "        SentencePieceTokenizer(data, str(path))",
        "        pass",
        (
            "test_edited_folders.py::"
            "test_an_edited_folder_is_refused_in_one_line_by_every_caller[a "
            "tokeniser of four bytes]",
        ),
    ),
    Mutant(
        "a folder's file read as the entry config.json says, whatever its name",
        "read_folder",
        "            if kept != name:",
        "            if False:",
        (
            "test_edited_folders.py::test_an_edited_folder_is_refused_in_one_line_by_every_caller"
            "[a tokeniser listed as the vocabulary]",
        ),
    ),
    Mutant(
        "a model missing a part it needs called newer (upgrade seqtasks) rather than edited",
        "ParsedSpec.__init__",
        "            if _REQUIRED.search(str(error)):",
        "            if False:",
        (
            "test_edited_folders.py::"
            "test_an_edited_folder_is_refused_in_one_line_by_every_caller[no decoder]",
        ),
    ),
    Mutant(
        "a command's model of another task refused only after torch and the whole model load",
        "load_model",
        "    refused = other_task(list(checkpoints), task)  # read before "
        "torch is imported: at once",
        "    refused = None",
        (
            "test_commands.py::test_argument_errors_are_said_at_once_without_importing_anything_heavy",
        ),
    ),
    Mutant(
        "a checkpoint path that is not there taken by argparse (said after torch is imported)",
        "model_reference",
        "    if not path.exists():",
        "    if False:",
        (
            "test_commands.py::test_argument_errors_are_said_at_once_without_importing_anything_heavy",
        ),
    ),
    Mutant(
        "a misspelt option reported as the required option it was meant to be, missing",
        "CommandParser.error",
        '        misspelt = self._misspelt() if message.startswith("the '
        'following arguments") else None',
        "        misspelt = None",
        (
            "test_commands.py::test_argument_errors_are_said_at_once_without_importing_anything_heavy",
        ),
    ),
    Mutant(
        "a setting renamed since 0.1 answered as unknown, without its new name",
        "with_new_name",
        '    new = renamed(owner, found["option"]) if isinstance(owner, type) else None',
        "    new = None",
        ("test_bad_input.py::test_a_setting_renamed_since_0_1_is_answered_with_its_new_name",),
    ),
    Mutant(
        "an hf:// revision taken unchecked (hf://ORG/NAME@../../x climbs out of the cache's refs/)",
        "parse_name",
        "    if at and (fault := _revision_fault(revision)):",
        "    if False:",
        ("test_hub.py::test_the_command_refuses_a_revision_climbing_out_of_the_cache_in_one_line",),
    ),
    Mutant(
        "the Hub cache's refs file followed unchecked (refs/main naming ../../../elsewhere)",
        "_check_ref",
        "    if not ref.is_file():\n",
        "    if True:\n",
        ("test_hub.py::test_offline_a_refs_file_leading_out_of_the_cache_is_refused",),
    ),
    Mutant(
        "a cached snapshot's files loaded without checking their links stay in the Hub cache",
        "_checked_snapshot",
        "            if not path.resolve().is_relative_to(storage):",
        "            if False:",
        ("test_hub.py::test_a_cached_snapshot_leading_out_of_the_cache_is_refused",),
    ),
    Mutant(
        "serve: /info, /models and the page naming each model by its path as typed",
        "group_by_task",
        "            names=[model_name(source.where, source.path) for source in members],",
        "            names=[source.where for source in members],",
        ("test_serve.py::test_no_answer_nor_the_page_names_where_the_models_are",),
    ),
    Mutant(
        "the page's heat map cells of one fixed size, whatever its pieces and the window",
        "views.js",
        "  return Math.max(MIN_CELL, Math.min(MAX_CELL, across, down));",
        "  return 16;",
        ("test_serve.py::test_a_character_models_heat_map_is_sized_to_its_pieces_and_the_window",),
    ),
    Mutant(
        "serve: plain-text answers (/health's ok) without their newline",
        "ended",
        '    return body + b"\\n" if body and not body.endswith(b"\\n") else body',
        "    return body",
        (
            "test_serve_startup.py::test_plain_text_answers_end_with_a_newline_and_others_pass_as_they_are",
            "test_serve.py::test_health_and_info_cover_every_endpoint",
        ),
    ),
    Mutant(
        "an empty sentence's n-best list repeating its empty translation as its alternatives",
        "Translator.translations",
        '            Translation("", [], 0.0)\n',
        '            Translation("", [], 0.0, alternatives=[Translation("", '
        "[], 0.0)] * (n_best - 1))\n",
        (
            "test_translation_task.py::test_an_empty_sentence_lists_no_alternative_whatever_the_n_best",
            "test_apps.py::test_translate_n_best_gives_an_empty_line_one_empty_translation",
        ),
    ),
    Mutant(
        "evaluate translation's exact match taking a translation one character "
        "off for its reference",
        "translation_report",
        "    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True))",
        "    exact = sum(h[:-1] == r[:-1] for h, r in zip(hypotheses, references, strict=True))",
        ("test_apps.py::test_evaluate_counts_exact_matches_against_the_reference_lines",),
    ),
    Mutant(
        "evaluate's decoding progress counting no batch until the model is done (a silent decode)",
        "counting_batches",
        "            if done:\n                stage.advance(done)\n",
        "            pass\n",
        (
            "test_translation_task.py::"
            "test_counting_batches_counts_each_input_once_as_worker_threads_finish_them",
        ),
    ),
    Mutant(
        "an outside task's command taking over the name of seqtasks' own or a built-in task's",
        "commands",
        "        if command.name in taken or command.name in own:",
        "        if False:",
        (
            "test_registry.py::"
            "test_an_outside_task_takes_no_command_and_its_broken_parts_fail_alone",
        ),
    ),
    Mutant(
        "an outside task's evaluation that fails to import ending every seqtasks evaluate",
        "evaluations",
        "except Exception as error:  # an outside task's evaluation",
        "except ZeroDivisionError as error:",
        (
            "test_registry.py::"
            "test_an_outside_task_takes_no_command_and_its_broken_parts_fail_alone",
        ),
    ),
    Mutant(
        "the convolutional encoder's residual connection dropped",
        "ConvolutionalLayer.forward",
        "            h = (h + x) * math.sqrt(0.5)",
        "            h = h * math.sqrt(0.5)",
        (
            "test_convolutional.py::"
            "test_annotations_and_summary_match_the_equations_and_ignore_padding",
        ),
    ),
    Mutant(
        "the convolutional encoder's filters reading the padding of a shorter sequence",
        "ConvolutionalLayer.forward",
        "        return h * mask[:, :, None]",
        "        return h",
        (
            "test_convolutional.py::"
            "test_annotations_and_summary_match_the_equations_and_ignore_padding",
        ),
    ),
    Mutant(
        "a decoder's fixed-cache steps taken whatever its self-attention (linear's too)",
        "TransformerDecoder.fixed_cache_steps",
        "        return TransformerFixedSteps(self) if takes_fixed_cache(self) else None",
        "        return TransformerFixedSteps(self)",
        ("test_contract.py::test_search_reads_a_decoders_cache_and_fixed_steps_from_the_contract",),
    ),
    Mutant(
        "the single RNN reading the padding after a shorter prompt",
        "PromptedRNNDecoder.read_prompt",
        "x, lengths.clamp(min=1).cpu(), batch_first=True",
        "x, torch.full_like(lengths, x.size(1)).cpu(), batch_first=True",
        (
            "test_prompted.py::"
            "test_the_single_rnn_reads_the_prompt_then_writes_the_target_in_one_recurrence",
        ),
    ),
    Mutant(
        "the decoder-only Transformer's target positions counted from the batch's longest prompt",
        "PromptedTransformerDecoder.forward",
        "positions = memory.lengths[:, None] + torch.arange",
        "positions = prompt_length + torch.arange",
        (
            "test_prompted.py::"
            "test_the_decoder_only_transformer_equals_a_causal_stack_over_prompt_and_target",
        ),
    ),
    Mutant(
        "the decoder-only Transformer attending to prompt padding while it teacher-forces",
        "visible",
        "(causal & real[:, None, :]) | itself",
        "causal | itself",
        (
            "test_prompted.py::"
            "test_the_decoder_only_transformer_equals_a_causal_stack_over_prompt_and_target",
        ),
    ),
    Mutant(
        "the decoder-only Transformer's search steps attending to prompt padding",
        "prompt_and_target_attention",
        'on_prompt = on_prompt.masked_fill(~mask[:, None, None, None, :], float("-inf"))',
        "on_prompt = on_prompt",
        ("test_decoders.py::test_teacher_forcing_equals_stepwise_decoding",),
    ),
    Mutant(
        "a relative distance unclipped: distances beyond k wrapped round the table of 2k+1",
        "RelativeSelfAttention.clipped",
        "table[distance.clamp(-k, k) + k]",
        "table[(distance + k) % (2 * k + 1)]",
        (
            "test_relative_attention.py::test_distances_beyond_k_share_one_vector",
            "test_relative_attention.py::"
            "test_causal_and_masked_forward_is_the_papers_equations_pair_by_pair",
        ),
    ),
    Mutant(
        "relative attention's value term a^V dropped (the keys' a^K kept)",
        "RelativeSelfAttention.attend",
        'return alpha @ v + torch.einsum("bhts,tsd->bhtd", alpha, a_v)',
        "return alpha @ v",
        (
            "test_relative_attention.py::"
            "test_causal_and_masked_forward_is_the_papers_equations_pair_by_pair",
        ),
    ),
    Mutant(
        "relative attention's cached step placing the new position one past the cache (t + 1)",
        "RelativeSelfAttention.step",
        "torch.arange(keys.size(2), keys.size(2) + 1, device=x.device)",
        "torch.arange(keys.size(2) + 1, keys.size(2) + 2, device=x.device)",
        (
            "test_relative_attention.py::"
            "test_growing_and_fixed_caches_decode_as_the_decoder_teacher_forces",
        ),
    ),
    Mutant(
        "relative attention's fixed-cache step measuring distances from the cache's end, not at",
        "RelativeSelfAttention.step_fixed",
        "context = self.attend(q, keys, values, at, visible)",
        "context = self.attend(q, keys, values, at * 0 + keys.size(2) - 1, visible)",
        (
            "test_relative_attention.py::"
            "test_growing_and_fixed_caches_decode_as_the_decoder_teacher_forces",
        ),
    ),
    Mutant(
        "positions: none adding the sinusoids all the same",
        "Embeddings.__init__",
        'self.register_buffer("table", torch.zeros(max_positions, d_model), persistent=False)',
        'self.register_buffer("table", sinusoidal_table(max_positions, d_model), persistent=False)',
        (
            "test_relative_attention.py::"
            "test_the_encoder_ignores_padding_and_without_absolute_positions_only_distances_count",
        ),
    ),
    Mutant(
        "the halting remainder ignored: a position that halts weighs its last state by p, not R",
        "halting_step",
        "weight = torch.where(goes_on, p, torch.where(halts, remainder, torch.zeros_like(p)))",
        "weight = torch.where(goes_on, p, torch.where(halts, p, torch.zeros_like(p)))",
        (
            "test_universal.py::test_act_halts_each_position_with_its_remainder_by_hand",
            "test_universal.py::test_act_output_is_the_weighted_mean_of_the_steps_states",
        ),
    ),
    Mutant(
        "ACT's ponder cost without its remainder (N alone, so no gradient reaches the halting)",
        "Pondering.cost",
        "        return self.steps + self.remainder",
        "        return self.steps",
        (
            "test_universal.py::test_act_halts_each_position_with_its_remainder_by_hand",
            "test_universal.py::"
            "test_the_ponder_cost_is_in_the_tasks_loss_and_trains_the_halting_units",
        ),
    ),
    Mutant(
        "a halted position's state not carried: later steps go on transforming it",
        "DepthRecurrence.forward",
        "            stream = chosen(~account.halted, new, stream)",
        "            stream = new",
        (
            "test_universal.py::"
            "test_steps_apply_one_layer_to_the_state_plus_its_coordinate_embedding",
        ),
    ),
    Mutant(
        "the Universal Transformer's coordinate embedding without its step signal",
        "DepthRecurrence.forward",
        "                coordinate = positions + self.timing[t]  # (L, D) P^t",
        "                coordinate = positions  # (L, D) P^t",
        (
            "test_universal.py::"
            "test_one_step_without_act_is_a_one_layer_transformer_plus_the_step_signal",
        ),
    ),
    Mutant(
        "the encoder's own loss term (Memory.auxiliary_loss) never joined to the objective",
        "EncoderDecoderTask.teacher_forced",
        "        return memory, output.adding(memory.auxiliary_loss)",
        "        return memory, output",
        (
            "test_universal.py::"
            "test_the_ponder_cost_is_in_the_tasks_loss_and_trains_the_halting_units",
        ),
    ),
    Mutant(
        "the objective leaving out the parts' own loss terms (DecoderOutput.auxiliary_loss)",
        "Objective.forward",
        "            total = total + output.auxiliary_loss",
        "            total = total",
        (
            "test_universal.py::"
            "test_the_ponder_cost_is_in_the_tasks_loss_and_trains_the_halting_units",
        ),
    ),
    Mutant(
        "the Universal Transformer decoder's search widths counting one step's cache, not T",
        "UniversalTransformerDecoder.search_widths",
        "        return 2 * self.recurrence.steps * width, width",
        "        return 2 * width, width",
        (
            "test_universal.py::"
            "test_a_halted_positions_carried_state_is_its_cache_in_forward_and_step",
        ),
    ),
    Mutant(
        "the Universal Transformer decoder's step ignoring search's pending reorder of its caches",
        "UniversalTransformerDecoder.step",
        "state.self_values[t], state.memory[0], state.rows, need",
        "state.self_values[t], state.memory[0], None, need",
        ("test_decoders.py::test_reorder_moves_hypotheses[universal-post-actTrue]",),
    ),
    Mutant(
        "the TTT update's sign in its step: gradient ascent, W_t = W_{t−1} + η ∇ℓ",
        "TTTLinearSelfAttention.step",
        "current = current - self.eta()[:, None, None] * gradient",
        "current = current + self.eta()[:, None, None] * gradient",
        ("test_linear_memories.py::test_ttt_is_gradient_descent_on_its_loss",),
    ),
    Mutant(
        "the TTT update's sign in its causal forward: gradient ascent, β = −2η",
        "TTTLinearSelfAttention.scan",
        "rate = 2 * self.eta()",
        "rate = -2 * self.eta()",
        ("test_linear_memories.py::test_ttt_is_gradient_descent_on_its_loss",),
    ),
    Mutant(
        "TTT's step taking every gradient at W_{t−1} whatever its mini_batch",
        "TTTLinearSelfAttention.step",
        "base = torch.where(starts, current, base)",
        "base = current",
        ("test_linear_memories.py::test_ttt_is_gradient_descent_on_its_loss",),
    ),
    Mutant(
        "TTT's causal forward taking every gradient at W_{t−1} whatever its mini_batch",
        "TTTLinearSelfAttention.scan",
        "self.chunk_size, self.mini_batch)",
        "self.chunk_size, 1)",
        ("test_linear_memories.py::test_ttt_is_gradient_descent_on_its_loss",),
    ),
    Mutant(
        "the delta rule's M_{t−1}ᵀφ(k_t) term dropped within a chunk (the triangular solve)",
        "delta_chunks",
        "(eye + coupling).float()",
        "eye.float()",
        ("test_linear_memories.py::test_delta_rule_is_its_equations_position_by_position",),
    ),
    Mutant(
        "the delta rule's M_{t−1}ᵀφ(k_t) term dropped in its step",
        "DeltaRuleSelfAttention.step",
        "u = beta[..., None] * (v - (k[..., None, :] @ memory)[..., 0, :])",
        "u = beta[..., None] * v",
        ("test_linear_memories.py::test_delta_rule_is_its_equations_position_by_position",),
    ),
    Mutant(
        "the delta rule's φ not normalised by its sum",
        "DeltaRuleSelfAttention.features",
        "return sum_normalised(self.phi(q)), sum_normalised(self.phi(k)), v, beta",
        "return self.phi(q), self.phi(k), v, beta",
        ("test_linear_memories.py::test_delta_rule_is_its_equations_position_by_position",),
    ),
    Mutant(
        "the gated memory's gate ignored (α ≡ 1)",
        "GatedLinearSelfAttention.features",
        "F.logsigmoid(self.gate(x)) / self.temperature",
        "0 * self.gate(x)",
        ("test_linear_memories.py::test_gated_write_is_its_equations_position_by_position",),
    ),
    Mutant(
        "the gated memory's decay of the carried memory dropped from a chunk's outputs",
        "gated_chunks",
        "(qc * b.exp()) @ memory",
        "qc @ memory",
        ("test_linear_memories.py::test_gated_write_is_its_equations_position_by_position[2]",),
    ),
    Mutant(
        "padding positions forgetting in the gated memory",
        "GatedLinearSelfAttention.scan",
        "k, log_alpha = k * keep, log_alpha * keep",
        "k, log_alpha = k * keep, log_alpha",
        ("test_linear_memories.py::test_padding_keys_write_and_forget_nothing[gated]",),
    ),
    Mutant(
        "padding keys written into the delta rule's memory",
        "DeltaRuleSelfAttention.scan",
        "k = k * key_mask[:, None, :, None].to(k.dtype)",
        "k = k",
        ("test_linear_memories.py::test_padding_keys_write_and_forget_nothing[delta]",),
    ),
    Mutant(
        "a linear memory's non-causal form read causally",
        "LinearMemorySelfAttention.forward",
        "        if not causal:\n",
        "        if False:\n",
        ("test_linear_memories.py::test_delta_rule_is_its_equations_position_by_position",),
    ),
    Mutant(
        "the delta rule's step ignoring beam search's reordering of its memory",
        "DeltaRuleSelfAttention.step",
        "memory, empty = continued(rows, memory, empty)",
        "pass",
        ("test_decoders.py::test_reorder_moves_hypotheses[transformer-delta]",),
    ),
    Mutant(
        "TTT's step ignoring beam search's reordering of its weights",
        "TTTLinearSelfAttention.step",
        "weights, written = continued(rows, weights, written)",
        "pass",
        ("test_decoders.py::test_reorder_moves_hypotheses[transformer-ttt]",),
    ),
    Mutant(
        "linear attention's feature_map setting ignored (elu + 1 whatever it names)",
        "LinearSelfAttention.__init__",
        "self.phi = chosen_feature_map(feature_map, type(self).__name__)",
        "self.phi = FEATURE_MAPS['elu+1']",
        (
            "test_linear_memories.py::"
            "test_linear_attention_with_another_feature_map_is_eq5_and_steps_as_it_runs",
        ),
    ),
    Mutant(
        "DPFP's products with r shifted by j + 1 instead of j",
        "dpfp",
        "r * r.roll(-j, dims=-1)",
        "r * r.roll(-j - 1, dims=-1)",
        ("test_linear_memories.py::test_dpfp_is_r_times_its_shifts",),
    ),
    Mutant(
        "GNMT's decoder with its residual connections dropped (o^k = h^k from layer 3 up too)",
        "GNMTDecoder._residual",
        "            return output + below\n",
        "            return output\n",
        ("test_gnmt.py::test_the_decoder_matches_a_loop_of_cells",),
    ),
    Mutant(
        "the recurrent encoder's residual connections dropped (GNMT's from layer 3)",
        "RNNEncoder.forward",
        "                x = x + below\n",
        "                pass\n",
        ("test_gnmt.py::test_the_encoder_matches_its_layers_run_by_hand",),
    ),
    Mutant(
        "GNMT's attention context fed to the bottom decoder layer only, not to those above",
        "GNMTDecoder._upper_input",
        "self.training), context], dim=-1)",
        "self.training), context * 0], dim=-1)",
        ("test_gnmt.py::test_the_decoder_matches_a_loop_of_cells",),
    ),
    Mutant(
        "GNMT's attention queried with the bottom layer's new output h¹_i instead of h¹_{i−1} "
        "(teacher forcing still equals step-wise decoding)",
        "GNMTDecoder._bottom",
        "        return bottom, context, weights\n",
        "        context, weights = self.attend(_output(bottom), state, per_head)\n"
        "        return bottom, context, weights\n",
        ("test_gnmt.py::test_the_decoder_matches_a_loop_of_cells",),
    ),
    Mutant(
        "the recurrent encoder's summary read at the batch's last position (a shorter row's "
        "padding) instead of the row's last real token",
        "RNNEncoder.forward",
        "last = (lengths - 1).clamp(min=0)",
        "last = (lengths * 0 + inputs.size(1) - 1)",
        ("test_gnmt.py::test_the_encoder_matches_its_layers_run_by_hand",),
    ),
    Mutant(
        "relative attention's own fixed-cache step refused (a CUDA-graph search taken from it)",
        "keeps_keys_and_values",
        " or kind.step_fixed is not SelfAttention.step_fixed",
        "",
        ("test_contract.py::test_search_reads_a_decoders_cache_and_fixed_steps_from_the_contract",),
    ),
    Mutant(
        "a relative self-attention exported to CTranslate2 without its distances",
        "refusal",
        "{type(layer.self_attention) for layer in part.layers} - {SelfAttention}",
        "{type(a) for a in (x.self_attention for x in part.layers) if 'Lin' in type(a).__name__}",
        ("test_export.py::test_refuses_what_ctranslate2_cannot_run[relative]",),
    ),
    Mutant(
        "monolingual text compared with held-out lines case-sensitively",
        "line_key",
        "line.lower()",
        "line",
        ("test_monolingual.py::test_no_line_of_a_held_out_split_is_written",),
    ),
    Mutant(
        "the Brown corpus written with its tags (word/tag)",
        "brown",
        't.rsplit("/", 1)[0] for t in line.split()',
        "t for t in line.split()",
        ("test_monolingual.py::test_the_corpora_are_every_sentence_nltks_readers_give_in_order",),
    ),
    Mutant(
        "the prepared task data's held-out splits not checked (only --held-out files)",
        "held_out_files",
        "return list(dict.fromkeys([*given, *found]))",
        "return list(given)",
        ("test_monolingual.py::test_no_line_of_a_held_out_split_is_written",),
    ),
    Mutant(
        "a --text file named as a held-out split accepted",
        "parse_args",
        "if HELD_OUT_NAME.match(path.name):",
        "if False:",
        ("test_monolingual.py::test_a_text_file_named_as_a_held_out_split_is_refused",),
    ),
    Mutant(
        "monolingual validation taking the first block of every 50, not the 50th",
        "blocks",
        "set(range(VAL_EVERY - 1, len(cut), VAL_EVERY))",
        "set(range(0, len(cut), VAL_EVERY))",
        ("test_monolingual.py::test_the_corpora_are_every_sentence_nltks_readers_give_in_order",),
    ),
    Mutant(
        "monolingual output with every sentence held out written all the same (empty files)",
        "main",
        'sys.exit("error: no sentence is left to write")',
        "kept = [[]]",
        (
            "test_monolingual.py::test_its_own_tokeniser_is_trained_on_train_txt_and_a_failure_replaces_nothing",
        ),
    ),
    Mutant(
        "masked LM's loss over every position, not the chosen ones alone",
        "MaskedLMTask.losses",
        "chosen = batch.targets != PAD_ID",
        "chosen = batch.src_mask",
        ("test_pretraining.py::test_the_loss_is_the_cross_entropy_of_the_chosen_pieces_alone",),
    ),
    Mutant(
        "BERT's corruption masking 10 % of the chosen pieces and replacing 80 % at random",
        "corrupt",
        "if draw < replace_share:",
        "if draw < random_share:",
        ("test_pretraining.py::test_corruption_chooses_15_percent_and_replaces_80_10_10",),
    ),
    Mutant(
        "BERT's corruption choosing nothing in a sequence whose draws all missed",
        "corrupt",
        "if ordinary and not chosen:",
        "if False:",
        (
            "test_pretraining.py::test_every_sequence_predicts_one_piece_at_least_and_specials_never",
        ),
    ),
    Mutant(
        "evaluation masks drawn afresh each time (validations not comparable)",
        "collate",
        "rng = random.Random(i) if fixed else random",
        "rng = random",
        (
            "test_pretraining.py::test_evaluation_masks_are_the_same_every_time_and_training_masks_fresh",
        ),
    ),
    Mutant(
        "next-sentence pairs whose B is drawn from A's own document",
        "MonolingualData._pairs",
        "while not is_next and other[0] == d:",
        "while not is_next and other == (d, s + 1):",
        (
            "test_pretraining.py::test_next_sentence_pairs_follow_half_the_time_and_else_come_from_another_document",
        ),
    ),
    Mutant(
        "the frozen steps ignored: the encoder trained from the first step",
        "FineTuning.on_train_batch_start",
        "parameter.requires_grad_(trained)",
        "parameter.requires_grad_(True)",
        (
            "test_fine_tuning.py::test_a_fit_starts_from_the_pretrained_encoder_and_keeps_it_frozen_as_asked",
        ),
    ),
    Mutant(
        "the pre-trained encoder's weights checked but never loaded",
        "FineTuning.start_from_pretrained",
        "self.encoder.load_state_dict(weights)",
        "self.encoder.load_state_dict(self.encoder.state_dict())",
        (
            "test_fine_tuning.py::test_a_fit_starts_from_the_pretrained_encoder_and_keeps_it_frozen_as_asked",
        ),
    ),
    Mutant(
        "a pre-trained encoder reading with another tokeniser taken",
        "pretrained_weights",
        "        if found is not None:\n",
        "        if False:\n",
        (
            "test_fine_tuning.py::test_an_encoder_that_does_not_fit_is_refused_in_one_line_before_a_step[tokeniser]",
        ),
    ),
    Mutant(
        "the encoder's own rate given to every parameter",
        "FineTuning.parameter_groups",
        'return [{"params": encoder, "lr": self.encoder_lr}, {"params": rest}]',
        'return [{"params": encoder + rest, "lr": self.encoder_lr}]',
        ("test_fine_tuning.py::test_the_encoders_own_rate_is_a_group_of_its_parameters_alone",),
    ),
    Mutant(
        "monolingual.py holding out its own earlier validation split (a second run drops it)",
        "held_out_files",
        "and not path.resolve().is_relative_to(own)",
        "",
        (
            "test_monolingual.py::test_a_second_run_into_the_task_data_does_not_hold_out_its_own_validation",
        ),
    ),
    Mutant(
        "the pieces inside words standing for the words instead of each word's first",
        "first_pieces",
        "torch.argsort((~keep).to(torch.int8), dim=1, stable=True)",
        "torch.argsort(keep.to(torch.int8), dim=1, stable=True)",
        ("test_pieces.py::test_first_pieces_keeps_each_words_first_annotation_in_order",),
    ),
    Mutant(
        "the EOS not kept by the pooling over pieces (the decoder loses its end)",
        "SourcePieces.__init__",
        "        self.word_starts[EOS_ID] = True\n",
        "",
        ("test_pieces.py::test_each_word_reads_as_its_own_pieces_and_its_first_marks_the_word",),
    ),
    Mutant(
        "search reading the encoder's pieces instead of the words they are pooled to",
        "Model.search_sources",
        "memory = task.encode_source(src, src != PAD_ID)",
        "memory = task.encoder(src, src != PAD_ID)",
        ("test_pieces.py::test_a_parser_over_pieces_parses_words_stores_and_exports_alike",),
    ),
    Mutant(
        "a word vocabulary stored with a null tokeniser key (every old fingerprint changes)",
        "ParsingVocabulary.as_dict",
        '        if self.source_tokenizer is None:\n            del stored["source_tokenizer"]\n',
        "",
        (
            "test_pieces.py::test_the_vocabulary_keeps_its_tokeniser_in_json_and_a_word_vocabulary_as_before",
        ),
    ),
    Mutant(
        "self-critical training descending the reward (the sign of REINFORCE flipped)",
        "self_critical_step",
        "loss=-(advantage * log_p).mean(),",
        "loss=(advantage * log_p).mean(),",
        (
            "test_self_critical.py::test_training_on_a_reward_makes_its_outputs_likelier",
            "test_self_critical.py::test_the_loss_is_reinforce_with_the_baseline_and_logs_by_hand",
        ),
    ),
    Mutant(
        "the leave-one-out baseline counting the sample itself",
        "self_critical_step",
        "(rewards.sum(dim=1, keepdim=True) - rewards) / (k - 1)",
        "rewards.mean(dim=1, keepdim=True).expand(rows, k)",
        (
            "test_self_critical.py::test_the_loss_is_reinforce_with_the_baseline_and_logs_by_hand[mean]",
        ),
    ),
    Mutant(
        "log p of the samples not renormalised under the constraint",
        "sequence_log_probs",
        '        logits = logits.masked_fill(~torch.stack(allowed, dim=1), float("-inf"))\n',
        "",
        ("test_self_critical.py::test_log_p_of_the_samples_is_the_sampling_policys",),
    ),
    Mutant(
        "a finished sample's EOS left out of its log p",
        "sequence_log_probs",
        "tokens = [h.tokens + ([EOS_ID] if h.finished else []) for h in outputs]",
        "tokens = [list(h.tokens) for h in outputs]",
        ("test_self_critical.py::test_log_p_of_the_samples_is_the_sampling_policys",),
    ),
    Mutant(
        "a caption's EOS left out of its CIDEr-D reward",
        "CaptioningTask.sequence_rewards",
        "+ [EOS_WORD] * h.finished,",
        ",",
        ("test_self_critical.py::test_captions_are_rewarded_by_cider_d_with_their_eos",),
    ),
    Mutant(
        "parse F1 counting matched brackets once, not against gold and test",
        "sentence_f1",
        "return 2 * scored.matched / (scored.gold + scored.test)",
        "return scored.matched / (scored.gold + scored.test)",
        ("test_self_critical.py::test_sentence_f1_against_a_worked_example",),
    ),
    Mutant(
        "the whole pre-trained model checked but not loaded",
        "FineTuning.start_from_pretrained",
        "self.load_state_dict(pretrained_model_weights(self.pretrained_model, self, entries))",
        "pretrained_model_weights(self.pretrained_model, self, entries)",
        ("test_self_critical.py::test_a_self_critical_fit_starts_from_the_whole_trained_model",),
    ),
    Mutant(
        "a word whose pieces do not start with the word boundary taken (its position lost)",
        "SourcePieces.encode_words",
        "if not starts or not starts[0] or any(starts[1:]):",
        "if not starts:",
        ("test_pieces.py::test_a_word_whose_pieces_lose_its_start_is_refused_by_name",),
    ),
    Mutant(
        "word dropout over pieces taken silently (it has no unknown-word classes to drop to)",
        "ParsingData.__init__",
        "if source_tokenizer is not None and word_dropout > 0:",
        "if False:",
        ("test_pieces.py::test_settings_that_pieces_cannot_keep_are_refused[word_dropout]",),
    ),
    Mutant(
        "translation rewarding chrF when asked for BLEU",
        "TranslationTask.sequence_rewards",
        'sacrebleu.sentence_bleu if reward == "bleu" else sacrebleu.sentence_chrf',
        "sacrebleu.sentence_chrf",
        ("test_self_critical.py::test_each_task_rewards_its_own_metric",),
    ),
    Mutant(
        "the server taking a key that only starts with its own",
        "KeyCheck.__call__",
        "if hmac.compare_digest(given, self.key):",
        "if given.startswith(self.key):",
        ("test_serve.py::test_the_key_guards_every_route_but_the_page",),
    ),
    Mutant(
        "the layer mix weighting by its raw weights, not their softmax",
        "ScalarMix.forward",
        "shares = torch.softmax(self.weights, dim=0)",
        "shares = self.weights",
        ("test_layer_mix.py::test_the_mix_is_elmos_equation",),
    ),
    Mutant(
        "the layers mixed as they are, not layer-normalised first",
        "ScalarMix.forward",
        "s * F.layer_norm(h, h.shape[-1:])",
        "s * h",
        ("test_layer_mix.py::test_the_mix_is_elmos_equation",),
    ),
    Mutant(
        "the layer mix without its scale γ",
        "ScalarMix.forward",
        "return self.scale * mixed",
        "return mixed",
        ("test_layer_mix.py::test_the_mix_is_elmos_equation",),
    ),
    Mutant(
        "the Transformer's mix reading the top stream before the stack's final norm",
        "TransformerEncoder.forward",
        "states = self.layer_mix([*below, states])",
        "states = self.layer_mix([*below, stream[0]])",
        (
            "test_layer_mix.py::test_each_share_of_the_transformers_mix_reads_the_layer_it_names[pre]",
        ),
    ),
    Mutant(
        "the BiRNN's token layer mixed as [x; 0], not ELMo's [x; x]",
        "RNNEncoder.forward",
        "layers = [torch.cat([x, x], dim=-1)] if mixing else []",
        "layers = [torch.cat([x, torch.zeros_like(x)], dim=-1)] if mixing else []",
        (
            "test_layer_mix.py::test_the_birnns_mix_reads_the_token_layer_twice_over_and_every_layer",
        ),
    ),
    Mutant(
        "a BiRNN with one-way layers above given a mix of layers of two widths",
        "RNNEncoder.__init__",
        "if layer_mix and (both_ways < num_layers or embed_dim != hidden_size):",
        "if layer_mix and embed_dim != hidden_size:",
        ("test_layer_mix.py::test_a_birnn_whose_layers_differ_in_width_is_refused_a_mix[one_way]",),
    ),
    Mutant(
        "a pre-trained encoder's own layer mix taken (it is its task's)",
        "pretrained_weights",
        "if k.startswith(PREFIX) and not own(k[len(PREFIX) :])",
        "if k.startswith(PREFIX)",
        ("test_layer_mix.py::test_a_pretrained_mix_is_its_own_tasks_and_is_not_taken",),
    ),
    Mutant(
        "the layer mix frozen with the encoder",
        "FineTuning.on_train_batch_start",
        "self._trainable = [p for p in self.pretrained_parameters() if p.requires_grad]",
        "self._trainable = [p for p in self.encoder.parameters() if p.requires_grad]",
        (
            "test_layer_mix.py::test_the_mix_trains_at_the_tasks_rate_and_while_the_encoder_is_frozen",
        ),
    ),
    Mutant(
        "the layer mix trained at the encoder's rate",
        "FineTuning.parameter_groups",
        "encoder = self.pretrained_parameters()",
        "encoder = list(self.encoder.parameters())",
        (
            "test_layer_mix.py::test_the_mix_trains_at_the_tasks_rate_and_while_the_encoder_is_frozen",
        ),
    ),
    Mutant(
        "possible gold links counted as sure",
        "read_links",
        '(sure if found[2] == "-" else possible).add(link)',
        "sure.add(link)",
        (
            "test_alignment.py::test_sure_and_possible_links_are_read_and_every_sure_link_is_possible",
            "test_alignment.py::test_aer_precision_and_recall_of_a_corpus_as_worked_by_hand",
        ),
    ),
    Mutant(
        "subwords not summed into words: a word's first piece stands for it",
        "_summing",
        "counted = [(k, word) for k, word in enumerate(words) if word is not None]",
        "counted = [(k, w) for k, w in enumerate(words) if w is not None and w not in words[:k]]",
        ("test_alignment.py::test_a_words_pieces_are_summed_on_both_sides",),
    ),
    Mutant(
        "a target word that attends most to the EOS linked to it",
        "attention_links",
        "return {(i, j) for j, i in enumerate(words.argmax(dim=1).tolist()) if i != eos}",
        "return {(i, j) for j, i in enumerate(words.argmax(dim=1).tolist())}",
        (
            "test_alignment.py::test_each_target_word_links_to_the_source_word_it_attends_to_most_but_the_eos",
        ),
    ),
    Mutant(
        "AER counting sure hits twice instead of sure and possible hits",
        "score_alignments",
        "aer=100 * (1 - (a_s + a_p) / (a + s)),",
        "aer=100 * (1 - 2 * a_s / (a + s)),",
        ("test_alignment.py::test_aer_precision_and_recall_of_a_corpus_as_worked_by_hand",),
    ),
    Mutant(
        "forced attention a row late (the row that writes the EOS kept, the first dropped)",
        "Translator.align",
        'attention = alignment_attention(maps["cross"], layer, heads)[:-1]',
        'attention = alignment_attention(maps["cross"], layer, heads)[1:]',
        ("test_alignment_command.py::test_the_attention_read_is_the_attention_written",),
    ),
    Mutant(
        "a bare word mark counted as a target character",
        "piece_positions",
        "position += piece != WORD_START",
        "position += 1",
        ("test_alignment.py::test_a_character_models_positions_are_its_characters",),
    ),
    Mutant(
        "a translation longer than the decoder reads aligned anyway (failing inside it)",
        "Model.check_forced",
        "if steps is not None and len(target) + 1 > steps:",
        "if False:",
        (
            "test_alignment_command.py::"
            "test_a_translation_longer_than_the_decoder_reads_is_refused_by_its_number",
        ),
    ),
    Mutant(
        "the causal mask left out of a recorded self-attention's weights",
        "visible_keys",
        "    if not causal:\n        return key_mask\n",
        "    if True:\n        return key_mask\n",
        ("test_attention_recording.py::test_causal_self_attention_sees_the_past_only",),
    ),
    Mutant(
        "a recorded cross-attention's heads in reverse order",
        "Attention.forward",
        "self.keep(heads)",
        "self.keep(heads.flip(1))",
        (
            "test_attention_recording.py::"
            "test_multi_head_cross_attention_per_head_and_per_hypothesis",
        ),
    ),
    Mutant(
        "every attention's decoder maps cut without the EOS row",
        "recorded_maps",
        "rows, keys = len(target) + 1, memory_lengths[row]",
        "rows, keys = len(target), memory_lengths[row]",
        ("test_every_attention.py::test_every_layer_and_head_over_its_pieces",),
    ),
    Mutant(
        "the mask not applied to the loss: every position of the input predicted",
        "MaskedLMTask.losses",
        "chosen = batch.targets != PAD_ID",
        "chosen = batch.src_mask",
        (
            "test_pretraining.py::"
            "test_the_loss_is_the_cross_entropy_of_the_chosen_pieces_alone[encoder0]",
        ),
    ),
    Mutant(
        "a reversing parser's maps naming its words in the sentence's order, not the encoder's",
        "Parser.attention_names",
        "memory = [*vocabulary.source.ordered(list(words)), read[-1]]",
        "memory = [*words, read[-1]]",
        (
            "test_attentions_of_each_task.py::"
            "test_a_reversing_parsers_maps_name_the_words_in_the_order_it_reads_them",
        ),
    ),
    Mutant(
        "every caption's maps read from the first image of the batch",
        "Captioner.attach_caption_attentions",
        "rows, targets = [i for i, _, _ in outputs], [t for _, t, _ in outputs]",
        "rows, targets = [0 for i, _, _ in outputs], [t for _, t, _ in outputs]",
        ("test_attentions_of_each_task.py::test_a_captioners_maps_are_over_its_grid_cells[soft]",),
    ),
    Mutant(
        "alignments read from the top layer by default, not Garg et al.'s penultimate",
        "alignment_attention",
        "layer = (-2 if len(cross) >= 2 else -1) if layer is None else layer",
        "layer = -1 if layer is None else layer",
        (
            "test_alignment.py::test_alignments_read_garg_et_als_penultimate_layer_unless_told",
            "test_alignment_command.py::test_alignments_come_from_the_layer_and_heads_asked_for",
        ),
    ),
    Mutant(
        "the heads asked for ignored: every head of the layer averaged",
        "alignment_attention",
        "return weights[list(heads)].mean(0)",
        "return weights.mean(0)",
        (
            "test_alignment.py::test_alignments_read_garg_et_als_penultimate_layer_unless_told",
            "test_alignment_command.py::test_alignments_come_from_the_layer_and_heads_asked_for",
        ),
    ),
    Mutant(
        "a plot's panels all showing the first head, whatever head they name",
        "Attentions.panels",
        "self.get(kind, layer, int(head))",
        "self.get(kind, layer, 0)",
        ("test_every_attention.py::test_panels_are_the_layers_and_heads_asked_for",),
    ),
    Mutant(
        "the decoder-only model's recorded weights without the causal and padding mask",
        "PromptedLayer.forward",
        "joint = attention_weights(q, k, allowed)",
        "joint = attention_weights(q, k, None)",
        (
            "test_prompted.py::"
            "test_the_decoder_only_transformers_attention_is_its_one_softmax_block_by_block",
            "test_every_attention.py::"
            "test_a_decoder_only_models_one_attention_is_given_as_the_three_kinds",
        ),
    ),
    Mutant(
        "the decoder-only model's step recording its target block as the cross-attention",
        "PromptedLayer.step",
        "self.keep(cross=weights, decoder=on_target)",
        "self.keep(cross=on_target, decoder=weights)",
        (
            "test_prompted.py::"
            "test_the_decoder_only_transformers_attention_is_its_one_softmax_block_by_block",
        ),
    ),
    Mutant(
        "an ensemble's prompt maps looked for in each member's encoder alone (not its decoder)",
        "recorded_maps",
        '"encoder": log.layers("encoder", within=member),',
        '"encoder": log.layers("encoder", within=member[:1]),',
        (
            "test_every_attention.py::"
            "test_a_decoder_only_models_one_attention_is_given_as_the_three_kinds",
        ),
    ),
    Mutant(
        "the share of distinct captions counting every caption, repeated ones too",
        "captioning_report",
        "distinct = len({c.text for c in captions})",
        "distinct = len([c.text for c in captions])",
        (
            "test_caption_apps.py::test_evaluate_captioning_scores_each_caption_against_its_own_image",
        ),
    ),
    Mutant(
        "monolingual.py's --model-type not passed on: a word tokeniser trained as subwords",
        "main",
        "tokenizer = train_sentencepiece(train_lines, args.vocab_size, args.model_type)",
        "tokenizer = train_sentencepiece(train_lines, args.vocab_size)",
        ("test_monolingual.py::test_a_word_tokeniser_reads_each_word_it_knows_as_one_piece",),
    ),
    Mutant(
        "a word tokeniser's unknown word not taken as a word: the parser loses its position",
        "SourcePieces.__init__",
        "if all(self.word_starts[EOS_ID + 1 :]):",
        "if False:",
        ("test_pieces.py::test_a_word_tokeniser_reads_an_unknown_word_as_one_unknown_piece",),
    ),
    Mutant(
        "a subword tokeniser's unknown piece taken as a word's start (a word split in two)",
        "SourcePieces.__init__",
        "if all(self.word_starts[EOS_ID + 1 :]):",
        "if True:",
        ("test_pieces.py::test_a_word_tokeniser_reads_an_unknown_word_as_one_unknown_piece",),
    ),
]


def copy_tree(
    destination: Path,
    shared_data: Path = REPO.parent / "shared" / "data",
    untracked: bool = True,
) -> Path:
    """The tracked (and, with `untracked`, the untracked files not ignored) files in
    destination/main, beside destination/shared/data, a link to `shared_data` (the tests read
    ../shared/data)."""
    others = ["--others", "--exclude-standard"] if untracked else []
    files = subprocess.run(
        ["git", "ls-files", "--cached", *others, "-z"],
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
    (destination / "shared").mkdir()
    (destination / "shared" / "data").symlink_to(shared_data.resolve())
    return root


class Stale(Exception):
    """A mutant's site or test that cannot be found, or not uniquely; its message is one line."""


@functools.lru_cache(maxsize=1024)
def definitions(text: str) -> list[tuple[str, int, int]]:
    """The sites of a Python module: (dotted name, start, end), offsets into `text` of whole
    lines, for every function and class (its decorators included), named through the functions
    and classes around it (`TransformerDecoder.reorder`), and every module-level assignment to
    one name (`STAGE_SPLITS`)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found = []

    def span(node: ast.AST, first: int) -> tuple[int, int]:
        return starts[first - 1], min(starts[node.end_lineno], len(text))

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                found.append((name, *span(child, first)))
                visit(child, name + ".")
                continue
            if not prefix and isinstance(child, ast.Assign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                names = [target.id for target in targets if isinstance(target, ast.Name)]
                if len(names) == 1:
                    found.append((names[0], *span(child, child.lineno)))
            visit(child, prefix)

    visit(ast.parse(text), "")
    return found


def is_file_site(site: str) -> bool:
    return "/" in site or Path(site).suffix in FILE_SUFFIXES


def searched(relative: str) -> bool:
    """Whether a file at `relative` (a POSIX path under the tree's root) is one of the project's:
    outside hidden and NOT_SEARCHED folders and what a build leaves (BUILT at the top, any
    *.egg-info)."""
    folders = relative.split("/")[:-1]
    return not (folders and folders[0] in BUILT) and not any(
        name[0] == "." or name in NOT_SEARCHED or name.endswith(".egg-info") for name in folders
    )


def project_files(root: Path) -> list[Path]:
    """The project's own files under `root`, sorted: those git tracks there and the untracked
    ones it does not ignore (never .venv, runs/ or data/), or, in a tree without git (the
    mutants' copies, which hold just those), every file; either way only those `searched`, so
    never what `pip install .` leaves in build/."""
    try:
        command = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
        listing = subprocess.run(command, cwd=root, capture_output=True)
    except OSError:  # no git on this machine
        listing = None
    if listing is not None and listing.returncode == 0:
        names = [os.fsdecode(name) for name in listing.stdout.split(b"\0") if name]
    else:
        names = []
        for parent, folders, files in os.walk(root):
            at = Path(parent).relative_to(root)
            prefix = "" if at == Path(".") else at.as_posix() + "/"
            folders[:] = [name for name in folders if searched(f"{prefix}{name}/")]
            names += [prefix + name for name in files]
    # git lists a tracked file deleted from the work tree until the deletion is staged
    return sorted(root / name for name in names if searched(name) and (root / name).is_file())


def files_under(files: list[Path], folder: Path, suffix: str = "") -> list[Path]:
    """Those of `files` (from `project_files`) under `folder` that end in `suffix`."""
    under = os.path.join(folder, "")
    return [path for path in files if str(path).startswith(under) and str(path).endswith(suffix)]


def locate(root: Path, mutant: Mutant, files: list[Path] | None = None) -> tuple[Path, int, int]:
    """The file under `root` holding the mutant's site, and where in its text (start, end) the
    mutant's `old` text lies; Stale where the site is missing, not unique, or does not hold the
    text exactly once. `files`: `project_files(root)`, when the caller has it already."""
    site, old = mutant.site, mutant.old
    files = project_files(root) if files is None else files
    if is_file_site(site):
        paths = [
            path for path in files if ("/" + path.relative_to(root).as_posix()).endswith("/" + site)
        ]
        if not paths:
            raise Stale(f"site {site} not found")
        if len(paths) > 1:
            names = ", ".join(path.relative_to(root).as_posix() for path in paths)
            raise Stale(f"site {site} found in {len(paths)} files: {names}")
        holders = [(paths[0], 0, len(paths[0].read_text(encoding="utf-8")), 1)]
    else:
        last = site.rpartition(".")[2]
        holders, seen = [], False
        for folder in SOURCE_FOLDERS:
            for path in files_under(files, root / folder, ".py"):
                text = path.read_text(encoding="utf-8")
                for name, start, end in definitions(text) if last in text else ():
                    if name == site:
                        seen = True
                        if old in text[start:end]:
                            line = text.count("\n", 0, start) + 1
                            holders.append((path, start, end, line))
        if not holders:
            raise Stale(f"site {site} {'holds its text 0×' if seen else 'not found'}")
        if len(holders) > 1:
            files = {path for path, *_ in holders}
            places = ", ".join(
                path.relative_to(root).as_posix()
                + ("" if len(files) == len(holders) else f":{line}")
                for path, _, _, line in holders
            )
            where = "files" if len(files) == len(holders) else "places"
            raise Stale(f"site {site} found in {len(holders)} {where}: {places}")
    path, start, end, _ = holders[0]
    text = path.read_text(encoding="utf-8")
    if (count := text.count(old, start, end)) != 1:
        raise Stale(f"site {site} holds its text {count}×")
    at = text.index(old, start, end)
    return path, at, at + len(old)


def find_test(root: Path, test: str, files: list[Path] | None = None) -> str:
    """pytest's id under `root` of a test named `test_file.py::test_name[param]` (or a whole
    file, `test_file.py`): the test function (or class) `test_name` is looked for in every
    `test_*.py` under tests/, and where several files define it, the one named `test_file.py`
    is taken; Stale where none or several remain. `files`: as for `locate`."""
    file, _, rest = test.partition("::")
    name = re.match(r"[^\[:]*", rest).group()
    files = project_files(root) if files is None else files
    candidates = files_under(files, root / "tests", ".py")
    candidates = [path for path in candidates if re.fullmatch(r"test_.*\.py", path.name)]
    if not name:
        paths = [path for path in candidates if path.name == file]
    else:
        paths = []
        for path in candidates:
            text = path.read_text(encoding="utf-8")
            if name in text and any(
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == name
                for node in ast.parse(text).body
            ):
                paths.append(path)
        if len(paths) > 1:
            paths = [path for path in paths if path.name == file] or paths
    if not paths:
        raise Stale(f"test {test} not found")
    if len(paths) > 1:
        names = ", ".join(path.relative_to(root).as_posix() for path in paths)
        raise Stale(f"test {test} found in {len(paths)} files: {names}")
    return paths[0].relative_to(root).as_posix() + (f"::{rest}" if rest else "")


def run_tests(root: Path, tests: list[str]) -> subprocess.CompletedProcess:
    """The tests (pytest ids under `root`, from `find_test`) run in one pytest process."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_WAIT_POLICY": "PASSIVE"}
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-x", "-q", "--no-header"]
    return subprocess.run(
        [*command, *tests],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def failed_tests(output: str) -> list[str]:
    """The tests pytest reports as failed, or as in error at their setup or teardown (a
    fixture's own check, e.g. the page's accessible names); not a module that fails to import."""
    return [
        line.split()[1]
        for line in output.splitlines()
        if line.startswith("FAILED ") or (line.startswith("ERROR ") and "::" in line.split()[1])
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("numbers", nargs="*", type=int, help="mutants to run (1-based)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    args = parser.parse_args()
    chosen = args.numbers or range(1, len(MUTANTS) + 1)
    if args.list:
        for n in chosen:
            print(f"{n:2d}. {MUTANTS[n - 1].what}: {MUTANTS[n - 1].site}")
        return 0
    survivors = 0
    for n in chosen:
        mutant = MUTANTS[n - 1]
        with tempfile.TemporaryDirectory(prefix="seqtasks-mutant-") as folder:
            root = copy_tree(Path(folder))
            files = project_files(root)
            try:
                path, start, end = locate(root, mutant, files)
                tests = [find_test(root, test, files) for test in mutant.tests]
            except Stale as stale:
                print(f"{n:2d}. STALE: {stale}")
                survivors += 1
                continue
            clean = run_tests(root, tests)
            if clean.returncode != 0:
                print(f"{n:2d}. BROKEN: the unmutated tests fail: {failed_tests(clean.stdout)}")
                survivors += 1
                continue
            text = path.read_text(encoding="utf-8")
            path.write_text(text[:start] + mutant.new + text[end:], encoding="utf-8")
            broken = run_tests(root, tests)
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
