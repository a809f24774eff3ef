"""Zeus's single-GPU power-limit optimizer example (ImageNet training), ported with only imports changed.

The loop is Zeus's: a ``ZeusMonitor`` on the training GPU, a ``GlobalPowerLimitOptimizer`` with
Zeus's ``MaxSlowdownConstraint`` selector, and ``plo.on_epoch_begin`` / ``on_step_begin`` /
``on_step_end`` / ``on_epoch_end`` around a plain PyTorch training loop with a validation pass per
epoch. What changed for Zeus Suite are the two import lines marked ``# ZEUS``.

To run without ImageNet and torchvision, the defaults are tiny: ``--data synthetic`` (random 32×32
images of 10 classes) and ``--arch tiny`` (a small CNN). Point ``--data`` at an ImageNet folder
(``train/``, ``val/``) and pick a torchvision ``--arch`` such as ``resnet50`` for the real thing.
Needs an NVIDIA GPU (CPU tensors when CUDA is absent); its test runs it on the fake NVML of
``tests/fakes``.

Usage::

    python examples/zeus_power_limit_optimizer.py --epochs 3
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# ZEUS: was `from zeus.monitor import ZeusMonitor` and
# `from zeus.optimizer.power_limit import MaxSlowdownConstraint, GlobalPowerLimitOptimizer`.
from zeus_core import GlobalPowerLimitOptimizer, MaxSlowdownConstraint, ZeusMonitor


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (Zeus's names; tiny defaults so the example runs anywhere)."""
    parser = argparse.ArgumentParser(description="PyTorch ImageNet training with the power-limit optimizer")
    parser.add_argument("--data", default="synthetic", help="ImageNet folder, or 'synthetic' (default)")
    parser.add_argument("-a", "--arch", default="tiny", help="'tiny' (default) or a torchvision model name")
    parser.add_argument("--epochs", default=2, type=int, help="number of epochs (default: 2)")
    parser.add_argument("-b", "--batch_size", default=32, type=int, help="mini-batch size (default: 32)")
    parser.add_argument("--samples", default=512, type=int, help="synthetic training samples (default: 512)")
    parser.add_argument("--lr", "--learning_rate", default=0.1, type=float, dest="lr")
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight_decay", default=1e-4, type=float, dest="weight_decay")
    parser.add_argument("--gpu", default=0, type=int, help="GPU id to use (default: 0)")
    parser.add_argument("--warmup_steps", default=10, type=int, help="Zeus's default: 10")
    parser.add_argument("--profile_steps", default=40, type=int, help="Zeus's default: 40")
    parser.add_argument("--pl_step", default=25, type=int, help="Zeus's default: 25 W")
    return parser.parse_args(argv)


class TinyNet(nn.Module):
    """A small CNN for 32×32 images (stands for ResNet in the tiny default)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of a batch of 3×32×32 images."""
        return self.head(self.features(x))


def build_model(arch: str) -> nn.Module:
    """``tiny`` or a torchvision model (torchvision is needed only for those)."""
    if arch == "tiny":
        return TinyNet()
    import torchvision.models as models

    return models.__dict__[arch]()


def build_loaders(args: argparse.Namespace) -> tuple[DataLoader, DataLoader]:
    """Synthetic tensors, or ImageNet's ``train``/``val`` folders (with torchvision)."""
    if args.data == "synthetic":
        gen = torch.Generator().manual_seed(0)
        images = torch.randn(args.samples + args.samples // 4, 3, 32, 32, generator=gen)
        labels = (images.mean(dim=(1, 2, 3)) > 0).long() + 2 * (images[:, 0].mean(dim=(1, 2)) > 0).long()
        train = TensorDataset(images[: args.samples], labels[: args.samples])
        val = TensorDataset(images[args.samples :], labels[args.samples :])
    else:
        import torchvision.datasets as datasets
        import torchvision.transforms as transforms

        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        train = datasets.ImageFolder(
            os.path.join(args.data, "train"),
            transforms.Compose(
                [
                    transforms.RandomResizedCrop(224),
                    transforms.RandomHorizontalFlip(),
                    transforms.ToTensor(),
                    normalize,
                ]
            ),
        )
        val = datasets.ImageFolder(
            os.path.join(args.data, "val"),
            transforms.Compose(
                [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize]
            ),
        )
    return (
        DataLoader(train, batch_size=args.batch_size, shuffle=True),
        DataLoader(val, batch_size=args.batch_size, shuffle=False),
    )


def main(argv: list[str] | None = None) -> None:
    """Train with Zeus's power-limit optimizer loop."""
    args = parse_args(argv)
    torch.manual_seed(0)
    device = torch.device("cuda", args.gpu) if torch.cuda.is_available() else torch.device("cpu")
    model = build_model(args.arch).to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
    train_loader, val_loader = build_loaders(args)

    # ---- Zeus's loop, unchanged ----------------------------------------------------------------
    # ZeusMonitor is used to profile the time and energy consumption of the GPU.
    monitor = ZeusMonitor(gpu_indices=[args.gpu])

    # GlobalPowerLimitOptimizer profiles each power limit and selects the best one.
    plo = GlobalPowerLimitOptimizer(
        monitor=monitor,
        optimum_selector=MaxSlowdownConstraint(factor=float(os.environ.get("ZEUS_MAX_SLOWDOWN", 1.1))),
        warmup_steps=args.warmup_steps,
        profile_steps=args.profile_steps,
        pl_step=args.pl_step,
    )

    for epoch in range(args.epochs):
        plo.on_epoch_begin()
        train(train_loader, model, criterion, optimizer, epoch, device, plo)
        plo.on_epoch_end()

        acc1 = validate(val_loader, model, criterion, device)
        print(f"Top-1 accuracy: {acc1}")

        scheduler.step()
    # ---------------------------------------------------------------------------------------------
    print(f"Power limit at the end: {monitor.gpus[0].get_power_limit():.0f} W")


def train(
    loader: DataLoader, model: nn.Module, criterion: Any, optimizer: Any, epoch: int, device: Any, plo: Any
) -> None:
    """One epoch; the optimizer marks every training step."""
    model.train()
    start, seen, loss_sum = time.time(), 0, 0.0
    for images, target in loader:
        plo.on_step_begin()  # Mark the beginning of one training step.

        images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        plo.on_step_end()  # Mark the end of one training step.
        seen += images.size(0)
        loss_sum += loss.item() * images.size(0)
    print(f"Epoch: [{epoch}] loss {loss_sum / max(seen, 1):.4f} ({time.time() - start:.2f} s)")


def validate(loader: DataLoader, model: nn.Module, criterion: Any, device: Any) -> float:
    """Top-1 accuracy on the validation set, %."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, target in loader:
            images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
            correct += int((model(images).argmax(dim=1) == target).sum())
            total += target.size(0)
    return 100.0 * correct / max(total, 1)


if __name__ == "__main__":
    main()
