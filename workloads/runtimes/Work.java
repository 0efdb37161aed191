// What the runtimes' Java workloads share: CPU work of a known length, and
// the kernel's id of a thread (for the tests to find it in a recording).
import java.nio.file.Files;
import java.nio.file.Path;

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
}
