"""Tool for llm agents: the lines of a log file under the plan's folder that contain a text.

Arguments arrive as JSON on stdin: {"file": "data/app.log", "contains": "ERROR"}.
Prints at most 200 matching lines. Refuses paths outside the plan's folder.
"""

import json
import pathlib
import sys

MAX_LINES = 200


def main() -> int:
    args = json.load(sys.stdin)
    root = pathlib.Path.cwd().resolve()
    path = (root / args["file"]).resolve()
    if root not in path.parents or not path.is_file():
        print(f"no such log file under the plan's folder: {args['file']}", file=sys.stderr)
        return 1
    needle = args.get("contains", "")
    shown = 0
    with path.open(encoding="utf-8", errors="replace") as log:
        for line in log:
            if needle in line:
                print(line.rstrip("\n"))
                shown += 1
                if shown == MAX_LINES:
                    print(f"[stopped after {MAX_LINES} lines]")
                    break
    return 0


if __name__ == "__main__":
    sys.exit(main())
