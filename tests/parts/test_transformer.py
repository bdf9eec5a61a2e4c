"""The Transformer: cached search equals re-running the prefix, the encoder ignores padding,
every residual placement learns, and the schedule, dropout and embedding sharing behave."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

import seqtasks.attention.multihead as multihead
from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seqtasks.decoders import BahdanauDecoder, LuongDecoder, NoAttentionDecoder
from seqtasks.decoders.base import Decoder, DecoderOutput
from seqtasks.decoders.transformer import TransformerDecoder
from seqtasks.encoders import TransformerEncoder
from seqtasks.layers.dropout import Dropout
from seqtasks.layers.memory import Memory, lengths_to_mask
from seqtasks.layers.transformer import grid_positions, sinusoidal_table
from seqtasks.search import SearchSettings, beam_search, greedy
from seqtasks.training.schedules import InverseSqrtWarmup

VOCAB, B, S = 13, 3, 7
LENGTHS = torch.tensor([7, 4, 2])


def padded_sources(seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = lengths_to_mask(LENGTHS, S)
    return torch.randint(4, VOCAB, (B, S), generator=g).masked_fill(~mask, PAD_ID), mask


def small_model(norm: str = "post") -> tuple[TransformerEncoder, TransformerDecoder]:
    torch.manual_seed(0)
    sizes = dict(d_model=16, num_heads=4, num_layers=2, ff_dim=32, norm=norm)
    encoder = TransformerEncoder(VOCAB, **sizes).eval()
    return encoder, TransformerDecoder(VOCAB, encoder.out_dim, **sizes).eval()


class PrefixRerunDecoder(Decoder):
    """The uncached way to decode: every step re-runs the teacher-forced pass over the whole
    prefix and keeps the last position. The state is (memory rows, prefix)."""

    def __init__(self, decoder: TransformerDecoder):
        super().__init__()
        self.inner = decoder
        self.vocab_size = decoder.vocab_size

    def forward(self, memory: Memory, tgt_in: torch.Tensor, **attention) -> DecoderOutput:
        return self.inner(memory, tgt_in, **attention)

    def start(self, memory: Memory, beam_size: int = 1):
        rows = torch.arange(memory.states.size(0)).repeat_interleave(beam_size)
        return memory.index_select(rows), torch.zeros(len(rows), 0, dtype=torch.long)

    def step(self, prev_tokens, state):
        memory, prefix = state
        prefix = torch.cat([prefix, prev_tokens[:, None]], dim=1)
        output = self.inner(memory, prefix, need_attention=True)
        return output.logits[:, -1], (memory, prefix), output.attention[:, -1]

    def reorder(self, state, index):
        memory, prefix = state
        return memory.index_select(index), prefix.index_select(0, index)


@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
def test_cached_search_equals_rerunning_the_prefix(norm):
    encoder, decoder = small_model(norm)
    src, mask = padded_sources()
    with torch.no_grad():
        memory = encoder(src, mask)
    uncached = PrefixRerunDecoder(decoder)
    for search in (
        lambda d: greedy(d, memory, 9, attention=True),
        lambda d: beam_search(d, memory, SearchSettings(1), 9, attention=True),
        lambda d: beam_search(d, memory, SearchSettings(3, n_best=3), 9),
    ):
        for fast, slow in zip(search(decoder), search(uncached), strict=True):
            assert [h.tokens for h in fast] == [h.tokens for h in slow]
            for a, b in zip(fast, slow, strict=True):
                assert math.isclose(a.score, b.score, rel_tol=1e-4, abs_tol=1e-4)
                if a.attention is not None:
                    torch.testing.assert_close(a.attention, b.attention, atol=1e-5, rtol=1e-4)


def test_reorders_compose_before_the_next_step():
    """`reorder` only records the rows (the next step applies them while extending the caches):
    two reorders in a row, dropping an input on the way, act as their composition."""
    encoder, decoder = small_model()
    src, mask = padded_sources()
    k = 2
    with torch.no_grad():
        memory = encoder(src, mask)
        state = decoder.start(memory, beam_size=k)
        for token in (5, 6):
            _, state, _ = decoder.step(torch.full((B * k,), token), state)
        first = torch.tensor([1, 1, 2, 3, 5, 4])  # within each input's K rows
        second = torch.tensor([0, 1, 5, 4])  # drops input 1
        prev = torch.tensor([7, 8, 9, 10])
        twice, _, _ = decoder.step(prev, decoder.reorder(decoder.reorder(state, first), second))
        once, _, _ = decoder.step(prev, decoder.reorder(state, first[second]))
        kept = memory.index_select(torch.tensor([0, 2]))
        fresh = decoder.start(kept, beam_size=k)
        for token in (5, 6):
            _, fresh, _ = decoder.step(torch.full((2 * k,), token), fresh)
        direct, _, _ = decoder.step(prev, fresh)
    torch.testing.assert_close(twice, once)
    torch.testing.assert_close(twice, direct)


@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
def test_encoder_ignores_padding(norm):
    encoder, _ = small_model(norm)
    src, mask = padded_sources()
    noisy = torch.where(mask, src, 5)  # a real token where there is padding
    with torch.no_grad():
        memory, noisy_memory = encoder(src, mask), encoder(noisy, mask)
        for b, length in enumerate(LENGTHS.tolist()):
            alone = encoder(src[b : b + 1, :length], mask[b : b + 1, :length])
            torch.testing.assert_close(memory.states[b, :length], alone.states[0])
            torch.testing.assert_close(memory.summary[b], alone.summary[0])
            torch.testing.assert_close(memory.summary[b], memory.states[b, :length].mean(0))
    torch.testing.assert_close(noisy_memory.summary, memory.summary)


@pytest.mark.parametrize(
    "decoder_class", [BahdanauDecoder, LuongDecoder, NoAttentionDecoder, TransformerDecoder]
)
def test_transformer_encoder_pairs_with_every_decoder(decoder_class):
    encoder, _ = small_model()
    decoder = decoder_class(VOCAB, encoder.out_dim)
    src, mask = padded_sources()
    tgt_in = torch.randint(4, VOCAB, (B, 5))
    encoder.train()
    logits = decoder(encoder(src, mask), tgt_in).logits
    F.cross_entropy(logits.flatten(0, 1), tgt_in.flatten()).backward()
    assert encoder.embedding.weight.grad.abs().sum() > 0
    decoder.eval(), encoder.eval()
    assert len(greedy(decoder, encoder(src, mask), 4)) == B


def copy_task(n: int, seed: int = 0):
    """n sequences of 3–7 distinct symbols to copy (distinct, so a small model can overfit them
    in a few hundred steps by content alone), with their teacher-forcing inputs and targets."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 8, (n,), generator=g)
    mask = lengths_to_mask(lengths)
    symbols = torch.stack([torch.randperm(VOCAB - 4, generator=g)[:7] + 4 for _ in range(n)])
    src = symbols[:, : mask.size(1)].masked_fill(~mask, PAD_ID)
    tgt_in = F.pad(src, (1, 0), value=BOS_ID)
    tgt_out = F.pad(src, (0, 1), value=PAD_ID)
    tgt_out[torch.arange(n), lengths] = EOS_ID
    return src, mask, tgt_in, tgt_out


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["post", "pre", "resi_dual"])
def test_every_norm_placement_overfits_a_copy_task(norm):
    src, mask, tgt_in, tgt_out = copy_task(128)
    torch.manual_seed(0)
    sizes = dict(d_model=32, num_heads=4, num_layers=2, ff_dim=64, dropout=0.0, norm=norm)
    encoder = TransformerEncoder(VOCAB, **sizes)
    decoder = TransformerDecoder(VOCAB, encoder.out_dim, **sizes)
    parameters = [*encoder.parameters(), *decoder.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=5e-3, betas=(0.9, 0.98))
    schedule = InverseSqrtWarmup(optimizer, warmup_steps=30)
    for _ in range(100):
        total = 0.0
        for rows in torch.randperm(len(src)).split(16):
            logits = decoder(encoder(src[rows], mask[rows]), tgt_in[rows]).logits
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out[rows].flatten(), ignore_index=0)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            schedule.step()
            total += loss.item() * len(rows) / len(src)
        if total < 0.01:
            break
    encoder.eval(), decoder.eval()
    with torch.no_grad():
        results = greedy(decoder, encoder(src, mask), 10)
    targets = [row[m].tolist() for row, m in zip(src, mask, strict=True)]
    exact = sum(r[0].tokens == t for r, t in zip(results, targets, strict=True)) / len(targets)
    assert exact == 1.0, f"{norm}: exact match {exact:.0%}, last epoch's loss {total:.3f}"


