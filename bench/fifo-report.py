#!/usr/bin/env python3
"""bench/fifo-report.py FIFO.csv OUT.md HOW: the tables of bench/run.sh
--fifo-only (rows from bench/guest-fifo.sh).  Every figure is the median of
the runs with their range; the ratios are taken run by run (the modes of one
round ran back to back), then their median and range.  Only ratios mean
anything: the guest runs under software emulation on a shared host."""
import csv
import statistics
import sys
from collections import defaultdict

from benchstats import num

RATE_COLS = ("rate", "rx_cpu", "rx_soft", "all_cpu", "rx_proc")
WAKE_COLS = ("p50", "p90", "p99", "max")
TARGET = 1.5    # FIFO / SRQ messages per second at 16 senders


def spread(vals, fmt):
    vals = [v for v in vals if v == v]
    if not vals:
        return "nan"
    return "**{}** ({}-{})".format(fmt.format(statistics.median(vals)),
                                   fmt.format(min(vals)), fmt.format(max(vals)))


def main(path, out, how):
    rate = defaultdict(dict)    # (topo, qps, procs, mode) -> run -> {col: v}
    wake = defaultdict(dict)    # (topo, mode) -> run -> {col: v}
    with open(path) as f:
        for r in csv.DictReader(f):
            vals = [num(r["v%d" % i]) for i in range(1, 6)]
            if r["group"] == "rate":
                rate[(r["topology"], r["qps"], r["procs"], r["mode"])][r["run"]] = dict(zip(RATE_COLS, vals))
            elif r["group"] == "wake":
                wake[(r["topology"], r["mode"])][r["run"]] = dict(zip(WAKE_COLS, vals))
    lines = ["# The memory-based FIFO: message rate and wake-up", "",
             "Produced by: " + how, "",
             "64 B messages into one receiver (its process and its veth's receive on vCPU 0; "
             "the senders' processes on vCPU 1).  lo: both ends on mbcf0; veth: senders on "
             "mbcf1 (ns1) into mbcf0.  CPU per message in us: rx = vCPU 0's busy time over the run "
             "(wall time minus its exact nohz idle time: the receiving process, the softirqs that "
             "place the messages, ksoftirqd, everything that ran there); rx softirq = vCPU 0's "
             "softirq time as /proc/stat samples it (at the tick: a share, not exact); all = both "
             "vCPUs' busy time the same way (senders included); rx proc = the receiving "
             "process's own user + system time (getrusage).  Median of the runs, (min-max).", "",
             "| topology | senders (QPs/processes) | mode | messages/s | rx CPU us/msg | "
             "rx softirq us/msg | all CPU us/msg | rx proc us/msg |",
             "|---|---|---|---|---|---|---|---|"]
    for key in sorted(rate, key=lambda k: (k[0], int(k[1]), ("fifo", "srq", "imm").index(k[3]))):
        runs = rate[key].values()
        lines.append("| {} | {}/{} | {} | {} | {} | {} | {} | {} |".format(
            key[0], key[1], key[2], key[3],
            spread([r["rate"] for r in runs], "{:.0f}"),
            *(spread([r[c] for r in runs], "{:.2f}") for c in RATE_COLS[1:])))
    lines += ["", "## Ratios, run by run (median, min-max)", "",
              "| topology | senders | FIFO/SRQ msg/s | FIFO/IMM msg/s | FIFO/SRQ rx CPU per msg | "
              "FIFO/IMM rx CPU per msg |", "|---|---|---|---|---|---|"]
    verdicts = []
    for topo, q, p in sorted({k[:3] for k in rate}, key=lambda k: (k[0], int(k[1]))):
        f, s, i = (rate.get((topo, q, p, m), {}) for m in ("fifo", "srq", "imm"))

        def ratio(a, b, col):   # a failed run (nan) on either side is left out
            v = [a[r][col] / b[r][col] for r in a if r in b and b[r][col]]
            return [x for x in v if x == x]
        rs, ri = ratio(f, s, "rate"), ratio(f, i, "rate")
        cs, ci = ratio(f, s, "rx_cpu"), ratio(f, i, "rx_cpu")
        lines.append("| {} | {}/{} | {} | {} | {} | {} |".format(
            topo, q, p, *(spread(v, "{:.2f}") for v in (rs, ri, cs, ci))))
        if q == "16" and rs:
            ok = statistics.median(rs) >= TARGET and cs and statistics.median(cs) < 1
            verdicts.append("- {} at 16 senders: FIFO/SRQ messages/s {:.2f} (target >= {}), "
                            "receiver CPU per message FIFO/SRQ {:.3f} (target < 1): {}".format(
                                topo, statistics.median(rs), TARGET,
                                statistics.median(cs) if cs else float("nan"),
                                "met" if ok else "missed"))
    lines += [""] + verdicts
    lines += ["", "## Wake-up round trip, both ends asleep", "",
              "signal: a FIFO with MBCFDV_FIFO_SIGNAL, each end in poll() on its eventfd; "
              "send: SEND into a posted receive, each end in ibv_get_cq_event; both processes on "
              "vCPU 0, no RPS (a halted vCPU woken from the other waits for its next tick under "
              "TCG).  Round trip in us (two wake-ups), percentiles of one run, median over the "
              "runs (min-max).", "",
              "| topology | mode | p50 | p90 | p99 | max |", "|---|---|---|---|---|---|"]
    for key in sorted(wake, key=lambda k: (k[0], k[1] != "signal")):
        runs = wake[key].values()
        lines.append("| {} | {} | {} |".format(
            key[0], key[1], " | ".join(spread([r[c] for r in runs], "{:.1f}") for c in WAKE_COLS)))
    lines += [""]
    for topo in sorted({k[0] for k in wake}):
        a, b = wake.get((topo, "signal"), {}), wake.get((topo, "send"), {})
        for c in ("p50", "p99"):
            v = [a[r][c] / b[r][c] for r in a if r in b and b[r][c]]
            v = [x for x in v if x == x]
            lines.append("- {}: signal/send {} round trip, run by run: {}".format(topo, c, spread(v, "{:.2f}")))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: fifo-report.py FIFO.csv OUT.md HOW")
    main(*sys.argv[1:])
