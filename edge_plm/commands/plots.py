"""`edge-plm stats --plot`: learning over time, drawn with matplotlib (the ``plot`` extra).

matplotlib is optional (a device does not need it): `require_matplotlib` raises
`PlotUnavailable` with the install command when it is missing, before any work is done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge_plm.errors import EdgePlmError

INSTALL_HINT = "pip install 'edge-plm[plot]'  (or: pip install matplotlib)"


class PlotUnavailable(EdgePlmError, RuntimeError):
    """matplotlib is not installed."""


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise PlotUnavailable(f"plotting needs matplotlib, which is not installed: "
                              f"{INSTALL_HINT}") from None


class PlotPathError(EdgePlmError, ValueError):
    """The plot cannot be written there (a format matplotlib cannot write, no such directory)."""


def check_plot_path(path: str | Path) -> Path:
    """`path` if matplotlib can write a plot there (checked before any work); else
    `PlotPathError` naming the formats it can write."""
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase  # noqa: PLC0415

    path = Path(path)
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise PlotPathError(f"--plot {path}: cannot draw a {suffix or 'file without an extension'!r} "
                            f"plot; name the file .png (or {', '.join('.' + f for f in formats if f != 'png')})")
    if path.exists() and path.is_dir():
        raise PlotPathError(f"--plot {path}: is a directory")
    if not (path.parent if str(path.parent) else Path(".")).is_dir():
        raise PlotPathError(f"--plot {path}: no such directory {path.parent}")
    return path


COLOURS = {"asked": "#e0a800", "acted_right": "#2e7d32", "acted_wrong": "#c62828",
           "ignored": "#9e9e9e", "missed": "#6a1b9a"}
NAMES = {"asked": "asked", "acted_right": "acted right", "acted_wrong": "acted wrong",
         "ignored": "ignored (rightly)", "missed": "missed a wish"}


def plot_learning(curve: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Two panels over the interaction count: what the device did (rolling shares), and the
    holdout balanced accuracy of each model version (rolled-back candidates marked)."""
    require_matplotlib()
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    _draw_behaviour(top, curve, title)
    _draw_versions(bottom, curve)
    for v in curve["versions"]:
        top.axvline(v["at"], color="#999999", linewidth=0.6, linestyle=":")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: how each share is drawn: lines that often sit on the same value (0) must all stay visible,
#: so "acted wrong" (the one that matters most) is drawn last and thin, on a wide "missed"
STYLES = {"asked": dict(linewidth=2, zorder=2), "acted_right": dict(linewidth=2, zorder=2),
          "ignored": dict(linewidth=1.5, linestyle="--", zorder=2),
          "missed": dict(linewidth=5, alpha=0.45, zorder=3),
          "acted_wrong": dict(linewidth=1.8, zorder=4)}


def _draw_behaviour(ax: Any, curve: dict[str, Any], title: str) -> None:
    """Rolling shares of asked / acted right / acted wrong / ignored / missed."""
    xs = list(range(1, curve["n"] + 1))
    for kind, values in curve["rolling"].items():
        ax.plot(xs, values, label=NAMES[kind], color=COLOURS[kind], **STYLES[kind])
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel(f"share of the last {curve['window']}\ninteractions")
    ax.set_title(title or "Learning on the device: asking turns into acting right", pad=30)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, fontsize=9, frameon=False)


def _draw_versions(ax: Any, curve: dict[str, Any]) -> None:
    """How often the prediction was the label (rolling, over labelled interactions), and each
    scored model version's holdout balanced accuracy; rolled-back candidates as crosses."""
    n = curve["n"]
    agreement = curve.get("agreement") or []
    if any(a is not None for a in agreement):
        ax.plot(range(1, len(agreement) + 1), [float("nan") if a is None else a for a in agreement],
                color="#00897b", linewidth=1.8,
                label=f"prediction = label (last {curve['window']} labelled)")
    scored = sorted((v for v in curve["versions"] if v["balanced_accuracy"] is not None),
                    key=lambda v: v["at"])
    accepted = [v for v in scored if v["status"] != "rolled_back"]
    rejected = [v for v in scored if v["status"] == "rolled_back"]
    if accepted:
        xs, ys = [v["at"] for v in accepted], [v["balanced_accuracy"] for v in accepted]
        ax.step(xs, ys, where="post", color="#1565c0", linewidth=1.5, alpha=0.5)
        ax.plot(xs, ys, "o", color="#1565c0", label="model version: holdout balanced accuracy")
        if len(accepted) <= 25:  # beyond that the labels overlap
            for v in accepted:
                below = v["balanced_accuracy"] > 0.5
                ax.annotate(f"{v['version']}\nn={v['holdout_n']}", (v["at"], v["balanced_accuracy"]),
                            textcoords="offset points", xytext=(0, -24 if below else 8),
                            ha="center", fontsize=7, color="#333333")
    if rejected:
        ax.plot([v["at"] for v in rejected], [v["balanced_accuracy"] for v in rejected],
                "x", color="#c62828", markersize=9, mew=2, label="candidate rolled back")
    ax.set_ylim(-0.05, 1.12)
    ax.set_ylabel("how right the\nmodel is")
    ax.set_xlabel("interactions recorded")
    ax.set_xlim(0.5, max(n, 1) + max(1.0, 0.03 * n))  # room for the last label
    ax.grid(alpha=0.3)
    if accepted or rejected or any(a is not None for a in agreement):
        ax.legend(loc="lower right", fontsize=9, framealpha=0.9)
    if not (accepted or rejected):
        ax.text(0.5, 0.25, "no scored model version yet", transform=ax.transAxes,
                ha="center", va="center", color="#666666")


__all__ = ["INSTALL_HINT", "PlotPathError", "PlotUnavailable", "check_plot_path", "plot_learning",
           "require_matplotlib"]
