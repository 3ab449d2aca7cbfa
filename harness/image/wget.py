"""A small ``wget`` for the node image's health check (``wget -q -O /dev/null URL``).

Takes ``-q``, ``-O FILE`` (``-`` for standard output), ``-T SECONDS``, ``--spider`` and
one URL; exit status 0 for an HTTP 2xx answer, 1 otherwise, as busybox's wget. Copied
into the image as a script (standard library only, run with ``python3 -IS``).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Sequence


def fetch(argv: Sequence[str]) -> int:
    quiet, out, timeout, spider, urls = False, None, 10.0, False, []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-q", "--quiet"):
            quiet = True
        elif arg in ("-O", "-T") and args:
            value = args.pop(0)
            if arg == "-O":
                out = value
            else:
                timeout = float(value)
        elif arg == "--spider":
            spider = True
        elif arg.startswith("-"):
            print(f"wget: unsupported option {arg}", file=sys.stderr)
            return 2
        else:
            urls.append(arg)
    if len(urls) != 1:
        print("wget: give one URL", file=sys.stderr)
        return 2
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urls[0], timeout=timeout) as resp:
            body = resp.read()
    except (OSError, ValueError) as exc:
        if not quiet:
            print(f"wget: {urls[0]}: {exc}", file=sys.stderr)
        return 1
    if not spider:
        if out == "-":
            sys.stdout.buffer.write(body)
        elif out is not None:
            with open(out, "wb") as fh:
                fh.write(body)
        else:
            name = urls[0].rstrip("/").rsplit("/", 1)[-1] or "index.html"
            with open(name, "wb") as fh:
                fh.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(fetch(sys.argv[1:]))
