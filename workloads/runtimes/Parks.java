// Two kinds of LockSupport.park whose truth is known by construction:
// - contention on a java.util.concurrent lock (Work.contend): the thread
//   "holder" keeps a ReentrantLock for HOLD_MS at a time and then works
//   outside it; the thread "waiter" takes the same lock between short
//   bursts of its own CPU work, so nearly all its waiting is for the lock
//   the holder keeps;
// - idle pool threads: a ThreadPoolExecutor's IDLE workers ("idle-1", …)
//   run a warm-up of small tasks, then get no task for the rest of the run:
//   they wait in ThreadPoolExecutor.getTask, idle.
// Both paths are warmed up first, so that the JIT compiles them and a perf
// map names them (run with -XX:+PreserveFramePointer
// -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit). A perf map names
// compiled methods, not what they inlined: ReentrantLock.lock and
// ThreadPoolExecutor.getTask show only when compiled out of line
// (-XX:CompileCommand=dontinline,CLASS::METHOD makes sure of it).
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
    static final int IDLE = 2;
    static final int WARM_UP = 20_000;

    /** Runs `body` holding the lock. */
    static void locked(Runnable body) {
        lock.lock();
        try {
            body.run();
        } finally {
            lock.unlock();
        }
    }

    /** Contended lock() calls, so that the JIT compiles the AQS path. */
    static void warmLock() throws InterruptedException {
        Runnable contend = () -> {
            for (int i = 0; i < WARM_UP; i++) {
                locked(() -> Work.sink++);
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

        Work.contend(seconds, Parks::locked);
        pool.shutdown();
    }
}
