#!/usr/bin/env python3
"""The gate and the report of repo-report.yaml.

  repo_report.py merge   reads a gate's input (sections holding one JSON object each, keyed
                         by crate) and prints the objects merged per crate, as JSON
  repo_report.py render  reads that JSON and prints a Markdown report, one row per crate

Standard library only.
"""

import json
import sys


def merge(text):
    crates = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue  # section headings, and empty outputs of skipped tasks
        for crate, figures in json.loads(line).items():
            crates.setdefault(crate, {}).update(figures)
    if not crates:
        raise SystemExit("repo_report.py merge: no statistics in the input")
    return json.dumps(crates, sort_keys=True, indent=2)


def render(text):
    crates = json.loads(text)
    rows = ["| crate | Rust files | lines | pub fns | tests | TODOs | largest file |", "|---|---|---|---|---|---|---|"]
    total = {"files": 0, "lines": 0, "pub_fns": 0, "tests": 0, "todos": 0}
    for name in sorted(crates):
        figures = crates[name]
        for key in total:
            total[key] += figures.get(key, 0)
        largest = figures.get("largest") or [{"file": "?", "lines": 0}]
        top = f"{largest[0]['file']} ({largest[0]['lines']} lines)"
        cells = [str(figures.get(key, "?")) for key in ("files", "lines", "pub_fns", "tests", "todos")]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {top} |")
    cells = [str(total[key]) for key in ("files", "lines", "pub_fns", "tests", "todos")]
    rows.append("| **total** | " + " | ".join(cells) + " | |")
    return "# Repository report\n\n" + "\n".join(rows)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("merge", "render"):
        raise SystemExit(__doc__)
    text = sys.stdin.read()
    try:
        print(merge(text) if sys.argv[1] == "merge" else render(text))
    except ValueError as error:
        raise SystemExit(f"repo_report.py {sys.argv[1]}: the input is not valid JSON: {error}")


if __name__ == "__main__":
    main()
