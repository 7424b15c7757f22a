"""The trainer's Adam (fastsample/trainer/adam.py) is torch.optim.Adam, bitwise, state_dict
included, and it does not import torch._dynamo (a second of every rank's start-up)."""

import subprocess
import sys

import pytest
import torch

from fastsample.trainer.adam import Adam


def model():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(7, 33), torch.nn.ReLU(), torch.nn.Linear(33, 5),
                              torch.nn.Linear(5, 3))
    net[3].requires_grad_(False)  # parameters with no gradient are left alone, as torch does
    return net


def train(net, optimizer, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=False)
        net(torch.randn(16, 7, generator=gen)).square().sum().backward()
        optimizer.step()


def same_state(a: dict, b: dict) -> bool:
    return a["param_groups"] == b["param_groups"] and a["state"].keys() == b["state"].keys() and all(
        a["state"][k].keys() == b["state"][k].keys()
        and all(torch.equal(a["state"][k][n], b["state"][k][n]) and a["state"][k][n].dtype == b["state"][k][n].dtype
                for n in a["state"][k]) for k in a["state"])


@pytest.mark.parametrize("decay", [0.0, 5e-4])
def test_adam_is_torchs_bitwise_and_their_states_load_into_each_other(decay):
    ours, theirs = model(), model()
    o, t = Adam(ours.parameters(), lr=0.01, weight_decay=decay), torch.optim.Adam(theirs.parameters(), lr=0.01,
                                                                                   weight_decay=decay)
    train(ours, o, 25, 1)
    train(theirs, t, 25, 1)
    assert all(torch.equal(p, q) for p, q in zip(ours.parameters(), theirs.parameters()))
    assert same_state(o.state_dict(), t.state_dict())
    # a checkpoint written by torch's Adam (older fastsample) resumes in ours, and the other way
    o3 = Adam(ours.parameters(), lr=0.01, weight_decay=decay)
    o3.load_state_dict(t.state_dict())
    t3 = torch.optim.Adam(theirs.parameters(), lr=0.01, weight_decay=decay)
    t3.load_state_dict(o.state_dict())
    train(ours, o3, 5, 2)
    train(theirs, t3, 5, 2)
    assert all(torch.equal(p, q) for p, q in zip(ours.parameters(), theirs.parameters()))


def test_adam_leaves_torch_dynamo_unimported():
    code = ("import sys, torch\nfrom fastsample.trainer.adam import Adam\n"
            "net = torch.nn.Linear(3, 2)\no = Adam(net.parameters(), lr=0.1, weight_decay=0.1)\n"
            "o.zero_grad(); net(torch.ones(1, 3)).sum().backward(); o.step(); o.load_state_dict(o.state_dict())\n"
            "print('torch._dynamo' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_adam_refuses_a_variant_it_does_not_compute():
    net = model()
    o = Adam(net.parameters(), lr=0.01)
    state = torch.optim.Adam(net.parameters(), lr=0.01, amsgrad=True).state_dict()
    o.load_state_dict(state)
    net(torch.ones(1, 7)).sum().backward()
    with pytest.raises(ValueError, match="plain Adam only"):
        o.step()
