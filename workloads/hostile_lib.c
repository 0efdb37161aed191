/* The library hostile_maps.c maps: computation only, with no data, no
 * constants and no calls, so that it keeps running from its code pages
 * once everything after them in the file is cut off. */

/* What the program runs before its attack. */
__attribute__((noinline)) unsigned long lib_work(unsigned long n)
{
	volatile unsigned long x = 1;

	for (unsigned long i = 0; i < n; i++)
		x = x * 3 + i;
	return x;
}

#define STEP(k) x = x * (k) + (x >> 3);
#define STEPS8(k) STEP(k) STEP(k + 1) STEP(k + 2) STEP(k + 3) STEP(k + 4) STEP(k + 5) STEP(k + 6) STEP(k + 7)

/* What it runs after: code at many addresses the unwinder has not seen. */
__attribute__((noinline)) unsigned long lib_work_late(unsigned long n)
{
	volatile unsigned long x = 1;

	for (unsigned long i = 0; i < n; i++) {
		STEPS8(3) STEPS8(11) STEPS8(19) STEPS8(27) STEPS8(35) STEPS8(43) STEPS8(51) STEPS8(59)
	}
	return x;
}
