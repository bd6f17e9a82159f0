"""Review-rule patterns with RE2 against Python's ``re`` (issue 36): how long one pattern of
the backtracking shape ``(a?){n}a{n}`` takes on a line of n a's.

    /work/main/.venv/bin/python tests/benchmarks/bench_rule_patterns.py

Python's ``re`` is timed only up to n = 24 (each further a roughly doubles its time; at
n = 40 it runs for hours, holding the interpreter lock). RE2, which reviews use, is timed up
to n = 150 (a line is read up to ``rulecheck.MAX_LINE`` = 300 characters). Also timed: a whole
``pattern_hits`` pass of the guardian over 1,000 added lines with runs of 39 a's (none
matches, so every line is read).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reviews_app.rules import check as rulecheck  # noqa: E402


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    print(f"{'n':>4} {'python re (ms)':>15} {'RE2 (ms)':>10}")
    for n in (16, 20, 22, 24, 40, 100, 150):
        pattern, line = f"(a?){{{n}}}a{{{n}}}", "a" * n
        slow = (f"{best(lambda: re.search(pattern, line), 1) * 1000:15.1f}" if n <= 24
                else f"{'(hours)' if n == 40 else '-':>15}")
        compiled, why = rulecheck.compile_pattern(pattern)
        assert compiled is not None, why
        assert compiled.search(line)
        print(f"{n:>4} {slow} {best(lambda: compiled.search(line)) * 1000:10.3f}")
    compiled, _ = rulecheck.compile_pattern("(a?){40}a{40}")
    files = [{"path": "app/x.py", "hunks": [{"lines": [
        {"kind": "add", "old": None, "new": i, "text": ("a" * 39 + "b") * 8}
        for i in range(1, 1001)]}]}]  # no line matches: every line is read in full
    hits, complete = rulecheck.pattern_hits(compiled, files, ["app/x.py"], rulecheck.Budget())
    assert hits == {} and complete
    took = best(lambda: rulecheck.pattern_hits(compiled, files, ["app/x.py"],
                                               rulecheck.Budget()))
    print(f"pattern_hits, (a?){{40}}a{{40}} over 1,000 added lines of 320 characters "
          f"(runs of 39 a's, no match): {took * 1000:.1f} ms")


if __name__ == "__main__":
    main()
