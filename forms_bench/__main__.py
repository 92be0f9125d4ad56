"""``python -m forms_bench [--check]``: regenerate the frozen test set and its checksum, or check
that the generator still reproduces the frozen file byte for byte (exit 1 if not)."""

import argparse
import sys

from forms_bench.suite import _path, build_test_set, dump_tasks, write_test_set


def main(argv: list[str] | None = None) -> int:
    """CLI: write (default) or ``--check`` the frozen test set. Returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m forms_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="verify the frozen file is reproduced byte for byte")
    args = ap.parse_args(argv)
    if args.check:
        path = _path()
        ok = path.exists() and path.read_bytes() == dump_tasks(build_test_set())
        print(f"frozen test set reproduced ({path.name})" if ok else f"MISMATCH: {path.name} differs from the generator")
        return 0 if ok else 1
    print(f"wrote {write_test_set()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
