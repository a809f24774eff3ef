"""Tiny CPU stand-ins for what Zeus's documented code leaves to the reader or to a GPU machine.

Used by ``zeus_runner.py`` only: the model and data a docs fragment calls ``train_loader``,
``model``, ``train_one_step``, ...; a ``torchvision`` with random MNIST/ImageNet-shaped data and
small models (none is installed in CI, and no dataset is downloaded); CUDA calls mapped to the CPU
(CI's torch is CPU-only); a local Pushgateway. The snippets' own lines stay as Zeus wrote them.
"""

from __future__ import annotations

import http.server
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

__all__ = [
    "accelerated_clock",
    "cuda_on_cpu",
    "fake_rapl",
    "fsdp_on_cpu",
    "install_fake_jax",
    "install_fake_torchvision",
    "start_pushgateway",
    "names",
    "install_fake_tensorboardx",
    "start_bso_server",
    "start_zeusd",
    "start_ipinfo",
    "install_capriccio",
    "install_clm",
    "install_nsdi23_traces",
    "scale_cuda_tensors",
    "scale_sleep",
    "remap_master_port",
    "stop_after",
    "trainer_arguments",
]


def cuda_on_cpu(device_count: int) -> None:
    """Map the CUDA calls of Zeus's examples to the CPU (``.cuda()``, ``set_device``, ...)."""
    if torch.cuda.is_available():
        return
    torch.cuda.current_device = lambda: 0  # type: ignore[assignment]
    torch.cuda.set_device = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.device_count = lambda: device_count  # type: ignore[assignment]
    torch.cuda.synchronize = lambda *a, **k: None  # type: ignore[assignment]
    torch.cuda.Event = _CPUEvent  # type: ignore[assignment,misc]
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    nn.Module.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]

    def gpu(device: Any) -> bool:
        return (isinstance(device, int) and not isinstance(device, bool)) or str(device).startswith("cuda")

    def on_cpu(to: Any) -> Any:  # `.to(rank)`, `.to("cuda:0")`, `.to(torch.device("cuda"))`: here, the CPU
        def cpu_to(self: Any, *args: Any, **kwargs: Any) -> Any:
            if args and gpu(args[0]):
                args = ("cpu", *args[1:])
            if gpu(kwargs.get("device")):
                kwargs["device"] = "cpu"
            return to(self, *args, **kwargs)

        return cpu_to

    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors

    constructors = _device_constructors()

    class OnCPU(TorchFunctionMode):
        """``torch.tensor(..., device="cuda")`` and the other constructors: on the CPU.

        A mode rather than a replaced ``torch.tensor``: transformers 5 builds models with the
        constructors swapped and back, and a replaced one leaves its buffers uninitialised.
        """

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in constructors and gpu(kwargs.get("device")):
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    OnCPU().__enter__()
    torch.Tensor.to = on_cpu(torch.Tensor.to)  # type: ignore[method-assign]
    nn.Module.to = on_cpu(nn.Module.to)  # type: ignore[method-assign]
    import torch.distributed as dist

    init = dist.init_process_group

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:  # NCCL needs GPUs: gloo
        return init("gloo" if backend in ("nccl", None) else backend, *args, **kwargs)

    dist.init_process_group = init_process_group  # type: ignore[assignment]
    ddp_init = nn.parallel.DistributedDataParallel.__init__

    def ddp_on_cpu(
        self: Any, module: Any, device_ids: Any = None, output_device: Any = None, **kwargs: Any
    ) -> None:
        ddp_init(self, module, **kwargs)  # a CPU module takes no device_ids

    nn.parallel.DistributedDataParallel.__init__ = ddp_on_cpu  # type: ignore[method-assign]


