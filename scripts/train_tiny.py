#!/usr/bin/python3
"""Trains the built-in `tiny` model (models/tiny.safetensors) on the SQLite documentation.

The model is the CPU reference transformer of src/compute/ (llama-style: RMSNorm, RoPE on halves,
GQA, SwiGLU; d 256, 4 layers, 8 query heads of 32, 2 KV heads, ffn 688, vocab 512) with the byte
tokenizer of src/serve/tokenizer.h (bytes 0-255; 256 BOS, 257 system, 258 user, 259 assistant,
260 end). The weights go out with the Hugging Face llama names and shapes, which
compute::load_weights reads as is.

Corpus: the SQLite documentation from Debian's sqlite3-doc package (/usr/share/doc/sqlite3),
which the SQLite authors dedicate to the public domain (its copyright file). HTML is reduced to
its text. Training sequences are of two kinds, so that both endpoints of the API read well:
  chat:       BOS <|user|> paragraph_i <|end|> <|assistant|> paragraph_i+1 <|end|> ...
  completion: BOS text...
Runs on the CPU with Debian's python3-torch. Deterministic for a seed (up to thread scheduling).
Install libopenblas0-pthread too: Debian's torch uses whatever libblas.so.3 is installed, and the
reference BLAS is about 18x slower (7 against 124 GFLOP/s for our matmuls on 2 cores).

  apt-get install python3-torch libopenblas0-pthread sqlite3-doc
  /usr/bin/python3 scripts/train_tiny.py --minutes 32 --out models/tiny.safetensors
"""
import argparse
import glob
import html
import json
import math
import os
import random
import re
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BOS, SYSTEM, USER, ASSISTANT, END = 256, 257, 258, 259, 260
D, LAYERS, QH, KVH, HD, FFN, VOCAB = 256, 4, 8, 2, 32, 688, 512
THETA, EPS = 10000.0, 1e-5


