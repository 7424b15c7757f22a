"""The products' floor of an epoch: what its matrix products alone would take on this CPU.

A model that lists its products (``products(blocks)`` or ``products(blocks, batch)``:
(layer, op, rows, k, n) per product, 2·rows·k·n FLOPs each, ``layer`` any label of the
product's place, as the built-in models do; None: not listed) has them counted at every
training step from the MFGs (and batch) it actually ran. At the end of an epoch the products' throughput is
measured on this CPU, on the epoch's own shapes (each layer and op at its mean row count),
with the engines and precision the model's products use (fastsample/nn/matmul.py's plan),
once per run (a product whose timings do not agree, the core shared meanwhile, is measured
again at the next epoch's end, and that epoch has no floor); the floor is the epoch's FLOPs
at those speeds. An epoch can only approach
it: everything else (sampling, gather, aggregation, activations, loss, optimizer) is
what the ratio epoch / floor shows.
"""

from __future__ import annotations

import inspect
from collections import defaultdict

import torch

from fastsample.nn import matmul


def products_of(model, blocks, batch=None) -> list | None:
    """``model``'s list of a step's products (``products(blocks)``, or ``products(blocks,
    batch)`` where it reads the batch too); None where it lists none."""
    listed = getattr(model, "products", None)
    if listed is None:
        return None
    return listed(blocks, batch) if "batch" in inspect.signature(listed).parameters else listed(blocks)


class Roofline:
    """Counts a model's products per step and prices them per epoch (see the module doc).

    Args:
        model: the model; without a ``products`` method nothing is counted (fields None).
        device: where the model runs (the floor is measured on the CPU only).
    """

    def __init__(self, model, device: torch.device | str = "cpu"):
        self.enabled = callable(getattr(model, "products", None))
        self.model, self.measurable = model, torch.device(device).type == "cpu"
        self.gflops: dict[tuple[int, str], float] = {}  # measured once, on the first epoch's shapes
        self._reset()

    def _reset(self) -> None:
        self.flop = defaultdict(float)
        self.rows = defaultdict(int)
        self.steps = defaultdict(int)
        self.shape: dict[tuple[int, str], tuple[int, int]] = {}

    def count(self, blocks, batch=None) -> None:
        """Add one training step's products (its forward and backward)."""
        if not self.enabled:
            return
        products = products_of(self.model, blocks, batch)
        if products is None:  # the model does not list them after all (a link model's user encoder)
            self.enabled = False
            return
        for layer, op, m, k, n in products:
            key = (layer, op)
            self.flop[key] += 2.0 * m * k * n
            self.rows[key] += m
            self.steps[key] += 1
            self.shape[key] = (k, n)

    def epoch(self) -> tuple[int | None, float | None]:
        """(products_flop, products_floor_s) of the steps counted since the last call; the
        floor is None off the CPU. Measures the throughput at the first call (~0.5 s)."""
        if not self.enabled or not self.flop:
            self._reset()
            return None, None
        flop, floor = int(sum(self.flop.values())), None
        if self.measurable:
            plan, steady = matmul.current(), True
            for key in self.flop:
                if key not in self.gflops:
                    rows = max(1, round(self.rows[key] / self.steps[key]))
                    speed, calm = matmul.throughput(plan, key[1], rows, *self.shape[key])
                    if calm:
                        self.gflops[key] = speed
                    steady &= calm
            # a measurement under someone else's load puts the floor too high (even above the
            # epoch): none this epoch, measured again at the next one's end
            if steady:
                floor = sum(f / (self.gflops[key] * 1e9) for key, f in self.flop.items())
        self._reset()
        return flop, floor

    def describe(self) -> str:
        """The measured throughput per layer and op, e.g. "layer 0 forward 78 weight_grad 80"."""
        layers = sorted({layer for layer, _ in self.gflops}, key=str)
        return "; ".join(f"layer {i} " + " ".join(f"{op} {g:.0f}" for (j, op), g in sorted(self.gflops.items())
                                                  if j == i) for i in layers)
