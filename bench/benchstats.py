"""The statistics the bench/ reports share.  A failed run is a NaN: it stays
in the runs a report lists and is left out of every figure computed here.
The reports run as scripts, so their directory (bench/) is on sys.path and
`from benchstats import ...` finds this module."""

NAN = float("nan")


def num(v):
    """v as a float; NaN when it is no number ("", "nan", "failed", None)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return NAN


def median(v):
    """The lower median of v's non-NaN values (of two, the smaller); NaN
    when there are none."""
    v = sorted(x for x in v if x == x)
    return v[(len(v) - 1) // 2] if v else NAN


def spread_pct(v):
    """(max - min) / median * 100 over v's non-NaN values; NaN when there
    are none or the median is 0."""
    v = [x for x in v if x == x]
    m = median(v)
    return (max(v) - min(v)) / m * 100 if v and m else NAN
