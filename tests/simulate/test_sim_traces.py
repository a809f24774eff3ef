"""Trace loading: filtering, batch-size intersection, default capping, and clear errors."""

from __future__ import annotations

import pytest

from tests.simulate.toy_traces import POWER, TOY, TRAIN, write_toy
from zeus_core.exceptions import ZeusProfileError
from zeus_core.simulate._traces import NSDI23_WORKLOADS, load_nsdi23_traces, load_workload_trace


def test_toy_trace_is_filtered_intersected_and_capped(tmp_path):
    trace = load_workload_trace(TOY, *write_toy(tmp_path))
    assert trace.gpu == "toy"
    assert trace.batch_sizes == (16, 32)  # 8 has no power rows, 64 no training runs
    assert trace.power_limits == (100, 200)
    assert trace.target_epochs == {16: (4, 6), 32: (3, None)}
    assert trace.workload.default_batch_size == 32  # 64 is traced for power but not trained
    assert trace.epochs[(32, 200)].energy_j == pytest.approx(900.0)
    assert trace.max_power_w == 200.0
    assert trace.num_recurrences() == 2 * 2 * 2


@pytest.mark.parametrize(
    ("train", "power", "match"),
    [
        (TRAIN, POWER.replace("average_power", "avg_power"), "average_power"),
        (TRAIN, POWER.replace("toy,net,16,sgd,100,10,80", "toy,net,16,sgd,100,ten,80"), "time_per_epoch"),
        (TRAIN, POWER.replace("toy,net,16,sgd,100,10,80", "toy,net,16,sgd,100,-1,80"), "must be > 0"),
        (TRAIN.replace("toy", "zzz"), POWER, "no batch size"),
        (TRAIN, POWER.replace("toy", "zzz"), "no rows"),
    ],
)
def test_malformed_traces_raise_naming_the_problem(tmp_path, train, power, match):
    with pytest.raises(ZeusProfileError, match=match):
        load_workload_trace(TOY, *write_toy(tmp_path, train, power))


def test_missing_files_and_folders(tmp_path):
    with pytest.raises(ZeusProfileError, match="does not exist"):
        load_workload_trace(TOY, tmp_path / "nope.csv", tmp_path / "nope2.csv")
    with pytest.raises(ZeusProfileError, match="does not exist"):
        load_nsdi23_traces("a40", trace_dir=tmp_path)


def test_nsdi23_traces_match_the_paper_settings(shared_data):
    folder = shared_data / "zeus_nsdi23"
    a40 = {t.workload.dataset: t for t in load_nsdi23_traces("a40", folder)}
    v100 = {t.workload.dataset: t for t in load_nsdi23_traces("v100", folder)}
    assert [w.dataset for w in NSDI23_WORKLOADS] == list(a40) == list(v100)
    assert a40["cifar100"].num_recurrences() == 2 * 10 * 9 == 180
    assert v100["librispeech"].batch_sizes[0] == 2 and v100["librispeech"].num_recurrences() == 210
    assert a40["librispeech"].workload.higher_is_better is False
    assert a40["sentiment140"].power_limits == (100, 150, 200, 250, 300)
    assert v100["imagenet"].workload.default_batch_size == 256
    assert a40["movielens-1m"].target_epochs[8] == (None,) * 5  # never converges


def test_power_trace_of_another_gpu_by_path(shared_data, tmp_path):
    other = tmp_path / "my_power.csv"
    other.write_text((shared_data / "zeus_nsdi23" / "summary_power_v100.csv").read_text())
    traces = load_nsdi23_traces("mygpu", shared_data / "zeus_nsdi23", power_trace=other)
    assert {t.gpu for t in traces} == {"mygpu"}
    assert traces[0].power_limits == (100, 125, 150, 175, 200, 225, 250)
