"""What the Procfile's `release` line runs after the migrations: nothing on a platform, a wait under honcho.

`honcho start` without process names runs every line of the Procfile, `release` too, and stops every
process once one has exited: the migrations' quick exit used to stop web, worker and beat seconds after
they started, without a word. honcho names each process it runs in `HONCHO_PROCESS_NAME`; under it
the release process says why it stays, and waits for the stop (Ctrl-C). A platform's release phase (a
buildpack deploy) has no such name, and the line ends with the migrations.
"""

from __future__ import annotations

import os
import signal

UNDER_HONCHO = (
    "release: migrations done; this process now waits for Ctrl-C, because honcho stops every process once one "
    "exits (`honcho start web worker beat` runs the service without it)"
)


def main() -> None:
    """Return at once, or under honcho print why and wait for SIGINT or SIGTERM."""
    if not os.environ.get("HONCHO_PROCESS_NAME"):
        return
    print(UNDER_HONCHO, flush=True)
    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    signal.sigwait(stops)


if __name__ == "__main__":
    main()
