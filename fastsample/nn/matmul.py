"""The dense products of the built-in GraphSAGE, on the fastest path the CPU at hand offers.

A native GraphSAGE layer (fastsample/nn/sage.py) does three matrix products per step:

    forward      out    = Z @ W^T        (rows, 2 d_in) x (2 d_in, d_out)
    weight grad  dW     = G^T @ Z        (d_out, rows) x (rows, 2 d_in)
    input grad   dZ     = G @ W          (rows, d_out) x (d_out, 2 d_in)

torch ships two CPU engines for them: its BLAS (MKL in the x86 wheels; `torch.mm`) and
oneDNN (`torch.ops.mkldnn._linear_pointwise`, the inner product inductor uses). Which is
faster depends on the CPU and on the shapes (measured, one core: oneDNN 1.6x MKL on one
AMD EPYC host at 40000x256 @ 256x256, 0.8-1.2x on another, by shape), so `choose` measures both on the model's
largest layer at start-up (~0.1-0.3 s) and keeps, per product, the faster one; BLAS stays
unless the other is clearly (10 %) faster. Both compute in fp32 with fp32 accumulation: the
results differ from each other by rounding only (the 1e-5 contract of tests/test_model.py).

bf16 (``--precision bf16``): the products run on bfloat16 operands with fp32 accumulation,
their results rounded to bfloat16 (torch's CPU bf16 products return bf16) and widened
(outputs within 1 % of fp32, gradients within 10 %, norm-wise: tests/test_matmul.py);
weights, optimizer and loss stay fp32. Only where the measurement says they pay (CPUs
with AVX-512 BF16 or AMX); elsewhere (AVX2: bf16 products are emulated, 7-40x slower
than fp32) the products stay fp32 and bf16 only narrows the features (fastsample/bf16.py).
``--precision int8`` computes as bf16 does, its features held in 8 bits (fastsample/int8.py).

The chosen plan is process-wide (`use`, `current`), like torch's own backend flags: the
trainer decides on rank 0 and every rank uses rank 0's plan, so ranks compute alike. A
measured choice is kept on disk (`plan_for`: $XDG_CACHE_HOME/fastsample/matmul.json, per
CPU, torch version, thread count and shape), so that runs on one host with one seed stay
bitwise reproducible: two fresh measurements of engines within noise of each other could
otherwise pick differently. A measurement made while something else used the core must not
decide: it repeats until each engine's best two calls agree, else that run uses BLAS (the
engine with no measurement) in fp32 (bf16 products too are not measured under load) and the plan is kept marked unsteady, to be measured afresh at
the next start-up (a start-up beside another job must not lock a host to BLAS); a kept
steady plan is re-checked cheaply at every start-up and replaced only when its engine has
become clearly slower (RECHECK_MARGIN) and a fresh, steady measurement chooses otherwise
(plan_for; a kept BLAS plan needs no re-check). The start-up line says which happened.
A session whose runs are compared bitwise (the tests) sets KEEP_UNSTEADY_ENV, so that its
first plan, steady or not, decides all of its runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from fastsample.choices import BF16_PRODUCTS, MATMUL_CHOICES, MATMUL_ENGINES as ENGINES, PRECISIONS

# oneDNN (and ideep, torch's wrapper of it) keep a compiled primitive per matrix shape,
# up to 1024; a layer's row count differs every step, so a rank on the onednn engine
# grew by ~1.2 GiB over 750 medium steps. Small caches keep it flat (both are needed);
# read at the first oneDNN call, so set here, before any; a user's setting wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")
os.environ.setdefault("LRU_CACHE_CAPACITY", "16")

OPS = ("forward", "weight_grad", "input_grad")
MARGIN = 1.1  # another engine replaces BLAS only when at least this much faster: noise must not flip it
BF16_MARGIN = 1.2  # bf16 products also pay for casting their operands
SPREAD = 1.05  # a measurement is steady when each candidate's two best calls agree this well
RECHECK_MARGIN = 1.3  # a cached choice is re-measured only when a quick re-check finds it this much slower
# set to 1: a kept unsteady plan decides later runs as a steady one does (not measured afresh). For a
# session whose runs are compared bitwise (tests/conftest.py): a later steady measurement could choose
# another engine than an earlier run's unsteady BLAS. Not for production: there load would stick.
KEEP_UNSTEADY_ENV = "FASTSAMPLE_MATMUL_KEEP_UNSTEADY"


def _onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """a @ b^T (+ bias) through oneDNN's inner product (a, b row-major or transposed views)."""
    return torch.ops.mkldnn._linear_pointwise(a, b, bias, "none", [], "")


