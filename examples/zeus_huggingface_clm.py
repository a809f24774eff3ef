"""Zeus's Hugging Face example (causal language modelling with ``Trainer``), ported with only imports changed.

The integration is Zeus's: a ``ZeusMonitor`` on the training GPUs and an
``HFGlobalPowerLimitOptimizer(monitor)`` passed to ``Trainer(callbacks=[...])``, which profiles power
limits during the first optimizer steps and keeps the best one for the rest of training; a monitor
window around ``trainer.train()`` reports the run's time and energy. What changed for Zeus Suite
are the two import lines marked ``# ZEUS``.

To run offline and on a CPU, the defaults are tiny: a 2-layer GPT-2 built from a config (no
download) trained on random token blocks. ``--model_name_or_path gpt2`` loads real weights with
``from_pretrained`` (and the GPT-2 tokenizer's vocabulary size) for the real thing. Needs an NVIDIA
GPU; its test runs it on the fake NVML of ``tests/fakes``.

Usage::

    python examples/zeus_huggingface_clm.py --max_steps 60
    python examples/zeus_huggingface_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 8
"""

from __future__ import annotations

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

# ZEUS: was `from zeus.monitor import ZeusMonitor` and
# `from zeus.optimizer.power_limit import HFGlobalPowerLimitOptimizer`.
from zeus_core import ZeusMonitor
from zeus_integrations import HFGlobalPowerLimitOptimizer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (Hugging Face's names; tiny defaults so the example runs anywhere)."""
    parser = argparse.ArgumentParser(description="Causal LM training with the power-limit optimizer")
    parser.add_argument("--model_name_or_path", default=None, help="None: a tiny GPT-2 from a config")
    parser.add_argument("--output_dir", default="out/zeus_huggingface_clm")
    parser.add_argument("--per_device_train_batch_size", type=int, default=4)
    parser.add_argument("--max_steps", type=int, default=60, help="optimizer steps (default: 60)")
    parser.add_argument("--block_size", type=int, default=32, help="tokens per training example")
    parser.add_argument("--samples", type=int, default=256, help="random token blocks in the tiny data set")
    parser.add_argument("--warmup_steps", type=int, default=10, help="power-limit optimizer warm-up steps")
    parser.add_argument("--profile_steps", type=int, default=40, help="steps profiled per power limit")
    parser.add_argument("--pl_step", type=int, default=25, help="power limit spacing, W")
    return parser.parse_args(argv)


def build_model(name: str | None) -> GPT2LMHeadModel:
    """Real weights with ``from_pretrained`` when named, else a tiny GPT-2 built from a config."""
    if name is not None:
        return GPT2LMHeadModel.from_pretrained(name)
    config = GPT2Config(
        vocab_size=512, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return GPT2LMHeadModel(config)


def token_blocks(vocab_size: int, samples: int, block_size: int) -> list[dict[str, torch.Tensor]]:
    """Random token blocks standing in for a tokenized text corpus (labels = inputs, as in run_clm)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab_size, (samples, block_size), generator=g)
    return [{"input_ids": row, "labels": row.clone()} for row in ids]


def main(argv: list[str] | None = None) -> None:
    """Train with the power-limit optimizer and print the run's time, energy and limit."""
    args = parse_args(argv)
    model = build_model(args.model_name_or_path)
    train_dataset = token_blocks(model.config.vocab_size, args.samples, args.block_size)

    # Zeus's integration: a monitor on this process's GPU and the optimizer as a Trainer callback.
    gpu = torch.cuda.current_device() if torch.cuda.is_available() else 0
    monitor = ZeusMonitor(gpu_indices=[gpu])
    optimizer = HFGlobalPowerLimitOptimizer(
        monitor, warmup_steps=args.warmup_steps, profile_steps=args.profile_steps, pl_step=args.pl_step
    )
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.per_device_train_batch_size,
        max_steps=args.max_steps,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset, callbacks=[optimizer])

    monitor.begin_window("training")
    result = trainer.train()
    measurement = monitor.end_window("training")

    print(f"Training loss: {result.training_loss:.4f}")
    print(f"Entire training: {measurement.time:.2f} s, {measurement.total_energy:.1f} J")
    chosen = optimizer.optimizer.optimal_power_limit_w
    print(f"Power limit chosen: {chosen:g} W" if chosen is not None else "Power limit: still profiling")
    limits = [e["power/limit_w"] for e in trainer.state.log_history if "power/limit_w" in e]
    print(f"Power limits logged: {limits}")


if __name__ == "__main__":
    main()
