#include "compute/modeled_backend.h"

#include <fmt/format.h>

#include <cmath>

#include "compute/init_rng.h"
#include "compute/kv_filler.h"

namespace dualpath::compute {
namespace {

int32_t token_from(uint64_t h, int32_t vocab) {
  return static_cast<int32_t>(h % static_cast<uint64_t>(vocab));
}

}  // namespace

Status ModeledOptions::validate() const {
  if (!(kv_scale > 0.0) || !std::isfinite(kv_scale)) {
    return Status::invalid_argument(
        fmt::format("modeled compute: kv_scale {} must be a positive number", kv_scale));
  }
  if (prefill_ep_size < 1 || decode_ep_size < 1 || vocab < 1) {
    return Status::invalid_argument(
        fmt::format("modeled compute: prefill_ep_size {}, decode_ep_size {} and vocab {} must "
                    "be at least 1",
                    prefill_ep_size, decode_ep_size, vocab));
  }
  return Status::ok();
}

ModeledBackend::ModeledBackend(model::CostModel cost, Clock& clock, ModeledOptions options)
    : cost_(std::move(cost)), clock_(clock), options_(options) {
  const double scaled =
      static_cast<double>(cost_.model().stored_bytes_per_token_per_layer()) * options_.kv_scale;
  row_bytes_ = std::max<int64_t>(1, std::llround(scaled));
}

Result<std::unique_ptr<ModeledBackend>> ModeledBackend::create(model::CostModel cost,
                                                               Clock& clock,
                                                               ModeledOptions options) {
  DP_RETURN_IF_ERROR(options.validate());
  DP_RETURN_IF_ERROR(cost.model().validate(), "modeled compute");
  return std::unique_ptr<ModeledBackend>(new ModeledBackend(std::move(cost), clock, options));
}

KvShape ModeledBackend::kv_shape() const { return {cost_.model().layers, row_bytes_}; }

Duration ModeledBackend::decode_time(int batch, int64_t context_tokens_sum) const {
  return from_seconds(
      cost_.decode_step_s(batch, static_cast<double>(context_tokens_sum), options_.decode_ep_size));
}

Status ModeledBackend::begin_prefill(std::span<const PrefillSequence> batch) {
  pass_.clear();
  in_pass_ = false;
  if (batch.empty()) return Status::invalid_argument("modeled compute: empty prefill batch");
  std::vector<model::PrefillWork> work;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].new_tokens.empty() || batch[i].cached_tokens < 0) {
      pass_.clear();
      return Status::invalid_argument(fmt::format(
          "modeled compute: sequence {} of the batch has {} new tokens and {} cached; a pass "
          "needs at least one new token",
          i, batch[i].new_tokens.size(), batch[i].cached_tokens));
    }
    pass_.push_back({{batch[i].new_tokens.begin(), batch[i].new_tokens.end()},
                     batch[i].cached_tokens,
                     mix64(options_.seed)});
    work.push_back({batch[i].cached_tokens, static_cast<int64_t>(batch[i].new_tokens.size())});
  }
  layer_time_ =
      from_seconds(cost_.prefill_s(work, options_.prefill_ep_size) / cost_.model().layers);
  next_layer_ = 0;
  in_pass_ = true;
  return Status::ok();
}

Status ModeledBackend::prefill_layer(int layer,
                                     std::span<const KvLayerView> cached_kv,
                                     std::span<const std::span<std::byte>> new_kv_out) {
  const Duration start = clock_.now();
  if (!in_pass_ || layer != next_layer_) {
    return Status::failed_precondition(fmt::format(
        "modeled compute: prefill_layer({}) but the pass expects {}; call begin_prefill, then "
        "layers 0..{} in order",
        layer, in_pass_ ? fmt::format("layer {}", next_layer_) : std::string("no layer (no pass)"),
        cost_.model().layers - 1));
  }
  if (cached_kv.size() != pass_.size() || new_kv_out.size() != pass_.size()) {
    return Status::invalid_argument(
        fmt::format("modeled compute layer {}: {} cached-KV views and {} outputs for a batch of {}",
                    layer, cached_kv.size(), new_kv_out.size(), pass_.size()));
  }
  const auto row = static_cast<size_t>(row_bytes_);
  for (size_t i = 0; i < pass_.size(); ++i) {
    size_t cached_bytes = 0;
    for (const auto& seg : cached_kv[i]) cached_bytes += seg.size();
    if (cached_bytes != row * static_cast<size_t>(pass_[i].cached) ||
        new_kv_out[i].size() != row * pass_[i].tokens.size()) {
      return Status::invalid_argument(fmt::format(
          "modeled compute layer {}, sequence {}: {} cached KV bytes and a {}-byte output; {} "
          "cached and {} new tokens of {} bytes need {} and {}",
          layer, i, cached_bytes, new_kv_out[i].size(), pass_[i].cached, pass_[i].tokens.size(),
          row, row * static_cast<size_t>(pass_[i].cached), row * pass_[i].tokens.size()));
    }
  }
  const bool last = layer == cost_.model().layers - 1;
  for (size_t i = 0; i < pass_.size(); ++i) {
    Sequence& seq = pass_[i];
    if (last && options_.digest_kv) {
      for (const auto& seg : cached_kv[i]) {
        for (size_t off = 0; off < seg.size(); off += row) {
          seq.digest = mix64(seq.digest ^ kv_row_digest(seg.subspan(off, row)));
        }
      }
    }
    for (size_t t = 0; t < seq.tokens.size(); ++t) {
      auto out = new_kv_out[i].subspan(t * row, row);
      fill_kv_row(out, options_.seed, seq.tokens[t], seq.cached + static_cast<int64_t>(t), layer);
      if (last && options_.digest_kv) seq.digest = mix64(seq.digest ^ kv_row_digest(out));
    }
  }
  ++next_layer_;
  // The layer's time counts from the call: filling the rows above is part of it, not extra.
  clock_.sleep_until(start + layer_time_);
  return Status::ok();
}

