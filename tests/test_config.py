"""The typed configs and the extension points: one config drives the CLI, the checks, the
ranks' agreement and resume; model, optimizer, loss and sampler can be passed as objects
and the defaults, passed explicitly, train exactly as the built-in ones."""

import dataclasses

import numpy as np
import pytest
import torch

from fastsample import options as cfg
from fastsample.cli import flag_message
from fastsample.comm.local import LocalCommunicator
from fastsample.loading import NodeLoader
from fastsample.nn.sage import GraphSAGE
from fastsample.sampling import LocalSampler, Sampler
from fastsample.distributed import VanillaSampler
from fastsample.trainer import CheckpointError, Checkpoints, TrainConfig, Trainer
from fastsample.train import parse_args
from helpers import mfg_equal


def test_the_command_line_is_the_config_and_errors_name_the_field_or_the_flag():
    c = parse_args(["--data", "d", "--fanouts", "4,3", "--net-model", "10,25", "--resume", "--checkpoint-dir", "k"])
    assert c == TrainConfig(data="d", fanouts=(4, 3), net_model=(10.0, 25.0), resume=True, checkpoint_dir="k")
    assert c.layers == 2  # derived from the fanouts
    with pytest.raises(cfg.ConfigError) as e:
        TrainConfig(data="d", batch_size=0)
    assert (e.value.field, str(e.value)) == ("batch_size", "batch_size must be positive (got 0)")
    assert flag_message(e.value) == "--batch-size must be positive (got 0)"
    with pytest.raises(cfg.ConfigError, match="layers 3 needs 3 fanouts"):
        TrainConfig(data="d", fanouts=(4, 3), layers=3)
    with pytest.raises(cfg.ConfigError, match="mode must be one of hybrid, vanilla"):
        TrainConfig(data="d", mode="both")


@pytest.mark.parametrize("flag,value", [("weight_decay", float("inf")), ("lr", float("nan")),
                                        ("stall_timeout", float("inf")), ("embed_lr", float("nan"))])
def test_a_number_that_is_not_finite_is_refused_by_every_option(flag, value):
    # --weight-decay inf passed its ">= 0" and trained on NaN weights; nan fails no "< 0" test
    with pytest.raises(cfg.ConfigError) as e:
        TrainConfig(data="d", **{flag: value})
    assert flag_message(e.value) == f"--{flag.replace('_', '-')} must be a finite number (got {value})"


def test_an_option_of_another_task_is_refused_naming_the_tasks_it_serves():
    from fastsample.tasks import TASKS

    for option, value in (("scorer", "dot"), ("negatives", 5), ("hits", (1,))):
        with pytest.raises(cfg.ConfigError) as e:
            TrainConfig(data="d", task="node", **{option: value})
        assert (e.value.field, str(e.value)) == (option, f"{option} serves --task link only, not --task node")
        assert getattr(TrainConfig(data="d", task="link", **{option: value}), option) == value
    with pytest.raises(cfg.ConfigError, match="eval_every_steps serves --task node and node-regression only, not --task link"):
        TrainConfig(data="d", task="link", eval_every_steps=5)
    with pytest.raises(cfg.ConfigError, match="task must be one of " + ", ".join(TASKS)):
        TrainConfig(data="d", task="nodes")
    # every task's own options are real settings, with a default to compare against
    assert {o for t in TASKS.values() for o in t.options} <= {f.name for f in dataclasses.fields(TrainConfig)}


def test_shared_and_resume_marks_live_on_the_fields():
    shared, resume = cfg.marked(TrainConfig, "shared"), cfg.marked(TrainConfig, "resume")
    # what a rank writes or how it runs may differ; what decides the numbers may not
    assert {"checkpoint_dir", "log_json", "threads", "device", "quiet", "allocator"}.isdisjoint(shared)
    assert {"data", "fanouts", "batch_size", "lr", "seed", "mode", "prefetch", "cache_fraction"} <= set(shared)
    assert {"model", "fanouts", "hidden", "layers", "mode", "seed", "batch_size"} <= set(resume)
    c = TrainConfig(data="d", fanouts=(5, -1), net_model=(1.0, 2.0))
    d = cfg.to_dict(c)
    assert all(isinstance(v, (str, int, float, bool, tuple, type(None))) for v in d.values())
    # a checkpoint's dict, lists for tuples and a key an older version wrote, reads back
    assert cfg.from_dict(TrainConfig, {**d, "fanouts": [5, -1], "net_model": [1.0, 2.0], "gone": 1}) == c


def test_resume_compares_configs_and_names_what_differs(tmp_path):
    model = GraphSAGE(4, 8, 3, 2, 0.0)
    opt = torch.optim.Adam(model.parameters())
    saved = TrainConfig(data="d", fanouts=(3, 2), hidden=8, epochs=2, checkpoint_dir=str(tmp_path))
    Checkpoints(tmp_path, saved).save(0, model, opt)
    again = dataclasses.replace(saved, epochs=3, resume=True)  # may change: no resume mark
    assert Checkpoints(tmp_path, again).resume(model, opt) == (1, 0, f"resume: from {tmp_path / 'epoch-0.pt'}")
    # a setting that changes the numbers, changed: allowed, and said (it was silent)
    changed = dataclasses.replace(again, lr=0.1, dropout=0.2, sampler="numba", lr_schedule="none")
    assert Checkpoints(tmp_path, changed).resume(model, opt)[2] == (
        f"resume: from {tmp_path / 'epoch-0.pt'}; with other settings than its: dropout (0.5 there, 0.2 here), "
        "lr (0.006 there, 0.1 here)")
    other = dataclasses.replace(again, hidden=16, seed=4, lr=0.1)
    with pytest.raises(CheckpointError, match=r"epoch-0.pt: saved with different hidden \(8 there, 16 here\), seed \(0 there, 4 here\)$"):
        Checkpoints(tmp_path, other).resume(model, opt)


