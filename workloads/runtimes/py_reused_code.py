"""Functions made at run time one after another (ROUNDS of them, `round_K`),
each spinning MS milliseconds and then dropped, so that the next one's code
object takes the memory of the one before (CPython reuses freed memory at
once): each must be named by its own name. Prints how many of them had an
address an earlier one had. usage: py_reused_code.py ROUNDS MS"""
import sys
import time

SOURCE = """
def round_{k}(end):
    x = 0
    while time.monotonic() < end:
        for i in range(500):
            x += i
    return x
"""


def main(rounds, ms):
    seen = set()
    reused = 0
    for k in range(rounds):
        names = {"time": time}
        exec(compile(SOURCE.format(k=k), "py_reused_gen.py", "exec"), names)
        f = names.pop(f"round_{k}")
        reused += id(f.__code__) in seen
        seen.add(id(f.__code__))
        f(time.monotonic() + ms / 1000)
        del f, names
    print("rounds", rounds)
    print("reused", reused, flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
