/* A seed for the ELF/DWARF fuzz target: a few functions, one inlined,
 * built without the C library so that the file stays small. */
static inline __attribute__((always_inline)) int twice(int x)
{
	return 2 * x;
}

__attribute__((noinline)) int leaf(int x)
{
	return twice(x) + 1;
}

__attribute__((noinline)) int middle(int x)
{
	return leaf(x) * 3;
}

volatile int sink;

void _start(void)
{
	sink = middle(sink);
	for (;;)
		;
}