@pytest.mark.parametrize("norm, bf16", [("post", False), ("resi_dual", False), ("pre", True)])
def test_activation_checkpointing_keeps_loss_and_gradients(norm, bf16):
    """Recomputing each layer in the backward pass gives the same loss and gradients, dropout
    masks and bf16 autocast included, while autograd keeps fewer activations; evaluation never
    recomputes."""
    src, mask, tgt_in, tgt_out = copy_task(4)

    def run(checkpointing: bool, training: bool = True):
        torch.manual_seed(0)
        sizes = dict(d_model=16, num_heads=4, num_layers=2, ff_dim=32, norm=norm, dropout=0.3)
        sizes.update(attention_dropout=0.2, activation_checkpointing=checkpointing)
        encoder = TransformerEncoder(VOCAB, **sizes).train(training)
        decoder = TransformerDecoder(VOCAB, encoder.out_dim, **sizes).train(training)
        saved = []
        keep = torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t)
        with keep, torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            logits = decoder(encoder(src, mask), tgt_in, need_attention=True).logits.float()
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
        loss.backward()
        named = [*encoder.named_parameters("encoder"), *decoder.named_parameters("decoder")]
        return loss, {name: p.grad for name, p in named}, len(saved)

    loss, grads, kept = run(checkpointing=False)
    loss_ckpt, grads_ckpt, kept_ckpt = run(checkpointing=True)
    torch.testing.assert_close(loss_ckpt, loss, rtol=0, atol=0)
    torch.testing.assert_close(grads_ckpt, grads, rtol=1e-6, atol=1e-7)
    assert kept_ckpt < kept / 2, f"{kept_ckpt} tensors kept with checkpointing, {kept} without"
    assert run(checkpointing=True, training=False)[2] == run(False, training=False)[2]


