"""daphne under cProfile on every thread, for bench/_profile_turn.py (not a bench of its own).

Each thread (the event loop's and every worker thread) gets its own profiler
timed with that thread's CPU clock (`time.thread_time`), so waiting costs
nothing. SIGUSR1 starts the event loop's profiler (worker threads profile from
their start); SIGUSR2 writes every thread's stats, merged, to PROFILE_OUT.

    PROFILE_OUT=off.prof python bench/_profiled_daphne.py -b 127.0.0.1 -p 8001 config.asgi:application
"""
import cProfile
import os
import pstats
import signal
import sys
import threading
import time

profiles = []
_thread_run = threading.Thread.run


def _profiled_run(self):
    profile = cProfile.Profile(time.thread_time)
    profiles.append(profile)
    profile.enable()
    try:
        _thread_run(self)
    finally:
        profile.disable()


threading.Thread.run = _profiled_run
main = cProfile.Profile(time.thread_time)
profiles.append(main)


def _start(*_):
    main.enable()


def _dump(*_):
    main.disable()
    stats = None
    for profile in profiles:
        try:
            profile.create_stats()
        except Exception:  # a profiler that never ran
            continue
        stats = pstats.Stats(profile) if stats is None else stats.add(profile)
    stats.dump_stats(os.environ["PROFILE_OUT"])


signal.signal(signal.SIGUSR1, _start)
signal.signal(signal.SIGUSR2, _dump)

if __name__ == "__main__":
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(sys.argv[1:])
