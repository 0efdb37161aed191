"""Ground truth for the interpreter frames of holdup: a thread that spins in
pure Python (`hot`, called by `spinner`) and a thread that sleeps in short
naps (`napper`), for SECONDS seconds. Prints each thread's native id
(`spinner_tid N`, `napper_tid N`)."""
import sys
import threading
import time

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
    end = time.monotonic() + SECONDS
    threads = [threading.Thread(target=f, args=(end,), name=f.__name__) for f in (spinner, napper)]
    for t in threads:
        t.start()
    for t in threads:
        print(f"{t.name}_tid {t.native_id}", flush=True)
    for t in threads:
        t.join()


main()
