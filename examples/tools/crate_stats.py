#!/usr/bin/env python3
"""Statistics of one Rust crate's sources, for repo-report.yaml.

Usage: crate_stats.py [CRATE_DIR MEASURE]

Without arguments it reads {"crate": CRATE_DIR, "measure": MEASURE} as JSON on stdin (the
task's rendered input). CRATE_DIR is relative to the working directory. MEASURE is one of:
  size     Rust files and lines under src/, tests/, benches/ and examples/
  largest  the three largest Rust files by lines
  api      `pub fn` declarations under src/
  tests    `#[test]` and `#[tokio::test]` functions, and TODO/FIXME notes

Prints one JSON object on stdout, keyed by the crate's folder name. Standard library only.
"""

import json
import os
import re
import sys

FOLDERS = ("src", "tests", "benches", "examples")


def rust_files(crate):
    for folder in FOLDERS:
        root = os.path.join(crate, folder)
        for parent, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".rs"):
                    yield os.path.join(parent, name)


def lines_of(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read().splitlines()


def measure(crate, what):
    files = {path: lines_of(path) for path in rust_files(crate)}
    relative = {path: os.path.relpath(path, crate) for path in files}
    if what == "size":
        return {"files": len(files), "lines": sum(len(text) for text in files.values())}
    if what == "largest":
        ranked = sorted(files, key=lambda p: (-len(files[p]), p))[:3]
        return {"largest": [{"file": relative[p], "lines": len(files[p])} for p in ranked]}
    if what == "api":
        pattern = re.compile(r"^\s*pub(\([a-z:]+\))?\s+(async\s+)?fn\s")
        src = [p for p in files if relative[p].startswith("src" + os.sep)]
        return {"pub_fns": sum(1 for p in src for line in files[p] if pattern.match(line))}
    if what == "tests":
        test = re.compile(r"^\s*#\[(tokio::)?test\b")
        todo = re.compile(r"\b(TODO|FIXME)\b")
        return {
            "tests": sum(1 for text in files.values() for line in text if test.match(line)),
            "todos": sum(1 for text in files.values() for line in text if todo.search(line)),
        }
    raise SystemExit(f"crate_stats.py: unknown measure `{what}` (size, largest, api, tests)")


def main():
    if len(sys.argv) == 3:
        crate, what = sys.argv[1], sys.argv[2]
    elif len(sys.argv) == 1:
        try:
            request = json.load(sys.stdin)
            crate, what = request["crate"], request["measure"]
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"crate_stats.py: expected {{\"crate\": ..., \"measure\": ...}} on stdin: {error}")
    else:
        raise SystemExit(__doc__)
    if not os.path.isfile(os.path.join(crate, "Cargo.toml")):
        raise SystemExit(f"crate_stats.py: {crate} has no Cargo.toml")
    name = os.path.basename(os.path.normpath(crate))
    json.dump({name: measure(crate, what)}, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
