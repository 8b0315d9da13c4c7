/* Input of bindgen (build.rs): the rdma-core headers plus the shim's prototypes. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "shim.h"
