/* A fake librdmacm.so.1 for the CM zygote's tests (tests/agent/test_cm_zygote.py):
 * an event channel whose fd never has an event, and every other call failing with
 * ENOSYS.  A worker on it says hello and answers the ops that need no cm_id
 * (handles, events), so it lives until it is closed or killed, on a machine without
 * RDMA.  The symbols are those hil/agent/remote/librdmacm/cmabi.py types (SIGNATURES). */
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct rdma_event_channel { int fd; };  /* rdma/rdma_cma.h: the fd comes first */

struct rdma_event_channel *rdma_create_event_channel(void) {
    struct rdma_event_channel *ch = malloc(sizeof *ch);
    if (ch == NULL) return NULL;
    ch->fd = eventfd(0, EFD_CLOEXEC);
    return ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *ch) {
    close(ch->fd);
    free(ch);
}

#define FAIL(name) int name(void) { errno = ENOSYS; return -1; }
FAIL(rdma_create_id) FAIL(rdma_destroy_id) FAIL(rdma_bind_addr) FAIL(rdma_resolve_addr)
FAIL(rdma_resolve_route) FAIL(rdma_listen) FAIL(rdma_connect) FAIL(rdma_accept)
FAIL(rdma_reject) FAIL(rdma_disconnect) FAIL(rdma_create_qp) FAIL(rdma_destroy_qp)
FAIL(rdma_get_cm_event) FAIL(rdma_ack_cm_event)
