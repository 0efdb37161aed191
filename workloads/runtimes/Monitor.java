// Monitor contention whose truth is known by construction (Work.contend):
// the thread "holder" keeps a monitor (synchronized) for HOLD_MS at a time
// and then works outside it; the thread "waiter" enters the same monitor
// between short bursts of its own CPU work, so nearly all its waiting is
// for the monitor the holder keeps.
// java Monitor SECONDS: prints "waiter_tid N", "holder_tid N" (the threads'
// kernel ids) and "waited_s X", the wall time the waiter spent entering the
// monitor.
public class Monitor {
    static final Object lock = new Object();

    public static void main(String[] args) throws Exception {
        Work.contend(Double.parseDouble(args[0]), body -> {
            synchronized (lock) {
                body.run();
            }
        });
    }
}