def corpus_paragraphs(root):
    paras = []
    for path in sorted(glob.glob(os.path.join(root, "**", "*.html"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        text = re.sub(r"(?is)<(script|style|pre|code|table).*?</\1>", " ", text)
        text = re.sub(r"(?i)<br\s*/?>|</p>|</li>|</h[1-6]>|</div>|</dd>|</dt>", "\n\n", text)
        text = re.sub(r"<[^>]+>", " ", text)
        text = html.unescape(text)
        for p in re.split(r"\n\s*\n", text):
            p = " ".join(p.split())
            # Prose: long enough, mostly letters, ASCII (bytes are tokens: keep it compact).
            if len(p) < 80 or not p.isascii():
                continue
            letters = sum(c.isalpha() for c in p)
            if letters < 0.7 * len(p) or p.count(" ") < 10:
                continue
            paras.append(p[:1200])
    return paras


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm()
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm()
        self.mlp = MLP()

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rope(x, cos, sin):  # x [b, h, t, hd]; rotates the halves, as cpu_kernels.cc rope()
    a, b = x[..., : HD // 2], x[..., HD // 2 :]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(D, QH * HD, bias=False)
        self.k_proj = nn.Linear(D, KVH * HD, bias=False)
        self.v_proj = nn.Linear(D, KVH * HD, bias=False)
        self.o_proj = nn.Linear(QH * HD, D, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, QH, HD).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KVH, HD).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KVH, HD).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k = k.repeat_interleave(QH // KVH, dim=1)
        v = v.repeat_interleave(QH // KVH, dim=1)
        # torch 1.13 (Debian 12) has no scaled_dot_product_attention.
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HD)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, t, QH * HD))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(D, FFN, bias=False)
        self.up_proj = nn.Linear(D, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = RMSNorm()
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        inv = 1.0 / (THETA ** (torch.arange(0, HD // 2, dtype=torch.float64) * 2 / HD))
        self.inv_freq = inv

    def forward(self, tokens):
        t = tokens.shape[1]
        ang = torch.arange(t, dtype=torch.float64)[:, None] * self.inv_freq[None, :]
        cos, sin = ang.cos().float(), ang.sin().float()
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def sequences(paras, seq_len, rng):
    """An endless stream of training sequences of seq_len + 1 tokens."""
    while True:
        out = [BOS]
        if rng.random() < 0.6:  # a chat: user paragraph, assistant continues with the next ones
            i = rng.randrange(len(paras) - 4)
            out += [USER] + list(paras[i].encode()) + [END, ASSISTANT]
            j = i + 1
            while len(out) < seq_len + 1 and j < len(paras):
                out += list(paras[j].encode()) + [END]
                if len(out) < seq_len + 1:
                    out += [USER] + list(paras[j + 1].encode())[:200] + [END, ASSISTANT]
                j += 2
        else:
            i = rng.randrange(len(paras))
            while len(out) < seq_len + 1 and i < len(paras):
                out += list(paras[i].encode()) + [ord("\n"), ord("\n")]
                i += 1
        if len(out) >= seq_len + 1:
            yield out[: seq_len + 1]


CHECK_PROMPT = "How do I create a table?"


@torch.no_grad()
def greedy(model, toks, n):
    toks = list(toks)
    out = []
    for _ in range(n):
        t = int(model(torch.tensor([toks]))[0, -1].argmax())
        toks.append(t)
        out.append(t)
    return out


def save_safetensors(path, model, info=None):
    tensors = {}
    for name, p in model.state_dict().items():
        if name.endswith("inv_freq"):
            continue
        key = name if name == "lm_head.weight" else "model." + name
        tensors[key] = p.detach().float().contiguous()
    header, blobs, offset = {}, [], 0
    for key in sorted(tensors):
        data = tensors[key].numpy().astype("<f4").tobytes()
        header[key] = {"dtype": "F32", "shape": list(tensors[key].shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    meta = {"format": "pt", "dualpath.model": "tiny",
            "dualpath.corpus": "sqlite3-doc (public domain), /usr/share/doc/sqlite3"}
    # What the C++ model must reproduce from these weights (compute/ test): torch's greedy tokens.
    prompt = [BOS, USER] + list(CHECK_PROMPT.encode()) + [END, ASSISTANT]
    model.eval()
    meta["dualpath.check_prompt"] = json.dumps(prompt)
    meta["dualpath.check_greedy"] = json.dumps(greedy(model, prompt, 24))
    model.train()
    meta.update(info or {})
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


@torch.no_grad()
def sample(model, prompt, n=120):
    toks = [BOS, USER] + list(prompt.encode()) + [END, ASSISTANT]
    out = []
    for _ in range(n):
        logits = model(torch.tensor([toks]))[0, -1]
        t = int(logits.argmax())
        if t == END:
            break
        toks.append(t)
        out.append(t)
    return bytes(b for b in out if b < 256).decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="/usr/share/doc/sqlite3")
    ap.add_argument("--out", default="models/tiny.safetensors")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    rng = random.Random(a.seed)
    paras = corpus_paragraphs(a.corpus)
    if len(paras) < 100:
        sys.exit(f"{a.corpus}: only {len(paras)} paragraphs of prose; install sqlite3-doc")
    print(f"corpus: {len(paras)} paragraphs, {sum(map(len, paras)) / 1e6:.1f} MB of text", flush=True)
    model = Tiny()
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.05)
    stream = sequences(paras, a.seq, rng)
    start, step, deadline = time.time(), 0, time.time() + 60 * a.minutes
    est_steps = None
    while time.time() < deadline:
        batch = torch.tensor([next(stream) for _ in range(a.batch)])
        elapsed = time.time() - start
        frac = min(1.0, elapsed / (60 * a.minutes))
        lr = a.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0:
            print(f"step {step}  {elapsed / 60:.1f} min  loss {loss.item():.3f} "
                  f"({loss.item() / math.log(2):.2f} bits/byte)  lr {lr:.2e}", flush=True)
        if step % 200 == 0:
            save_safetensors(a.out, model, {"dualpath.steps": str(step)})
    info = {"dualpath.steps": str(step), "dualpath.minutes": f"{(time.time() - start) / 60:.1f}",
            "dualpath.batch": f"{a.batch}x{a.seq}", "dualpath.seed": str(a.seed),
            "dualpath.last_loss_bits_per_byte": f"{loss.item() / math.log(2):.3f}"}
    save_safetensors(a.out, model, info)
    model.eval()
    for p in ["What is a database?", "How do I create a table?"]:
        print(f"> {p}\n{sample(model, p)!r}", flush=True)
    print(f"wrote {a.out} after {step} steps", flush=True)


if __name__ == "__main__":
    main()
