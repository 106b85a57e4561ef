"""gpumemprof.utils: format_memory, the seed's helper, which the tracker's
messages and the commands' text output use."""

__all__ = ["format_memory"]


def format_memory(bytes_value) -> str:
    """1536 -> "1.5 KiB"; None -> "?"."""
    if bytes_value is None:
        return "?"
    n, units = float(bytes_value), ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    for unit in units:
        if abs(n) < 1024 or unit == units[-1]:
            break
        n /= 1024.0
    return "%d B" % n if unit == "B" else "%.1f %s" % (n, unit)
