#!/usr/bin/env python3
"""bench/storage-icount-report.py CSV LOG OUT.md [HOW]: the tables of one
bench/storage-icount.sh run.  The guest's clock counts instructions (1 ns
each) and jumps over idle time to the next timer, so us/IO is the
instructions an I/O costs plus the timer waits it sits out (idle_us/IO).
Per row: the runs, min, median, max, spread (max - min) / median; the
ratios mbcf / NVMe/TCP and mbcf / rxe; then, from the guest's log, the
tracepoints, work items, timers and mbcf's counters per I/O, and the
profile's instructions per I/O by source file and symbol (--profile)."""
import csv
import sys
from collections import OrderedDict, defaultdict

from benchstats import median, num, spread_pct


def fmt(x):
    if x != x:
        return "nan"
    a = abs(x)
    return "{:.3f}".format(x) if a < 10 else "{:.1f}".format(x) if a < 1000 else "{:.0f}".format(x)


TRS = ["mbcf", "tcp", "rxe"]
NAMES = {"mbcf": "NVMe-oF on mbcf0", "tcp": "NVMe/TCP over lo", "rxe": "nvme-rdma on rxe0"}
UNITS = ["IOPS", "MiB/s", "us/IO", "kcpu_us/IO", "idle_us/IO"]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: storage-icount-report.py CSV LOG OUT.md [HOW]")
    csvf, logf, outf = sys.argv[1:4]
    how = sys.argv[4] if len(sys.argv) > 4 else ""
    rows = OrderedDict()
    with open(csvf) as f:
        for r in csv.DictReader(f):
            k = (r["test"], r["size"], r["unit"])
            rows.setdefault(k, OrderedDict()).setdefault(r["transport"], []).append(num(r["value"]))
    trace = defaultdict(dict)     # (size, event) -> tr -> per IO
    tracefn = defaultdict(dict)   # (size, event fn) -> tr -> per IO
    ctr = defaultdict(dict)       # size -> name -> per IO
    files = defaultdict(list)
    syms = defaultdict(list)
    prof = {}
    for line in open(logf, errors="replace"):
        p = line.rstrip("\n").split(",")
        if p[0] == "TRACE" and len(p) >= 5:
            trace[(p[2], p[3])][p[1]] = num(p[4])
        elif p[0] == "TRACEFN" and len(p) >= 5:
            tracefn[(p[2], p[3])][p[1]] = num(p[4])
        elif p[0] == "CTR" and len(p) >= 5:
            ctr[p[2]][p[3]] = num(p[4])
        elif p[0] == "FILE" and len(p) >= 4:
            files[p[1]].append((num(p[2]), ",".join(p[3:])))
        elif p[0] == "SYM" and len(p) >= 4:
            syms[p[1]].append((num(p[2]), ",".join(p[3:])))
        elif p[0] == "PROFILE" and len(p) >= 5:
            prof[p[1]] = num(p[4])
    out = ["# NVMe over Fabrics in the instruction-counting guest", ""]
    if how:
        out += ["`" + how + "`", ""]
    out += ["Guest time is instructions (1 ns each) plus the timer waits the guest "
            "idles through (`idle_us/IO`); fio libaio, O_DIRECT, iodepth 32, one vCPU; "
            "a fixed number of I/Os per run.  spread = (max - min) / median.", ""]
    out += ["| row | unit | " + " | ".join(NAMES[t] + " (spread)" for t in TRS) +
            " | mbcf / TCP | mbcf / rxe |", "|---|---|" + "---|" * (len(TRS) + 2)]
    for (test, size, unit), by in rows.items():
        med = {t: median(by.get(t, [])) for t in TRS}
        cells = []
        for t in TRS:
            v = by.get(t)
            cells.append("%s (%.2f %%)" % (fmt(med[t]), spread_pct(v)) if v else "")
        rt = lambda a, b: fmt(a / b) if a == a and b == b and b else ""
        out.append("| %s %s B | %s | %s | %s | %s |" % (test, size, unit, " | ".join(cells),
                                                      rt(med["mbcf"], med["tcp"]), rt(med["mbcf"], med["rxe"])))
    out.append("")
    out.append("Runs: " + "; ".join("%s %s %s %s: %s" % (t, test, size, unit, " ".join(fmt(x) for x in v))
                                    for (test, size, unit), by in rows.items() if unit == "IOPS"
                                    for t, v in by.items()))
    out.append("")
    for size in sorted({k[0] for k in trace}, key=int):
        out += ["## Per I/O, %s B: tracepoints (one run under perf stat)" % size, "",
                "| event | " + " | ".join(TRS) + " |", "|---|" + "---|" * len(TRS)]
        for (s, ev), by in sorted(trace.items()):
            if s == size:
                out.append("| %s | %s |" % (ev, " | ".join(fmt(by[t]) if t in by else "" for t in TRS)))
        out.append("")
        fn = [(k, by) for k, by in tracefn.items() if k[0] == size]
        fn.sort(key=lambda kb: -max(kb[1].values()))
        out += ["By function (work items queued, hrtimers and timers started, softirqs "
                "raised, wake-ups by task; one run under perf record; >= 0.05 per I/O):", "",
                "| event | " + " | ".join(TRS) + " |", "|---|" + "---|" * len(TRS)]
        for (s, ev), by in fn:
            if max(by.values()) >= 0.05:
                out.append("| %s | %s |" % (ev, " | ".join(fmt(by[t]) if t in by else "" for t in TRS)))
        out.append("")
    for size in sorted(ctr, key=int):
        c = ctr[size]
        out += ["mbcf0's counters per I/O, %s B (measured runs): " % size +
                ", ".join("%s %s" % (k, fmt(v)) for k, v in sorted(c.items())), ""]
    for t in TRS:
        if t not in files:
            continue
        out += ["## Profile, %s, 4096 B random read: instructions per I/O" % NAMES[t], "",
                "Total %s (samples of the longer run less the shorter's, per I/O)." % fmt(prof.get(t, float("nan"))), "",
                "| instructions / I/O | source file or object |", "|---|---|"]
        for v, k in sorted(files[t], key=lambda x: -x[0])[:20]:
            out.append("| %.0f | %s |" % (v, k))
        out += ["", "| instructions / I/O | symbol |", "|---|---|"]
        for v, k in syms[t][:30]:
            out.append("| %.0f | %s |" % (v, k))
        out.append("")
    with open(outf, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
