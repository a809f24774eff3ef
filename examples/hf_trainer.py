"""Fine-tune a text classifier with the Hugging Face ``Trainer`` and measure it with one callback.

``Trainer(..., callbacks=[ZeusTrainerCallback()])`` measures every epoch and the whole run; the
energy figures land in ``trainer.state.log_history``, in every ``report_to`` backend and in the
metrics ``trainer.train()`` returns. Steps are optimizer steps (``--grad-accum`` micro-batches
each); evaluation time is left out of the training figures.

Offline by default: a small randomly initialised BERT classifier learns a synthetic sentiment
task (sentences of "good" or "bad" words) with a word-level tokenizer built on the spot, so
nothing is downloaded. ``--model`` fine-tunes a real checkpoint instead (``from_pretrained``), and
``--dataset`` loads a real dataset with ``text`` and ``label`` columns (``datasets.load_dataset``).

Where is the GPU? With a CUDA GPU the model trains on it and the callback reads its energy
counter. Without one the model trains on the CPU and a **simulated** NVIDIA A40 (the documented
``PhysicalModel``) stands in: it counts as busy for the whole run, drawing its modelled 300 W at
the default power limit, so its energy is 300 W times the measured wall time. Every line this
script prints about energy then says "simulated".

Run::

    python examples/hf_trainer.py            # offline, about a minute on a laptop CPU
    python examples/hf_trainer.py --tiny     # seconds (CI)
    python examples/hf_trainer.py --model distilbert-base-uncased --dataset imdb --samples 2000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]

logger = logging.getLogger("hf_trainer")

_GOOD = "good great fine happy superb lovely nice excellent brilliant pleasant".split()
_BAD = "bad awful poor sad terrible ugly nasty dreadful boring horrible".split()
_FILLER = "the movie plot acting was is a very quite and film story".split()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", help="a Hub model id or local path to fine-tune (default: a tiny BERT from a config)"
    )
    parser.add_argument(
        "--dataset", help="a dataset with 'text' and 'label' columns (default: synthetic sentiment)"
    )
    parser.add_argument("--samples", type=int, default=2048, help="training samples (default 2048)")
    parser.add_argument("--epochs", type=int, default=3, help="training epochs (default 3)")
    parser.add_argument("--batch-size", type=int, default=16, help="per-device micro-batch size (default 16)")
    parser.add_argument(
        "--grad-accum", type=int, default=2, help="micro-batches per optimizer step (default 2)"
    )
    parser.add_argument("--max-length", type=int, default=32, help="tokens per sample (default 32)")
    parser.add_argument(
        "--simulate", action="store_true", help="use a simulated A40 even if a GPU is present"
    )
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for tests")
    parser.add_argument("--out", type=Path, default=Path("out/hf_trainer"), help="Trainer output folder")
    parser.add_argument("--json", type=Path, help="also write the energy report to this JSON file")
    args = parser.parse_args(argv)
    if args.tiny:
        args.samples, args.epochs, args.batch_size, args.max_length = 48, 2, 8, 16
    return args


def _synthetic_texts(n: int, seed: int) -> tuple[list[str], list[int]]:
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        label = rng.randrange(2)
        words = rng.choices(_FILLER, k=6) + rng.choices(_GOOD if label else _BAD, k=2)
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def _tokenizer_and_model(args: argparse.Namespace) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if args.model:
        tok = AutoTokenizer.from_pretrained(args.model)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model = AutoModelForSequenceClassification.from_pretrained(args.model, num_labels=2)
        model.config.pad_token_id = tok.pad_token_id
        return tok, model
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *_GOOD, *_BAD, *_FILLER])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=2,
        pad_token_id=0,
    )
    return tok, BertForSequenceClassification(config)


def _datasets(args: argparse.Namespace, tok: Any) -> tuple[Any, Any]:
    from datasets import Dataset, disable_progress_bars, load_dataset

    disable_progress_bars()
    if args.dataset:
        data = load_dataset(args.dataset, split="train").shuffle(seed=0)
        data = data.select(range(min(len(data), args.samples + max(args.samples // 8, 8))))
    else:
        texts, labels = _synthetic_texts(args.samples + max(args.samples // 8, 8), seed=0)
        data = Dataset.from_dict({"text": texts, "label": labels})
    data = data.map(
        lambda b: tok(b["text"], truncation=True, max_length=args.max_length, padding="max_length"),
        batched=True,
        remove_columns=["text"],
    )
    split = data.train_test_split(test_size=len(data) - args.samples, shuffle=False)
    return split["train"], split["test"]


def _monitor(simulate: bool) -> Any:
    """A monitor on a busy simulated A40 without a GPU; ``None`` lets the callback find the real one."""
    import torch

    if torch.cuda.is_available() and not simulate:
        return None
    from zeus_core import PhysicalModel, SimulatedGPU, ZeusMonitor

    return ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), busy=True)], cpu_indices=[])


def print_report(zeus: Any, device: str, steps: int, micro_batches: int) -> None:
    """Print the callback's per-epoch and total figures as a table (every energy line tags simulation)."""
    from rich.console import Console
    from rich.table import Table

    simulated = bool(zeus.train_metrics.get("simulated"))
    tag = " (simulated)" if simulated and "simulated" not in device else ""
    table = Table(title=f"Energy on {device}{tag}")
    for column in ("epoch", "time (s)", "energy (J)", "avg power (W)", "source"):
        table.add_column(column, justify="right")
    source = "simulated" if simulated else "measured"
    for i, e in enumerate(zeus.epoch_history, 1):
        table.add_row(
            str(i),
            f"{e['time/epoch_s']:.2f}",
            f"{e['energy/epoch_j']:.1f}",
            f"{e['power/avg_w']:.1f}",
            source,
        )
    t = zeus.train_metrics
    table.add_row(
        "total",
        f"{t['time/train_s']:.2f}",
        f"{t['energy/train_j']:.1f}",
        f"{t['power/train_avg_w']:.1f}",
        source,
    )
    console = Console(width=100)
    console.print(table)
    console.print(
        f"{steps} optimizer steps ({micro_batches} micro-batches); evaluation excluded from the figures."
    )


