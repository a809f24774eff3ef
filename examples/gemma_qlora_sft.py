"""Supervised fine-tuning of Gemma with QLoRA under TRL's ``SFTTrainer``, measured by one callback.

QLoRA: the base model's linear layers are loaded in 4-bit NF4 (bitsandbytes, double quantisation)
and frozen; small LoRA adapters (peft) on the attention projections are trained. The
``ZeusTrainerCallback`` in ``callbacks=`` measures every epoch and the whole run, exactly as with a
plain ``Trainer`` (``SFTTrainer`` is one).

Offline by default: a tiny randomly initialised Gemma is built from a ``GemmaConfig`` with a
word-level tokenizer made on the spot, trained on synthetic question/answer lines. It is saved to a
temporary folder first, because 4-bit quantisation happens inside ``from_pretrained``.
``--model google/gemma-3-270m`` (or any causal LM) takes the real ``from_pretrained`` path
instead, ``--dataset`` a real dataset with a ``text`` column.

4-bit where supported: the script tries to load the base model in 4-bit with the installed
bitsandbytes on the training device (CUDA, or the CPU with bitsandbytes >= 0.48). If that is not
possible it says why and trains LoRA on unquantised weights; ``--no-4bit`` skips the attempt.

Where is the GPU? With a CUDA GPU the model trains on it and the callback reads its energy
counter. Without one the model trains on the CPU and a **simulated** NVIDIA A40 (the documented
``PhysicalModel``) stands in: it counts as busy for the whole run at its modelled 300 W, so its
energy is 300 W times the measured wall time. Every line this script prints about energy then
says "simulated".

Run::

    python examples/gemma_qlora_sft.py                  # offline tiny Gemma, about a minute on a CPU
    python examples/gemma_qlora_sft.py --tiny           # seconds of training (CI)
    python examples/gemma_qlora_sft.py --model google/gemma-3-270m --dataset stanfordnlp/imdb --samples 1000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["main"]

logger = logging.getLogger("gemma_qlora_sft")

_WORDS = "zero one two three four five six seven eight nine ten".split()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", help="a causal LM id or path, e.g. google/gemma-3-270m (default: tiny Gemma)"
    )
    parser.add_argument("--dataset", help="a dataset with a 'text' column (default: synthetic Q/A lines)")
    parser.add_argument("--samples", type=int, default=512, help="training samples (default 512)")
    parser.add_argument("--epochs", type=int, default=2, help="training epochs (default 2)")
    parser.add_argument("--batch-size", type=int, default=8, help="per-device micro-batch size (default 8)")
    parser.add_argument(
        "--grad-accum", type=int, default=2, help="micro-batches per optimizer step (default 2)"
    )
    parser.add_argument("--max-length", type=int, default=64, help="tokens per sample (default 64)")
    parser.add_argument("--lora-rank", type=int, default=8, help="LoRA rank (default 8)")
    parser.add_argument("--no-4bit", action="store_true", help="train LoRA on unquantised weights")
    parser.add_argument(
        "--simulate", action="store_true", help="use a simulated A40 even if a GPU is present"
    )
    parser.add_argument("--tiny", action="store_true", help="a seconds-long training run for tests")
    parser.add_argument("--out", type=Path, default=Path("out/gemma_qlora_sft"), help="trainer output folder")
    parser.add_argument("--json", type=Path, help="also write the energy report to this JSON file")
    args = parser.parse_args(argv)
    if args.tiny:
        args.samples, args.epochs, args.batch_size, args.max_length, args.lora_rank = 16, 2, 4, 32, 4
    return args


def _synthetic_lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        a, b = rng.randrange(6), rng.randrange(5)
        lines.append(f"question : what is {_WORDS[a]} plus {_WORDS[b]} ? answer : {_WORDS[a + b]}")
    return lines


def _tiny_gemma(folder: str) -> Any:
    """Save a tiny random Gemma and its tokenizer to ``folder``; returns the tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GemmaConfig, GemmaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    vocab = {
        w: i for i, w in enumerate([*specials, *_WORDS, "question", "answer", ":", "?", "what", "is", "plus"])
    }
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>"
    )
    config = GemmaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=128,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    GemmaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return tok


