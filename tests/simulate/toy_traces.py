"""A hand-made two-batch-size trace shared by the simulator tests."""

from __future__ import annotations

from pathlib import Path

from zeus_core.simulate._traces import Workload

TOY = Workload("toy", "net", "sgd", target_metric=0.5, max_epochs=5, default_batch_size=64)

TRAIN = """dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch
toy,net,16,sgd,0.1,1,0.5,4
toy,net,16,sgd,0.1,2,0.5,6
toy,net,16,sgd,0.1,1,0.4,2
toy,net,32,sgd,0.1,1,0.5,3
toy,net,32,sgd,0.1,2,0.5,nan
toy,net,8,sgd,0.1,1,0.5,2
other,net,16,sgd,0.1,1,0.5,1
"""
POWER = """dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power
toy,net,16,sgd,100,10,80
toy,net,16,sgd,200,6,150
toy,net,32,sgd,100,8,90
toy,net,32,sgd,200,5,180
toy,net,64,sgd,200,4,190
other,net,16,sgd,300,1,1
"""


def write_toy(folder: Path, train: str = TRAIN, power: str = POWER) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary_train.csv").write_text(train)
    (folder / "summary_power_toy.csv").write_text(power)
    return folder / "summary_train.csv", folder / "summary_power_toy.csv"
