/* comm_none.c - the communicator when the library is built without NVSHMEM: every
 * call says so. */
#include "comm_internal.h"

#define NO_NVSHMEM(fn) \
  return ws_fail(WS_ERR_UNSUPPORTED, fn ": warpspec was built without NVSHMEM (configure with -DWS_NVSHMEM_HOME=...)")

ws_status ws_comm_available(void) { NO_NVSHMEM("ws_comm_available"); }
ws_status ws_comm_get_unique_id(ws_comm_id *id) { (void)id; NO_NVSHMEM("ws_comm_get_unique_id"); }
ws_status ws_comm_init(ws_comm **c, int r, int n, const ws_comm_id *id) { (void)c; (void)r; (void)n; (void)id; NO_NVSHMEM("ws_comm_init"); }
ws_status ws_comm_alloc(ws_comm *c, size_t b, void **p) { (void)c; (void)b; (void)p; NO_NVSHMEM("ws_comm_alloc"); }
ws_status ws_comm_free(ws_comm *c, void *p) { (void)c; (void)p; NO_NVSHMEM("ws_comm_free"); }
ws_status ws_comm_peer_ptr(const ws_comm *c, const void *p, int peer, void **o) { (void)c; (void)p; (void)peer; (void)o; NO_NVSHMEM("ws_comm_peer_ptr"); }
ws_status ws_comm_barrier(ws_comm *c, cudaStream_t s) { (void)c; (void)s; NO_NVSHMEM("ws_comm_barrier"); }
ws_status ws_comm_destroy(ws_comm *c) { (void)c; NO_NVSHMEM("ws_comm_destroy"); }
int ws_comm_is_symmetric(const ws_comm *c, const void *p, size_t n) { (void)c; (void)p; (void)n; return 0; }
/* The hooks' heap: never reached, ws_comm_init fails first; sendrecv_state.c links. */
ws_status ws_comm_sym_alloc(ws_comm *c, size_t b, void **p, const char *w) { (void)c; (void)b; (void)w; *p = NULL; NO_NVSHMEM("ws_comm_sym_alloc"); }
void ws_comm_sym_free(ws_comm *c, void *p) { (void)c; (void)p; }
void *ws_comm_peer_addr(const ws_comm *c, const void *p, int peer) { (void)c; (void)p; (void)peer; return NULL; }