def main(argv: list[str] | None = None) -> int:
    """Run the example; returns the exit status."""
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not args.model and not args.dataset:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the default run needs nothing from the Hub
    import numpy as np
    import torch
    from transformers import Trainer, TrainingArguments

    from zeus_integrations.huggingface import ZeusTrainerCallback

    tok, model = _tokenizer_and_model(args)
    train_ds, eval_ds = _datasets(args, tok)
    monitor = _monitor(args.simulate)
    zeus = ZeusTrainerCallback(monitor=monitor)  # None: the GPUs this process trains on
    use_cpu = not torch.cuda.is_available()
    training_args = TrainingArguments(
        output_dir=str(args.out),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        learning_rate=5e-4 if not args.model else 5e-5,
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        use_cpu=use_cpu,
        disable_tqdm=True,
        seed=0,
    )

    def accuracy(pred: Any) -> dict[str, float]:
        return {"accuracy": float((np.argmax(pred.predictions, axis=-1) == pred.label_ids).mean())}

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        compute_metrics=accuracy,
        callbacks=[zeus],
    )
    micro_batches = 0

    def count(*_: Any) -> None:
        nonlocal micro_batches
        micro_batches += int(model.training)

    model.register_forward_hook(count)
    result = trainer.train()
    device = monitor.gpus[0].name if monitor is not None else f"GPU {training_args.device}"
    print_report(zeus, device, trainer.state.global_step, micro_batches)
    accuracy_now = [h["eval_accuracy"] for h in trainer.state.log_history if "eval_accuracy" in h]
    print(f"eval accuracy per epoch: {', '.join(f'{a:.2f}' for a in accuracy_now)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "device": device,
            "global_step": trainer.state.global_step,
            "micro_batches": micro_batches,
            "epochs": zeus.epoch_history,
            "train": zeus.train_metrics,
            "train_output_metrics": {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))},
            "eval_accuracy": accuracy_now,
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
