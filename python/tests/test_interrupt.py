"""Ctrl-C cancels a statement that is running in datafusion_lance.sql."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

# What both children start with: a context, and a SIGINT handler that
# raises KeyboardInterrupt only once the statement runs (signals before it
# are ignored: only one that reaches the running statement counts).
PREAMBLE = textwrap.dedent(
    """
    import signal, sys, time
    import datafusion, datafusion_lance, pyarrow as pa

    ctx = datafusion.SessionContext()
    datafusion_lance.register(ctx)
    running = False

    def interrupt(signum, frame):
        if running:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    """
)

CHILD = PREAMBLE + textwrap.dedent(
    """
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


def interrupted(source: str) -> tuple[str, int]:
    """Runs `source` in a child Python, sends it SIGINT once it prints
    "ready" until it ends; its output after that line and its exit code."""
    child = subprocess.Popen(
        [sys.executable, "-c", source], stdout=subprocess.PIPE, text=True
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
    return out, child.returncode


def test_ctrl_c_cancels_a_running_statement():
    out, code = interrupted(CHILD)
    # The statement counts 1e11 rows (hours): it ended because it was cancelled.
    assert out.startswith("cancelled after"), out
    assert code == 0


STREAMING = PREAMBLE + textwrap.dedent(
    """
    # The first row comes at once; the next one after counting 1e11 rows.
    result = datafusion_lance.sql(
        ctx, "SELECT 1 AS n UNION ALL SELECT count(*) FROM generate_series(1, 100000000000)"
    )
    reader = pa.RecordBatchReader.from_stream(result)
    print("ready", flush=True)
    try:
        running = True
        while True:
            reader.read_next_batch()
    except StopIteration:
        print("finished", flush=True)
    except Exception as e:
        running = False
        print(f"stopped: {e}", flush=True)
    # The process's engine serves on.
    print(pa.table(datafusion_lance.sql(ctx, "SELECT 41 + 1 AS n")).to_pylist(), flush=True)
    """
)


def test_ctrl_c_while_rows_stream_cancels_the_statement():
    out, _ = interrupted(STREAMING)
    first, after = out.splitlines()[:2]
    assert first.startswith("stopped: "), out
    assert "interrupted (KeyboardInterrupt): the statement was cancelled" in first, out
    assert after == "[{'n': 42}]", out
