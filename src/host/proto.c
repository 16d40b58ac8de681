/* proto.c — host side of the device protocol. PLACEHOLDER until the protocol issue lands:
 * abort and check only record state on the host. */
#include <stdlib.h>

#include "comm.h"
#include "error.h"

struct meld_proto_state {
  int aborted;
};

meld_result_t meld_proto_create(struct meld_comm *comm) {
  comm->proto = calloc(1, sizeof *comm->proto);
  if (!comm->proto) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  return MELD_OK;
}

void meld_proto_destroy(struct meld_comm *comm) {
  free(comm->proto);
  comm->proto = NULL;
}

meld_result_t meld_proto_abort(struct meld_comm *comm) {
  comm->proto->aborted = 1;
  return MELD_OK;
}

meld_result_t meld_proto_check(struct meld_comm *comm) {
  if (comm->proto->aborted) return meld_error(MELD_ERR_ABORTED, "meld_comm_check: the communicator was aborted");
  return MELD_OK;
}
