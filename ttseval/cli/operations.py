"""Operations: stack (the local Prefect + Dask + S3 stack), server (the Prefect server commands share), series (the
nightly series the settings file declares, registered as deployments), serve (a store's HTML reports over HTTP)."""

from __future__ import annotations

import argparse

from ttseval.cli.common import Subcommands, add_store


def cmd_stack(args: argparse.Namespace) -> int:
    """Start, stop or describe the local stack: Prefect server + worker, Dask cluster, S3 server, on 127.0.0.1."""
    import json
    import os
    from pathlib import Path

    from ttseval.infra.stack import stack_down, stack_status, stack_up

    folder = Path(args.folder)
    if args.action == "up":
        info = stack_up(folder, gpu=args.gpu, bind=args.bind)
        print(info.describe())
        if args.deploy:
            from unittest import mock

            from ttseval.core.config import load_settings
            from ttseval.deployments.register import register, register_series
            from ttseval.infra.stack import auth_env

            # the adhoc form lists the stack store's choices; an API beyond loopback wants its password
            with mock.patch.dict(os.environ, info.aws_env() | auth_env(info.auth_string)):
                print("\n".join(register(info.api_url, info.pool, store=info.store_uri)))
                settings = load_settings(store=info.store_uri)
                if settings.series:  # the series the settings file declares, each its own scheduled deployment
                    print("\n".join(register_series(info.api_url, settings, info.pool)))
    elif args.action == "down":
        stack_down(folder)
        print(f"stack in {folder} stopped")
    elif args.action == "env":
        import shlex

        from ttseval.core.errors import NotFoundError
        from ttseval.infra.stack import stack_info

        running = stack_info(folder)
        if running is None:
            raise NotFoundError(f"no stack is running in {folder}; start one with `ttseval stack up`")
        # what a client shell exports to use the stack: `eval "$(ttseval stack env)"`
        print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in running.env().items()))
    else:
        print(json.dumps(stack_status(folder), indent=2))
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    """Describe or stop the Prefect server that commands with no PREFECT_API_URL share
    (ttseval/infra/prefect_server.py)."""
    import json

    from ttseval.infra.prefect_server import server_folder, server_info, stop_server

    folder = server_folder()
    if args.action == "stop":
        print(
            {
                "stopped": f"the shared Prefect server in {folder} stopped",
                "none": f"no shared Prefect server is running in {folder}",
                "stopping": f"the shared Prefect server in {folder} stops once the commands using it end; no new "
                "command uses it",
            }[stop_server(folder)]
        )
    else:
        info = server_info(folder)
        print(json.dumps({"folder": str(folder), "running": info is not None, **(info or {})}, indent=2))
    return 0


def cmd_series(args: argparse.Namespace) -> int:
    """List the nightly series the settings file declares, or register each as its own deployment of the nightly
    flow on a Prefect server (ttseval.deployments.register.register_series)."""
    import os
    import sys

    from ttseval.cli.common import EXIT_FAILED
    from ttseval.core.config import load_settings, settings_file
    from ttseval.core.errors import ConfigError

    settings, path = load_settings(), settings_file()
    if args.action == "list":
        if not settings.series:
            print(f"no nightly series declared in {path or 'any settings file (TTSEVAL_CONFIG, ./ttseval.toml)'}")
        for name, declared in settings.series.items():
            alerts = declared.alert_blocks if declared.alert_blocks is not None else settings.alert_blocks
            print(
                f"{name}: {declared.dataset}; systems {', '.join(declared.systems)}; schedule '{declared.schedule}' "
                f"({declared.timezone}); alerts {', '.join(alerts) or 'none'}"
            )
        return 0
    api_url = args.api_url or os.environ.get("PREFECT_API_URL")
    if not api_url:
        raise ConfigError(
            "series register: which Prefect server? give --api-url URL (`ttseval stack up` prints the stack's) or "
            "set PREFECT_API_URL"
        )
    from ttseval.deployments.register import RegisterError, register_series

    try:
        created = register_series(api_url, settings, args.pool)
    except RegisterError as e:
        print(f"ttseval: error: registration failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    for name in created:
        declared = settings.series[name.split("/", 1)[1]]
        print(f"{name}: '{declared.schedule}' ({declared.timezone})")
    print(
        f"each runs on the work pool {args.pool} with TTSEVAL_CONFIG={path}: its worker must see that file at that "
        "path (a worker on another machine: the same path there, or TTSEVAL_CONFIG in its own environment)"
    )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """A store's HTML reports over HTTP, read-only (ttseval/infra/serve.py)."""
    from ttseval.core.config import load_settings
    from ttseval.core.store import open_store
    from ttseval.infra.serve import make_server

    settings = load_settings(store=args.store)
    open_store(settings).require()  # a mistyped --store is said here, not as an empty page
    server = make_server(settings.store, args.host, args.port)
    # the address bound (port 0 resolved): what server_address holds once bound, typed there as if bytes could be
    host, port = server.socket.getsockname()[:2]
    print(f"serving the reports of {settings.store} at http://{host}:{port}/ (read-only; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


# -- parsers ------------------------------------------------------------------------------------------------------


def add_stack(sub: Subcommands) -> None:
    stk = sub.add_parser("stack", help="local Prefect server + worker, Dask cluster and S3 server on 127.0.0.1")
    stk.add_argument(
        "action",
        choices=["up", "down", "status", "env"],
        help='env prints the exports a client shell needs to use the running stack: eval "$(ttseval stack env)"',
    )
    stk.add_argument("--folder", default=".ttseval-stack", help="PIDs, logs and state of the stack")
    stk.add_argument(
        "--gpu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="give one Dask worker the GPU resource (default: when nvidia-smi finds a GPU)",
    )
    stk.add_argument(
        "--bind",
        default="127.0.0.1",
        help="the address the Prefect API and UI and the Dask scheduler listen on (default 127.0.0.1); any other "
        "(0.0.0.0 for every interface) makes the API require a user:password and Dask require TLS with a "
        "certificate, both made at `stack up` (`ttseval stack env` prints what a client exports); the Dask workers "
        "and the S3 server stay on 127.0.0.1",
    )
    stk.add_argument(
        "--deploy",
        action="store_true",
        help="also register deployments/prefect.yaml and every nightly series the settings file declares",
    )
    stk.set_defaults(func=cmd_stack)


def add_server(sub: Subcommands) -> None:
    srv = sub.add_parser(
        "server",
        help="the Prefect server commands share when PREFECT_API_URL is not set: status "
        "or stop it now (it stops by itself once unused for prefect_server_keep_s)",
    )
    srv.add_argument("action", choices=["status", "stop"])
    srv.set_defaults(func=cmd_server)


def add_series(sub: Subcommands) -> None:
    from ttseval.deployments.register import DEFAULT_POOL

    se = sub.add_parser(
        "series",
        help="the nightly series the settings file declares ([series.NAME]): list them, or register each as its own "
        "scheduled deployment (nightly/NAME) on a Prefect server",
    )
    se.add_argument("action", choices=["list", "register"])
    se.add_argument("--api-url", default=None, help="the Prefect server's API (default: PREFECT_API_URL)")
    se.add_argument("--pool", default=DEFAULT_POOL, help=f"the work pool its nights run on (default {DEFAULT_POOL})")
    se.set_defaults(func=cmd_series)


def add_serve(sub: Subcommands) -> None:
    sv = sub.add_parser("serve", help="serve a store's HTML run reports and their audio over HTTP, read-only")
    add_store(sv)
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    sv.add_argument("--port", type=int, default=8765, help="port (0: any free one)")
    sv.set_defaults(func=cmd_serve)
