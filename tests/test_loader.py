"""NodeLoader: the batches are the sampler's MFGs and the right rows, deterministic, and
the same on one process as the trainer's data path."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from fastsample.comm.local import LocalCommunicator
from fastsample.distributed import average_gradients
from fastsample.data.graph import load_dataset
from fastsample.loading import NodeLoader
from fastsample.partition import partition_dataset
from fastsample.sampling import sample
from conftest import make_small_dataset
from helpers import mfg_equal


def test_one_epoch_covers_the_split_once_with_the_samplers_mfgs_and_the_right_rows(small_dataset):
    ds = load_dataset(small_dataset)
    loader = NodeLoader(small_dataset, fanouts=[3, 2], batch_size=4, split="train", seed=5)
    assert len(loader) == math.ceil(len(ds.train) / 4)
    loader.set_epoch(2)
    seen = []
    for step, batch in enumerate(loader):
        seeds = batch.seeds.numpy()
        assert batch.seeds.dtype == torch.int64 and np.all(np.diff(seeds) > 0)
        want = sample(ds.graph, seeds, [3, 2], seed=5, epoch=2, step=step, rank=0, kernel=loader.sampler.name)
        assert all(mfg_equal(a, b) for a, b in zip(batch.mfgs, want))
        assert np.array_equal(batch.mfgs[-1].dst_ids, seeds)
        assert batch.x.dtype == torch.float32
        assert torch.equal(batch.x, torch.from_numpy(np.asarray(ds.features[batch.mfgs[0].src_ids], np.float32)))
        assert torch.equal(batch.y, torch.from_numpy(ds.labels[seeds]))
        for i, m in enumerate(batch.mfgs):
            ei = batch.edge_index(i)
            assert ei.dtype == torch.int64 and ei.shape == (2, m.num_edges)
            assert batch.size(i) == (m.num_src, m.num_dst)
            assert np.array_equal(ei[0].numpy(), m.indices)
            assert np.array_equal(ei[1].numpy(), np.repeat(np.arange(m.num_dst), np.diff(m.indptr)))
        batch.x[0, 0] = 1.0  # writable: the model may work in place
        seen.append(seeds)
    assert np.array_equal(np.sort(np.concatenate(seen)), np.sort(ds.train))


def test_order_depends_on_seed_and_epoch_only(small_dataset):
    def epoch(seed, e):
        loader = NodeLoader(small_dataset, fanouts=[2], batch_size=3, seed=seed)
        loader.set_epoch(e)
        return [b.seeds.tolist() for b in loader]

    assert epoch(1, 0) == epoch(1, 0)
    assert epoch(1, 0) != epoch(1, 1) and epoch(1, 0) != epoch(2, 0)
    evaluation = NodeLoader(small_dataset, fanouts=[2], batch_size=3, split="val")
    assert [s for b in evaluation for s in b.seeds.tolist()] == sorted(load_dataset(small_dataset).val.tolist())


def test_a_one_rank_partition_loads_without_a_communicator(small_dataset, tmp_path):
    partition_dataset(small_dataset, tmp_path / "p1", 1, progress=False)
    ds, orig = load_dataset(small_dataset), np.load(tmp_path / "p1" / "orig_ids.npy")  # new id -> dataset id
    loader = NodeLoader(tmp_path / "p1", fanouts=[3, 2], batch_size=4)
    assert len(loader) == math.ceil(len(ds.train) / 4)
    for batch in loader:
        assert torch.equal(batch.x, torch.from_numpy(np.asarray(ds.features[orig[batch.mfgs[0].src_ids]])))
        assert torch.equal(batch.y, torch.from_numpy(ds.labels[orig[batch.seeds.numpy()]]))


@pytest.mark.parametrize("kwargs, message", [
    (dict(split="dev"), "split must be one of train, val, test"),
    (dict(batch_size=0), "batch_size must be a positive integer"),
    (dict(fanouts=[3, 0]), "fanouts must be positive or -1"),
    (dict(mode="mixed"), "mode must be one of hybrid, vanilla"),
])
def test_bad_arguments_are_named(small_dataset, kwargs, message):
    with pytest.raises(ValueError, match=message):
        NodeLoader(small_dataset, **{"fanouts": [2], "batch_size": 4, **kwargs})


def test_a_dataset_directory_is_for_one_process(small_dataset):
    class Two(LocalCommunicator):
        size = 2

    with pytest.raises(ValueError, match="a dataset directory serves one process; for 2 ranks partition it"):
        NodeLoader(small_dataset, fanouts=[2], batch_size=4, comm=Two())


def test_average_gradients_on_one_rank_keeps_gradients_and_sums_extra():
    model = torch.nn.Linear(3, 2)
    model(torch.ones(4, 3)).sum().backward()
    before = [p.grad.clone() for p in model.parameters()]
    extra = average_gradients(model, LocalCommunicator(), extra=[1.5, 2.0])
    assert [torch.equal(a, p.grad) for a, p in zip(before, model.parameters())] == [True, True]
    assert extra.tolist() == [1.5, 2.0]
    fresh = torch.nn.Linear(3, 2)  # no backward yet: counts as zero gradients
    assert average_gradients(fresh, LocalCommunicator()) is None
    assert all(torch.count_nonzero(p.grad) == 0 for p in fresh.parameters())


def resident_kib(path) -> int:
    """This process's resident KiB of its mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:  # a mapping's first line
            inside = len(head) >= 6 and head[5] == str(path)
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs /proc/self/smaps")
def test_warm_up_faults_the_feature_shard_in_and_populate_skips_what_it_should(tmp_path):
    """The first steps would otherwise fault the shard's pages in one by one (allocator.populate)."""
    from fastsample.allocator import populate

    file = tmp_path / "rows.npy"
    np.save(file, np.random.default_rng(0).standard_normal((4096, 256)).astype(np.float32))  # 4 MiB
    rows = np.load(file, mmap_mode="r")
    assert resident_kib(file) == 0
    assert not populate(rows, share=1e-9)  # larger than that share of the free memory: left alone
    assert resident_kib(file) == 0
    assert populate(rows[100:200])  # a view finds its file mapping
    assert resident_kib(file) >= 4 * 1024
    assert not populate(np.ones(4))  # not a mapping


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs /proc/self/smaps")
def test_a_loader_reads_its_feature_shard_into_memory_and_resident_skips_what_it_should(tmp_path):
    """The gathered rows are read at random where they are (fastsample/rows.py): through a
    file mapping's small pages every row would miss the TLB (allocator.resident)."""
    from fastsample.allocator import resident

    data = make_small_dataset(tmp_path / "wide", num_nodes=2000, feature_dim=512)  # 4 MiB of features
    loader = NodeLoader(data, fanouts=[3, 2], batch_size=4)
    file = (data / "features.npy").resolve()
    shard = loader.gather.shards[0]
    assert not isinstance(shard, np.memmap) and not shard.flags.writeable
    assert resident_kib(file) == 0  # the mapping it was read through is gone
    assert np.array_equal(shard, np.load(file))
    batch = next(iter(loader))
    assert torch.equal(batch.x, torch.from_numpy(np.load(file)[batch.mfgs[0].src_ids]))
    rows = np.load(file, mmap_mode="r")
    assert resident(rows, share=1e-9) is rows  # larger than that share of the free memory: left mapped
    plain = np.ones((3, 2))
    assert resident(plain) is plain  # not a mapping
    kept = NodeLoader(data, fanouts=[3, 2], batch_size=4, precision="bf16")
    assert kept.gather.shards[0].dtype == np.uint16  # narrowed into memory, once