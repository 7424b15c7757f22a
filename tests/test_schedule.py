"""The learning-rate schedule (fastsample/trainer/schedule.py): a function of the global step
alone, which is what lets a resumed run continue it exactly (tests/test_faults.py's SIGTERM
case with --lr-schedule cosine --warmup-steps --grad-clip)."""

import math

import pytest

from fastsample.options import ConfigError, marked
from fastsample.trainer import TrainConfig
from fastsample.trainer.schedule import lr_factor


def test_warm_up_then_cosine_or_steps():
    assert [lr_factor("none", 4, s, 100) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cos = [lr_factor("cosine", 10, s, 110) for s in range(110)]
    assert cos[9] == 1.0 and cos[10] == 1.0 and math.isclose(cos[60], 0.5) and cos[-1] < 1e-3
    assert all(a >= b for a, b in zip(cos[10:], cos[11:]))  # decays monotonically after the warm-up
    steps = [lr_factor("step", 0, s, 100) for s in (0, 49, 50, 74, 75, 99)]
    assert steps == [1.0, 1.0, 0.1, 0.1, 0.01, 0.01]


def test_bad_controls_are_refused_naming_the_flag():
    for field, value, says in (("lr_schedule", "linear", "lr_schedule must be one of none, cosine, step"),
                               ("warmup_steps", -1, "warmup_steps must be >= 0"),
                               ("grad_clip", 0.0, "grad_clip must be positive")):
        with pytest.raises(ConfigError, match=says):
            TrainConfig(data="d", **{field: value})
    # a checkpoint resumes only with the schedule it was saved with (resume=True fields)
    assert {"lr_schedule", "warmup_steps", "grad_clip"} <= set(marked(TrainConfig, "resume"))
