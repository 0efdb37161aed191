// Functions as C++ names them: two overloads of ns::Cls::work, one called
// CALLS times and one never, and a template, ns::twice, instantiated for
// int and long and each called CALLS times. A probe of "ns::Cls::work"
// must find both overloads and count CALLS visits; of "ns::twice", both
// instantiations and 2 × CALLS.
// overloads CALLS: prints "calls=CALLS sum=…".
#include <cstdio>
#include <cstdlib>

namespace ns {
struct Cls {
    long acc = 0;
    __attribute__((noinline)) void work(int x);
    __attribute__((noinline, used)) double work(double x) const;
};

void Cls::work(int x) { acc += x; asm volatile("" ::: "memory"); }
double Cls::work(double x) const { return x * 2 + acc; }

template <typename T> __attribute__((noinline)) T twice(T x)
{
    asm volatile("" ::: "memory");
    return x + x;
}
} // namespace ns

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 1000;
    ns::Cls c;
    long sum = 0;
    for (long i = 0; i < calls; i++) {
        c.work(static_cast<int>(i & 7));
        sum += ns::twice<int>(static_cast<int>(i & 3)) + ns::twice<long>(i & 5);
    }
    printf("calls=%ld sum=%ld\n", calls, sum + c.acc);
    return 0;
}
