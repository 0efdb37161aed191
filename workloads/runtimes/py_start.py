"""The Python workloads' threads: each function runs in a thread named after
it, its native id is printed (`NAME_tid N`), and every thread is joined."""
import threading


def run_threads(functions, args):
    threads = [threading.Thread(target=f, args=args, name=f.__name__) for f in functions]
    for t in threads:
        t.start()
    for t in threads:
        print(f"{t.name}_tid {t.native_id}", flush=True)
    for t in threads:
        t.join()
