"""Shared by the benchmarks: percentiles and the printed table (figure, value, target)."""


def pct(values, q):
    """The q-quantile (0..1) of values, nearest rank (NaN for none)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def print_table(title: str, rows) -> None:
    """Print rows of (figure, value, target) under a title."""
    width = max(len(r[0]) for r in rows)
    value_width = max(8, max(len(r[1]) for r in rows))
    print(title)
    print(f"{'figure':<{width}}  {'value':>{value_width}}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>{value_width}}  {target}")
