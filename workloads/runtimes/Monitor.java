// Monitor contention whose truth is known by construction: the thread
// "holder" keeps a monitor (synchronized) for HOLD_MS at a time and then
// works outside it; the thread "waiter" enters the same monitor between
// short bursts of its own CPU work, so nearly all its waiting is for the
// monitor the holder keeps.
// java Monitor SECONDS: prints "waiter_tid N", "holder_tid N" (the threads'
// kernel ids) and "waited_s X", the wall time the waiter spent entering the
// monitor.
import java.nio.file.Files;
import java.nio.file.Path;

public class Monitor {
    static final Object lock = new Object();
    static final long HOLD_MS = 20;
    static volatile long sink;

    /** Burns CPU for about `nanos`. */
    static void spin(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < end) {
            x = x * 31 + 7;
        }
        sink += x;
    }

    /** Prints "KEY N", N the kernel's id of the calling thread. */
    static void printTid(String key) {
        try {
            Path self = Files.readSymbolicLink(Path.of("/proc/thread-self"));
            System.out.println(key + " " + self.getFileName());
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        long[] waited = new long[1];
        Thread holder = new Thread(() -> {
            printTid("holder_tid");
            while (System.nanoTime() < end) {
                synchronized (lock) {
                    spin(HOLD_MS * 1_000_000);
                }
                // Outside the monitor long enough for the waiter to get in.
                spin(2_000_000);
            }
        }, "holder");
        Thread waiter = new Thread(() -> {
            printTid("waiter_tid");
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                synchronized (lock) {
                    waited[0] += System.nanoTime() - t0;
                    sink++;
                }
                spin(500_000);
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
