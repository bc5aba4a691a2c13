"""Counts the HTTP requests a process sends through httpx (Prefect's client), for benchmarks/bench_scale.py: on its
PYTHONPATH, every Python process of a run (the command, its Dask workers) loads this at start when
TTSEVAL_BENCH_REQUESTS_DIR is set, and keeps its count in <dir>/<pid>, rewritten every 50 requests and at exit."""

import os

_DIR = os.environ.get("TTSEVAL_BENCH_REQUESTS_DIR")

if _DIR:
    import atexit

    import httpx

    _count = [0]

    def _save() -> None:
        with open(os.path.join(_DIR, str(os.getpid())), "w") as f:
            f.write(str(_count[0]))

    def _counted(send):  # type: ignore[no-untyped-def]
        def wrapper(self, request, *args, **kwargs):  # type: ignore[no-untyped-def]
            _count[0] += 1
            if _count[0] % 50 == 0:
                _save()
            return send(self, request, *args, **kwargs)

        return wrapper

    httpx.Client.send = _counted(httpx.Client.send)  # type: ignore[method-assign]
    httpx.AsyncClient.send = _counted(httpx.AsyncClient.send)  # type: ignore[method-assign]
    atexit.register(_save)
