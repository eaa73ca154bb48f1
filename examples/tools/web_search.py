#!/usr/bin/env python3
"""The `web_search` tool of research.yaml: reads {"query": ..., "max_results": ...} as JSON
on stdin and prints the DuckDuckGo Instant Answer results as JSON on stdout."""

import json
import sys
import urllib.parse
import urllib.request


def main() -> int:
    arguments = json.load(sys.stdin)
    query = arguments["query"]
    limit = int(arguments.get("max_results", 5))
    url = "https://api.duckduckgo.com/?" + urllib.parse.urlencode(
        {"q": query, "format": "json", "no_html": 1, "skip_disambig": 1}
    )
    request = urllib.request.Request(url, headers={"User-Agent": "runner-example/1"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            answer = json.load(response)
    except (OSError, ValueError) as error:
        print(f"web_search: {error}", file=sys.stderr)
        return 1
    results = []
    if answer.get("AbstractText"):
        results.append({"title": answer.get("Heading", query), "url": answer.get("AbstractURL", ""),
                        "snippet": answer["AbstractText"]})
    for topic in answer.get("RelatedTopics", []):
        if "Text" in topic and "FirstURL" in topic:
            results.append({"title": topic["Text"].split(" - ")[0], "url": topic["FirstURL"],
                            "snippet": topic["Text"]})
    json.dump({"query": query, "results": results[:limit]}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