Result<std::vector<NextToken>> ModeledBackend::finish_prefill() {
  if (!in_pass_ || next_layer_ != cost_.model().layers) {
    return Status::failed_precondition(fmt::format(
        "modeled compute: finish_prefill after {} of {} layers{}; run every layer first",
        next_layer_, cost_.model().layers, in_pass_ ? "" : " (no pass)"));
  }
  std::vector<NextToken> out;
  for (const Sequence& seq : pass_) {
    const int64_t last_pos = seq.cached + static_cast<int64_t>(seq.tokens.size()) - 1;
    const uint64_t h = options_.digest_kv
                           ? seq.digest
                           : mix64(options_.seed ^ mix64(static_cast<uint64_t>(last_pos)) ^
                                   static_cast<uint64_t>(static_cast<uint32_t>(seq.tokens.back())));
    out.push_back({token_from(h, options_.vocab), {}});
  }
  pass_.clear();
  in_pass_ = false;
  return out;
}

Result<std::vector<NextToken>> ModeledBackend::decode_step(std::span<const DecodeSequence> batch) {
  const Duration start = clock_.now();
  pass_.clear();
  in_pass_ = false;
  const int layers = cost_.model().layers;
  const auto row = static_cast<size_t>(row_bytes_);
  int64_t context_sum = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const DecodeSequence& seq = batch[i];
    if (static_cast<int>(seq.kv_per_layer.size()) != layers ||
        seq.new_kv_out.size() != row * static_cast<size_t>(layers)) {
      return Status::invalid_argument(fmt::format(
          "modeled compute decode, sequence {}: KV for {} layers and a {}-byte output; the model "
          "needs {} layers and {} bytes",
          i, seq.kv_per_layer.size(), seq.new_kv_out.size(), layers, row * layers));
    }
    context_sum += seq.context_tokens + 1;
  }
  std::vector<NextToken> out;
  if (decode_digest_.size() < batch.size()) decode_digest_.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const DecodeSequence& seq = batch[i];
    for (int l = 0; l < layers; ++l) {
      fill_kv_row(seq.new_kv_out.subspan(static_cast<size_t>(l) * row, row), options_.seed,
                  seq.token, seq.context_tokens, l);
    }
    uint64_t h = 0;
    if (options_.digest_kv) {
      // The prefill's digest (finish_prefill) over rows [0, context] of the last layer: the
      // context's rows (read once per sequence, then carried), then this token's.
      DecodeDigest& d = decode_digest_[i];
      if (d.rows != seq.context_tokens) {
        d.digest = mix64(options_.seed);  // as begin_prefill starts it
        int64_t rows = 0;
        for (std::span<const std::byte> seg : seq.kv_per_layer[layers - 1]) {
          for (size_t off = 0; off + row <= seg.size(); off += row, ++rows) {
            d.digest = mix64(d.digest ^ kv_row_digest(seg.subspan(off, row)));
          }
        }
        if (rows != seq.context_tokens) {
          return Status::invalid_argument(fmt::format(
              "modeled compute decode, sequence {}: {} KV rows in the last layer for a context "
              "of {} tokens",
              i, rows, seq.context_tokens));
        }
      }
      d.digest = mix64(d.digest ^ kv_row_digest(seq.new_kv_out.subspan(
                                      static_cast<size_t>(layers - 1) * row, row)));
      d.rows = seq.context_tokens + 1;
      h = d.digest;
    } else {
      h = mix64(options_.seed ^ mix64(static_cast<uint64_t>(seq.context_tokens)) ^
                static_cast<uint64_t>(static_cast<uint32_t>(seq.token)));
    }
    out.push_back({token_from(h, options_.vocab), {}});
  }
  if (!batch.empty()) {
    clock_.sleep_until(start + decode_time(static_cast<int>(batch.size()), context_sum));
  }
  return out;
}

}  // namespace dualpath::compute
