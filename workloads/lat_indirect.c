/* lat_callees, with handle() calling store() through a function pointer:
 * the same calls and the same self-timing, but a callee that only the
 * samples of a recording can show.
 *
 * usage: lat_indirect [CALLS]
 */
#define STORE_BY_POINTER
#include "lat_callees.c"
