#!/usr/bin/env python3
"""Code lines of Rust sources: non-blank, non-comment lines outside `#[cfg(test)]` modules.

    scripts/code-lines.py collector/src [more dirs]   # per file, then the total

A line is a comment when it starts with `//` (doc comments too) or lies in a `/* */` block;
a `#[cfg(test)]` module is skipped from its `mod` line to its closing brace (braces counted
per line, which holds for rustfmt-formatted code).
"""
import os
import re
import sys


def count(path):
    n = 0
    depth = 0
    skip_at = None  # brace depth at which the skipped test module closes
    in_block = False
    pending_cfg = False
    for line in open(path, encoding="utf-8"):
        s = line.strip()
        if skip_at is not None:
            depth += line.count("{") - line.count("}")
            if depth <= skip_at:
                skip_at = None
            continue
        if in_block:
            in_block = "*/" not in s
            continue
        if s.startswith("/*"):
            in_block = "*/" not in s
            continue
        if s == "#[cfg(test)]":
            pending_cfg = True
            continue
        if pending_cfg and re.match(r"(pub(\(crate\))? )?mod \w+\s*\{", s):
            skip_at = depth
            depth += line.count("{") - line.count("}")
            pending_cfg = False
            continue
        if pending_cfg:
            n += 1  # the attribute of an item that is not a module counts
        pending_cfg = False
        depth += line.count("{") - line.count("}")
        if s and not s.startswith("//"):
            n += 1
    return n


def main():
    per = {}
    for root in sys.argv[1:]:
        for d, _, files in os.walk(root):
            for f in files:
                if f.endswith(".rs"):
                    p = os.path.join(d, f)
                    per[p] = count(p)
    for p in sorted(per, key=per.get):
        print(per[p], p)
    print("total", sum(per.values()))


if __name__ == "__main__":
    main()
