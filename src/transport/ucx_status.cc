#include "transport/ucx_status.h"

#include <fmt/format.h>

namespace dualpath::transport {

Status ucx_status(ucs_status_t status, std::string_view what) {
  if (status == UCS_OK) return Status::ok();
  std::string message = fmt::format("{} failed: {} (UCX status {})", what,
                                    ucs_status_string(status), static_cast<int>(status));
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
    // A shared-memory peer that died takes its segment with it: sends to it fail this way.
    case UCS_ERR_SHMEM_SEGMENT:
      return Status::unavailable(message + "; the peer is gone or unreachable");
    case UCS_ERR_TIMED_OUT:
      return Status::timed_out(std::move(message));
    case UCS_ERR_CANCELED:
      return Status::aborted(std::move(message));
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return Status::invalid_argument(std::move(message));
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return Status::resource_exhausted(std::move(message));
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_NO_ELEM:
      return Status::not_found(std::move(message));
    case UCS_ERR_UNSUPPORTED:
      return Status::unimplemented(std::move(message));
    default:
      return Status::io_error(std::move(message));
  }
}

}  // namespace dualpath::transport
