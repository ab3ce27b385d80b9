#!/usr/bin/env python3
"""Compares two `go test -json` runs of one suite, straight to the server and
through shardgate, against the explained differences in known_differences.txt.

    compare_upstream.py --direct direct.json --proxy proxy.json --known known_differences.txt
        [--out DIR] [--update]

Top-level tests are compared (a subtest's failure fails its parent). A test
that passes directly and fails, is skipped or does not finish through the
proxy is a difference; one that known_differences.txt does not list fails
the comparison, and so does a listed one that now passes through the proxy
(stale entry), and so does a listed one that does not pass directly (the
direct run is broken, e.g. missing grants). Other tests that do not pass
directly are not compared. Lines
`ignore TestName reason` are left out of the comparison (tests that never
talk to the server under test). --update rewrites the file to today's
differences, keeping the reasons of entries that remain. Exits 1 when the
comparison fails.
"""

import argparse
import json
import os
import sys

TODO = "TODO: explain"


def load_run(path):
    """{test: outcome} (pass/fail/skip/unfinished) and {test: output}."""
    outcome, output = {}, {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            test = event.get("Test")
            if not test:
                continue
            action = event.get("Action")
            if action == "run":
                outcome.setdefault(test, "unfinished")
            elif action in ("pass", "fail", "skip"):
                outcome[test] = action
            elif action == "output":
                output.setdefault(test, []).append(event.get("Output", ""))
    return outcome, {t: "".join(o) for t, o in output.items()}


def load_known(path):
    """(header comment lines, {test: reason}, {test: reason} ignored)."""
    header, known, ignored = [], {}, {}
    if not os.path.exists(path):
        return header, known, ignored
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.rstrip("\n")
            if not text.strip() or text.lstrip().startswith("#"):
                if not known and not ignored:
                    header.append(text)
                continue
            parts = text.split(None, 1)
            if parts[0] == "ignore":
                rest = parts[1].split(None, 1) if len(parts) > 1 else [""]
                ignored[rest[0]] = rest[1].strip() if len(rest) > 1 else ""
            else:
                known[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return header, known, ignored


def top_level(outcomes):
    return {t: o for t, o in outcomes.items() if "/" not in t}


def tail(text, lines=12):
    kept = [l for l in text.splitlines() if l.strip()]
    return "\n".join("      " + l for l in kept[-lines:])


def write_known(path, header, ignored, differences, known):
    width = max([len(t) for t in list(differences) + list(ignored)] + [0]) + 2
    with open(path, "w", encoding="utf-8") as f:
        for line in header:
            f.write(line + "\n")
        for test in sorted(differences):
            f.write(f"{test.ljust(width)}{known.get(test) or TODO}\n")
        if ignored:
            f.write("\n")
        for test in sorted(ignored):
            f.write(f"ignore {test.ljust(width)}{ignored[test]}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--direct", required=True)
    p.add_argument("--proxy", required=True)
    p.add_argument("--known", required=True)
    p.add_argument("--out", default=None, help="directory for proxy-failures.txt")
    p.add_argument("--update", action="store_true", help="rewrite --known to today's differences")
    args = p.parse_args()

    direct, direct_out = load_run(args.direct)
    proxy, proxy_out = load_run(args.proxy)
    direct, proxy = top_level(direct), top_level(proxy)
    header, known, ignored = load_known(args.known)
    if not direct:
        print(f"FAIL the direct run produced no test results ({args.direct}); its output:")
        print(open(args.direct, encoding="utf-8", errors="replace").read()[-3000:])
        return 1

    compared = [t for t in sorted(direct) if t not in ignored]
    passed_direct = [t for t in compared if direct[t] == "pass"]
    differences = {t: proxy.get(t, "did not run") for t in passed_direct if proxy.get(t) != "pass"}
    unexplained = [t for t in differences if t not in known]
    explained = [t for t in differences if t in known]
    stale = [t for t in known if t not in differences and direct.get(t) == "pass"]
    unknown = [t for t in known if t not in direct]
    not_comparable = [t for t in compared if direct[t] != "pass"]

    same = len(passed_direct) - len(differences)
    print(f"{len(direct)} tests: {len(passed_direct)} pass directly, {same} of them through the proxy too; "
          f"{len(not_comparable)} do not pass directly (not compared), {len(ignored)} ignored")
    listed_broken = [t for t in not_comparable if t in known]
    for t in not_comparable:
        if t not in known:
            print(f"  not compared: {t} {direct[t]}s directly")
    for t in explained:
        print(f"known   {t}: {differences[t]} through the proxy: {known[t]}")
    for t in unexplained:
        print(f"FAIL    {t}: passes directly, {differences[t]} through the proxy (not in known_differences.txt)")
        print(tail(proxy_out.get(t, "")))
    for t in stale:
        print(f"FAIL    {t}: listed in known_differences.txt but now passes through the proxy: remove the entry")
    for t in listed_broken:
        print(f"FAIL    {t}: listed in known_differences.txt but {direct[t]}s directly, so it is not compared: "
              f"the direct run is broken (the data account's grants?) or the entry is stale")
        print(tail(direct_out.get(t, ""), 4))
    for t in unknown:
        print(f"FAIL    {t}: listed in known_differences.txt but the suite has no such test: remove the entry")

    if args.out:
        with open(os.path.join(args.out, "proxy-failures.txt"), "w", encoding="utf-8") as f:
            for t in sorted(differences):
                f.write(f"===== {t}: {differences[t]} through the proxy\n{proxy_out.get(t, '')}\n")
    if args.update:
        write_known(args.known, header, ignored, differences, known)
        print(f"rewrote {args.known}: {len(differences)} differences "
              f"({len([t for t in differences if t not in known])} new, marked {TODO!r}), "
              f"{len(stale) + len(unknown)} stale entries dropped")
        return 0
    failed = len(unexplained) + len(stale) + len(unknown) + len(listed_broken)
    print(f"{len(explained)} known differences, {failed} comparison failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
