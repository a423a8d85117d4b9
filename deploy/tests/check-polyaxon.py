"""Every Polyaxon file given through Polyaxon's own check (check_polyaxonfile, what
`polyaxon check -f FILE` calls), in one process: the CLI takes about two seconds per file, and a
study emits one operation per replica. Exits 1 naming each file that fails."""

import sys

from polyaxon._polyaxonfile.check import check_polyaxonfile


def main(paths):
    bad = 0
    for path in paths:
        try:
            check_polyaxonfile(polyaxonfile=path, validate_params=True)
        except BaseException as e:  # the CLI's checks exit through SystemExit too
            bad += 1
            print(f"error: {path}: {type(e).__name__}: {e}", file=sys.stderr)
    if bad:
        print(f"{bad} of {len(paths)} file(s) failed", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