class _CPUEvent:
    """``torch.cuda.Event(enable_timing=True)`` on the CPU (``elapsed_time`` in ms)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.t = 0.0

    def record(self, *args: Any) -> None:
        import time

        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _CPUEvent) -> float:
        return (end.t - self.t) * 1000.0


def fsdp_on_cpu() -> None:
    """``FullyShardedDataParallel(model)`` (FSDP1 needs a GPU) as FSDP2's ``fully_shard`` on a CPU mesh."""
    import torch.distributed as dist
    import torch.distributed.fsdp as fsdp
    from torch.distributed.device_mesh import init_device_mesh

    def shard(module: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
        fsdp.fully_shard(module, mesh=init_device_mesh("cpu", (dist.get_world_size(),)))
        return module

    fsdp.FullyShardedDataParallel = shard  # type: ignore[assignment,misc]


def fake_rapl() -> None:
    """A RAPL powercap tree (packages 0 and 1, each with its DRAM) in a temporary folder, for discovery."""
    import tempfile
    from pathlib import Path

    from zeus_core.device import _discovery

    root = Path(tempfile.mkdtemp(prefix="zeus-fake-rapl-"))
    zones = [(f"intel-rapl:{i}", f"package-{i}") for i in (0, 1)]
    zones += [(f"intel-rapl:{i}/intel-rapl:{i}:0", "dram") for i in (0, 1)]
    for zone, name in zones:
        (root / zone).mkdir(parents=True)
        (root / zone / "name").write_text(name + "\n")
        (root / zone / "energy_uj").write_text("1000000\n")
        (root / zone / "max_energy_range_uj").write_text("262143328850\n")
    _discovery.get_cpus.__defaults__ = (str(root),)


class _Images(Dataset):
    """``n`` random images of ``shape`` with labels in ``range(classes)``."""

    def __init__(self, n: int, shape: tuple[int, ...], classes: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, *shape, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)
        self.classes = [str(c) for c in range(classes)]

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.x[i], int(self.y[i])


class _Identity:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, x: Any) -> Any:
        return x


def _tiny_classifier(num_classes: int = 10, channels: int = 3, **kwargs: Any) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(channels, 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(16, num_classes),
    )


def install_fake_torchvision() -> None:
    """A ``torchvision`` whose datasets are a few random images and whose models are tiny."""
    tv = types.ModuleType("torchvision")
    datasets = types.ModuleType("torchvision.datasets")
    datasets.ImageFolder = lambda root, transform=None, **k: _Images(64, (3, 8, 8), 10)  # type: ignore[attr-defined]
    mnist = lambda root, train=True, download=False, transform=None, **k: _Images(  # noqa: E731
        256 if train else 64, (1, 28, 28), 10
    )
    datasets.MNIST = datasets.FashionMNIST = mnist  # type: ignore[attr-defined]
    models = types.ModuleType("torchvision.models")
    for arch in ("resnet18", "resnet50", "vgg16", "shufflenet_v2_x1_0"):
        setattr(models, arch, lambda pretrained=False, **k: _tiny_classifier(num_classes=1000))
    transforms = types.ModuleType("torchvision.transforms")
    for name in (
        "Compose",
        "Resize",
        "CenterCrop",
        "RandomResizedCrop",
        "RandomHorizontalFlip",
        "ToTensor",
        "Normalize",
    ):
        setattr(transforms, name, _Identity)
    tv.datasets, tv.models, tv.transforms = datasets, models, transforms  # type: ignore[attr-defined]
    sys.modules.update(
        {
            "torchvision": tv,
            "torchvision.datasets": datasets,
            "torchvision.models": models,
            "torchvision.transforms": transforms,
        }
    )


