// A hot method the JIT compiles, timed by the thread that runs it.
// java Hot SECONDS [jcmd]: spins in spinHot for SECONDS, then prints
// "hot_cpu_s X", the CPU time this thread spent in the loop, and its pid
// ("pid N"). With "jcmd",
// it asks `jcmd PID Compiler.perfmap` to write its perf map halfway (a map
// written while the program runs, not at its exit).
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class Hot {
    static volatile long sink;

    static long spinHot(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) {
            x = x * 31 + (i ^ (x >>> 7));
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        boolean jcmd = args.length > 1 && args[1].equals("jcmd");
        ThreadMXBean bean = ManagementFactory.getThreadMXBean();
        long cpu0 = bean.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        boolean asked = false;
        long hot = 0;
        while (System.nanoTime() < end) {
            sink += spinHot(100_000);
            if (jcmd && !asked && System.nanoTime() - start > (end - start) / 2) {
                asked = true;
                // Not timed: jcmd is another process, this thread waits.
                long before = bean.getCurrentThreadCpuTime();
                String pid = Long.toString(ProcessHandle.current().pid());
                new ProcessBuilder("jcmd", pid, "Compiler.perfmap").inheritIO().start().waitFor();
                hot -= bean.getCurrentThreadCpuTime() - before;
            }
        }
        hot += bean.getCurrentThreadCpuTime() - cpu0;
        System.out.println("hot_cpu_s " + hot / 1e9);
        System.out.println("pid " + ProcessHandle.current().pid());
    }
}
