#!/usr/bin/env python3
"""Writes a small Hugging Face llama checkpoint with random weights, for trying and testing
`dualpath serve --model DIR` where no real checkpoint can be downloaded.

    scripts/random_llama_checkpoint.py DIR [--vocab 512] [--dtype bf16] [--tokenizer M.model]

DIR gets config.json, model.safetensors (the llama tensor names, in HF's [out, in] layout, F32,
BF16 or F16) and, with --tokenizer, a copy of that SentencePiece model as tokenizer.model (train
one with `spm_train`, from Debian's sentencepiece package). Python's standard library only.
"""
import argparse
import json
import os
import random
import shutil
import struct
import sys


def to_bytes(values, dtype):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    # BF16: the top half of the float32 bits, rounded to nearest even.
    out = bytearray()
    for (bits,) in struct.iter_unpack("<I", struct.pack(f"<{len(values)}f", *values)):
        bits += 0x7FFF + ((bits >> 16) & 1)
        out += struct.pack("<H", (bits >> 16) & 0xFFFF)
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--vocab", type=int, default=512, help="vocab_size (at least the tokenizer's pieces)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="bf16")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", help="a SentencePiece model to copy in as tokenizer.model")
    a = ap.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads:
        sys.exit("random_llama_checkpoint: --hidden must divide by --heads, --heads by --kv-heads")
    rng = random.Random(a.seed)
    head = a.hidden // a.heads
    q, kv, d, f, v = a.heads * head, a.kv_heads * head, a.hidden, a.ffn, a.vocab
    shapes = {"model.embed_tokens.weight": [v, d], "model.norm.weight": [d], "lm_head.weight": [v, d]}
    for l in range(a.layers):
        p = f"model.layers.{l}."
        shapes.update({
            p + "input_layernorm.weight": [d], p + "post_attention_layernorm.weight": [d],
            p + "self_attn.q_proj.weight": [q, d], p + "self_attn.k_proj.weight": [kv, d],
            p + "self_attn.v_proj.weight": [kv, d], p + "self_attn.o_proj.weight": [d, q],
            p + "mlp.gate_proj.weight": [f, d], p + "mlp.up_proj.weight": [f, d],
            p + "mlp.down_proj.weight": [d, f]})
    dtype = a.dtype.upper()
    header, blobs, offset = {}, [], 0
    for name, shape in shapes.items():
        n = 1
        for s in shape:
            n *= s
        if len(shape) == 1:  # norms: near 1
            values = [1.0 + rng.uniform(-0.1, 0.1) for _ in range(n)]
        else:
            scale = 1.0 / (shape[1] ** 0.5)
            values = [rng.uniform(-scale, scale) for _ in range(n)]
        blob = to_bytes(values, dtype)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt", "made_by": "dualpath scripts/random_llama_checkpoint.py"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(a.dir, exist_ok=True)
    with open(os.path.join(a.dir, "model.safetensors"), "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for b in blobs:
            out.write(b)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
              "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
              "num_key_value_heads": a.kv_heads, "intermediate_size": f, "vocab_size": v,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
              "tie_word_embeddings": False, "max_position_embeddings": 4096,
              "torch_dtype": {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype]}
    with open(os.path.join(a.dir, "config.json"), "w") as out:
        json.dump(config, out, indent=2)
    if a.tokenizer:
        shutil.copyfile(a.tokenizer, os.path.join(a.dir, "tokenizer.model"))
    print(f"random_llama_checkpoint: wrote {a.dir} ({offset} bytes of {dtype} weights)")


if __name__ == "__main__":
    main()
