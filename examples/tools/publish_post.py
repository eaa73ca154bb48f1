#!/usr/bin/env python3
"""The `publish_post` tool of review.yaml: reads {"title": ..., "body": ...} as JSON on stdin,
writes the post to published/<slug>.md (a stand-in for a blog) and prints its path."""

import json
import pathlib
import re
import sys


def main() -> int:
    post = json.load(sys.stdin)
    slug = re.sub(r"[^a-z0-9]+", "-", post["title"].lower()).strip("-") or "post"
    folder = pathlib.Path("published")
    folder.mkdir(exist_ok=True)
    path = folder / f"{slug}.md"
    path.write_text(f"# {post['title']}\n\n{post['body']}\n", encoding="utf-8")
    print(json.dumps({"published": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
