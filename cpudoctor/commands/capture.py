"""``cpudoctor capture -o FILE.tar.gz``: pack the /proc and /sys files the probes read.

Like hwloc-gather-topology: the tarball lets someone else run
``cpudoctor report --root`` on this machine's facts. It holds no personal data
beyond what the probes use (see cpudoctor.capture for the allowlist).
"""

from __future__ import annotations

from cpudoctor.commands import CliError, root_arg
from cpudoctor.argtypes import file_name


def register(subparsers) -> None:
    p = subparsers.add_parser("capture", help="pack the /proc and /sys files CPU Doctor reads into a tarball",
                              description="Pack the /proc and /sys files the probes read, so `cpudoctor report "
                                          "--root` can analyse this machine elsewhere.")
    p.add_argument("--output", "-o", metavar="FILE.tar.gz", type=file_name("the tarball's file name"),
                   required=True, help="tarball to write")
    p.add_argument("--root", metavar="DIR", help="capture a tree under DIR instead of this machine")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.set_defaults(func=run)


def run(args) -> int:
    from cpudoctor.capture import CaptureError, capture

    name = str(args.output).lower()
    if not name.endswith((".tar.gz", ".tgz")):
        # The file is always a gzip tarball: a .zip or .tar name would mislead whoever unpacks it.
        raise CliError(f"-o {args.output}: the capture is a gzip tarball; give a name ending in .tar.gz or .tgz")
    root = root_arg(args.root)
    try:
        result = capture(args.output, root=root, force=args.force)
    except CaptureError as exc:
        raise CliError(str(exc), code=exc.code) from None
    print(result.summary())
    return 0
