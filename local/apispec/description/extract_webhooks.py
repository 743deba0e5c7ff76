#!/usr/bin/env python3
"""Cut the workflow_job webhooks out of GitHub's webhook OpenAPI description.

Usage:
    python3 extract_webhooks.py SOURCE.json OUTPUT.json [--source TEXT]

SOURCE.json is generated/api.github.com.json of the npm package
@octokit/openapi-webhooks (an OpenAPI 3.1 document whose `webhooks` hold one
operation per event and action). The program keeps the webhooks listed in
WEBHOOKS, copies every `components` entry they reference, following `$ref`s
transitively, checks that every `$ref` in the result resolves inside it, and
writes pretty-printed JSON with sorted keys. Only the Python standard library
is used.
"""

import argparse
import copy
import json
import sys

from extract import iter_refs, resolve, collect_components

# The webhooks a runner autoscaler receives: workflow_job, each action.
WEBHOOKS = [
    "workflow-job-queued",
    "workflow-job-waiting",
    "workflow-job-in-progress",
    "workflow-job-completed",
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--source", dest="source_name", default="a copy of the description file")
    args = parser.parse_args(argv)
    with open(args.source, encoding="utf-8") as f:
        source = json.load(f)
    missing = [w for w in WEBHOOKS if w not in source.get("webhooks", {})]
    if missing:
        print("not in source:", ", ".join(missing), file=sys.stderr)
        return 1
    webhooks = {w: copy.deepcopy(source["webhooks"][w]) for w in WEBHOOKS}
    subset = {"openapi": source["openapi"], "info": copy.deepcopy(source["info"])}
    subset["info"]["description"] = (
        subset["info"].get("description", "").rstrip()
        + "\n\nThis is a subset of the description: it keeps only the webhooks "
        + ", ".join(WEBHOOKS)
        + " and the components they reference. Extracted by extract_webhooks.py from "
        + args.source_name + "."
    )
    subset["webhooks"] = webhooks
    subset["components"] = collect_components(source, [webhooks])
    problems = []
    for ref in iter_refs(subset):
        try:
            resolve(subset, ref)
        except (KeyError, ValueError, IndexError):
            problems.append(f"unresolved $ref {ref}")
    if problems:
        for p in problems:
            print("invalid:", p, file=sys.stderr)
        return 1
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(subset, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    counts = ", ".join(f"{len(v)} {k}" for k, v in subset["components"].items())
    print(f"kept {len(WEBHOOKS)} webhooks; components: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
