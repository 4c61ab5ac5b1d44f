/* abi.c - sizes of the public structs, for bindings that mirror them (the Python
 * package checks its ctypes structs against these when it loads the library). */
#include "warpspec/warpspec.h"

#include <string.h>

size_t ws_abi_sizeof(const char *type) {
  if (!type) return 0;
  static const struct { const char *name; size_t size; } table[] = {
      {"ws_role", sizeof(ws_role)},
      {"ws_layout", sizeof(ws_layout)},
      {"ws_plan", sizeof(ws_plan)},
      {"ws_device_limits", sizeof(ws_device_limits)},
      {"ws_gemm_problem", sizeof(ws_gemm_problem)},
      {"ws_comm_id", sizeof(ws_comm_id)},
      {"ws_sendrecv_opts", sizeof(ws_sendrecv_opts)},
      {"ws_ep_config", sizeof(ws_ep_config)},
      {"ws_ep_recv", sizeof(ws_ep_recv)},
      {"ws_attn_problem", sizeof(ws_attn_problem)},
      {"ws_moe_layer_config", sizeof(ws_moe_layer_config)},
      {"ws_mla_sparse_problem", sizeof(ws_mla_sparse_problem)},
      {"ws_mla_decode_problem", sizeof(ws_mla_decode_problem)},
      {"ws_mla_sparse_decode_problem", sizeof(ws_mla_sparse_decode_problem)},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, type) == 0) return table[i].size;
  return 0;
}
