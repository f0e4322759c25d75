#pragma once
// Control messages between the scheduler service (serve/) and its node processes, and between
// nodes: JSON objects, one per framed message of a transport::OobChannel (a TCP socket). Every call has a deadline; a
// closed socket (a dead node) is kUnavailable at once. We chose a plain socket over UCX active
// messages for control because it is what exists before UCX addresses are exchanged, it detects a
// dead peer immediately (UCX over shared memory cannot, docs/transport.md), and the control rate
// (a few messages per turn) is far below anything that needs the model traffic class.
//
// A reply is {"ok": true, "call_id", ...} or {"ok": false, "call_id", "code": <StatusCode>,
// "error": "..."}, echoing the request's call_id.
// Thread-compatible (one thread per channel at a time).

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

#include "dualpath/result.h"
#include "dualpath/units.h"
#include "transport/oob_channel.h"

namespace dualpath::engine {

using Json = nlohmann::json;

Status send_json(transport::OobChannel& channel, const Json& message, Duration timeout);
Result<Json> receive_json(transport::OobChannel& channel, Duration timeout);
Json ok_reply(Json fields = Json::object());
Json error_reply(const Status& status);

std::string to_hex(std::span<const std::byte> bytes);
Result<std::vector<std::byte>> from_hex(const std::string& hex);

}  // namespace dualpath::engine
