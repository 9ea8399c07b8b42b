/* Link stubs: the harness never allocates waiters or logs. */
#include <stdlib.h>
void *env_allocator_create(void) { return NULL; }
void env_allocator_del(void *a, void *o) { (void)a; (void)o; }
void env_allocator_destroy(void *a) { (void)a; }
void *env_allocator_new(void *a) { (void)a; return NULL; }
void env_stack_trace(void) { }
void *ocf_cache_get_ctx(void *c) { (void)c; return NULL; }
const char *ocf_cache_get_name(void *c) { (void)c; return "x"; }
int ocf_log_raw(void *c, int l, const char *f, ...) { (void)c; (void)l; (void)f; return 0; }
