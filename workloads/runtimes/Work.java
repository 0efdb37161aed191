// What the runtimes' Java workloads share: CPU work of a known length, the
// kernel's id of a thread (for the tests to find it in a recording), and
// two threads contending for one lock.
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Consumer;

final class Work {
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

    static final long HOLD_MS = 20;

    /**
     * For `seconds`, the thread "holder" keeps a lock for HOLD_MS at a time
     * and then works outside it; the thread "waiter" takes the same lock
     * between short bursts of its own CPU work, so nearly all its waiting
     * is for the lock the holder keeps. `locked.accept(body)` runs `body`
     * holding the lock. Prints "holder_tid N", "waiter_tid N" and
     * "waited_s X", the wall time the waiter spent taking the lock.
     */
    static void contend(double seconds, Consumer<Runnable> locked) throws InterruptedException {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long[] waited = new long[1];
        Thread holder = new Thread(() -> {
            printTid("holder_tid");
            while (System.nanoTime() < end) {
                locked.accept(() -> spin(HOLD_MS * 1_000_000));
                // Outside the lock long enough for the waiter to get in.
                spin(2_000_000);
            }
        }, "holder");
        Thread waiter = new Thread(() -> {
            printTid("waiter_tid");
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                locked.accept(() -> {
                    waited[0] += System.nanoTime() - t0;
                    sink++;
                });
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
