#pragma once
// Conversion of UCX status codes into dualpath Status. Internal to transport/ (includes UCX).

#include <ucs/type/status.h>

#include <string_view>

#include "dualpath/status.h"

namespace dualpath::transport {

// Maps a failed UCX status onto our codes: peer loss -> kUnavailable, timeouts -> kTimedOut,
// cancellation -> kAborted, bad arguments -> kInvalidArgument, the rest -> kIoError. `what` says
// which call failed ("ucp_put_nbx to peer 'b'"). UCS_OK maps to OK.
Status ucx_status(ucs_status_t status, std::string_view what);

}  // namespace dualpath::transport
