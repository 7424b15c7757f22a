"""python -m fastsample.report: runs of --log-json files side by side.

Draws, for each run, the loss and the validation score per epoch (with the steps' losses
behind), and the per-phase time split of each epoch (sample, gather, forward/backward,
all-reduce, optimizer, embeddings); prints a table of what differs between the runs'
settings (their headers' resolved configs, data, hosts, versions) and of their final
figures. The figures and the table go to --out; the table also to stdout.

    python -m fastsample.report a.jsonl b.jsonl --out report/
"""

from __future__ import annotations

import sys
from pathlib import Path

from fastsample import cli

PROG = "python -m fastsample.report"
# where output went, and how it was shown: never what makes two runs differ
NOT_SETTINGS = {"log_json", "checkpoint_dir", "tensorboard", "quiet", "progress", "progress_every", "resume"}
PHASES = (("sample_s", "sample"), ("gather_s", "gather"), ("compute_s", "forward/backward"),
          ("allreduce_s", "all-reduce"), ("optimizer_s", "optimizer"), ("embed_grads_s", "embedding grads"),
          ("embed_update_s", "embedding update"))


def build_parser() -> cli.Parser:
    p = cli.Parser(prog=PROG, description=__doc__)
    p.add_argument("logs", nargs="+", metavar="LOG", help="--log-json files (each may hold several runs)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="where curves.FORMAT and runs.md go (created; files there of the same names are replaced)")
    p.add_argument("--format", choices=("png", "svg", "pdf"), default="png", help="the figure's file format")
    p.add_argument("--run", action="append", metavar="RUN_ID", default=None,
                   help="only these runs (by run id or its last characters; repeatable); default: every run")
    return p


def load_runs(logs: list[str], wanted: list[str] | None = None) -> list[tuple[str, object]]:
    """(label, Run) of every run in ``logs``, in order: a run's label is its file's name, with
    #K where the file holds several runs. Raises ValueError naming a file that is not a log."""
    from fastsample.trainer.runlog import read_runs

    out = []
    for log in logs:
        path = Path(log)
        if not path.is_file():
            raise ValueError(f"{log}: {'a directory, not a --log-json file' if path.is_dir() else 'no such file'}")
        runs = read_runs(path)
        if not runs:
            raise ValueError(f"{log}: holds no run (an empty log)")
        for k, run in enumerate(runs):
            label = path.name if len(runs) == 1 else f"{path.name}#{k + 1}"
            if wanted is None or any(run.run_id and run.run_id.endswith(w) for w in wanted):
                out.append((label, run))
    if wanted is not None and not out:
        raise ValueError(f"--run {', '.join(wanted)}: no run in {', '.join(logs)} has that id")
    if not any(run.records for _, run in out):
        raise ValueError(f"{', '.join(logs)}: no epoch recorded (the runs ended before their first epoch)")
    return out


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def settings(run) -> dict:
    """What a run was: its resolved config (less where output went), data, job, host, versions, commit."""
    h = run.header or {}
    out = {k: v for k, v in h.get("config", {}).items() if k not in NOT_SETTINGS}
    for k in out:  # a setting a resumption changed: each value in turn ("0.01 -> 0.05"), not the first alone
        values = [_show(r.get("config", {}).get(k)) for r in run.headers if k in r.get("config", {})]
        changed = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
        if len(changed) > 1:
            out[k] = " -> ".join(changed)
    for section in ("data", "job", "host", "versions", "git"):
        if h.get(section):
            out |= _flat(h[section], f"{section}.")
    return out


def _show(value) -> str:
    """A setting or figure as a table cell (and as what two runs are compared by)."""
    return "—" if value is None else ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def differences(every: list[dict]) -> list[str]:
    """Of the runs' ``settings``, the keys whose values are not alike in every run (all of
    them with one run: its settings)."""
    keys = sorted({k for s in every for k in s}, key=lambda k: ("." in k, k))
    if len(every) == 1:
        return keys
    return [k for k in keys if len({_show(s.get(k)) for s in every}) > 1]


def finals(run) -> dict:
    """A run's final figures: epochs, the last loss, the best score and the test measure at it,
    the mean time of its whole epochs, how it ended."""
    from fastsample.tasks import task_class
    from fastsample.trainer.metrics import seconds

    records = run.records
    if not records:
        return {"epochs run": "none"}
    task = task_class(records[-1].task)
    whole = [r.epoch_s for r in records if not r.partial]
    evaluated = [r for r in records if r.score is not None]
    best = max(evaluated, key=lambda r: r.score) if evaluated else None
    twin = "test_" + task.score.removeprefix("val_")  # the score's measure on the test set, where the task has it
    test = twin if twin in task.metrics else next((k for k in task.metrics if k.startswith("test_")), None)
    out = {"epochs run": f"{records[0].epoch}..{records[-1].epoch}", "last loss": f"{records[-1].loss:.4f}",
           f"best {task.score}": f"{best.score:.4f} (epoch {best.epoch})" if best else "n/a",
           f"{test or 'test'} there": f"{best.metrics[test]:.4f}" if best and test and best.metrics.get(test) is not None
           else "n/a",
           "mean epoch": seconds(sum(whole) / len(whole)) if whole else "n/a",
           "ended": _ended(run)}
    return out


def _ended(run) -> str:
    """How a run's log ends: what its last record says, or, where the log stops short of the
    epochs asked for (its last header's --epochs) with no record saying why, that it does (the
    run failed there or was killed: a NaN loss with --on-nan stop, a rank lost, a preemption)."""
    last, config = run.records[-1], (run.headers[-1] if run.headers else {}).get("config", {})
    if last.stopped_early:
        return "stopped early"
    if any(r.time_to_target_s is not None for r in run.records):
        return "target reached"
    if not last.complete:
        return "stopped"
    planned = config.get("epochs")
    if planned and last.epoch + 1 < planned:
        return f"log ends at epoch {last.epoch} of 0..{planned - 1} (failed or killed there)"
    return "ran its epochs"


def table(runs: list) -> str:
    """A Markdown table: the settings that differ, then the final figures, a column per run."""
    head = ["", *(label for label, _ in runs)]
    rows = [["run id", *(run.run_id or "(no header)" for _, run in runs)]]
    every = [settings(run) for _, run in runs]
    diff = differences(every)
    rows += [[k, *(_show(s.get(k)) for s in every)] for k in diff]
    if len(runs) > 1 and not diff:
        rows.append(["(settings)", *(["alike"] * len(runs))])
    figures = [finals(run) for _, run in runs]
    names = list(dict.fromkeys(k for f in figures for k in f))
    rows += [[k, *(_show(f.get(k)) for f in figures)] for k in names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def draw(runs: list, path: Path) -> None:
    """The figure: loss, validation score, and each run's per-phase time per epoch."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a cluster node
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from fastsample.tasks import task_class

    fig, axes = plt.subplots(1, 3, figsize=(18, 5))
    loss_ax, score_ax, time_ax = axes
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    scores = set()
    width = 0.8 / len(runs)
    for i, (label, run) in enumerate(runs):
        color = colors[i % len(colors)]
        records = run.records
        if not records:
            continue
        # the steps' losses, at their fraction of the epoch, behind the epochs' means
        xs, ys = [], []
        for r in records:
            n = r.steps_per_epoch or max(len(r.step_losses), 1)
            xs += [r.epoch + (r.first_step + k + 1) / n for k in range(len(r.step_losses))]
            ys += r.step_losses
        loss_ax.plot(xs, ys, color=color, alpha=0.25, linewidth=0.8)
        loss_ax.plot([r.epoch + 1 for r in records], [r.loss for r in records], "o-", color=color, label=label)
        evaluated = [r for r in records if r.score is not None]
        if evaluated:
            scores.add(task_class(records[-1].task).score)
            score_ax.plot([r.epoch + 1 for r in evaluated], [r.score for r in evaluated], "o-", color=color, label=label)
        bottom = [0.0] * len(records)
        x = [r.epoch - 0.4 + width * (i + 0.5) for r in records]
        for k, (key, name) in enumerate(PHASES):
            values = [getattr(r, key) or 0.0 for r in records]
            if not any(values):
                continue
            time_ax.bar(x, values, width, bottom=bottom, color=plt.cm.tab10(k), edgecolor=color,
                        label=name if i == 0 else None)
            bottom = [b + v for b, v in zip(bottom, values)]
        other = [max(r.epoch_s - b, 0.0) for r, b in zip(records, bottom)]
        time_ax.bar(x, other, width, bottom=bottom, color="lightgrey", edgecolor=color,
                    label="other" if i == 0 else None)
    # epoch E's steps run from E to E + 1, where its mean loss and its evaluation are marked
    loss_ax.set(title="training loss (steps faint, epochs' means marked)", xlabel="epochs done", ylabel="loss")
    score_ax.set(title="validation", xlabel="epochs done", ylabel=" / ".join(sorted(scores)) or "(no evaluation)")
    time_ax.set(title="time per epoch, by phase (rank 0; runs side by side)", xlabel="epoch", ylabel="seconds")
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (loss_ax, score_ax):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    time_ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        runs = load_runs(args.logs, args.run)
    except (ValueError, OSError, KeyError) as e:
        return cli.fail(PROG, e)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return cli.fail(PROG, ValueError(f"--out {out}: cannot create it ({e.strerror})"))
    text = table(runs)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return cli.fail(PROG, ImportError("the figures need matplotlib: pip install 'fastsample[report]'"))
    figure = out / f"curves.{args.format}"
    draw(runs, figure)
    (out / "runs.md").write_text(text + "\n")
    print(text)
    print(f"\n{PROG}: {len(runs)} run(s): {figure}, {out / 'runs.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
