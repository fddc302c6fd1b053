"""PNG charts with matplotlib (the ``plot`` extra), imported only here and only when asked for."""

from __future__ import annotations

from pathlib import Path

from trainprobe.errors import missing_extra
from trainprobe.metrics.analyze import LogReport
from trainprobe.metrics.findings import STALL
from trainprobe.metrics.series import downsample

_SEV_COLOR = {"error": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}


def render_png(report: LogReport, path: Path, *, max_metrics: int = 6) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise missing_extra("matplotlib", extra="plot", needed_by="--png") from None
    panels = []
    for run in report.runs:
        series = downsample(run, 4000)
        flagged = {f.metric for f in report.findings if f.run == run.name}
        for metric in sorted(series, key=lambda m: m not in flagged)[:max_metrics]:
            panels.append((run, metric, series[metric]))
    panels = panels[:max_metrics]
    fig, axes = plt.subplots(len(panels) or 1, 1, figsize=(10, 2.4 * max(1, len(panels))), squeeze=False)
    for ax, (run, metric, data) in zip(axes[:, 0], panels, strict=True):
        ax.plot(
            data["steps"], [float("nan") if v is None else v for v in data["values"]], lw=0.8, color="#333"
        )
        for f in report.findings:
            if f.run == run.name and (f.metric == metric or f.kind == STALL):
                ax.axvspan(
                    f.step - 0.5, max(f.end_step, f.step) + 0.5, color=_SEV_COLOR[f.severity], alpha=0.25
                )
        for e in report.events.get(run.name, []):
            if e.kind != "eval":
                ax.axvline(
                    e.step, color="#2ca02c" if e.kind == "checkpoint_save" else "#888", ls="--", lw=0.8
                )
        ax.set_title(f"{run.name} · {metric}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
