#!/usr/bin/env python3
"""README.md's rollout table is `make bench-cluster`'s table as a run printed it: the same caption (date, commit,
Kubernetes version, CPUs, pods), the same columns and fixed rows in the same order, request rows as the bench writes
them. Its webhook table is `make bench`'s (tests/bench/bench.py) as a run printed it: the caption (date, commit,
machine, seconds per cell), the RSS line, the columns, one row per review and connection count in the bench's
order, each cell as the bench formats it. Fails when a README table and its bench's output format drift apart (a
row renamed, a case added, a table typed by hand).

    python3 tests/bench/test_readme_tables.py SOURCE_DIR
"""

import os
import re
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
sys.path.insert(0, HERE)

BEGIN, END = "<!-- bench-cluster table: begin -->", "<!-- bench-cluster table: end -->"
WEBHOOK_BEGIN, WEBHOOK_END = "<!-- bench table: begin -->", "<!-- bench table: end -->"


def block(text, begin, end, check):
    """The lines between README.md's one `begin` and `end` markers; None (a failure said) when not exactly one."""
    one = text.count(begin) == 1 and text.count(end) == 1
    check(one, "README.md has one %s ... %s block" % (begin, end))
    return text[text.index(begin) + len(begin):text.index(end)].strip("\n").split("\n") if one else None


def caption_fields(line, fmt, which, check):
    """The fields of a bench's caption `fmt` (its %s and %d, the date and the commit first) in `line`, the date and
    the commit checked; None (a failure said) when `line` is not that caption."""
    m = re.fullmatch(re.escape(fmt).replace("%s", "(.+?)").replace("%d", r"(\d+)"), line)
    check(m is not None, "the %s table's first line is the bench's caption (%r), got %r" % (which, fmt, line))
    if m is None:
        return None
    date, commit = m.group(1), m.group(2)
    check(re.fullmatch(r"\d{4}-\d\d-\d\d", date) is not None, "%s caption date %r" % (which, date))
    check(re.fullmatch(r"[0-9a-f]{7,40}", commit) is not None, "%s caption commit %r" % (which, commit))
    return m.groups()


def check_webhook_table(text, check):
    """The `make bench` block: each row parsed back into the bench's cell and rendered again must be the row."""
    import bench  # the bench's own format: CAPTION, RSS_LINE, HEADER, ALIGN, REVIEWS, CONNECTIONS, row

    lines = block(text, WEBHOOK_BEGIN, WEBHOOK_END, check)
    if lines is None or caption_fields(lines[0], bench.CAPTION, "webhook", check) is None:
        return
    rss = re.escape(bench.RSS_LINE).replace("%\\.1f", r"(\d+\.\d)")
    check(len(lines) > 5 and lines[1] == "" and re.fullmatch(rss, lines[2]) is not None and lines[3] == "",
          "then a blank line, the bench's RSS line and a blank line, got %r" % lines[1:4])
    check(len(lines) > 5 and lines[4] == bench.HEADER and lines[5] == bench.ALIGN,
          "the webhook table's header and alignment rows are the bench's, got %r" % lines[4:6])
    rows = lines[6:]
    want = [(label, c) for _name, _path, label in bench.REVIEWS for c in bench.CONNECTIONS]
    check(len(rows) == len(want), "%d webhook rows (each review at %s connections), got %d"
          % (len(want), bench.CONNECTIONS, len(rows)))
    for line, (label, conns) in zip(rows, want):
        cells = [c.strip() for c in line.strip("|").split("|")]
        try:
            f = [float(x) for x in cells[2:]]
            cell = {"label": cells[0], "connections": int(cells[1]), "cpu_ratio": f[6], "rps_ratio": f[7],
                    "ours": {"rps": f[0], "p50_us": f[1] * 1000, "p99_us": f[2] * 1000, "p999_us": f[3] * 1000,
                             "error_count": int(f[4]), "cpu_us_per_req": f[5], "rss_peak_kib": f[8] * 1024},
                    "nginx": {"rps": f[9], "cpu_us_per_req": f[10]}}
        except (ValueError, IndexError):
            check(False, "webhook row %r: 13 cells, numbers after the first" % line)
            continue
        check(cell["label"] == label and cell["connections"] == conns,
              "webhook row %r is for %r at %d connections" % (line, label, conns))
        check(bench.row(cell) == line, "the bench would print webhook row %r as %r" % (line, bench.row(cell)))


def main():
    import cluster_bench as bench  # the bench's own format: CASES, ROWS, CAPTION, heading, table

    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..")
    text = open(os.path.join(source, "README.md"), encoding="utf-8").read()
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    check_webhook_table(text, check)
    lines = block(text, BEGIN, END, check)
    fields = caption_fields(lines[0], bench.CAPTION, "rollout", check) if lines is not None else None
    if fields is None:
        return report(failures)
    _date, _commit, version, _cpus, replicas = fields
    check(re.fullmatch(r"v\d+\.\d+\.\d+.*", version) is not None, "caption Kubernetes version %r" % version)

    # The same table, rebuilt by the bench from the README's own figures, must be the README's table.
    ncases = len(bench.CASES)
    check(lines[1] == "" and lines[2] == bench.heading(int(replicas)), "the heading: %r, not %r"
          % (lines[2], bench.heading(int(replicas))))
    check(lines[3] == "|---|" + "---:|" * ncases, "the alignment row %r" % lines[3])
    rows = lines[4:]
    results = {c[0]: {"requests": {}} for c in bench.CASES}
    for i, (label, key) in enumerate(bench.ROWS):
        cells = [c.strip() for c in rows[i].strip("|").split("|")] if i < len(rows) else []
        check(len(cells) == ncases + 1 and cells[0] == label, "fixed row %d is %r, the bench writes %r with %d cells"
              % (i, rows[i] if i < len(rows) else None, label, ncases))
        for case, cell in zip(bench.CASES, cells[1:]):
            results[case[0]][key] = cell
    for row in rows[len(bench.ROWS):]:
        m = re.fullmatch(r"\| `(\S+) (\S+)` \|" + r" (\d+) \|" * ncases, row)
        check(m is not None, "request row %r is not the bench's `VERB resource` | counts" % row)
        if m:
            for case, n in zip(bench.CASES, m.groups()[2:]):
                results[case[0]]["requests"][(m.group(1), m.group(2))] = int(n)
    if not failures:
        rebuilt = bench.table(results, int(replicas), lines[0])
        check(rebuilt == "\n".join(lines), "the bench would print this table differently (row order: busiest "
              "first):\n%s" % rebuilt)
    return report(failures)


def report(failures):
    for f in failures:
        print("FAIL: " + f)
    print("readme tables: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
