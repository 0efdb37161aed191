"""Ground truth for the Python wait semantics of holdup, in two phases of
SECONDS seconds each (default 1.5).

1. `holder` keeps a threading.Lock for 200 ms at a time (sleeping, so the
   GIL is free) and lets go of it for 5 ms; `contender` takes the same lock
   over and over (`with lock:`): its lock waits are contention, ended by
   `holder`. The main thread waits in `join()` meanwhile.
2. Two threads spin in pure Python (`spin_a`, `spin_b`): each one's waits
   are for the GIL. Each measures its own share of time waiting for it:
   wall time minus its CPU time minus its runqueue time (from
   /proc/thread-self/schedstat), over wall time.

Prints each thread's native id (`holder_tid N`, …, `main_tid N`) and each
spinner's measured GIL share (`spin_a_gil_share 0.47`)."""
import sys
import threading
import time

from py_start import run_threads

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5

lock = threading.Lock()
held = threading.Event()


def holder(end):
    while time.monotonic() < end:
        with lock:
            held.set()
            time.sleep(0.2)
        time.sleep(0.005)


def contender(end):
    held.wait()
    while time.monotonic() < end:
        with lock:
            pass


def schedstat():
    """This thread's time on a CPU and on a runqueue, in seconds."""
    with open("/proc/thread-self/schedstat") as f:
        run, runq, _ = map(int, f.read().split())
    return run / 1e9, runq / 1e9


shares = {}


def spin(end):
    wall0, (run0, runq0) = time.monotonic(), schedstat()
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x += i
    wall, (run, runq) = time.monotonic() - wall0, schedstat()
    shares[threading.current_thread().name] = (wall - (run - run0) - (runq - runq0)) / wall


def spin_a(end):
    spin(end)


def spin_b(end):
    spin(end)


def phase(functions):
    run_threads(functions, (time.monotonic() + SECONDS,))


def main():
    print(f"main_tid {threading.get_native_id()}", flush=True)
    phase((holder, contender))
    phase((spin_a, spin_b))
    for name, share in sorted(shares.items()):
        print(f"{name}_gil_share {share:.4f}", flush=True)


main()
