#!/usr/bin/env python3
"""A writer with two planted bugs, wrapped around this project's own writer, for the
differential fuzzer's writer mode to find:

1. it writes COO objects with one blob byte changed (after the header: the file stays
   readable, its content does not);
2. it crashes on a recipe with a bool component.

Usage: planted_writer.py WRITE... RECIPE OUT, where WRITE... is the command of the wrapped
writer (`ztensor-conformance write`).
"""

import json
import os
import subprocess
import sys


def main():
    *write, recipe_path, out = sys.argv[1:]
    with open(recipe_path, encoding="utf-8") as f:
        recipe = json.load(f)
    objects = recipe.get("objects") or []
    if any(c.get("dtype") == "bool" for o in objects for c in (o.get("components") or {}).values()):
        os.abort()
    done = subprocess.run([*write, recipe_path, out])
    if done.returncode != 0:
        return done.returncode
    if any(o.get("format") == "sparse_coo" for o in objects):
        with open(out, "r+b") as f:
            f.seek(64)
            byte = f.read(1)
            if byte:
                f.seek(64)
                f.write(bytes([byte[0] ^ 0x01]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
