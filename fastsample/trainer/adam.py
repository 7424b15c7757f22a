"""The trainer's default optimizer: torch.optim.Adam, bitwise, without importing torch._dynamo.

torch.optim wraps add_param_group, zero_grad, state_dict, load_state_dict and every step()
in decorators whose first call imports torch._dynamo (sympy, FSDP, the tracer): 0.96 s of
CPU per rank, measured on a 2-core AMD EPYC, a third of a small job's start-up, and a fifth
of the test suite's time, for a compiler the trainer never runs. This class is
torch.optim.Adam with those four methods taken undecorated (``__wrapped__``: torch's own
code) and a step() that applies torch's single-tensor rule (the one torch runs on CPU
tensors) with the same tensor ops in the same order, so parameters, state and state_dict
(the checkpoints' format) are those torch.optim.Adam gives; tests/test_adam.py checks it.
Only Adam as the trainer builds it: no amsgrad, maximize, capturable, differentiable or
fused variants (refused).
"""

from __future__ import annotations

import torch


def _undecorated(method):
    """torch's method without its torch._disable_dynamo wrapper (the method itself where a
    torch release has none to unwrap: correct, only slower to start)."""
    return getattr(method, "__wrapped__", method)


class Adam(torch.optim.Adam):
    """torch.optim.Adam(params, lr, betas, eps, weight_decay): the same numbers, the same
    state_dict; see the module doc."""

    add_param_group = _undecorated(torch.optim.Optimizer.add_param_group)
    zero_grad = _undecorated(torch.optim.Optimizer.zero_grad)
    state_dict = _undecorated(torch.optim.Optimizer.state_dict)
    load_state_dict = _undecorated(torch.optim.Optimizer.load_state_dict)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if any(group[k] for k in ("amsgrad", "maximize", "capturable", "differentiable", "fused",
                                      "decoupled_weight_decay")):
                raise ValueError("fastsample's Adam runs plain Adam only (a loaded state asked for a variant)")
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients")
                state = self.state[param]
                if not state:  # as torch.optim.Adam starts a parameter's state
                    state["step"] = torch.tensor(0.0, dtype=torch.float64 if torch.get_default_dtype() == torch.float64
                                                 else torch.float32)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                grad, exp_avg, exp_avg_sq = param.grad, state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                if decay != 0:
                    grad = grad.add(param, alpha=decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step = state["step"].item()
                step_size = lr / (1 - beta1**step)
                denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
                param.addcdiv_(exp_avg, denom, value=-step_size)
        return loss
