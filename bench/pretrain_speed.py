"""Training tokens/s: our masked-LM step vs Hugging Face's, same run, same machine.

Ours: `PretrainingModel` (MLM head only at the chosen positions) + our masking.
Peer: `transformers.BertForMaskedLM` + `DataCollatorForLanguageModeling`
(full-vocabulary logits at every position, loss over the masked ones).
Ours uses fused AdamW (one pass over the weights), as `spacy_mlm pretrain` does;
the peer torch's default AdamW, as HF's Trainer (--same-optimizer: unfused for both).
Both: the same model directory and starting weights, the same batches of packed
WikiText-2 text (batch x length, no padding), masking rate 0.15, dropout
as configured, AdamW, train mode, and the same precision (--precision: fp32, or
bf16 = forward passes under torch.autocast in bfloat16, as `[pretraining]
precision = "bf16"`). Steps alternate between the two so machine
load affects both alike; the median step time is reported.

    python bench/pretrain_speed.py [--quick] [--model DIR] [--data FILE] [--precision fp32,bf16]

Last line: {"ours_tps": ..., "hf_tps": ..., "ratio": ..., "precision": ...} for the
first precision; with two, also every system's `*_tps` and `ours_bf16_speedup`,
`hf_bf16_speedup` (bf16 over fp32 tokens/s).
"""
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from harness.common import BenchParser, print_result


def packed_batches(tokenizer, path: Path, batch_size: int, length: int, n_batches: int):
    from spacy_mlm import PretrainingExample, collate, pack_documents, read_corpus, tokenize_documents

    docs = read_corpus(path)[: 400 * n_batches]
    capacity = length - tokenizer.num_special_tokens_to_add(pair=False)
    blocks = [b for b in pack_documents(tokenize_documents(tokenizer, docs), capacity, tokenizer.sep_token_id) if len(b[0]) == capacity]
    need = batch_size * n_batches
    if len(blocks) < need:
        raise SystemExit(f"{path}: only {len(blocks)} full blocks of {length}; need {need}")
    return [collate([PretrainingExample(b) for b in blocks[i * batch_size : (i + 1) * batch_size]], tokenizer) for i in range(n_batches)]


def main():
    parser = BenchParser(__doc__)
    parser.model()
    parser.data_file("--data", "raw_text/wikitext2/valid.txt")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per system")
    parser.quick("batch 8 x 64, 2 timed steps")
    parser.threads(None)
    parser.add_argument("--same-optimizer", action="store_true", help="give ours the peer's (unfused) AdamW too")
    parser.add_argument("--precision", default="fp32",
                        help="both systems' forward passes: fp32, bf16 (torch.autocast in bfloat16), or fp32,bf16 "
                             "for both in one run, with the speedup of the second over the first")
    args = parser.parse_args()
    if args.quick:
        args.batch_size, args.length, args.steps = 8, 64, 2
    precisions = args.precision.split(",")
    if not precisions or any(p not in ("fp32", "bf16") for p in precisions) or len(set(precisions)) < len(precisions):
        parser.error(f"--precision: fp32, bf16 or fp32,bf16, got {args.precision!r}")
    from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

    from spacy_mlm import (
        MaskingSettings, PretrainingModel, forward_precision, load_mlm_model, to_inputs, uniform_distribution,
    )

    model_dir = args.model
    torch.manual_seed(0)
    loaded = load_mlm_model(model_dir)
    tokenizer = loaded.tokenizer
    ours = PretrainingModel(loaded.model).train()
    torch.manual_seed(0)
    hf = AutoModelForMaskedLM.from_pretrained(model_dir).train()
    batches = packed_batches(tokenizer, Path(args.data), args.batch_size, args.length, args.steps + 1)
    masking = MaskingSettings(tokenizer.mask_token_id, uniform_distribution(len(tokenizer), tokenizer.all_special_ids))
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=masking.rate)
    # ours: the optimizer `spacy_mlm pretrain` uses (fused AdamW); peer: torch's default AdamW, as HF's Trainer
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-5, fused=not args.same_optimizer)
    opt_hf = torch.optim.AdamW(hf.parameters(), lr=1e-5)
    rng = np.random.default_rng(0)

    def step_ours(batch, precision):
        masked = masking.apply(batch, rng)
        with forward_precision(torch.device("cpu"), precision):
            sums = ours(**to_inputs(batch, masked, torch.device("cpu")))
        (sums.mlm_loss / sums.n_predicted).backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def step_hf(batch, precision):
        features = collator([{"input_ids": torch.from_numpy(row)} for row in batch.input_ids])
        with forward_precision(torch.device("cpu"), precision):
            loss = hf(input_ids=features["input_ids"], labels=features["labels"]).loss
        loss.backward()
        opt_hf.step()
        opt_hf.zero_grad(set_to_none=True)

    # every (system, precision) takes one step per batch, in an order that rotates with the batch
    systems = [(f"{name}_{precision}", step, precision)
               for precision in precisions for name, step in (("ours", step_ours), ("hf", step_hf))]
    times = {name: [] for name, _, _ in systems}
    cpu = {name: [] for name, _, _ in systems}
    for i, batch in enumerate(batches):  # the first step of each warms up and is not timed
        for name, step, precision in systems[i % len(systems):] + systems[: i % len(systems)]:
            start, start_cpu = time.perf_counter(), time.process_time()
            step(batch, precision)
            if i:
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
        if i:
            print(f"step {i}: " + "  ".join(f"{name} {times[name][-1]:.2f}s (cpu {cpu[name][-1]:.2f}s)" for name in times),
                  flush=True)
    tokens = args.batch_size * args.length
    tps = {name: tokens / statistics.median(t) for name, t in times.items()}
    first = precisions[0]
    # CPU seconds are less disturbed than wall time when other jobs share the cores
    cpu_ratio = statistics.median(cpu[f"hf_{first}"]) / statistics.median(cpu[f"ours_{first}"])
    print(f"model {model_dir}, batch {args.batch_size} x {args.length}, {','.join(precisions)}, {torch.get_num_threads()} threads, "
          f"{args.steps} timed steps each (median); ours {'unfused' if args.same_optimizer else 'fused'} AdamW; load average {os.getloadavg()[0]:.1f}; "
          f"{first} ratio by CPU time {cpu_ratio:.3f}")
    result = {"ours_tps": round(tps[f"ours_{first}"], 1), "hf_tps": round(tps[f"hf_{first}"], 1),
              "ratio": round(tps[f"ours_{first}"] / tps[f"hf_{first}"], 3), "precision": first}
    if len(precisions) > 1:
        result.update({f"{name}_tps": round(value, 1) for name, value in tps.items()})
        for precision in precisions[1:]:
            for name in ("ours", "hf"):
                result[f"{name}_{precision}_speedup"] = round(tps[f"{name}_{precision}"] / tps[f"{name}_{first}"], 3)
    print_result(result)


if __name__ == "__main__":
    main()
