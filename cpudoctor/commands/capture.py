"""``cpudoctor capture -o FILE.tar.gz``: pack the /proc and /sys files the probes read, and the environment.

Like hwloc-gather-topology: the tarball lets someone else run
``cpudoctor report --root`` on this machine's facts, software included: the
chosen Python environment is described in ``environment.json`` (redacted like
a shared report). It holds no personal data beyond what the probes use (see
cpudoctor.capture for the allowlist).
"""

from __future__ import annotations

from cpudoctor.commands import CliError, root_arg
from cpudoctor.argtypes import file_name
from cpudoctor.kits.rooted import is_live_root


def register(subparsers) -> None:
    p = subparsers.add_parser("capture", help="pack the /proc and /sys files CPU Doctor reads into a tarball",
                              description="Pack the /proc and /sys files the probes read, so `cpudoctor report "
                                          "--root` can analyse this machine elsewhere.")
    p.add_argument("--output", "-o", metavar="FILE.tar.gz", type=file_name("the tarball's file name"),
                   required=True, help="tarball to write")
    p.add_argument("--root", metavar="DIR", help="capture a tree under DIR instead of this machine")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.add_argument("--python", metavar="PATH|ENV",
                   help="the Python environment the capture describes (environment.json): an interpreter, an "
                        "environment folder or a name from `cpudoctor envs` (default: the one you most likely "
                        "train in, as doctor)")
    p.add_argument("--no-environment", action="store_true",
                   help="pack only the /proc and /sys files, no description of a Python environment")
    p.set_defaults(func=run)


def run(args) -> int:
    from cpudoctor.capture import CaptureError, capture

    name = str(args.output).lower()
    if not name.endswith((".tar.gz", ".tgz")):
        # The file is always a gzip tarball: a .zip or .tar name would mislead whoever unpacks it.
        raise CliError(f"-o {args.output}: the capture is a gzip tarball; give a name ending in .tar.gz or .tgz")
    root = root_arg(args.root)
    environment = None
    if is_live_root(root) and not args.no_environment:
        from cpudoctor.pipeline import chosen_source
        from cpudoctor.probes.software.envs import EnvError

        try:
            environment = chosen_source(args.python)
        except EnvError as exc:
            raise CliError(str(exc)) from None
    elif args.python:
        raise CliError("--python describes an environment on this machine; a capture of another tree (--root) "
                       "carries no environment")
    try:
        result = capture(args.output, root=root, force=args.force, environment=environment)
    except CaptureError as exc:
        raise CliError(str(exc), code=exc.code) from None
    print(result.summary())
    return 0