def test_grid_memory_gets_2d_positions():
    _, decoder = small_model()
    states = torch.randn(2, 6, 16)
    flat = Memory(states, torch.ones(2, 6, dtype=torch.bool), states.mean(1))
    grid = Memory(states, flat.mask, flat.summary, grid=(2, 3))
    tgt_in = torch.tensor([[BOS_ID, 5], [BOS_ID, 6]])
    with torch.no_grad():
        assert not torch.allclose(decoder(grid, tgt_in).logits, decoder(flat, tgt_in).logits)
    table = grid_positions(2, 3, 16)
    assert table.shape == (6, 16)
    # Cells of one row share the row half; cells of one column share the column half.
    torch.testing.assert_close(table[0, :8], table[2, :8])
    torch.testing.assert_close(table[1, 8:], table[4, 8:])


def test_sinusoidal_table_matches_the_formula():
    table = sinusoidal_table(50, 8)
    p, i = 17, 3
    torch.testing.assert_close(table[p, 2 * i], torch.tensor(math.sin(p / 10000 ** (2 * i / 8))))
    assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 8)), 1e-5)


def test_too_long_input_names_the_limit():
    encoder = TransformerEncoder(VOCAB, d_model=8, num_heads=2, num_layers=1, max_positions=5)
    with pytest.raises(ValueError, match="max_positions=5"):
        encoder(torch.full((1, 6), 4), torch.ones(1, 6, dtype=torch.bool))