def _load_model(path: str, use_4bit: bool, on_gpu: bool) -> tuple[Any, str]:
    """The base model, in 4-bit where bitsandbytes supports this device; and a line saying which."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    device_map: Any = {"": 0} if on_gpu else "cpu"
    where = "cuda:0" if on_gpu else "the CPU"
    if use_4bit:
        try:
            import bitsandbytes as bnb
            from transformers import BitsAndBytesConfig

            quant = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=dtype,
            )
            model = AutoModelForCausalLM.from_pretrained(
                path, quantization_config=quant, device_map=device_map, dtype=dtype
            )
            layers = sum(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())
            return (
                model,
                f"base weights: 4-bit NF4 in {layers} linear layers "
                f"(bitsandbytes {bnb.__version__} on {where})",
            )
        except Exception as e:  # noqa: BLE001 - any failure here means "not supported on this device"
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(
                f"4-bit quantisation is not available on {where} ({reason}); "
                "running LoRA without quantisation."
            )
    model = AutoModelForCausalLM.from_pretrained(path, device_map=device_map, dtype=dtype)
    return model, f"base weights: unquantised {str(dtype).replace('torch.', '')} on {where}"


def _monitor(simulate: bool) -> Any:
    """A monitor on a busy simulated A40 without a GPU; ``None`` lets the callback find the real one."""
    import torch

    if torch.cuda.is_available() and not simulate:
        return None
    from zeus_core import PhysicalModel, SimulatedGPU, ZeusMonitor

    return ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), busy=True)], cpu_indices=[])


def _print_report(zeus: Any, device: str) -> None:
    from rich.console import Console
    from rich.table import Table

    simulated = bool(zeus.train_metrics.get("simulated"))
    tag = " (simulated)" if simulated and "simulated" not in device else ""
    table = Table(title=f"QLoRA SFT energy on {device}{tag}")
    for column in ("epoch", "time (s)", "energy (J)", "avg power (W)", "source"):
        table.add_column(column, justify="right")
    source = "simulated" if simulated else "measured"
    rows = [
        (str(i), e["time/epoch_s"], e["energy/epoch_j"], e["power/avg_w"])
        for i, e in enumerate(zeus.epoch_history, 1)
    ]
    t = zeus.train_metrics
    rows.append(("total", t["time/train_s"], t["energy/train_j"], t["power/train_avg_w"]))
    for name, seconds, joules, watts in rows:
        table.add_row(name, f"{seconds:.2f}", f"{joules:.1f}", f"{watts:.1f}", source)
    Console(width=100).print(table)


def main(argv: list[str] | None = None) -> int:
    """Run the example; returns the exit status."""
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not args.model and not args.dataset:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the default run needs nothing from the Hub
    import torch
    from datasets import Dataset, disable_progress_bars, load_dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging
    from trl import SFTConfig, SFTTrainer

    from zeus_integrations.huggingface import ZeusTrainerCallback

    disable_progress_bars()
    hf_logging.disable_progress_bar()
    on_gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as scratch:
        path = args.model or scratch
        tok = AutoTokenizer.from_pretrained(path) if args.model else _tiny_gemma(scratch)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model, weights = _load_model(path, use_4bit=not args.no_4bit, on_gpu=on_gpu)
    if args.dataset:
        data = load_dataset(args.dataset, split="train").shuffle(seed=0)
        data = data.select(range(min(len(data), args.samples)))
    else:
        data = Dataset.from_dict({"text": _synthetic_lines(args.samples, seed=0)})

    monitor = _monitor(args.simulate)
    zeus = ZeusTrainerCallback(monitor=monitor)
    config = SFTConfig(
        output_dir=str(args.out),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length,
        learning_rate=2e-3,
        logging_strategy="epoch",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        use_cpu=not on_gpu,
        bf16=on_gpu and torch.cuda.is_bf16_supported(),  # SFTConfig defaults to bf16
        dataset_text_field="text",
        packing=False,
    )
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=2 * args.lora_rank,
        lora_dropout=0.05,
        task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
    )
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=data, processing_class=tok, peft_config=lora, callbacks=[zeus]
    )
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in trainer.model.parameters())
    print(weights)
    print(f"LoRA r={args.lora_rank}: {trainable:,} trainable of {total:,} parameters")
    result = trainer.train()
    device = monitor.gpus[0].name if monitor is not None else f"GPU {config.device}"
    _print_report(zeus, device)
    print(f"{trainer.state.global_step} optimizer steps of {args.grad_accum} micro-batches each")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "device": device,
            "weights": weights,
            "quantized": "4-bit" in weights,
            "trainable_params": trainable,
            "total_params": total,
            "global_step": trainer.state.global_step,
            "epochs": zeus.epoch_history,
            "train": zeus.train_metrics,
            "train_output_metrics": {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))},
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
