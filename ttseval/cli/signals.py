"""SIGTERM: the command stops in order (its temporary Prefect server and Dask cluster closed by their context
managers), bounded by a watchdog that stops every process the command started when the orderly stop takes too
long, also while Prefect's own handler holds the signal inside a flow run."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

# How long SIGTERM's orderly stop may take before the command stops its own processes and exits. Below the
# grace a batch system gives before SIGKILL (Slurm's KillWait and Kubernetes' terminationGracePeriodSeconds are
# both 30 s by default), so the command, not SIGKILL, decides what is left behind.
SIGTERM_GRACE_S = 25.0


# Sent to the main thread so that it runs a pending SIGTERM (or SIGINT) handler at once; its own handler does
# nothing. SIGURG: ignored by default and used by nothing in this process.
NUDGE = signal.SIGURG


def handle_sigterm() -> None:
    """Install exit_on_sigterm, and make sure it runs promptly whichever thread the kernel hands SIGTERM to.

    Why: the kernel delivers a process-directed signal to any thread that does not block it. CPython's C-level
    handler only flags it; the Python handler waits until the main thread next runs bytecode, so a main thread
    blocked in a long wait (a sleep, a lock, a socket) would neither start the orderly stop nor arm the watchdog
    (a second SIGTERM inside a flow run's cleanup was seen to be ignored this way). The wakeup fd receives a byte
    for each signal on any thread; a watcher thread reads them and sends NUDGE to the main thread, whose blocking
    call then returns EINTR and runs every pending handler first (PEP 475). Call from the main thread."""
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    signal.signal(NUDGE, _do_nothing)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    if previous != -1:  # someone else reads the wakeup fd: leave it theirs, the handler still runs, only later
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return
    threading.Thread(target=_nudge_main, args=(read_fd,), name="ttseval-signal-nudge", daemon=True).start()


def _do_nothing(signum: int, frame: object) -> None:
    """NUDGE's handler: being delivered to the main thread is the whole effect."""


def _nudge_main(read_fd: int) -> None:
    main = threading.main_thread().ident
    assert main is not None
    wanted = {int(signal.SIGTERM), int(signal.SIGINT)}
    while data := os.read(read_fd, 64):
        if wanted.intersection(data):
            with contextlib.suppress(OSError):  # the main thread has already ended
                signal.pthread_kill(main, NUDGE)


def exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds the stack, so the temporary Prefect server and the Dask cluster are stopped by their
    # context managers instead of being left behind; Prefect marks the flow run Crashed and calls this after.
    # A watchdog bounds that unwinding: on a loaded machine closing a LocalCluster's workers was seen to take over
    # 60 s. After SIGTERM_GRACE_S (or at a second SIGTERM) it terminates every process the command started and
    # exits.
    if _watchdog["redelivered"]:  # Prefect's bridge armed the watchdog and hands the signal back as it unwinds
        _watchdog["redelivered"] = False
    else:
        _arm_watchdog(signum)
    raise SystemExit(128 + signum)


_watchdog = {"armed": False, "redelivered": False}


def _arm_watchdog(signum: int) -> None:
    """The first SIGTERM starts the grace timer; a second one stops everything at once."""
    if _watchdog["armed"]:
        _stop_now(signum)
    _watchdog["armed"] = True
    threading.Thread(target=_stop_after_grace, args=(signum,), name="ttseval-sigterm-grace", daemon=True).start()


def bridge_prefect_sigterm() -> None:
    """Make a SIGTERM that lands while a flow runs arm the watchdog too (idempotent; called once Prefect is in use).

    Why: while a flow runs, Prefect's engine swaps its own SIGTERM handler in for ours (it raises TerminationSignal,
    so the run is marked Crashed) and hands the signal back to ours only once that exception has unwound the flow.
    Without this, an unwinding that hangs (closing a LocalCluster under load) is never bounded: a `ttseval nightly`
    stays alive minutes after SIGTERM, and a second SIGTERM only raises TerminationSignal again. Prefect looks its
    handler up by module name each time a flow starts, so wrapping that name is enough; its own behaviour is
    unchanged."""
    from prefect.utilities import engine

    prefect_handler = engine._prefect_sigterm_handler
    if getattr(prefect_handler, "ttseval_watchdog", False):
        return

    # Prefect's signature, parameter name included: it raises TerminationSignal
    def handler(sig_num: int, *args: object) -> NoReturn:
        _arm_watchdog(sig_num)
        _watchdog["redelivered"] = True  # Prefect re-sends this signal to our handler after the flow unwinds
        prefect_handler(sig_num, *args)

    handler.ttseval_watchdog = True  # type: ignore[attr-defined]
    engine._prefect_sigterm_handler = handler


def _stop_after_grace(signum: int) -> None:
    import time

    time.sleep(SIGTERM_GRACE_S)
    print(
        f"ttseval: the orderly stop took over {SIGTERM_GRACE_S:.0f} s; stopping the processes this command started",
        file=sys.stderr,
    )
    _stop_now(signum)


def _stop_now(signum: int) -> None:
    import psutil

    family = psutil.Process().children(recursive=True)
    for p in family:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(family, timeout=5)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    os._exit(128 + signum)