def test_a_step_checkpoint_resumes_at_its_step_only_where_the_epoch_is_the_same_batches(tmp_path):
    model = GraphSAGE(4, 8, 3, 2, 0.0)
    opt = torch.optim.Adam(model.parameters())
    config = TrainConfig(data="d", fanouts=(3, 2), hidden=8, epochs=4, checkpoint_dir=str(tmp_path))
    Checkpoints(tmp_path, config).save(1, model, opt, step=6, steps_per_epoch=8)  # a job of one process
    again, path = dataclasses.replace(config, resume=True), tmp_path / "epoch-1.step-6.pt"
    assert Checkpoints(tmp_path, again).resume(model, opt, num_parts=1, steps_per_epoch=8) == (
        1, 6, f"resume: from {path}")
    # two ranks draw other batches; another number of steps is other batches: the next epoch, said
    assert Checkpoints(tmp_path, again).resume(model, opt, num_parts=2, steps_per_epoch=4) == (
        2, 0, f"resume: from {path}; saved at step 6 of epoch 1 by 1 rank, and 2 here draw other batches: "
              "continuing from epoch 2")
    assert Checkpoints(tmp_path, again).resume(model, opt, num_parts=1, steps_per_epoch=7)[:2] == (2, 0)
    # an older checkpoint (no step_of) is taken at its word where its step exists here
    state = torch.load(path, weights_only=False)
    del state["step_of"]
    torch.save(state, path)
    assert Checkpoints(tmp_path, again).resume(model, opt, num_parts=2, steps_per_epoch=7)[:2] == (1, 6)
    start, step, note = Checkpoints(tmp_path, again).resume(model, opt, num_parts=2, steps_per_epoch=4)
    assert (start, step) == (2, 0) and note.endswith("saved at step 6 of epoch 1, and an epoch here is 4 steps: "
                                                     "continuing from epoch 2"), note
    # the last epoch's: nothing left to train, said as for an epoch's end
    with pytest.raises(CheckpointError, match=r"epoch-1.step-6.pt saved at step 6 of epoch 1, and an epoch here is 4 "
                                              r"steps, so it continues from epoch 2; epochs 2 leaves nothing to train"):
        Checkpoints(tmp_path, dataclasses.replace(again, epochs=2)).resume(model, opt, num_parts=2, steps_per_epoch=4)


class CountingSampler:
    """A user's Sampler: delegates, and counts."""

    def __init__(self, inner):
        self.inner, self.name, self.calls = inner, "counting", 0

    def sample(self, seeds, fanouts, *, seed, epoch, step):
        self.calls += 1
        return self.inner.sample(seeds, fanouts, seed=seed, epoch=epoch, step=step)


def test_a_user_sampler_is_used_and_the_built_in_ones_satisfy_the_protocol(small_dataset):
    base = NodeLoader(small_dataset, [3, 2], 8)
    mine = CountingSampler(LocalSampler(base.part.graph, 0, "numba"))
    custom = NodeLoader(small_dataset, [3, 2], 8, sampler=mine)
    for a, b in zip(base, custom):
        assert all(mfg_equal(x, y) for x, y in zip(a.mfgs, b.mfgs)) and torch.equal(a.x, b.x)
    assert mine.calls == len(custom) and isinstance(mine, Sampler)
    assert isinstance(VanillaSampler(LocalCommunicator(), base.part.offsets, base.part.graph), Sampler)
    with pytest.raises(TypeError, match="Sampler"):
        NodeLoader(small_dataset, [3, 2], 8, sampler=object())


def test_the_default_components_passed_as_objects_train_exactly_as_the_built_in_ones(small_dataset):
    config = TrainConfig(data=str(small_dataset), fanouts=(3, 2), batch_size=8, hidden=8, epochs=2, eval_every=0,
                         quiet=True)

    def losses(trainer):
        return [r.step_losses for r in trainer.run()]

    default = losses(Trainer(config, LocalCommunicator()))
    torch.manual_seed(config.seed)
    model = GraphSAGE(4, 8, 3, 2, config.dropout)
    explicit = Trainer(config, LocalCommunicator(), model=model,
                       optimizer=lambda params: torch.optim.Adam(params, lr=config.lr),
                       loss=torch.nn.functional.cross_entropy)
    assert losses(explicit) == default
    # and a different loss is really used
    scaled = Trainer(config, LocalCommunicator(), loss=lambda logits, y: 2 * torch.nn.functional.cross_entropy(logits, y))
    assert np.allclose(np.array(losses(scaled)[0][:1]), 2 * np.array(default[0][:1]))


def test_a_file_where_a_directory_goes_and_a_directory_where_a_checkpoint_goes_are_said_so(tmp_path):
    from fastsample.trainer import load_checkpoint
    from fastsample.trainer.trainer import _writable_directory

    (tmp_path / "file").write_text("")
    with pytest.raises(cfg.ConfigError, match="file: not a directory"):  # was "cannot create it (File exists)"
        _writable_directory("checkpoint_dir", tmp_path / "file")
    with pytest.raises(FileNotFoundError, match="a directory; give a checkpoint file in it"):
        load_checkpoint(tmp_path, "cpu")
