#!/usr/bin/python3
"""Counts the skipped tests of one ctest run and names them.

    check_skips.py [--allow FILE] [--strict] JUNIT.xml

JUNIT.xml is ctest's --output-junit report. Prints "check_skips: N skipped of M" and one line per
skipped test (name, the allow-list's reason or UNLISTED, and the test's own skip message). An allowed
skip is one whose name matches a pattern of FILE: one `pattern  reason` per line (a shell-style
pattern, then the reason; # starts a comment). With --strict, or CI=true in the environment, an
unlisted skip is a failure (exit 1); otherwise it is only reported. Exit 2: the report is missing or
unreadable, or an allow-list line has no reason.
"""
import argparse
import fnmatch
import os
import sys
import xml.etree.ElementTree as ET


def read_allow(path):
    allow = []
    if not path:
        return allow
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                raise ValueError(f"{path}:{n}: '{parts[0]}' has no reason (pattern, then why it may skip)")
            allow.append((parts[0], parts[1]))
    return allow


def skip_message(case):
    """The test's own reason: the last output line that says it skipped, else ctest's message."""
    lines = (case.findtext("system-out") or "").splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped") and i + 1 < len(lines):  # GoogleTest: the reason follows
            return lines[i + 1].strip()[:200]
        if line.startswith("SKIPPED: "):  # the scripts' exit-77 convention
            return line[len("SKIPPED: "):].strip()[:200]
    skipped = case.find("skipped")
    return (skipped.get("message") if skipped is not None else "") or ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit")
    ap.add_argument("--allow", help="allow-list file (pattern, reason per line)")
    ap.add_argument("--strict", action="store_true", help="fail on an unlisted skip (default when CI=true)")
    a = ap.parse_args()
    strict = a.strict or os.environ.get("CI") == "true"
    try:
        allow = read_allow(a.allow)
        root = ET.parse(a.junit).getroot()
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"check_skips: {e}", file=sys.stderr)
        return 2
    cases = list(root.iter("testcase"))
    skipped = [c for c in cases if c.get("status") in ("notrun", "disabled") or c.find("skipped") is not None]
    print(f"check_skips: {len(skipped)} skipped of {len(cases)} ({a.junit})")
    unlisted = []
    for c in skipped:
        # a parameterised GoogleTest case's CTest name ends in "  # GetParam() = ...": matched without it
        name = c.get("name", "?").split("  # ", 1)[0]
        reason = next((r for p, r in allow if fnmatch.fnmatchcase(name, p)), None)
        if reason is None:
            unlisted.append(name)
        print(f"  skipped: {name}  [{reason if reason is not None else 'UNLISTED'}]  {skip_message(c)}")
    if unlisted:
        where = a.allow or "an allow-list"
        if strict:
            print(f"check_skips: FAIL: {len(unlisted)} skipped test(s) not listed in {where}: "
                  f"{', '.join(unlisted)}", file=sys.stderr)
            return 1
        print(f"check_skips: {len(unlisted)} skip(s) not listed in {where} (a failure in CI)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
