"""Conventions shared by the command-line tools: how they fail and how they report."""

from __future__ import annotations

import json
import resource
import sys


def fail(prog: str, error: Exception) -> int:
    """One line on stderr naming the tool and the problem; exit status 2."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


def report(record: dict, text: str, as_json: bool) -> int:
    """Print a run's record (as JSON, or as ``text`` plus time and peak memory)."""
    record["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if as_json:
        print(json.dumps(record, indent=2))
    else:
        print(text)
        print(f"time        {record['seconds']:.1f} s, peak RSS {record['peak_rss_mib']:,.0f} MiB")
    return 0