def _blas_forward(z, w, bias=None):
    return z @ w.t() if bias is None else torch.addmm(bias, z, w.t())


def _bf16_forward(z, w, bias=None):  # bf16 operands, fp32 out: torch's bf16 products accumulate in fp32
    out = (z.to(torch.bfloat16) @ w.to(torch.bfloat16).t()).float()
    return out if bias is None else out.add_(bias)


def onednn_available() -> bool:
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    try:
        _onednn(torch.ones(2, 3), torch.ones(4, 3))
        return True
    except RuntimeError:
        return False


# (engine, op) -> f; forward(z, w[, bias]), weight_grad(g, z) -> (d_out, 2 d_in), input_grad(g, w)
_IMPL = {
    ("blas", "forward"): _blas_forward,
    ("blas", "weight_grad"): lambda g, z: (z.t() @ g).t(),  # this operand order is ~15% faster in MKL
    ("blas", "input_grad"): lambda g, w: g @ w,
    ("onednn", "forward"): _onednn,
    ("onednn", "weight_grad"): lambda g, z: _onednn(g.t(), z.t()),
    # a column slice of w (the R-GCN's span of one input) made whole: oneDNN takes a strided
    # weight to a reference kernel, ~40x slower
    ("onednn", "input_grad"): lambda g, w: _onednn(g, w.contiguous().t()),
    ("bf16", "forward"): _bf16_forward,
    ("bf16", "weight_grad"): lambda g, z: (z.to(torch.bfloat16).t() @ g.to(torch.bfloat16)).t().float(),
    ("bf16", "input_grad"): lambda g, w: (g.to(torch.bfloat16) @ w.to(torch.bfloat16)).float(),
}


