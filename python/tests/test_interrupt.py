"""Ctrl-C cancels a statement that is running in datafusion_lance.sql."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import datafusion, datafusion_lance

    ctx = datafusion.SessionContext()
    datafusion_lance.register(ctx)
    running = False

    def interrupt(signum, frame):
        # Signals before the statement runs are ignored: only one that
        # reaches the running statement counts.
        if running:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    print("ready", flush=True)
    started = time.monotonic()
    try:
        running = True
        datafusion_lance.sql(ctx, "SELECT count(*) FROM generate_series(1, 100000000000)")
        print("finished", flush=True)
    except KeyboardInterrupt:
        print(f"cancelled after {time.monotonic() - started:.1f}s", flush=True)
    """
)


def test_ctrl_c_cancels_a_running_statement():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        # Interrupt until the child answers (bounded: 100 tries, 20 s).
        for _ in range(100):
            if child.poll() is not None:
                break
            child.send_signal(signal.SIGINT)
            time.sleep(0.2)
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
    # The statement counts 1e11 rows (hours): it ended because it was cancelled.
    assert out.startswith("cancelled after"), out
    assert child.returncode == 0