def test_inverse_sqrt_warmup_schedule():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = InverseSqrtWarmup(optimizer, warmup_steps=4)
    rates = []
    for _ in range(16):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert rates[15] == pytest.approx(math.sqrt(4 / 16))
    # The paper's formula with d = 16: lr = d^-0.5 · min(step^-0.5, step · warmup^-1.5).
    d, peak = 16, (16 * 4) ** -0.5
    paper = [d**-0.5 * min(s**-0.5, s * 4**-1.5) for s in range(1, 17)]
    assert [peak * r for r in rates] == pytest.approx(paper)


def test_dropout_rate_and_scale():
    torch.manual_seed(0)
    dropout = Dropout(0.3)
    x = torch.ones(200_000)
    y = dropout(x)
    kept = (y != 0).float().mean().item()
    assert kept == pytest.approx(1 - round(0.3 * 256) / 256, abs=0.005)
    assert y.mean().item() == pytest.approx(1.0, abs=0.01)  # unbiased
    assert not torch.equal(dropout(x), y)  # a fresh mask every call
    dropout.eval()
    assert torch.equal(dropout(x), x)
    with pytest.raises(ValueError, match="dropout rate"):
        Dropout(1.0)


def copy_weights_to_torch(
    encoder: TransformerEncoder, decoder: TransformerDecoder, norm_first: bool
) -> torch.nn.Transformer:
    """A `torch.nn.Transformer` with our weights, to check our layers against PyTorch's."""
    d = encoder.out_dim
    reference = torch.nn.Transformer(
        d_model=d, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
        dropout=0.0, batch_first=True, norm_first=norm_first,
    ).eval()  # fmt: skip
    with torch.no_grad():
        for ours, theirs in zip(encoder.layers, reference.encoder.layers, strict=True):
            theirs.self_attn.in_proj_weight.copy_(ours.self_attention.qkv.weight)
            theirs.self_attn.in_proj_bias.copy_(ours.self_attention.qkv.bias)
            theirs.self_attn.out_proj.load_state_dict(ours.self_attention.out.state_dict())
            theirs.linear1.load_state_dict(ours.feed_forward.inner.state_dict())
            theirs.linear2.load_state_dict(ours.feed_forward.outer.state_dict())
            theirs.norm1.load_state_dict(ours.residual_attention.norm.state_dict())
            theirs.norm2.load_state_dict(ours.residual_ff.norm.state_dict())
        for ours, theirs in zip(decoder.layers, reference.decoder.layers, strict=True):
            theirs.self_attn.in_proj_weight.copy_(ours.self_attention.qkv.weight)
            theirs.self_attn.in_proj_bias.copy_(ours.self_attention.qkv.bias)
            theirs.self_attn.out_proj.load_state_dict(ours.self_attention.out.state_dict())
            cross = theirs.multihead_attn
            cross.in_proj_weight.copy_(
                torch.cat([ours.cross_attention.q.weight, ours.cross_attention.kv.weight])
            )
            cross.in_proj_bias.copy_(
                torch.cat([ours.cross_attention.q.bias, ours.cross_attention.kv.bias])
            )
            cross.out_proj.load_state_dict(ours.cross_attention.out.state_dict())
            theirs.linear1.load_state_dict(ours.feed_forward.inner.state_dict())
            theirs.linear2.load_state_dict(ours.feed_forward.outer.state_dict())
            theirs.norm1.load_state_dict(ours.residual_self.norm.state_dict())
            theirs.norm2.load_state_dict(ours.residual_cross.norm.state_dict())
            theirs.norm3.load_state_dict(ours.residual_ff.norm.state_dict())
        if norm_first:
            reference.encoder.norm.load_state_dict(encoder.stack.norm.state_dict())
            reference.decoder.norm.load_state_dict(decoder.stack.norm.state_dict())
    return reference


