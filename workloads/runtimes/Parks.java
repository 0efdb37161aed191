// Two kinds of LockSupport.park whose truth is known by construction:
// - contention on a java.util.concurrent lock: the thread "holder" keeps a
//   ReentrantLock for HOLD_MS at a time and then works outside it; the
//   thread "waiter" takes the same lock between short bursts of its own
//   CPU work, so nearly all its waiting is for the lock the holder keeps;
// - idle pool threads: a ThreadPoolExecutor's IDLE workers ("idle-1", …)
//   run a warm-up of small tasks, then get no task for the rest of the run:
//   they wait in ThreadPoolExecutor.getTask, idle.
// Both paths are warmed up first, so that the JIT compiles them and a perf
// map names them (run with -XX:+PreserveFramePointer
// -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit).
// java Parks SECONDS: prints "waiter_tid N", "holder_tid N", "idle_tid N"
// (one line per idle worker), and "waited_s X", the wall time the waiter
// spent taking the lock after the warm-up.
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

public class Parks {
    static final ReentrantLock lock = new ReentrantLock();
    static final long HOLD_MS = 20;
    static final int IDLE = 2;
    static final int WARM_UP = 20_000;

    /** Contended lock() calls, so that the JIT compiles the AQS path. */
    static void warmLock() throws InterruptedException {
        Runnable contend = () -> {
            for (int i = 0; i < WARM_UP; i++) {
                lock.lock();
                try {
                    Work.sink++;
                } finally {
                    lock.unlock();
                }
            }
        };
        Thread a = new Thread(contend);
        Thread b = new Thread(contend);
        a.start();
        b.start();
        a.join();
        b.join();
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        AtomicInteger named = new AtomicInteger();
        ThreadPoolExecutor pool = new ThreadPoolExecutor(IDLE, IDLE, 1, TimeUnit.HOURS,
                new LinkedBlockingQueue<>(),
                r -> new Thread(r, "idle-" + named.incrementAndGet()));
        // Many small tasks: getTask and the queue's take are compiled.
        CountDownLatch warmed = new CountDownLatch(WARM_UP);
        for (int i = 0; i < WARM_UP; i++) {
            pool.execute(warmed::countDown);
        }
        warmed.await();
        CountDownLatch told = new CountDownLatch(IDLE);
        for (int i = 0; i < IDLE; i++) {
            pool.execute(() -> {
                Work.printTid("idle_tid");
                told.countDown();
                // Both workers stay busy until each has said its id.
                try {
                    told.await();
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            });
        }
        told.await();
        warmLock();

        long end = System.nanoTime() + (long) (seconds * 1e9);
        long[] waited = new long[1];
        Thread holder = new Thread(() -> {
            Work.printTid("holder_tid");
            while (System.nanoTime() < end) {
                lock.lock();
                try {
                    Work.spin(HOLD_MS * 1_000_000);
                } finally {
                    lock.unlock();
                }
                // Outside the lock long enough for the waiter to get in.
                Work.spin(2_000_000);
            }
        }, "holder");
        Thread waiter = new Thread(() -> {
            Work.printTid("waiter_tid");
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                lock.lock();
                try {
                    waited[0] += System.nanoTime() - t0;
                    Work.sink++;
                } finally {
                    lock.unlock();
                }
                Work.spin(500_000);
            }
        }, "waiter");
        holder.start();
        Thread.sleep(50);
        waiter.start();
        holder.join();
        waiter.join();
        pool.shutdown();
        System.out.println("waited_s " + waited[0] / 1e9);
    }
}
