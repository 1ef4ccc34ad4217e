#!/usr/bin/env python3
"""bench/icount-report.py ICOUNT.csv OUT.md [HOW]: the table of one
`bench/run.sh --icount` run: per row the runs, min, median, max and spread
(max - min) / median, then the ratios mbcf/rxe (both ends on one device)
and mbcf/TCP (across the veth).  The guest's clock counts instructions
(1 ns each at shift 0), so a latency in us is thousands of instructions."""
import csv
import sys
from collections import OrderedDict

from benchstats import median, num, spread_pct


def fmt(x):
    if x != x:
        return "nan"
    return "{:.4f}".format(x) if x < 1 else "{:.2f}".format(x) if x < 100 else "{:.1f}".format(x)


def main():
    rows = OrderedDict()
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            k = (r["group"], r["transport"], r["test"], r["size"], r["mode"], r["unit"])
            rows.setdefault(k, []).append(num(r["value"]))
    how = sys.argv[3] if len(sys.argv) > 3 else "bench/run.sh --icount"
    out = ["# Latency and message rate on the guest's instruction clock", "",
           "`{}`.  The guest runs with `tests/vm/run.sh --icount` (one vCPU,".format(how),
           "single-threaded TCG, 1 ns of guest time per instruction, idle time skipped):",
           "a figure in us is thousands of instructions, the same whatever the host does.",
           "mode `ev`: both ends sleep on completion events (`-e`); `poll`: the client",
           "polls, its peer is the device alone.  mbcf-lo and rxe: both ends on one",
           "device (mbcf0, rxe0); mbcf: mbcf0 <-> mbcf1 in ns1 across the veth; tcp:",
           "sockperf ping-pong across the veth, half the round trip.  The tick rows",
           "(`ib_write_lat`, polling on one vCPU) measure the scheduler's tick, not",
           "the transport.", "",
           "| group | transport | test | size (B) | mode | unit | runs | min | median | max | spread |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    med = {}
    for k, v in rows.items():
        g, tr, t, s, mode, u = k
        good = [x for x in v if x == x]
        m = median(v)
        med[k] = m
        lo = min(good) if good else float("nan")
        hi = max(good) if good else float("nan")
        sp = "{:.2f} %".format(spread_pct(v)) if good and m else "nan"
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {} |".format(
            g, tr, t, s, mode, u, " ".join(fmt(x) for x in v), fmt(lo), fmt(m), fmt(hi), sp))

    def get(tr, t, s, mode, g="latency"):
        for k, m in med.items():
            if k[0] == g and k[1] == tr and k[2] == t and k[3] == s and k[4] == mode:
                return m
        return float("nan")

    def ratio(a, b):
        return a / b if a == a and b == b and b else float("nan")

    out += ["", "## Ratios (medians)", "",
            "| row | mode | mbcf-lo / rxe (one device) | mbcf / TCP half round trip (across the veth) |",
            "|---|---|---|---|"]
    seen = set()
    for k in med:
        g, tr, t, s, mode, u = k
        if g != "latency" or tr == "tcp" or (t, s, mode) in seen:
            continue
        seen.add((t, s, mode))
        tcp = get("tcp", "rtt_half", "4" if s in ("4", "8") else s, "ev")
        out.append("| {} {} B | {} | {:.3f} ({} vs {} us) | {:.3f} ({} vs {} us) |".format(
            t, s, mode, ratio(get("mbcf-lo", t, s, mode), get("rxe", t, s, mode)),
            fmt(get("mbcf-lo", t, s, mode)), fmt(get("rxe", t, s, mode)),
            ratio(get("mbcf", t, s, mode), tcp), fmt(get("mbcf", t, s, mode)), fmt(tcp)))
    for t, s, mode in (("ib_atomic_bw", "8", "poll"), ("ib_send_bw", "64", "ev")):
        a, b = get("mbcf-lo", t, s, mode, "rate"), get("rxe", t, s, mode, "rate")
        out.append("| {} {} B message rate | {} | {:.2f}x ({} vs {} Mpps) | mbcf across the veth {} Mpps |".format(
            t, s, mode, ratio(a, b), fmt(a), fmt(b), fmt(get("mbcf", t, s, mode, "rate"))))
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
