"""CHILDREN forked interpreters, all alive until SECONDS after the start (each
sleeping in `hold`), then reaped; one more child, forked 0.3 s after the
start (the profiler knows the interpreter by then), runs py_reused_code's
ROUNDS functions of MS milliseconds, whose code objects take each other's
memory. Prints the time the whole took, and what the rounds print.
usage: py_forks.py CHILDREN SECONDS ROUNDS MS"""
import os
import sys
import time

import py_reused_code


def hold(end):
    time.sleep(max(0.0, end - time.monotonic()))


def child(work, *args):
    """Run work(*args) in a forked child; its pid."""
    pid = os.fork()
    if pid == 0:
        work(*args)
        sys.stdout.flush()
        os._exit(0)
    return pid


def main(children, seconds, rounds, ms):
    start = time.monotonic()
    end = start + seconds
    kids = [child(hold, end) for _ in range(children)]
    time.sleep(max(0.0, start + 0.3 - time.monotonic()))
    kids.append(child(py_reused_code.main, rounds, ms))
    for pid in kids:
        os.waitpid(pid, 0)
    print("workload_s", time.monotonic() - start, flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
