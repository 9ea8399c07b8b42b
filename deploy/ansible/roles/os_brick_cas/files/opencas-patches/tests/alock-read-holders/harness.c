/* Drive ocf_alock_trylock_entry_rd() to the read-holder limit. */
#include "utils/utils_alock.c"
#include <stdio.h>

int main(void)
{
	struct ocf_alock alock = {0};
	env_atomic8 access[1];
	unsigned int readers = 0;

	env_atomic8_set(&access[0], 0);
	alock.access = access;
	while (readers < 400 && ocf_alock_trylock_entry_rd(&alock, 0))
		readers++;
	printf("readers %u value %u write-locked %d\n", readers,
	       (unsigned)env_atomic8_read(&access[0]),
	       env_atomic8_read(&access[0]) == OCF_CACHE_LINE_ACCESS_WR);
	return env_atomic8_read(&access[0]) == OCF_CACHE_LINE_ACCESS_WR;
}
