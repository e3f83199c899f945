#!/usr/bin/env python3
"""An implementation with four planted bugs, wrapped around this project's own dump, for the
differential fuzzer's tests to find:

1. it crashes (abort) on an attribute whose key is the rare "名前";
2. it hangs on an object of shape [3, 2];
3. it accepts a file that breaks cbor_duplicate_key (an empty file, it says);
4. it reports f16 data of rank-2 objects as bf16.

Usage: planted.py DUMP... FILE, or planted.py DUMP... --serve (the persistent protocol), where
DUMP... is the command of the wrapped dump (`ztensor-conformance dump`).
"""

import json
import os
import subprocess
import sys
import time


def has_rare_key(value):
    if isinstance(value, dict):
        return "名前" in value or any(has_rare_key(v) for v in value.values())
    if isinstance(value, list):
        return any(has_rare_key(v) for v in value)
    return False


def plant(dump):
    """The dump as the buggy implementation gives it (it may not return)."""
    error = dump.get("error")
    if isinstance(error, dict):
        if error.get("kind") == "cbor_duplicate_key":
            return {"dump": "ztensor-dump/1", "container": None, "version": None,
                    "attributes": None, "objects": []}
        return dump
    objects = dump.get("objects") or []
    if has_rare_key(dump.get("attributes")) or any(has_rare_key(o.get("attributes")) for o in objects):
        os.abort()
    for o in objects:
        if o.get("shape") == [3, 2]:
            time.sleep(3600)
        if len(o.get("shape") or []) == 2:
            for c in (o.get("components") or {}).values():
                if c.get("dtype") == "f16":
                    c["dtype"] = "bf16"
    return dump


def main():
    args = sys.argv[1:]
    if args and args[-1] == "--serve":
        inner = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for line in sys.stdin:
            inner.stdin.write(line)
            inner.stdin.flush()
            dump = plant(json.loads(inner.stdout.readline()))
            sys.stdout.write(json.dumps(dump, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        return 0
    done = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    dump = plant(json.loads(done.stdout))
    print(json.dumps(dump, ensure_ascii=False))
    return 1 if isinstance(dump.get("error"), dict) else 0


if __name__ == "__main__":
    sys.exit(main())
