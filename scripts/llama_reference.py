#!/usr/bin/env python3
"""Hugging Face reference for the GPU Llama runner's test (tests/gpu/serving/test_llama_runner.cpp).

Loads LlamaForCausalLM in bf16 on the GPU with eager attention (the plain matmul-softmax-matmul path, fp32
softmax), draws N random prompts of L token ids (seeded), and writes one binary file:

    char[8]  magic "AISPLREF"
    int32    version (2), n_prompts, prompt_len, gen_len, vocab
    int32    prompts[n_prompts][prompt_len]
    int32    generated[n_prompts][gen_len]      greedy continuation (model.generate, do_sample=False)
    float32  gen_gap[n_prompts][gen_len]        top-1 minus top-2 logit at each generated step
    float32  gen_max_abs[n_prompts][gen_len]    largest |logit| at each generated step (scales the tolerance)
    uint16   logits[n_prompts][prompt_len][vocab]  bf16 bits of the logits of every prompt position
    float32  exact[n_prompts][prompt_len][vocab]   the same model's logits in fp32 (weights upcast exactly)

All little-endian. HF's bf16 model computes its logits in bf16 (lm_head's output), so storing their bf16
bits is exact and half the size of fp32. The fp32 logits are the yardstick of the test: how far HF's bf16
model is from them is the noise that bf16 itself costs on this model, and the runner must not be
measurably further. N=4, L=128 with a 128256-token vocabulary is 394 MB.
A JSON sidecar (FILE.json) records the versions and arguments.

Needs torch, transformers and safetensors; no network. Runs offline:
    python3 scripts/llama_reference.py --model DIR --prompts 4 --len 128 --gen 32 --seed 1 --out ref.bin
With --make-model PRESET (llama3.2-1b, llama3-8b or tiny; --layers N to cut the layer count) it first writes a seeded random-weight model into DIR
(config.json + model.safetensors, HF's own initializer), for machines without real weights.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

PRESETS = {
    # Llama-3.2-1B's published shape (tied embeddings, llama3 RoPE scaling).
    "llama3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                        bos_token_id=128000, eos_token_id=128001),
    # Llama-3.1-8B's published shape (untied, head_dim 128, llama3 RoPE scaling); --layers 2 makes it small.
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=128, vocab_size=128256, max_position_embeddings=131072,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                      bos_token_id=128000, eos_token_id=128001),
    # A few MB, untied, head_dim 128: for a quick end-to-end check.
    "tiny": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=128, vocab_size=1024, max_position_embeddings=4096,
                 rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
                 bos_token_id=1, eos_token_id=2),
}


def make_model(directory, preset, seed, init_std, layers):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    shape = dict(PRESETS[preset])
    if layers:
        shape["num_hidden_layers"] = layers
    config = LlamaConfig(**shape, initializer_range=init_std, dtype="bfloat16")
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    model = model.to(torch.bfloat16)
    os.makedirs(directory, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    print(f"wrote a random {preset} model (init std {init_std}, seed {seed}) to {directory}")


def top2_gap(logits):
    top = torch.topk(logits.float(), 2, dim=-1).values
    return float(top[0] - top[1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="model folder (Hugging Face layout)")
    p.add_argument("--prompts", type=int, default=4, help="number of prompts N")
    p.add_argument("--len", type=int, default=128, help="tokens per prompt L")
    p.add_argument("--gen", type=int, default=32, help="greedy tokens generated per prompt K")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="reference file to write")
    p.add_argument("--make-model", choices=sorted(PRESETS), help="first write a random model of this preset")
    p.add_argument("--init-std", type=float, default=0.02, help="--make-model's initializer std")
    p.add_argument("--layers", type=int, default=0, help="--make-model: override the preset's layer count")
    args = p.parse_args()
    if args.prompts < 1 or args.len < 1 or args.gen < 1:
        sys.exit("llama_reference.py: --prompts, --len and --gen must be >= 1")
    if not torch.cuda.is_available():
        sys.exit("llama_reference.py: no CUDA device")

    import transformers
    from transformers import LlamaForCausalLM
    if args.make_model:
        make_model(args.model, args.make_model, args.seed, args.init_std, args.layers)
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        sys.exit(f"llama_reference.py: {args.model} has no config.json")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 pass must be true fp32
    torch.backends.cudnn.allow_tf32 = False
    try:  # transformers 5 names it dtype; 4.x torch_dtype
        model = LlamaForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, attn_implementation="eager")
    except TypeError:
        model = LlamaForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16, attn_implementation="eager")
    model = model.to("cuda").eval()
    assert next(model.parameters()).dtype == torch.bfloat16
    vocab = model.config.vocab_size
    # Never stop at an EOS: the runner's test compares exactly gen_len tokens.
    model.generation_config.eos_token_id = None

    g = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(0, vocab, (args.prompts, args.len), generator=g, dtype=torch.int64)
    logits_all, generated, gaps, max_abs = [], [], [], []
    with torch.no_grad():
        for i in range(args.prompts):
            ids = prompts[i:i + 1].to("cuda")
            logits = model(input_ids=ids).logits[0]  # [L, vocab], bf16
            assert logits.dtype == torch.bfloat16, logits.dtype
            logits_all.append(logits.contiguous().view(torch.int16).cpu().numpy().view(np.uint16))
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.gen,
                                 do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=None,
                                 output_logits=True, return_dict_in_generate=True)
            new = out.sequences[0, args.len:]
            if new.numel() != args.gen:
                sys.exit(f"llama_reference.py: generate returned {new.numel()} tokens, not {args.gen}")
            generated.append(new.cpu().numpy().astype(np.int32))
            gaps.append(np.array([top2_gap(step[0]) for step in out.logits], dtype=np.float32))
            max_abs.append(np.array([float(step[0].float().abs().max()) for step in out.logits], dtype=np.float32))

    # The same weights in fp32 (bf16 -> fp32 is exact): the model's logits without bf16's roundings.
    model = model.float()
    exact_all, hf_err = [], []
    with torch.no_grad():
        for i in range(args.prompts):
            exact = model(input_ids=prompts[i:i + 1].to("cuda")).logits[0].float()
            bf16 = torch.from_numpy(logits_all[i].view(np.int16)).view(torch.bfloat16).to("cuda").float()
            hf_err.append(float((bf16 - exact).abs().max()))
            exact_all.append(exact.cpu().numpy().astype("<f4"))
    print(f"HF bf16 vs fp32: max |logit difference| per prompt {[round(e, 4) for e in hf_err]}")

    with open(args.out, "wb") as f:
        f.write(b"AISPLREF")
        f.write(struct.pack("<5i", 2, args.prompts, args.len, args.gen, vocab))
        f.write(prompts.numpy().astype("<i4").tobytes())
        f.write(np.stack(generated).astype("<i4").tobytes())
        f.write(np.stack(gaps).astype("<f4").tobytes())
        f.write(np.stack(max_abs).astype("<f4").tobytes())
        for block in logits_all:
            f.write(block.astype("<u2").tobytes())
        for block in exact_all:
            f.write(block.tobytes())
    meta = {"model": os.path.abspath(args.model), "prompts": args.prompts, "len": args.len, "gen": args.gen,
            "seed": args.seed, "vocab": vocab, "torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(), "attn_implementation": "eager", "dtype": "bfloat16"}
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=2)
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB): {args.prompts} prompts x {args.len} "
          f"tokens, {args.gen} generated each; transformers {transformers.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
