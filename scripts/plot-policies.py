#!/usr/bin/env python3
"""Plot the selection-policy comparison from `cacheblend eval --policies ... --json`.

    python3 scripts/plot-policies.py SUMMARY.json OUT.png [--markdown]

One curve per policy: fidelity to full prefill (answer F1 against full's answer, left; first-token
agreement, middle; first-token KL, right) against the TTFT speed-up over full, one point per
recompute ratio (labelled with r). reuse (r = 0) and full (1x, fidelity 1) are the ends. Also
prints the table, as Markdown with --markdown (the README's), and which policy reaches the
fidelity targets at the lowest ratio.
"""
import json
import math
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    modes = summary.get("modes")
    if not isinstance(modes, dict) or "full" not in modes:
        sys.exit(f"plot-policies: {path} has no 'modes' with a 'full' entry")
    curves = {}  # policy -> [(ratio, label, stats)]
    reuse = None
    for label, s in modes.items():
        if s.get("mode") == "reuse":
            reuse = s
        elif s.get("mode") == "blend":
            policy = s.get("select") or summary.get("select") or "hkvd"
            curves.setdefault(policy, []).append((float(s.get("ratio", 0.0)), label, s))
    for points in curves.values():
        points.sort(key=lambda p: p[0])
    if not curves:
        sys.exit(f"plot-policies: {path} has no blend runs")
    return summary, modes["full"], reuse, curves


def num(v):
    return float("nan") if v is None else float(v)


def fmt(v, digits=3):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def table(summary, full, reuse, curves, markdown):
    rows = [("full", "-", full), ] + ([("reuse", "0", reuse)] if reuse else [])
    for policy, points in sorted(curves.items()):
        rows += [(policy, f"{r:g}", s) for r, _, s in points]
    head = ["policy", "r", "fidelity F1", "agreement", "KL", "gold F1", "F1 - full [95% CI]",
            "TTFT ms", "speed-up", "recomputed"]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
    else:
        lines.append(f"{summary.get('records', '?')} records, KV format "
                     f"{summary.get('kv_format', 'f16')}, {summary.get('threads', '?')} threads")
    for name, r, s in rows:
        ci = s.get("f1_diff_ci95")
        diff = s.get("f1_diff_vs_full")
        d = "-" if diff is None else (f"{diff:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else f"{diff:+.3f}")
        cells = [name, r, fmt(num(s.get("fidelity_f1"))), fmt(num(s.get("first_token_agreement"))),
                 fmt(num(s.get("first_token_kl"))), fmt(num(s.get("f1"))), d,
                 fmt(num(s.get("ttft_ms_mean")), 0), f"{num(s.get('speedup_vs_full')):.2f}x",
                 fmt(num(s.get("tokens_recomputed_mean")), 0)]
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:>10}" for c in cells))
    print("\n".join(lines))


def best(curves, fid_target=0.90, agree_target=0.95):
    """The policy and ratio meeting both targets at the lowest ratio (ties: the faster)."""
    found = []
    for policy, points in curves.items():
        for r, _, s in points:
            if num(s.get("fidelity_f1")) >= fid_target and num(s.get("first_token_agreement")) >= agree_target:
                found.append((r, -num(s.get("speedup_vs_full")), policy))
                break
    if not found:
        print(f"no policy reaches fidelity F1 >= {fid_target} and agreement >= {agree_target}")
        return
    found.sort()
    r, neg_speed, policy = found[0]
    print(f"lowest ratio meeting fidelity F1 >= {fid_target} and agreement >= {agree_target}: "
          f"{policy} at r = {r:g} ({-neg_speed:.2f}x)")


def plot(full, reuse, curves, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    metrics = [("fidelity_f1", "answer F1 against full"), ("first_token_agreement",
               "first-token agreement with full"), ("first_token_kl", "first-token KL to full")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    for ax, (key, title) in zip(axes, metrics):
        for policy, points in sorted(curves.items()):
            xs = [num(s.get("speedup_vs_full")) for _, _, s in points]
            ys = [num(s.get(key)) for _, _, s in points]
            ax.plot(xs, ys, marker="o", label=policy)
            for (r, _, _), x, y in zip(points, xs, ys):
                ax.annotate(f"{r:g}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
        if reuse:
            ax.plot([num(reuse.get("speedup_vs_full"))], [num(reuse.get(key))], "kx", label="reuse (r = 0)")
        ax.plot([1.0], [num(full.get(key))], "k*", markersize=10, label="full")
        ax.set_xscale("log")
        ax.set_xlabel("TTFT speed-up over full prefill (log)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    summary, full, reuse, curves = load(args[0])
    table(summary, full, reuse, curves, "--markdown" in sys.argv)
    best(curves)
    plot(full, reuse, curves, args[1])


if __name__ == "__main__":
    main()
