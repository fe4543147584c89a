"""PNG charts for evaluation results (matplotlib's Agg backend: no display
needed), written atomically like every other output that matters."""
import io
from pathlib import Path
from typing import Mapping, Sequence, Union

import numpy

from .io import atomic_write_bytes


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Union[str, Path]) -> None:
    plt = _pyplot()
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def grouped_bar_chart(
    series: Mapping[str, Mapping[str, float]], path: Union[str, Path], title: str, ylabel: str = "F1"
) -> None:
    """One group of bars per category (e.g. entity type), one bar per series
    (e.g. model); values in [0, 1] are shown as percentages."""
    plt = _pyplot()
    categories = sorted({c for values in series.values() for c in values})
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(categories) + 2), 3.6))
    x = numpy.arange(len(categories))
    for k, (name, values) in enumerate(series.items()):
        heights = [100 * values.get(c, 0.0) for c in categories]
        bars = ax.bar(x + (k - (len(series) - 1) / 2) * width, heights, width, label=name)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(x, categories)
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"{ylabel} (%)")
    ax.set_title(title)
    if len(series) > 1:
        ax.legend(fontsize=8)
    _save(fig, path)


def confusion_matrix_chart(matrix: numpy.ndarray, labels: Sequence[str], path: Union[str, Path], title: str) -> None:
    """Counts as a heat map, rows = gold, columns = predicted, each cell labelled."""
    plt = _pyplot()
    matrix = numpy.asarray(matrix)
    size = max(3.5, 0.9 * len(labels) + 2)
    fig, ax = plt.subplots(figsize=(size, size * 0.85))
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title)
    threshold = matrix.max() / 2 if matrix.size else 0
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, str(matrix[i, j]), ha="center", va="center",
                    color="white" if matrix[i, j] > threshold else "black")
    _save(fig, path)



PANELS_PER_ROW = 5  # reliability diagrams side by side, then further rows


def reliability_chart(series: Mapping[str, Sequence], path: Union[str, Path], title: str) -> None:
    """Reliability diagrams side by side, one per series: each bin's accuracy
    as a bar over its score range (empty bins left out) against the diagonal a
    calibrated model would follow, and its mean score as a dot. A series is a
    list of bins with `low`, `high`, `count`, `mean_score` and `accuracy`
    (`scoring.calibration.reliability_bins`)."""
    plt = _pyplot()
    columns = min(len(series), PANELS_PER_ROW)
    rows = -(-len(series) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 3.6 * rows), squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, (name, bins) in zip(axes.flat, series.items()):
        full = [b for b in bins if b.count]
        ax.bar([b.low for b in full], [b.accuracy for b in full], [b.high - b.low for b in full], align="edge",
               edgecolor="black", linewidth=0.5, label="accuracy")
        ax.plot([b.mean_score for b in full], [b.accuracy for b in full], "o", color="tab:red", markersize=3,
                label="mean score")
        ax.plot([0, 1], [0, 1], "--", color="gray", linewidth=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("score")
        ax.set_ylabel("fraction right")
        ax.set_title(name, fontsize=9)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=10)
    _save(fig, path)
