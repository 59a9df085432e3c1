#!/usr/bin/env python3
"""How Poisson the sends of an open loop are, for bench/poisson_ks.sh: from `run --csv-details`
rows (`timestamp`: the actual send, `intended`: the schedule's time, both Unix ns), the gaps
between consecutive sends, sorted by time, against the exponential law of the rate. For the
intended and the actual sends: the Kolmogorov-Smirnov statistic D and its p-value, and the
share of gaps under 10 µs (the exponential's own share is 1 - exp(-rate * 10 µs)). Then what
explains the actual short gaps: the share the schedule had at 10 µs or more (the send before
left late, and this one right behind it), how late those sends before them left, and the
schedule lag (actual - intended) of all sends, the share of sends more than 1 ms late (what the
run counts as late) and how many were bunched (left under 10 µs after the send before though the
schedule had them 10 µs or more apart). One line per file; with the run's `--format json` result
beside it, then what the run itself told: its late counts and its notices about the schedule.

    bench/poisson_ks.py RATE LABEL=CALLS.csv[,RESULT.json] [...]
"""
import csv
import json
import math
import sys

SHORT_NS = 10_000
# The run's own threshold of a late send (src/record/shard.rs, LATE_SEND).
LATE_NS = 1_000_000


def ks_exponential(gaps_ns, rate):
    """D = sup |F_n - F| of the gaps against the exponential of `rate` calls/s, and its p-value
    by the Kolmogorov distribution with Stephens' small-sample correction (Numerical Recipes,
    "Kolmogorov-Smirnov Test")."""
    gaps = sorted(gaps_ns)
    n = len(gaps)
    d = 0.0
    for i, gap in enumerate(gaps):
        f = 1.0 - math.exp(-rate * gap / 1e9)
        d = max(d, (i + 1) / n - f, f - i / n)
    root = math.sqrt(n)
    return d, kolmogorov_q((root + 0.12 + 0.11 / root) * d)


def kolmogorov_q(lam):
    """P(K > lam): 2 * sum_j (-1)^(j-1) exp(-2 j^2 lam^2); 1 where the series has not settled."""
    if lam < 0.2:
        return 1.0
    total, sign, last = 0.0, 2.0, 0.0
    for j in range(1, 101):
        term = sign * math.exp(-2.0 * j * j * lam * lam)
        total += term
        if abs(term) <= 1e-10 * last or abs(term) <= 1e-12 * total:
            return max(0.0, min(1.0, total))
        sign, last = -sign, abs(term)
    return 1.0


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def read_sends(path):
    """(intended, actual) send times in ns, one pair per call of the schedule."""
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        return [(int(r["intended"]), int(r["timestamp"])) for r in rows if r["intended"]]


def gaps_of(times):
    times = sorted(times)
    return [b - a for a, b in zip(times, times[1:])]


def line(label, rate, sends):
    intended_gaps = gaps_of(t for t, _ in sends)
    # In the order the sends left: each actual gap, the schedule's gap between the same two
    # calls, and how late the first of them left.
    by_send = sorted(sends, key=lambda s: s[1])
    pairs = [(b[1] - a[1], b[0] - a[0], a[1] - a[0]) for a, b in zip(by_send, by_send[1:])]
    actual_gaps = [gap for gap, _, _ in pairs]
    d_i, p_i = ks_exponential(intended_gaps, rate)
    d_a, p_a = ks_exponential(actual_gaps, rate)
    short = lambda gaps: sum(g < SHORT_NS for g in gaps) / len(gaps)
    # A short gap the schedule did not have: the send before it left late, and this one, due
    # soon after, right behind it (a late send's lag is always at least the time its gap lost).
    shortened = [late for gap, due, late in pairs if gap < SHORT_NS <= due]
    short_count = sum(g < SHORT_NS for g in actual_gaps)
    why = ""
    if short_count:
        why = f" ({len(shortened) / short_count:.0%} of them shortened from >= 10 µs"
        why += f", behind a send late by p50 {percentile(shortened, 0.5) / 1e3:.0f} µs)" if shortened else ")"
    lag = [(a - i) / 1e3 for i, a in sends]
    late = sum(a - i > LATE_NS for i, a in sends)
    expected = 1.0 - math.exp(-rate * SHORT_NS / 1e9)
    return (
        f"{label}: {len(sends)} sends; KS against the exponential: intended D {d_i:.4f} p {p_i:.3g}, actual D "
        f"{d_a:.4f} p {p_a:.3g}; gaps < 10 µs: law {expected:.2%}, intended {short(intended_gaps):.2%}, actual "
        f"{short(actual_gaps):.2%}{why}; bunched {len(shortened)} ({len(shortened) / len(sends):.2%}); lag µs "
        f"p50 {percentile(lag, 0.5):.1f} p99 {percentile(lag, 0.99):.1f} max {max(lag):.0f}; late > 1 ms "
        f"{late} ({late / len(sends):.2%})"
    )


def told(path):
    """What the run's result says of its schedule: its late counts and the notices on it."""
    with open(path) as f:
        run = json.load(f)
    lines = [
        f"  the run counted late by > 1 ms: {run.get('late_wakeups', 0)} by the client's wake-up, "
        f"{run.get('late_sends', 0)} waiting for a slot"
    ]
    words = ("schedule", "late", "wake", "hiccup", "stood still")
    lines += [f"  notice: {n}" for n in run.get("notices", []) if any(w in n for w in words)]
    return "\n".join(lines if len(lines) > 1 else lines + ["  no notice on the schedule"])


def main():
    rate = float(sys.argv[1])
    for arg in sys.argv[2:]:
        label, paths = arg.split("=", 1)
        path, _, result = paths.partition(",")
        sends = read_sends(path)
        if len(sends) < 100:
            print(f"{label}: only {len(sends)} scheduled sends in {path}: not judged")
            continue
        print(line(label, rate, sends))
        if result:
            print(told(result))


if __name__ == "__main__":
    main()