def start_bso_server(host_port: str) -> None:
    """``zeus-suite bso-server`` on a free local port (SQLite), reached under Zeus's ``host:port``.

    The name in Zeus's URL (``http://bso-server:8000``) resolves to it, as ``/etc/hosts`` or a
    Kubernetes service would; the server stops when this process ends.
    """
    import atexit
    import socket
    import subprocess
    import tempfile
    import time

    # Under torchrun, local rank 0 starts one server for the job and tells the other ranks its port
    # through a file named by the job's MASTER_PORT (a fixed MASTER_PORT + 1 could be taken: Linux
    # hands out odd ephemeral ports to the connections the ranks open to the rendezvous store).
    job = os.environ.get("MASTER_PORT") if "LOCAL_RANK" in os.environ else None
    shared = Path(tempfile.gettempdir()) / f"zeus-compat-bso-{job}.port" if job else None
    name, _, zeus_port = host_port.partition(":")
    server = None
    deadline = time.monotonic() + 60
    if os.environ.get("LOCAL_RANK", "0") == "0":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        db = Path(tempfile.mkdtemp(prefix="zeus-bso-")) / "bso.db"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zeus_core._cli",
                "bso-server",
                "--database",
                str(db),
                "--port",
                str(port),
                "--allowed-host",  # reached under Zeus's service name, as a deployment would allow it
                name,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        atexit.register(server.terminate)
        if shared is not None:
            tmp = shared.with_suffix(f".{os.getpid()}")
            tmp.write_text(str(port))
            tmp.replace(shared)
            atexit.register(shared.unlink, missing_ok=True)
    else:
        assert shared is not None
        while not shared.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("local rank 0 did not start zeus-suite bso-server within 60 s")
            time.sleep(0.1)
        port = int(shared.read_text())
    _resolve_as(host_port, port)
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            raise RuntimeError(f"zeus-suite bso-server exited with code {server.returncode} at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("zeus-suite bso-server did not start within 60 s")


def _resolve_as(host_port: str, port: int) -> None:
    """Zeus's ``host:port`` reaches ``127.0.0.1:port`` (as ``/etc/hosts`` or a service would)."""
    import socket

    name, _, zeus_port = host_port.partition(":")
    resolve = socket.getaddrinfo

    def getaddrinfo(host: Any, p: Any, *args: Any, **kwargs: Any) -> Any:
        if host == name and str(p) == zeus_port:
            return resolve("127.0.0.1", port, *args, **kwargs)
        return resolve(host, p, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]


def start_zeusd(addresses: list[str]) -> None:
    """``zeus-suite daemon`` (4 fake A40s, one RAPL package) reached under each of Zeus's addresses.

    One daemon serves them all: each ``host:port`` resolves to its TCP port (with a read token in
    ``ZEUSD_TOKEN``, as Zeus's docs have the user set), each socket path is its Unix socket (as a
    bind mount would make it). The daemon stops when this process ends.
    """
    import atexit
    import socket

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.conftest import free_port
    from tests.daemon.harness import Daemon, make_rapl
    from zeus_core.daemon import issue_token

    port = free_port()
    daemon = Daemon(gpus=4, args=("--tcp", f"127.0.0.1:{port}"))
    key = b"a signing key of the compat tests, 32+ bytes\n"
    (daemon.dir / "key").write_bytes(key)
    make_rapl(daemon.dir / "rapl")
    daemon.args += ("--signing-key-path", str(daemon.dir / "key"), "--rapl-root", str(daemon.dir / "rapl"))
    daemon.start()
    atexit.register(daemon.stop)
    os.environ["ZEUSD_TOKEN"] = issue_token(key, "zeus-user", ["gpu-read", "cpu-read"], None)
    paths = [a for a in addresses if a.startswith("/")]
    for a in addresses:
        if not a.startswith("/"):
            _resolve_as(a, port)
    connect = socket.socket.connect

    def connect_as(self: socket.socket, address: Any) -> None:
        if self.family == socket.AF_UNIX and address in paths:
            address = daemon.socket
        connect(self, address)

    socket.socket.connect = connect_as  # type: ignore[method-assign]


def stop_after(namespace: dict[str, Any], name: str, readings: int) -> None:
    """Another thread calls ``namespace[name].stop()`` once ``readings`` snapshots had every device.

    Zeus's docs: "Iteration stops when stop() is called" (from another thread, in a real program).
    A snapshot counts when every endpoint has GPU and CPU readings; after 60 s it stops regardless.
    """
    import threading
    import time

    def complete(snapshot: dict[str, Any]) -> bool:
        return all(r.gpu_power_w and r.cpu_power_w for r in snapshot.values())

    def watch() -> None:
        while name not in namespace:
            time.sleep(0.05)
        client, seen, deadline = namespace[name], 0, time.monotonic() + 60
        for snapshot in client:  # type: ignore[attr-defined]
            seen += complete(snapshot)
            if seen >= readings or time.monotonic() > deadline:
                print(f"\n[stand-in] {seen} complete snapshots: calling {name}.stop()", flush=True)
                client.stop()  # type: ignore[attr-defined]
                return

    threading.Thread(target=watch, daemon=True).start()


def scale_cuda_tensors(f: int) -> None:
    """``torch.rand(n, m, device="cuda")`` (``randn``, ``zeros``, ``ones``): ``n/f × m/f`` on the CPU.

    Two CPU cores cannot multiply 10000² matrices in CI's time; the code around them runs as written.
    """
    for name in ("rand", "randn", "zeros", "ones"):
        make = getattr(torch, name)

        def smaller(*size: Any, _make: Any = make, **kwargs: Any) -> torch.Tensor:
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
                size = tuple(max(1, s // f) if isinstance(s, int) else s for s in size)
            return _make(*size, **kwargs)  # type: ignore[no-any-return]

        setattr(torch, name, smaller)


def scale_sleep(factor: float) -> None:
    """``time.sleep(s)`` sleeps ``s * factor`` s (a fast clock for what the code only waits out)."""
    import time

    sleep = time.sleep
    time.sleep = lambda s: sleep(s * factor)


def accelerated_clock(factor: float) -> Any:
    """A clock ``factor`` times faster than real time on which ``time.sleep`` returns at once.

    For documented code that only waits (cooldowns) or repeats a trivial step for fixed durations:
    Zeus's default duration sweep (``profile_parameters``) is about 50 minutes of wall time. Time on
    this clock is a :class:`~zeus_core.testing.VirtualClock` (advanced by every ``time.sleep(s)`` of
    the main thread, by ``s``) plus ``factor`` × the real time elapsed, so code in between still takes
    time. The GPUs' clock (what the monitor's windows and the fake NVML's energy counters read) is
    this clock, so energy and time stay consistent: the counters advance by draw × this clock's
    seconds. Other threads sleep in real time. Returns the clock (pass it to ``FakeNVML(clock=)``).
    """
    import time

    from zeus_core.device import _base
    from zeus_core.testing import VirtualClock

    class AcceleratedClock(VirtualClock):
        def __init__(self) -> None:
            super().__init__(start=time.time())
            self.real_start = time.perf_counter()

        def __call__(self) -> float:
            return super().__call__() + factor * (time.perf_counter() - self.real_start)

    clock = AcceleratedClock()
    _base.wall_clock = clock  # what a GPU's `.clock` returns (real hardware: wall-clock seconds)
    sleep, main = time.sleep, threading.main_thread()

    def sleep_on_clock(seconds: float) -> None:
        if threading.current_thread() is main:
            clock.advance(max(0.0, seconds))
        else:
            sleep(seconds)

    time.sleep = sleep_on_clock
    return clock


def remap_master_port(zeus_port: str) -> None:
    """A ``MASTER_PORT`` the code fixes (``29500``) is a free port (CI runs jobs side by side)."""
    import torch.distributed as dist

    from tests.conftest import free_port

    port = str(free_port())  # chosen before the code forks its workers: the same in each
    init = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get("MASTER_PORT") == zeus_port:
            os.environ["MASTER_PORT"] = port
        return init(*args, **kwargs)

    dist.init_process_group = init_process_group  # type: ignore[assignment]


class _Accuracy:
    """``load_metric("accuracy")`` of datasets < 3: ``add_batch``, ``compute()`` -> ``{"accuracy": ...}``."""

    def __init__(self) -> None:
        self.right = self.total = 0

    def add_batch(self, predictions: Any, references: Any) -> None:
        self.right += int((torch.as_tensor(predictions) == torch.as_tensor(references)).sum())
        self.total += len(references)

    def compute(self) -> dict[str, float]:
        out = {"accuracy": self.right / max(self.total, 1)}
        self.right = self.total = 0
        return out


def install_capriccio() -> str:
    """Capriccio-shaped local data, a tiny BERT and the names newer libraries removed; returns the folder.

    ``FOLDER/{0,9}_train.json``, ``FOLDER/{0,9}_val.json`` (JSON lines of ``text`` and ``label``, 64 and 16
    rows whose label a word gives away), ``FOLDER/tiny-bert`` (a 1-layer BERT with a 17-word vocabulary,
    randomly initialised, and its tokenizer); ``datasets.load_metric`` (removed in datasets 3) gives
    a local accuracy metric, ``transformers.AdamW`` (removed in transformers 5) is ``torch.optim.AdamW``.
    """
    import json
    import random
    import tempfile

    import datasets
    import transformers

    folder = Path(tempfile.mkdtemp(prefix="zeus-capriccio-"))
    words = ["good", "great", "fine", "bad", "awful", "poor", "the", "movie", "was", "plot", "acting", "very"]
    rng = random.Random(0)
    for split, n in (("train", 64), ("val", 16)):  # slice 0 (train.py's argv) and slice 9 (the README's)
        rows = []
        for _ in range(n):
            label = rng.randint(0, 1)
            mood = rng.choice(words[:3] if label else words[3:6])
            rows.append({"text": " ".join([*rng.sample(words[6:], 3), mood]), "label": label})
        for slice_number in (0, 9):
            (folder / f"{slice_number}_{split}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model_dir = folder / "tiny-bert"
    model_dir.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(model_dir)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=512,
    )
    transformers.BertForSequenceClassification(config).save_pretrained(model_dir)
    datasets.load_metric = lambda name, *a, **k: _Accuracy()  # type: ignore[attr-defined]
    sys.modules["transformers"].AdamW = torch.optim.AdamW  # type: ignore[attr-defined]  # (re-imported by now)
    return str(folder)


def install_clm() -> str:
    """A tiny GPT-2 with its tokenizer and a few lines of text, and the names transformers 5 removed.

    ``FOLDER/tiny-gpt2`` (one layer, a word-level tokenizer of 13 words), ``FOLDER/train.txt`` and
    ``FOLDER/validation.txt``; what transformers 4.37 had and 5 removed: ``is_torch_tpu_available``
    (False), ``transformers.utils.send_example_telemetry`` (nothing sent), ``Trainer(tokenizer=)``; an
    ``evaluate`` whose ``load("accuracy")`` is a local accuracy (no Hub in CI). Returns the folder.
    """
    import tempfile

    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = Path(tempfile.mkdtemp(prefix="zeus-clm-"))
    words = ["the", "gpu", "runs", "at", "a", "lower", "power", "limit", "and", "saves", "energy", "."]
    vocab = {w: i for i, w in enumerate(["<|endoftext|>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    model_dir = folder / "tiny-gpt2"
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", unk_token="<|endoftext|>"
    ).save_pretrained(model_dir)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=len(vocab), n_positions=64)
    transformers.GPT2LMHeadModel(config).save_pretrained(model_dir)
    line = "the gpu runs at a lower power limit and saves energy .\n"
    (folder / "train.txt").write_text(line * 48)
    (folder / "validation.txt").write_text(line * 8)
    trainer = sys.modules["transformers"].Trainer

    class Trainer(trainer):  # type: ignore[misc,valid-type]
        """transformers 4's ``Trainer(tokenizer=...)`` (transformers 5: ``processing_class=``)."""

        def __init__(self, *args: Any, tokenizer: Any = None, **kwargs: Any) -> None:
            if tokenizer is not None:
                kwargs.setdefault("processing_class", tokenizer)
            super().__init__(*args, **kwargs)

    sys.modules["transformers"].Trainer = Trainer  # type: ignore[attr-defined]
    sys.modules["transformers"].is_torch_tpu_available = lambda *a, **k: False  # type: ignore[attr-defined]
    sys.modules["transformers.utils"].send_example_telemetry = lambda *a, **k: None  # type: ignore[attr-defined]
    evaluate = types.ModuleType("evaluate")

    class _Metric(_Accuracy):
        def compute(self, predictions: Any = None, references: Any = None) -> dict[str, float]:  # type: ignore[override]
            if predictions is not None:
                self.add_batch(predictions, references)
            return super().compute()

    evaluate.load = lambda name, *a, **k: _Metric()  # type: ignore[attr-defined]
    sys.modules["evaluate"] = evaluate
    return str(folder)


def install_nsdi23_traces(alibaba: bool = False) -> str:
    """Zeus's ``trace/`` folder of the NSDI '23 example, from the traces that ship in ``zeus_core.data``.

    ``FOLDER/trace/summary_train.csv`` and ``summary_power_{a40,v100}.csv`` are the bundled copies of
    Zeus's files, unchanged (the P100 and RTX6000 power traces are not bundled). With ``alibaba``,
    also ``trace/alibaba_groups.csv.xz`` in the format of Zeus's Alibaba group trace but with
    **synthetic** rows (Zeus's file is not available offline): one group per workload of 12
    submissions, random arrivals and durations (seed 0) so that some overlap, runtime ratios in
    [0.5, 1.5]. Returns the folder.
    """
    import hashlib
    import lzma
    import random
    import shutil
    import tempfile

    from zeus_core import data

    folder = Path(tempfile.mkdtemp(prefix="zeus-nsdi23-"))
    shutil.copytree(data.path("zeus_nsdi23"), folder / "trace")
    if alibaba:
        rng = random.Random(0)
        rows = ["group,start_time,end_time,dataset,runtime_ratio"]
        for dataset in ("cifar100", "imagenet", "squad", "librispeech", "movielens-1m", "sentiment140"):
            group = hashlib.md5(f"synthetic-{dataset}".encode()).hexdigest()  # noqa: S324 - a name
            start = 0.0
            for _ in range(12):
                start += rng.expovariate(1 / 20000.0)
                end = start + rng.uniform(5000.0, 60000.0)
                rows.append(f"{group},{start:.1f},{end:.1f},{dataset},{rng.uniform(0.5, 1.5):.6f}")
        (folder / "trace" / "alibaba_groups.csv.xz").write_bytes(
            lzma.compress("\n".join(rows).encode() + b"\n")
        )
    return str(folder)


def install_fake_tensorboardx() -> None:
    """A ``tensorboardX`` whose ``SummaryWriter`` drops what it is given (not installed in CI)."""
    tbx = types.ModuleType("tensorboardX")

    class SummaryWriter:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: None

    tbx.SummaryWriter = SummaryWriter  # type: ignore[attr-defined]
    sys.modules["tensorboardX"] = tbx


class _JaxArray:
    """A stand-in for a JAX array on a GPU: shape only, so Zeus's 50,000 matrix products take no time."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __matmul__(self, other: _JaxArray) -> _JaxArray:
        return _JaxArray((self.shape[0], other.shape[-1]))

    def block_until_ready(self) -> _JaxArray:
        return self


def install_fake_jax() -> None:
    """A ``jax`` with one GPU device whose arrays carry their shape only (no JAX in CI)."""
    jax = types.ModuleType("jax")
    jnp = types.ModuleType("jax.numpy")
    random = types.ModuleType("jax.random")
    jax.jit = lambda f: f  # type: ignore[attr-defined]
    jax.devices = lambda: [types.SimpleNamespace(platform="gpu", id=0)]  # type: ignore[attr-defined]
    jax.device_put = lambda x, device=None: _JaxArray(())  # type: ignore[attr-defined]
    jnp.ones = lambda shape, *a, **k: _JaxArray(tuple(shape))  # type: ignore[attr-defined]
    random.PRNGKey = lambda seed: _JaxArray((2,))  # type: ignore[attr-defined]
    random.uniform = lambda key, shape, *a, **k: _JaxArray(tuple(shape))  # type: ignore[attr-defined]
    jax.numpy, jax.random = jnp, random  # type: ignore[attr-defined]
    sys.modules.update({"jax": jax, "jax.numpy": jnp, "jax.random": random})


class _Gateway(http.server.BaseHTTPRequestHandler):
    pushes = 0

    def _ok(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).pushes += 1
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = do_DELETE = _ok  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


def start_pushgateway(port: int = 9091) -> None:
    """A Pushgateway on ``localhost:port`` that accepts every push; the count is printed at exit."""
    import time

    deadline = time.monotonic() + 300
    while True:  # another snippet's gateway may hold the port: wait for it to end
        try:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Gateway)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    import atexit

    atexit.register(lambda: print(f"[pushgateway] {_Gateway.pushes} pushes", file=sys.stderr, flush=True))


def start_ipinfo(loc: str) -> None:
    """``http://ipinfo.io/json`` answered locally with ``{"loc": LOC}`` (CI has no network)."""
    import json

    class IPInfo(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = json.dumps({"ip": "192.0.2.1", "loc": loc}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), IPInfo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _resolve_as("ipinfo.io:80", server.server_address[1])


def names() -> dict[str, Any]:
    """What docs fragments leave to the reader: a tiny model, its data and one step of training."""
    g = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.randn(32, 8, generator=g), torch.randint(0, 2, (32,), generator=g))
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(dataset, batch_size=16)

    def train_one_step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()

    def train_one_epoch(
        train_loader: Any, model: Any, optimizer: Any, criterion: Any, epoch: int, args: Any
    ) -> None:
        for x, y in loader:
            train_one_step(x, y)

    def accuracy(val_loader: Any = None, *rest: Any) -> float:
        with torch.no_grad():
            return float(sum((model(x).argmax(1) == y).float().mean() for x, y in loader) / len(loader)) * 100

    return {
        "os": os,
        "torch": torch,
        "DataLoader": DataLoader,
        "model": model,
        "optimizer": optimizer,
        "criterion": criterion,
        "args": types.SimpleNamespace(),
        "train_loader": loader,
        "train_dataloader": loader,
        "val_loader": loader,
        "train_dataset": dataset,
        "eval_dataset": dataset,
        "train_one_step": train_one_step,
        "train_one_epoch": train_one_epoch,
        "validate": accuracy,
        "evaluate": accuracy,
        "local_rank": 0,
    }


def trainer_arguments() -> dict[str, Any]:
    """A Hugging Face ``Trainer``'s model, arguments and data: a tiny GPT-2 on a few random tokens."""
    import tempfile

    from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    ids = torch.randint(0, 64, (8, 16), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(
        tempfile.mkdtemp(prefix="zeus-trainer-"),
        max_steps=4,
        per_device_train_batch_size=4,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
    )
    return {"model": model, "args": args, "train_dataset": data}
