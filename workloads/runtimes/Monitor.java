// Monitor contention whose truth is known by construction: the thread
// "holder" keeps a monitor (synchronized) for HOLD_MS at a time and then
// works outside it; the thread "waiter" enters the same monitor between
// short bursts of its own CPU work, so nearly all its waiting is for the
// monitor the holder keeps.
// java Monitor SECONDS: prints "waiter_tid N", "holder_tid N" (the threads'
// kernel ids) and "waited_s X", the wall time the waiter spent entering the
// monitor.
public class Monitor {
    static final Object lock = new Object();
    static final long HOLD_MS = 20;

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        long[] waited = new long[1];
        Thread holder = new Thread(() -> {
            Work.printTid("holder_tid");
            while (System.nanoTime() < end) {
                synchronized (lock) {
                    Work.spin(HOLD_MS * 1_000_000);
                }
                // Outside the monitor long enough for the waiter to get in.
                Work.spin(2_000_000);
            }
        }, "holder");
        Thread waiter = new Thread(() -> {
            Work.printTid("waiter_tid");
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                synchronized (lock) {
                    waited[0] += System.nanoTime() - t0;
                    Work.sink++;
                }
                Work.spin(500_000);
            }
        }, "waiter");
        holder.start();
        Thread.sleep(50);
        waiter.start();
        holder.join();
        waiter.join();
        System.out.println("waited_s " + waited[0] / 1e9);
    }
}
