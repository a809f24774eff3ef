"""Zeus's energy-monitoring-only example (a classifier trained with ``ZeusMonitor`` windows), ported.

The measurement code is Zeus's documented use of ``ZeusMonitor``: one window around the whole
training, one per epoch and one per step, each read as ``measurement.time`` (s),
``measurement.total_energy`` (J) and ``measurement.gpu_energy`` (J per GPU). Only the import line
marked ``# ZEUS`` changed. Zeus's example trains on FashionMNIST; to run offline and on a CPU the
default here is a synthetic 28×28, 10-class data set of the same shape and a small MLP.
Needs an NVIDIA GPU (CPU tensors when CUDA is absent); its test runs it on the fake NVML of
``tests/fakes``.

Usage::

    python examples/zeus_energy_monitoring.py --epochs 2
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# ZEUS: was `from zeus.monitor import ZeusMonitor`.
from zeus_core import ZeusMonitor


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (tiny defaults so the example runs anywhere)."""
    parser = argparse.ArgumentParser(description="Measure the energy of training a classifier")
    parser.add_argument("--epochs", default=2, type=int, help="number of epochs (default: 2)")
    parser.add_argument("--batch_size", default=64, type=int, help="mini-batch size (default: 64)")
    parser.add_argument(
        "--samples", default=1024, type=int, help="synthetic training samples (default: 1024)"
    )
    parser.add_argument("--gpu", default=0, type=int, help="GPU id to measure (default: 0)")
    parser.add_argument("--print_every", default=8, type=int, help="print every N-th step's window")
    return parser.parse_args(argv)


def fashion_like(samples: int) -> TensorDataset:
    """Random 28×28 'images' whose class follows their brightness, like FashionMNIST's shape."""
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(samples, 1, 28, 28, generator=gen)
    labels = (images.mean(dim=(1, 2, 3)) * 10 * 2 - 5).clamp(0, 9).long()
    return TensorDataset(images, labels)


def main(argv: list[str] | None = None) -> None:
    """Train, measuring the whole run, each epoch and each step with Zeus's window API."""
    args = parse_args(argv)
    torch.manual_seed(0)
    device = torch.device("cuda", args.gpu) if torch.cuda.is_available() else torch.device("cpu")
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(fashion_like(args.samples), batch_size=args.batch_size, shuffle=True)

    # ---- Zeus's measurement, unchanged ---------------------------------------------------------
    monitor = ZeusMonitor(gpu_indices=[args.gpu])
    monitor.begin_window("entire_training")
    for epoch in range(args.epochs):
        monitor.begin_window("epoch")
        for step, (x, y) in enumerate(loader):
            monitor.begin_window("step")
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            result = monitor.end_window("step")
            if step % args.print_every == 0:
                print(f"Step {step} consumed {result.time:.4f} s and {result.total_energy:.3f} J")
        result = monitor.end_window("epoch")
        print(f"Epoch {epoch} consumed {result.time:.2f} s and {result.total_energy:.2f} J")
    measurement = monitor.end_window("entire_training")
    print(f"Entire training: {measurement.time:.2f} s, {measurement.total_energy:.2f} J")
    print(f"GPU energy: {measurement.gpu_energy}")
    # ---------------------------------------------------------------------------------------------


if __name__ == "__main__":
    main()
