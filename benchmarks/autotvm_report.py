"""Merging and reporting the pieces of ``bench_autotvm.py``: their JSON files merged into one
result, the summary it prints, the markdown tables of RESULTS.md and the best-so-far plot.

Kept apart from the benchmark so that ``--summarize`` (and its test) is plain JSON in, text
out: nothing here tunes or measures.
"""

from __future__ import annotations

import json
import math
import warnings

TUNER_NAMES = ("xgb", "ga", "random", "grid")
"""The AutoTVM tuners in the order of the tables' rows."""


def done(entry: dict | None) -> bool:
    """Whether a tuner's (or the template-free search's) entry is a complete run."""
    return entry is not None and not entry.get("partial", False)


# --------------------------------------------------------------------------- merging pieces


def _pick(old: dict | None, new: dict, where: str) -> dict:
    """Of two results of the same tuner and task, the complete one, else the longer curve."""
    if old is None:
        return new
    if done(old) and done(new):
        warnings.warn(f"{where} is complete in two pieces; keeping the first", stacklevel=3)
        return old
    if done(old) != done(new):
        return old if done(old) else new
    return old if len(old["curve_gflops"]) >= len(new["curve_gflops"]) else new


def merge_pieces(pieces: list[tuple[str, dict]]) -> dict:
    """One result of the pieces' JSONs ``[(path, result), ...]`` (same target and budgets)."""
    if not pieces:
        raise ValueError("--summarize needs at least one piece JSON")
    first_path, first = pieces[0]
    merged: dict = {"target": first["target"], "trials": first["trials"], "pieces": []}
    for path, piece in pieces:
        for key in ("target", "trials"):
            if piece.get(key) != first.get(key):
                raise ValueError(
                    f"--summarize: {path} has {key} {piece.get(key)!r} but {first_path} has "
                    f"{first.get(key)!r}; merge only pieces of one configuration"
                )
        merged["pieces"].append({"file": path, "argv": piece.get("argv")})
        for label, by_tuner in piece.get("tuners", {}).items():
            into = merged.setdefault("tuners", {}).setdefault(label, {})
            for name, entry in by_tuner.items():
                into[name] = _pick(into.get(name), entry, f"tuner {name} on {label}")
        for label, entry in piece.get("template_free", {}).items():
            into = merged.setdefault("template_free", {})
            into[label] = _pick(into.get(label), entry, f"the template-free search on {label}")
        for part in ("transfer", "cost_models"):
            if part in piece:
                if part in merged:
                    warnings.warn(f"{part} is in several pieces; keeping {path}'s", stacklevel=2)
                merged[part] = piece[part]
    return merged


def load_pieces(paths: list[str]) -> list[tuple[str, dict]]:
    out = []
    for path in paths:
        try:
            with open(path) as f:
                out.append((path, json.load(f)))
        except (OSError, json.JSONDecodeError) as exc:
            raise SystemExit(f"--summarize: cannot read piece {path}: {exc}") from None
    return out


# --------------------------------------------------------------------------- reporting


def geomean(values) -> float | None:
    """Geometric mean of the positive values; None when one is missing or not positive (a
    task not measured, or no working configuration) so a mean never hides a hole."""
    values = list(values)
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _cell(value, mark: str = "") -> str:
    return "n/a" if value is None else f"{value:.2f}{mark}"


def _task_order(label: str) -> int:
    return int(label[1:].split()[0]) if label.startswith("#") else 0


def curve_points(budgets: list[int]) -> list[int]:
    """Trial counts at which the markdown curve table samples the best-so-far curves."""
    top = max(budgets)
    points = {max(1, round(top * f)) for f in (0.05, 0.1, 0.25)} | set(budgets)
    return sorted(p for p in points if p <= top)


def _value_at(entry: dict, n: int) -> float | None:
    curve = entry["curve_gflops"]
    if not curve or (entry.get("partial") and len(curve) < n):
        return None
    return curve[min(n, len(curve)) - 1]