@pytest.mark.filterwarnings("ignore:.*nested tensor")
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_layers_match_torch_nn_transformer(norm):
    """Post-LN is `nn.Transformer`'s default layer, Pre-LN its `norm_first` (Xiong et al.)."""
    encoder, decoder = small_model(norm)
    reference = copy_weights_to_torch(encoder, decoder, norm_first=norm == "pre")
    if norm == "post":  # PyTorch's stacks end in a LayerNorm either way; make it the identity
        for stack in (reference.encoder, reference.decoder):
            stack.norm = torch.nn.Identity()
    src, mask = padded_sources()
    tgt_in = torch.tensor([[BOS_ID, 5, 6, 7], [BOS_ID, 8, 9, 0], [BOS_ID, 4, 0, 0]])
    with torch.no_grad():
        memory = encoder(src, mask)
        ours = decoder(memory, tgt_in).logits
        src_emb = encoder.embeddings(src)
        tgt_emb = decoder.embeddings(tgt_in)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
        theirs_memory = reference.encoder(src_emb, src_key_padding_mask=~mask)
        theirs = reference.decoder(
            tgt_emb, theirs_memory, tgt_mask=causal, memory_key_padding_mask=~mask
        )
    torch.testing.assert_close(memory.states[mask], theirs_memory[mask], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(
        ours, F.linear(theirs, decoder.embedding.weight), atol=1e-4, rtol=1e-4
    )


class CudaQuery:
    """Stands in for a CUDA query: `fused_attention` reads only `is_cuda` before the kernel."""

    is_cuda = True


def test_attention_on_a_gpu_keeps_off_cudnn_for_that_call_only(monkeypatch):
    """cuDNN's attention builds a plan for every new shape (docs/gpu.md, "Attention kernels"):
    a GPU call runs with it off and the others as they were; afterwards, and after a kernel
    that raised, the flags are the caller's again. A CPU call and a caller that turned cuDNN
    off themselves are left alone."""
    cuda = torch.backends.cuda
    seen = []

    def kernel(q, k, v, **kwargs):
        seen.append((cuda.cudnn_sdp_enabled(), cuda.flash_sdp_enabled(), cuda.math_sdp_enabled()))
        if k == "raise":
            raise RuntimeError("kernel failed")
        return q

    monkeypatch.setattr(F, "scaled_dot_product_attention", kernel)
    assert cuda.cudnn_sdp_enabled()
    multihead.fused_attention(CudaQuery(), None, None)
    assert seen.pop() == (False, True, True) and cuda.cudnn_sdp_enabled()
    with pytest.raises(RuntimeError, match="kernel failed"):
        multihead.fused_attention(CudaQuery(), "raise", None)
    assert seen.pop() == (False, True, True) and cuda.cudnn_sdp_enabled()
    multihead.fused_attention(torch.zeros(1, 1, 2, 4), None, None)
    assert seen.pop() == (True, True, True)
    cuda.enable_cudnn_sdp(False)
    try:
        multihead.fused_attention(CudaQuery(), None, None)
        assert not cuda.cudnn_sdp_enabled()
    finally:
        cuda.enable_cudnn_sdp(True)


def test_training_attends_through_the_fused_kernels_call(monkeypatch):
    """Every attention of a teacher-forced training pass is one `F.scaled_dot_product_attention`
    call of a form its flash and memory-efficient kernels take: the decoder's self-attention by
    `is_causal`, no mask; the encoder's and the cross-attention's key padding as a boolean
    (B, 1, 1, S) mask, broadcast, never a (B, H, T, S) one. The explicit weights
    (`attention_weights`) are only for what asks for them."""
    calls = []
    fused = F.scaled_dot_product_attention

    def counted(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        calls.append((attn_mask, is_causal, tuple(q.shape), tuple(k.shape)))
        return fused(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)

    def explicit(*args):
        raise AssertionError("attention weights computed in training")

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    monkeypatch.setattr(multihead, "attention_weights", explicit)
    encoder, decoder = (part.train() for part in small_model())
    src, mask = padded_sources()
    tgt_in = torch.tensor([[BOS_ID, 5, 6, 7, 8], [BOS_ID, 9, 10, PAD_ID, PAD_ID], [BOS_ID] * 5])
    decoder(encoder(src, mask), tgt_in).logits.sum().backward()
    layers = len(encoder.layers)
    assert len(calls) == 3 * layers  # the encoder's self-attention; the decoder's self, cross
    causal = [c for c in calls if c[1]]
    assert len(causal) == layers and all(c[0] is None and c[2] == c[3] for c in causal)
    for padding_mask, _, query, _ in (c for c in calls if not c[1]):
        assert padding_mask.dtype == torch.bool and padding_mask.shape == (B, 1, 1, S)
        torch.testing.assert_close(padding_mask[:, 0, 0], mask)
        assert query[:2] == (B, 4)  # (B, H, T, D/H)


@pytest.mark.parametrize("multiple, rows", [(1, VOCAB), (8, 16), (13, VOCAB)])
def test_vocab_multiple_rounds_the_table_up_and_zeroes_the_extra_rows(multiple, rows):
    torch.manual_seed(0)
    encoder = TransformerEncoder(VOCAB, d_model=16, num_heads=4, vocab_multiple=multiple)
    table = encoder.embedding.weight
    assert table.shape == (rows, 16) and encoder.embeddings.vocab_size == VOCAB
    assert table[VOCAB:].abs().sum() == 0 and table[PAD_ID].abs().sum() == 0
    with pytest.raises(ValueError, match="vocab_multiple"):
        TransformerEncoder(VOCAB, d_model=16, num_heads=4, vocab_multiple=0)


def test_cross_attention_is_chosen_apart_from_the_self_attention():
    """`cross_attention` built as `cross_attention(d_model, memory_dim)`, its heads its own;
    one whose context is not d_model wide is refused by name; and CTranslate2's export, whose
    Transformer has one head count and multi-head cross-attention only, refuses both."""
    from types import SimpleNamespace

    from seqtasks.attention import GeneralAttention, MultiHeadAttention
    from seqtasks.translation.ctranslate2.export import refusal

    encoder, _ = small_model()
    sizes = dict(d_model=16, num_heads=4, num_layers=2, ff_dim=32)
    eight = TransformerDecoder(
        VOCAB, 16, cross_attention=partial(MultiHeadAttention, heads=8), **sizes
    )
    assert [layer.cross_attention.heads for layer in eight.layers] == [8, 8]
    assert [layer.self_attention.heads for layer in eight.layers] == [4, 4]
    src, mask = padded_sources()
    tgt_in = torch.tensor([[BOS_ID, 5, 6]] * B)
    heads = eight.eval()(encoder(src, mask), tgt_in, need_attention=True, per_head=True).attention
    assert heads.shape == (B, 8, 3, S)
    with pytest.raises(ValueError, match="cross_attention GeneralAttention gives contexts 12 wide"):
        TransformerDecoder(VOCAB, 12, cross_attention=GeneralAttention, **sizes)
    general = TransformerDecoder(VOCAB, 16, cross_attention=GeneralAttention, **sizes)
    for decoder, named in (
        (eight, "MultiHeadAttention with 8 heads"),
        (general, "GeneralAttention"),
    ):
        why = refusal(SimpleNamespace(encoder=encoder, decoder=decoder))
        assert why.startswith(f"its decoder's cross_attention is a {named}"), why
