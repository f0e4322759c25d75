#pragma once
// The control plane's messages (control.proto) as the values the engines and the scheduler use,
// both ways. A message that came off the wire becomes a value only through here, and every field
// is range-checked on the way (a token id beyond the wire's range, a read range that is not the
// plan's shape, a negative count): a malformed message is kInvalidArgument naming the field,
// never a crash or a wrong read. fuzz/control_fuzz.cc drives these readers with arbitrary bytes.
//
// Pure functions; thread-safe.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compute/sampling.h"
#include "control/control.pb.h"
#include "dualpath/result.h"
#include "engine/engine_types.h"
#include "engine/node_runtime.h"
#include "sched/turn_plan.h"

namespace dualpath::control {

namespace pb = ::dualpath::control::v1;

// A node and a scheduler of different versions refuse each other at registration.
inline constexpr int kProtocolVersion = 2;

pb::Role to_proto(engine::NodeRole role);
Result<engine::NodeRole> from_proto(pb::Role role);
pb::ReadPath to_proto(sched::ReadPath path);
Result<sched::ReadPath> from_proto(pb::ReadPath path);

// The turn spec both nodes of a placed turn receive: the plan's read ranges, one shape for both.
pb::TurnSpec turn_spec(const sched::TurnPlan& plan,
                       uint64_t request_id,
                       std::span<const int32_t> tokens,
                       const compute::SamplingParams& sampling,
                       const std::string& cache_namespace);

// On the node: what its engines run. The turn spec's ranges must be the plan's shape: the PE
// side's read from 0, the DE side's after it up to the hit, whole blocks of `block_tokens`.
Result<engine::PrepareRequest> prepare_request(const pb::PrepareRequest& m, int64_t block_tokens);
Result<engine::PrefillRequest> prefill_request(const pb::PrefillRequest& m, int64_t block_tokens);
Result<engine::DecodeRequest> decode_request(const pb::DecodeRequest& m);

pb::HopBytes to_proto(const engine::HopBytes& b);
Result<engine::HopBytes> from_proto(const pb::HopBytes& m);
pb::PrepareReply to_proto(const engine::PrepareReply& r);
Result<engine::PrepareReply> from_proto(const pb::PrepareReply& m);
pb::PrefillReply to_proto(const engine::PrefillReply& r);
Result<engine::PrefillReply> from_proto(const pb::PrefillReply& m);
pb::DecodeReply to_proto(const engine::DecodeReply& r);
Result<engine::DecodeReply> from_proto(const pb::DecodeReply& m);
pb::LoadReport to_proto(const engine::LoadReport& r);
Result<engine::LoadReport> from_proto(const pb::LoadReport& m);
pb::Hello to_proto(const engine::NodeHello& h);
Result<engine::NodeHello> from_proto(const pb::Hello& m);
pb::NodeSetup to_proto(const engine::NodeSetup& s);
Result<engine::NodeSetup> from_proto(const pb::NodeSetup& m);

// Tokens of a message (a prompt, a decode's output): each a valid id, at most the wire's count.
Result<std::vector<int32_t>> tokens_from_proto(const google::protobuf::RepeatedField<int32_t>& t,
                                               std::string_view field);

}  // namespace dualpath::control
