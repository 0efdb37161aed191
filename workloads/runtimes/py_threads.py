"""Ground truth for the interpreter frames of holdup: a thread that spins in
pure Python (`hot`, called by `spinner`) and a thread that sleeps in short
naps (`napper`), for SECONDS seconds. Prints each thread's native id
(`spinner_tid N`, `napper_tid N`)."""
import sys
import time

from py_start import run_threads

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0


def hot(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def spinner(end):
    while time.monotonic() < end:
        hot(10000)


def napper(end):
    while time.monotonic() < end:
        time.sleep(0.05)


def main():
    run_threads((spinner, napper), (time.monotonic() + SECONDS,))


main()
