"""The plain-PyTorch reference for the RNN benchmark: Bahdanau attention written the way the
well-known tutorials write it (bentrevett/pytorch-seq2seq, "3 - Neural Machine Translation by
Jointly Learning to Align and Translate").

Kept as in the tutorial:
  * time-major tensors ([len, batch]); a bidirectional nn.GRU over the padded source, no packing;
  * s_0 = tanh(fc([→h_S; ←h_1])) from the encoder's final states;
  * at every decoder step the attention energy is recomputed over the whole source from
    `torch.cat((hidden.repeat(1, src_len, 1), encoder_outputs), dim=2)` -> Linear -> tanh ->
    Linear(v) (no precomputed U h), softmax over all positions (no padding mask);
  * a single-step nn.GRU per position, the output layer applied per step to
    cat(output, weighted, embedded), the logits written into a preallocated
    [trg_len, batch, vocab] buffer, and the tutorial's `top1 = output.argmax(1)` per step.

Changed, to compare like with like: the output layer is a maxout deep output of the same width as
seqtasks' (Linear(H + 2·He + E, 2·readout) -> max over pairs -> dropout -> Linear(readout, V))
instead of the tutorial's single Linear(H + 2·He + E, V) (which would add ~5.5M parameters and
a 1280×V matmul per token); teacher forcing is always on (ratio 1.0, as seqtasks trains); the
source is `tokens + EOS` exactly as seqtasks' batches (the tutorial also prepends <sos>). With the
same widths this gives exactly the parameter count of seqtasks' BahdanauDecoder + RNNEncoder.

Interface used by bench/translation_train.py (one such module per decoder family):
    build_like(task) -> nn.Module          same sizes as the seqtasks model `task`
    make_batch(src_ids, tgt_ids, pad_id, bos_id, eos_id) -> (src, trg)  time-major LongTensors
    batch_loss(model, src, trg, label_smoothing, pad_id) -> (loss, real target tokens)
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SUMMARY = (
    "tutorial-style Bahdanau: unpacked BiGRU, attention recomputed from "
    "cat(hidden.repeat, encoder_outputs) each step, maxout readout like ours"
)


class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, emb_dim)
        self.rnn = nn.GRU(emb_dim, enc_hid_dim, bidirectional=True)
        self.fc = nn.Linear(enc_hid_dim * 2, dec_hid_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        # src = [src len, batch size]
        embedded = self.dropout(self.embedding(src))
        outputs, hidden = self.rnn(embedded)
        # outputs = [src len, batch size, enc hid dim * 2]; hidden = [2, batch size, enc hid dim]
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, enc_hid_dim, dec_hid_dim, attn_dim):
        super().__init__()
        self.attn = nn.Linear((enc_hid_dim * 2) + dec_hid_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, hidden, encoder_outputs):
        # hidden = [batch size, dec hid dim]; encoder_outputs = [src len, batch size, enc hid * 2]
        src_len = encoder_outputs.shape[0]
        hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim=2)))
        attention = self.v(energy).squeeze(2)  # [batch size, src len]
        return F.softmax(attention, dim=1)


class Maxout(nn.Module):
    """Deep output with maxout pools of 2 (replaces the tutorial's single fc_out Linear)."""

    def __init__(self, in_dim, readout_dim, output_dim, dropout):
        super().__init__()
        self.hidden = nn.Linear(in_dim, 2 * readout_dim)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(readout_dim, output_dim)

    def forward(self, x):
        t = self.hidden(x)
        t = t.view(*t.shape[:-1], -1, 2).max(dim=-1).values
        return self.out(self.dropout(t))


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, enc_hid_dim, dec_hid_dim, readout_dim, dropout,
                 attention):  # fmt: skip
        super().__init__()
        self.output_dim = output_dim
        self.attention = attention
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = nn.GRU((enc_hid_dim * 2) + emb_dim, dec_hid_dim)
        self.fc_out = Maxout((enc_hid_dim * 2) + dec_hid_dim + emb_dim, readout_dim, output_dim,
                             dropout)  # fmt: skip
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs):
        # input = [batch size]; hidden = [batch size, dec hid dim]
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))  # [1, batch size, emb dim]
        a = self.attention(hidden, encoder_outputs)
        a = a.unsqueeze(1)  # [batch size, 1, src len]
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        weighted = torch.bmm(a, encoder_outputs)
        weighted = weighted.permute(1, 0, 2)  # [1, batch size, enc hid dim * 2]
        rnn_input = torch.cat((embedded, weighted), dim=2)
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)
        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))
        return prediction, hidden.squeeze(0)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src, trg, teacher_forcing_ratio=1.0):
        # src = [src len, batch size]; trg = [trg len, batch size] (BOS ... EOS)
        batch_size = src.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size, device=src.device)
        encoder_outputs, hidden = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_len):
            output, hidden = self.decoder(input, hidden, encoder_outputs)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


# ---- the interface bench/translation_train.py uses ------------------------------------------
def build_like(task) -> Seq2Seq:
    """A reference of the same widths as the seqtasks RNNEncoder + BahdanauDecoder in `task`."""
    enc, dec = task.encoder, task.decoder
    for name, rnn in (("encoder", enc.rnn), ("decoder", dec.rnn)):
        if not isinstance(rnn, nn.GRU) or rnn.num_layers != 1:
            raise ValueError(f"the RNN reference needs a 1-layer GRU {name}, got {rnn}")
    if not hasattr(dec.attention, "W") or not hasattr(dec.attention, "v"):
        raise ValueError(f"the RNN reference needs additive attention, got {dec.attention}")
    src_vocab, emb = enc.embedding.num_embeddings, enc.embedding.embedding_dim
    enc_hid = enc.rnn.hidden_size
    tgt_vocab, dec_emb = dec.embedding.num_embeddings, dec.embedding.embedding_dim
    dec_hid = dec.rnn.hidden_size
    attn_dim = dec.attention.W.out_features
    readout = dec.readout.out.in_features
    dropout = dec.dropout.p
    attention = Attention(enc_hid, dec_hid, attn_dim)
    return Seq2Seq(
        Encoder(src_vocab, emb, enc_hid, dec_hid, enc.dropout.p),
        Decoder(tgt_vocab, dec_emb, enc_hid, dec_hid, readout, dropout, attention),
    )


def make_batch(src_ids: list[list[int]], tgt_ids: list[list[int]], pad_id: int, bos_id: int,
               eos_id: int) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Time-major padded (src = tokens + EOS, trg = BOS + tokens + EOS), as the tutorial."""

    def pad_time_major(seqs: list[list[int]]) -> Tensor:
        out = torch.full((max(map(len, seqs)), len(seqs)), pad_id, dtype=torch.long)
        for col, ids in enumerate(seqs):
            out[: len(ids), col] = torch.tensor(ids, dtype=torch.long)
        return out

    src = pad_time_major([s + [eos_id] for s in src_ids])
    trg = pad_time_major([[bos_id] + t + [eos_id] for t in tgt_ids])
    return src, trg


def batch_loss(model: Seq2Seq, src: Tensor, trg: Tensor, label_smoothing: float,
               pad_id: int) -> tuple[Tensor, int]:  # fmt: skip
    """The tutorial's loss (CrossEntropyLoss ignoring pad, over outputs[1:]), label-smoothed."""
    output = model(src, trg)  # [trg len, batch size, output dim]
    output_dim = output.shape[-1]
    output = output[1:].view(-1, output_dim)
    target = trg[1:].reshape(-1)
    loss = F.cross_entropy(output, target, ignore_index=pad_id, label_smoothing=label_smoothing)
    return loss, int((target != pad_id).sum())