def markdown_tables(result: dict) -> str:
    """The merged figures as the markdown tables of benchmarks/RESULTS.md.

    Values marked * come from a partial run (killed before its last trial); n/a means not
    measured (or, in a geomean, some task not measured)."""
    budgets = [str(b) for b in result["trials"]]
    lines: list[str] = []
    tuners = result.get("tuners", {})
    free = result.get("template_free", {})
    labels = sorted(set(tuners) | set(free), key=_task_order)
    names = [n for n in TUNER_NAMES if any(n in tuners.get(lb, {}) for lb in labels)]
    rows = [(n, {lb: tuners[lb].get(n) for lb in labels if lb in tuners}) for n in names]
    if free:
        rows.append(("ansor (template-free)", free))
    if rows:
        lines += [
            f"Best GFLOP/s after N trials ({result['target']}; resnet-18 conv2d tasks, "
            "NCHW; * = partial run)",
            "",
            "| tuner | trials | " + " | ".join(labels) + " | geomean |",
            "|---|---:|" + "---:|" * (len(labels) + 1),
        ]
        for name, entries in rows:
            for b in budgets:
                vals = [(entries.get(lb) or {}).get("best_gflops", {}).get(b) for lb in labels]
                marks = ["*" if (entries.get(lb) or {}).get("partial") else "" for lb in labels]
                cells = [_cell(v, m) for v, m in zip(vals, marks, strict=True)]
                lines.append(f"| {name} | {b} | " + " | ".join(cells) + f" | "
                             f"{_cell(geomean(vals))} |")  # fmt: skip
        points = curve_points(result["trials"])
        lines += [
            "",
            "Best-so-far curve: geomean over the tasks of the best GFLOP/s after N trials",
            "",
            "| tuner | " + " | ".join(str(p) for p in points) + " |",
            "|---|" + "---:|" * len(points),
        ]
        for name, entries in rows:
            cells = [
                _cell(geomean(_value_at(entries[lb], p) if lb in entries and entries[lb] else None
                              for lb in labels))
                for p in points
            ]  # fmt: skip
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if tuners and free:
        top = budgets[-1]
        lines += [
            "",
            f"Template (best of the AutoTVM tuners) vs template-free, best GFLOP/s after {top} "
            "trials",
            "",
            "| task | best template tuner | template | template-free | template-free / template |",
            "|---|---|---:|---:|---:|",
        ]
        for lb in labels:
            found = [(e["best_gflops"].get(top), n) for n, e in tuners.get(lb, {}).items()]
            found = [(v, n) for v, n in found if v is not None]
            best, name = max(found) if found else (None, "n/a")
            other = (free.get(lb) or {}).get("best_gflops", {}).get(top)
            ratio = other / best if best and other is not None else None
            lines.append(f"| {lb} | {name} | {_cell(best)} | {_cell(other)} | "
                         f"{'n/a' if ratio is None else f'{ratio:.2f}x'} |")  # fmt: skip
    if "cost_models" in result:
        cm = result["cost_models"]
        lines += [
            "",
            f"Cost-model quality on {cm['test_tasks']} held-out resnet-18 tasks (trained on "
            f"{cm['train_tasks']} tasks, {cm.get('records_per_task', '?')} random "
            "configurations each)",
            "",
            "| model | top-1 | top-5 | NDCG |",
            "|---|---:|---:|---:|",
        ]
        for name, m in cm["models"].items():
            lines.append(f"| {name} | {m['top1']:.3f} | {m['top5']:.3f} | {m['ndcg']:.3f} |")
    return "\n".join(lines)


def plot_curves(result: dict, path: str) -> None:
    """The best-so-far curve of every tuner (and of the template-free search) per task, one
    panel per task, to ``path`` (needs matplotlib: ``pip install matplotlib``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install matplotlib") from None
    tuners, free = result.get("tuners", {}), result.get("template_free", {})
    labels = sorted(set(tuners) | set(free), key=_task_order)
    if not labels:
        raise SystemExit("--plot: the pieces hold no tuner or template-free curve")
    cols = min(len(labels), 2)
    rows = math.ceil(len(labels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, label in zip(axes.flat, labels, strict=False):
        curves = dict(tuners.get(label, {}))
        if label in free:
            curves["ansor (template-free)"] = free[label]
        for name, entry in curves.items():
            mark = " (partial)" if entry.get("partial") else ""
            ax.plot(range(1, len(entry["curve_gflops"]) + 1), entry["curve_gflops"],
                    label=name + mark, drawstyle="steps-post")  # fmt: skip
        ax.set(title=label, xlabel="trials", ylabel="best GFLOP/s")
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(labels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_summary(result) -> None:
    budgets = [str(b) for b in result["trials"]]

    def figs(r):
        mark = " (partial)" if r.get("partial") else ""
        return " / ".join(f"{_cell(r['best_gflops'][b]):>7s}" for b in budgets) + mark

    if "tuners" in result:
        print("\nbest GFLOP/s after " + "/".join(budgets) + " trials")
        for label in sorted(result["tuners"], key=_task_order):
            for name, r in result["tuners"][label].items():
                print(f"  {label:28s} {name:8s} {figs(r)}   ({r['seconds']} s)")
    if "template_free" in result:
        print("\ntemplate-free search (auto-scheduler), best GFLOP/s after " + "/".join(budgets))
        for label in sorted(result["template_free"], key=_task_order):
            r = result["template_free"][label]
            print(f"  {label:28s} {'ansor':8s} {figs(r)}   ({r['seconds']} s)")
    if "transfer" in result:
        print("\ntransfer learning (XGBTuner on a second task, cold vs load_history of the first)")
        for mode, r in result["transfer"].items():
            reached = r["trials_to_90pct"] or "not reached"
            print(f"  {mode:6s} {figs(r)}   trials to 90% of the best: {reached}")
    if "cost_models" in result:
        cm = result["cost_models"]
        print(f"\ncost models: trained on {cm['train_tasks']} tasks, tested on "
              f"{cm['test_tasks']} held-out resnet-18 tasks")  # fmt: skip
        print(f"  {'model':22s} {'top-1':>6s} {'top-5':>6s} {'NDCG':>6s}")
        for name, m in cm["models"].items():
            print(f"  {name:22s} {m['top1']:6.3f} {m['top5']:6.3f} {m['ndcg']:6.3f}")
