#!/usr/bin/env python3
"""Plot a recompute-ratio sweep from `cacheblend eval --json` (or its --out file).

    python3 scripts/plot-sweep.py SUMMARY.json OUT.png

Left: TTFT (mean, with the p50..p95 band) against the recompute ratio r, full prefill as a dashed
line. Right: fidelity to full (answer F1 against full, first-token agreement, and first-token KL
on a second axis) and answer F1 against the gold answers, against r. reuse is plotted at r = 0.
Also prints the table.
"""
import json
import sys


def load_points(path):
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    modes = summary.get("modes")
    if not isinstance(modes, dict) or "full" not in modes:
        sys.exit(f"plot-sweep: {path} has no 'modes' with a 'full' entry")
    full = modes["full"]
    points = []  # (r, label, stats) for reuse and every blend run
    for label, s in modes.items():
        if s.get("mode") == "reuse":
            points.append((0.0, label, s))
        elif s.get("mode") == "blend":
            points.append((float(s.get("ratio", 0.0)), label, s))
    points.sort(key=lambda p: (p[0], p[1]))
    return summary, full, points


def num(v):
    return float("nan") if v is None else float(v)


def print_table(summary, full, points):
    print(f"{summary.get('records', '?')} records, {summary.get('threads', '?')} threads, "
          f"KV format {summary.get('kv_format', 'f16')}")
    print(f"{'run':<12} {'r':>5} {'TTFT ms':>9} {'speedup':>8} {'fidF1':>6} {'agree':>6} "
          f"{'KL':>7} {'F1':>6}")
    for r, label, s in [(1.0, "full", full)] + points:
        print(f"{label:<12} {r:>5.2f} {num(s['ttft_ms_mean']):>9.1f} "
              f"{num(s['speedup_vs_full']):>7.2f}x {num(s['fidelity_f1']):>6.3f} "
              f"{num(s['first_token_agreement']):>6.3f} {num(s['first_token_kl']):>7.4f} "
              f"{num(s['f1']):>6.3f}")


def plot(summary, full, points, out_png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [p[0] for p in points]
    stat = lambda key: [num(p[2].get(key)) for p in points]
    fig, (ax_t, ax_q) = plt.subplots(1, 2, figsize=(11, 4.2))

    ax_t.plot(rs, stat("ttft_ms_mean"), "o-", label="blend / reuse (mean)")
    ax_t.fill_between(rs, stat("ttft_ms_p50"), stat("ttft_ms_p95"), alpha=0.2,
                      label="p50..p95")
    ax_t.axhline(num(full["ttft_ms_mean"]), color="k", linestyle="--", label="full prefill")
    for r, s in zip(rs, points):
        ax_t.annotate(f"{num(s[2]['speedup_vs_full']):.1f}x", (r, num(s[2]["ttft_ms_mean"])),
                      textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax_t.set_xlabel("recompute ratio r (reuse at 0)")
    ax_t.set_ylabel("TTFT (ms)")
    ax_t.set_ylim(bottom=0)
    ax_t.set_title("Time to first token")
    ax_t.legend(fontsize=8)

    ax_q.plot(rs, stat("fidelity_f1"), "o-", label="answer F1 vs full")
    ax_q.plot(rs, stat("first_token_agreement"), "s-", label="first-token agreement")
    ax_q.plot(rs, stat("f1"), "^-", label="answer F1 vs gold")
    ax_q.axhline(num(full["f1"]), color="k", linestyle="--", label="full: F1 vs gold")
    ax_q.set_xlabel("recompute ratio r (reuse at 0)")
    ax_q.set_ylim(0, 1.05)
    ax_q.set_title("Fidelity to full prefill")
    # First-token KL against full on its own axis: the most sensitive of the three measures.
    ax_k = ax_q.twinx()
    ax_k.plot(rs, stat("first_token_kl"), "d--", color="tab:red", label="first-token KL (right)")
    ax_k.set_ylabel("KL(full || mode) of the first token")
    ax_k.set_ylim(bottom=0)
    lines, labels = ax_q.get_legend_handles_labels()
    lines_k, labels_k = ax_k.get_legend_handles_labels()
    ax_q.legend(lines + lines_k, labels + labels_k, fontsize=8, loc="center right")

    fig.suptitle(f"CacheBlend sweep: {summary.get('records', '?')} records, "
                 f"{summary.get('threads', '?')} threads, KV format "
                 f"{summary.get('kv_format', 'f16')}")
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    print(f"wrote {out_png}")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot-sweep.py SUMMARY.json OUT.png")
    summary, full, points = load_points(sys.argv[1])
    if not points:
        sys.exit("plot-sweep: no reuse or blend runs to plot")
    print_table(summary, full, points)
    plot(summary, full, points, sys.argv[2])


if __name__ == "__main__":
    main()