@dataclass(frozen=True)
class Plan:
    """Which engine runs each product, and in which precision.

    engines: op -> "blas" or "onednn" (see OPS); bf16: products on bfloat16 operands;
    precision: what was asked for ("fp32", "bf16" or "int8": the last two may still compute
    in fp32, see the module doc); measured: GFLOP/s per candidate from `choose` ({} if not measured).
    """

    engines: dict = field(default_factory=lambda: dict.fromkeys(OPS, "blas"))
    bf16: bool = False
    precision: str = "fp32"
    measured: dict = field(default_factory=dict)
    seconds: float = 0.0
    steady: bool = True

    def forward(self, z: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """z @ w^T (+ bias): a layer's projection of Z = [h_dst | mean]."""
        return self._run("forward", z, w, bias) if bias is not None else self._run("forward", z, w)

    @staticmethod
    def output_grad(g: torch.Tensor) -> torch.Tensor:
        """A layer's output gradient as its products read it: whole, or the transposed view
        of a whole g^T (what a layer with no input gradient gets, written so by the layer
        above: the weight gradient reads g^T, so no copy is made); anything else made whole."""
        return g if g.t().is_contiguous() else g.contiguous()

    def operand(self, a: torch.Tensor) -> torch.Tensor:
        """``a`` as this plan's products read it (bf16 products: in bfloat16), for an operand
        read by more than one product, converted once; the products take it as is."""
        return a.to(torch.bfloat16) if self.bf16 else a

    @property
    def reads_transposed_grad(self) -> bool:
        """Whether the weight gradient reads g as g^T whole (oneDNN: given g row-major, it
        copies it so first): a producer that can write g^T as well saves that copy."""
        return not self.bf16 and self.engines["weight_grad"] == "onednn"

    def weight_grad(self, g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """g^T z, the gradient of w (d_out, 2 d_in)."""
        return self._run("weight_grad", g, z)

    def input_grad(self, g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """g w, the gradient of Z."""
        return self._run("input_grad", g, w)

    def _run(self, op: str, *args: torch.Tensor) -> torch.Tensor:
        if any(a.numel() == 0 for a in args):  # a type with no rows this step: oneDNN has no empty product
            return _IMPL["blas", op](*(a.float() for a in args))  # (an operand made bf16 by `operand` too)
        return _IMPL["bf16" if self.bf16 else self.engines[op], op](*args)

    def describe(self, figures: bool = True) -> str:
        """One line: the engines, and (``figures``) the measurement that chose them."""
        if self.bf16:
            what = "bf16 products"
        else:
            names = sorted(set(self.engines.values()))
            what = "fp32 " + (names[0] if len(names) == 1 else ", ".join(f"{op} {self.engines[op]}" for op in OPS))
        if self.precision in BF16_PRODUCTS and not self.bf16:
            what += (f" (bf16 products do not pay on this CPU: {self.precision} "
                     f"{'narrows' if self.precision == 'bf16' else 'quantizes'} the features only)")
        if self.measured and figures:
            m = self.measured
            figures = "; ".join(f"{op} " + " ".join(f"{e} {m[f'{op} {e}']:.0f}" for e in ENGINES if f"{op} {e}" in m)
                                for op in OPS)
            if "bf16 step" in m:
                figures += f"; step fp32 {m['fp32 step']:.0f} bf16 {m['bf16 step']:.0f}"
            what += f" [GFLOP/s {figures}; measured in {self.seconds:.2f} s{'' if self.steady else ', unsteady'}]"
        return what


_current = Plan()


def current() -> Plan:
    """The plan the model's products use now (BLAS, fp32 until `use` says otherwise)."""
    return _current


def use(plan: Plan) -> Plan:
    """Make ``plan`` the process's plan; returns the previous one."""
    global _current
    previous, _current = _current, plan
    return previous


def as_saved(plan: Plan) -> dict:
    """What a checkpoint keeps of ``plan``: how its products computed (engines, bf16)."""
    return {"engines": dict(plan.engines), "bf16": plan.bf16, "precision": plan.precision}


def from_saved(saved: dict | None) -> Plan:
    """The plan a checkpoint kept (`as_saved`), to compute as its run did: BLAS fp32 for one
    that kept none (saved before they were kept), BLAS for oneDNN where this torch lacks it."""
    if saved is None:
        return Plan()
    onednn = onednn_available()
    engines = {op: e if e == "blas" or onednn else "blas" for op, e in saved["engines"].items()}
    return Plan(engines, bool(saved["bf16"]), saved.get("precision", "fp32"))


def _gflops(candidates: dict, flops: float, reps: int = 3) -> dict:
    """GFLOP/s of each candidate (name -> f()): the best of ``reps`` calls after a warm one,
    the candidates taking turns, so that a drifting clock or a neighbour's load falls on
    all of them alike."""
    return _measure(candidates, flops, reps, reps)[0]


def _measure(candidates: dict, flops: float, least: int = 3, most: int = 8) -> tuple[dict, bool]:
    """({name: GFLOP/s}, steady): rounds of one timing per candidate (taking turns, after a
    warm call each; a timing repeats a small product until it takes ~2 ms, so that the
    clock's grain does not decide) until every candidate's two best timings agree within
    SPREAD (at least ``least``, at most ``most`` rounds). Not steady: something else used
    the core meanwhile, and a choice made on it must not decide a later run (choose, plan_for)."""
    times, repeat = {name: [] for name in candidates}, {}
    for name, f in candidates.items():
        t0 = time.perf_counter()
        f()  # warm: oneDNN builds its primitive on the first call
        repeat[name] = min(1000, max(1, int(0.002 / max(time.perf_counter() - t0, 1e-7))))
    for round_ in range(most):
        for name, f in candidates.items():
            t0 = time.perf_counter()
            for _ in range(repeat[name]):
                f()
            times[name].append((time.perf_counter() - t0) / repeat[name])
        steady = all(len(b) < 2 or b[1] <= SPREAD * b[0] for b in (sorted(t)[:2] for t in times.values()))
        if round_ + 1 >= least and steady:
            break
    return {name: flops / min(t) / 1e9 for name, t in times.items()}, steady


SHAPES = 64  # a timed call's rows: the shape's, less 0..SHAPES-1, a new count each call
_ROW_ARGS = {"forward": (0,), "weight_grad": (0, 1), "input_grad": (0,)}  # the operands with a row per product row


def _new_shapes(op: str, f, args: tuple):
    """f(*args) as training calls it: with a row count it has not just seen. A layer's rows
    differ every step, and oneDNN builds a primitive for each new shape (0.7-2.5 ms a call
    at the medium model's shapes, 10-25 %); timed on one fixed shape, it looked that much
    faster than it runs."""
    calls, rows = itertools.count(), args[_ROW_ARGS[op][0]].shape[0]
    cycle = max(1, min(SHAPES, rows))

    def call():
        m = rows - next(calls) % cycle
        return f(*(a[:m] if i in _ROW_ARGS[op] else a for i, a in enumerate(args)))
    return call


def _flops(rows: int, k: int, n: int) -> float:
    """A _new_shapes call's FLOPs, on average over its row counts."""
    return 2.0 * (rows - (max(1, min(SHAPES, rows)) - 1) / 2) * k * n


def _operands(rows: int, k: int, n: int, seed: int = 0) -> dict:
    """Random operands of each product of (rows, k) x (k, n) shape, as the model passes them:
    {op: args} over Z (rows, k), W (n, k) and G (rows, n)."""
    gen = torch.Generator().manual_seed(seed)
    z, w, g = (torch.randn(*s, generator=gen) for s in ((rows, k), (n, k), (rows, n)))
    return {"forward": (z, w), "weight_grad": (g, z), "input_grad": (g, w)}


def throughput(plan: Plan, op: str, rows: int, k: int, n: int, reps: int = 3) -> tuple[float, bool]:
    """(GFLOP/s, steady) of ``plan``'s ``op`` on a (rows, k) x (k, n) product (as the model
    calls it; the roofline's measure, fastsample/nn/roofline.py): the best call after a warm
    one, ``reps`` rounds or more until steady (_measure: not steady, something else used the
    core meanwhile, and the figure is too low).
    The weight gradient reads g row-major or, where its producer writes it so, as a whole
    g^T (sage.py, rgcn.py: oneDNN then skips its copy, 1.4x faster on layer 0 of the medium
    model); a floor is what the product can do, so the faster of the two is kept."""
    args = _operands(rows, k, n)[op]
    calls = {"as is": _new_shapes(op, lambda *a: plan._run(op, *a), args)}
    if op == "weight_grad":
        g_t = args[0].t().contiguous().view(-1)
        calls["g^T whole"] = _new_shapes(op, lambda g, z: plan._run(op, g_t[:g.numel()].view(n, -1).t(), z), args)
    speed, steady = _measure(calls, _flops(rows, k, n), reps)
    return max(speed.values()), steady


def choose(backend: str = "auto", precision: str = "fp32", shape: tuple[int, int, int] = (4096, 512, 256),
           seed: int = 0) -> Plan:
    """The plan for ``backend`` and ``precision`` on products of ``shape`` = (rows, 2 d_in,
    d_out): the model's largest layer, rows capped by the caller. "auto" measures: the
    faster engine per product, and with bf16 whether bf16 products pay; "blas" or "onednn"
    pin the engine, and with bf16 the bf16 products (which run on torch's own dispatch:
    oneDNN where the CPU has bf16 instructions)."""
    if backend not in MATMUL_CHOICES:
        raise ValueError(f"backend must be one of {', '.join(MATMUL_CHOICES)} (got {backend!r})")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)} (got {precision!r})")
    if backend == "onednn" and not onednn_available():
        raise ValueError("backend onednn: this torch build has no usable oneDNN inner product")
    if backend != "auto":  # pinned: no measurement; with bf16, bf16 products whether they pay or not
        return Plan(dict.fromkeys(OPS, backend), bf16=precision in BF16_PRODUCTS, precision=precision)
    t0 = time.perf_counter()
    rows, k, n = shape
    args = _operands(rows, k, n, seed)
    (z, w), g = args["forward"], args["input_grad"][0]
    flops = 2.0 * rows * k * n
    engines = ENGINES if onednn_available() else ("blas",)
    measured, chosen, steady = {}, {}, True
    for op in OPS:
        speed, calm = _measure({e: _new_shapes(op, _IMPL[e, op], args[op]) for e in engines}, _flops(rows, k, n))
        steady &= calm
        measured.update({f"{op} {e}": s for e, s in speed.items()})
        best = max(speed, key=speed.get)
        chosen[op] = best if best == "blas" or "blas" not in speed or speed[best] >= MARGIN * speed["blas"] else "blas"
    if not steady:  # a choice under someone else's load would differ run to run: BLAS, as without a measurement
        chosen = dict.fromkeys(OPS, "blas")
    bf16 = False
    # under load fp32 too: the bf16 timing below, near its margin (small shapes), would flip run to run
    if precision in BF16_PRODUCTS and steady:  # on a slice: emulated bf16 is slow, and a slice shows the ratio
        cut = max(1, rows // 8)
        small = {"forward": (z[:cut], w), "weight_grad": (g[:cut], z[:cut]), "input_grad": (g[:cut], w)}
        fp32, half = Plan(chosen), Plan(bf16=True)
        speed = [_gflops({"fp32": lambda: fp32._run(op, *small[op]), "bf16": lambda: half._run(op, *small[op])},
                         flops / 8, reps=1) for op in OPS]  # far from the margin either way: one timing shows it
        # (bf16 against fp32 as measured: 7-40x slower emulated on AVX2, 0.55x on an AVX-512 BF16 Xeon
        # without AMX (family 6 model 207), ~1.8x on Zen 5; bench/README.md)
        step32, step16 = (sum(1 / s[kind] for s in speed) for kind in ("fp32", "bf16"))
        measured.update({"fp32 step": 3 / step32, "bf16 step": 3 / step16})
        bf16 = step32 >= BF16_MARGIN * step16
    return Plan(chosen, bf16, precision, measured, time.perf_counter() - t0, steady)


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fastsample" / "matmul.json"


def _cpuinfo() -> dict:
    """The first CPU's /proc/cpuinfo fields ({} where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            block = f.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in block.splitlines())}


MATMUL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")


def cpu_summary() -> str:
    """The CPU model and the flags that decide the products' speed, e.g. "AMD EPYC (avx2 fma;
    no avx512f avx512_bf16 ...)": what a benchmark prints beside its figures."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    have = [f for f in MATMUL_FLAGS if f in flags]
    lack = [f for f in MATMUL_FLAGS if f not in flags]
    return f"{info.get('model name', 'unknown CPU')} ({' '.join(have) or 'none of ' + ' '.join(MATMUL_FLAGS)}" + \
        (f"; no {' '.join(lack)})" if lack and have else ")")


def _host_key(backend: str, precision: str, shape, threads: int) -> str:
    info = _cpuinfo()  # what decides which kernels run: two hosts named "AMD EPYC" with the same
    # flags were a Zen 4 and a Zen 5 here, and one's plan was read on the other
    cpu = hashlib.sha1(" ".join(str(info.get(f)) for f in ("model name", "cpu family", "model", "stepping", "flags"))
                       .encode()).hexdigest()[:12]
    return f"{cpu} torch {torch.__version__} {backend} {precision} {threads} threads {'x'.join(map(str, shape))}"


def recheck(plan: Plan, shape: tuple[int, int, int]) -> bool:
    """Whether a kept plan still holds: each product for which it chose another engine
    than BLAS, timed against BLAS in one quick round on a quarter of the rows (~0.05 s).
    False only when BLAS is now RECHECK_MARGIN faster: a choice made under load must not
    stick, and the noise of one round must not flip runs meant to be bitwise alike (BLAS,
    the engine with no measurement, needs no re-check)."""
    ops = [op for op in OPS if plan.engines[op] != "blas"]
    if plan.bf16 or not ops:
        return True
    rows, k, n = max(1, shape[0] // 4), shape[1], shape[2]
    args = _operands(rows, k, n)
    for op in ops:
        engines = {"blas", plan.engines[op]}
        speed = _gflops({e: _new_shapes(op, _IMPL[e, op], args[op]) for e in engines}, _flops(rows, k, n), reps=2)
        if speed["blas"] > RECHECK_MARGIN * speed[plan.engines[op]]:
            return False
    return True


def _clearly_slower(cached: Plan, fresh: Plan) -> bool:
    """Whether a fresh measurement finds one of the kept plan's engines RECHECK_MARGIN
    slower than the best for its product: engines within that of each other are a tie,
    and a tie never replaces a kept plan (runs on one host must compute alike)."""
    m = fresh.measured
    for op in OPS:
        speeds = {e: m[f"{op} {e}"] for e in ENGINES if f"{op} {e}" in m}
        mine = speeds.get(cached.engines[op])
        if mine is not None and max(speeds.values()) > RECHECK_MARGIN * mine:
            return True
    return False


def _keep(path: Path, key: str, plan: Plan) -> None:
    """Write ``plan`` under ``key`` into the cache file (atomically; a read-only home: not at all)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            entries = json.loads(path.read_text())
            entries = entries if isinstance(entries, dict) else {}
        except (OSError, ValueError):
            entries = {}
        entries[key] = asdict(plan)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
            json.dump(entries, f, indent=1)
        os.replace(f.name, path)  # atomic: concurrent jobs never read half a file
    except OSError:
        pass  # a read-only home: the plan still holds for this process


UNSTEADY = "unsteady (another load on the cores?): BLAS in fp32 for this run, measured again at the next start-up"


def plan_for(backend: str, precision: str, shape: tuple[int, int, int]) -> tuple[Plan, str]:
    """`choose`'s plan, measured once per host and settings and then read from
    cache_file(); returns it and where it came from, for the start-up line.

    Only a steady measurement can choose an engine other than BLAS, and only a steady one
    decides later runs. An unsteady one runs its own run on BLAS and is kept marked so
    (``steady`` False): the next start-up measures afresh, and the first steady measurement
    replaces it, whatever it chooses, as if nothing had been kept; so one start-up beside
    another job cannot lock a host to BLAS (unless KEEP_UNSTEADY_ENV is set: see there).
    A kept steady plan is re-checked at every start-up (`recheck`), and when its engine has
    become clearly slower it is measured afresh and replaced if that measurement is steady
    and finds it so. So load cannot make a choice stick, and noise cannot make two runs on
    one host with a steady plan kept compute differently."""
    if backend != "auto":
        return choose(backend, precision, shape), "set"
    key, path = _host_key(backend, precision, shape, torch.get_num_threads()), cache_file()
    cached = None
    try:
        saved = json.loads(path.read_text()).get(key)
        cached = Plan(**saved) if saved is not None else None
    except (OSError, ValueError, TypeError, AttributeError):
        pass  # no cache, or an unreadable one: measure (and rewrite it)
    if cached is not None and not cached.steady:
        if os.environ.get(KEEP_UNSTEADY_ENV) == "1":
            return cached, f"cached, unsteady (kept: {KEEP_UNSTEADY_ENV}=1)"
        plan = choose(backend, precision, shape)  # a kept unsteady plan decides nothing: as if none were kept
        source = "re-measured: the cached plan was unsteady" if plan.steady else f"re-measured; {UNSTEADY}"
        _keep(path, key, plan)
        return plan, source
    if cached is not None and recheck(cached, shape):
        return cached, "cached, re-checked"
    plan = choose(backend, precision, shape)
    if cached is not None:
        if not (plan.steady and _clearly_slower(cached, plan)):
            return cached, "cached (a re-check disagreed, a fresh measurement did not: kept)"
        source = "re-measured: the cached plan failed its re-check"
    else:
        source = "measured" if plan.steady else f"measured; {UNSTEADY}"
    _keep(path, key, plan)  # an unsteady plan too, marked so: the next start-up measures afresh
    return plan, source
