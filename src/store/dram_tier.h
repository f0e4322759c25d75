#pragma once
// DramTier: a decode node's DRAM tier (issue 35; docs/sched.md "For agents", docs/serve.md "The
// DE DRAM tier"). After a turn's decode its node keeps the session's KV, prompt and reply in
// whole Full Blocks, so that the session's next turn can be served from DRAM instead of storage.
//
// What it holds is chains: the block keys of one decoded sequence, in order (store/block_key.h:
// one key names a whole prefix). A chain is kept whole or not at all; blocks shared by chains
// (a session's turns share their prefix, sessions may share a system prompt) are kept once and
// counted once against the capacity.
//
//   store(keys, bytes)   keeps a chain for `ttl` from now. A chain it extends (the session's
//                        previous turn: its last key is one of these keys) is replaced. Room is
//                        made by dropping expired chains, then the least recently stored; a chain
//                        larger than the whole tier is not kept.
//   resident_prefix(k)   how many leading keys of k are held (in one chain, not expired)
//   read(key, out)       copies a held block (Full Block layout) into `out`
//
// The same policy runs in two places: on the decode node, which keeps the bytes, and in the
// scheduler (keep_bytes = false), which mirrors each decode node's tier from the turns it placed
// there, to give the turn plan the node and the length of a session's resident prefix. The two
// see the same stores in nearly the same order; where they differ (two turns ending together,
// a node restarted), the node reads what it lacks from storage: a stale mirror costs a read,
// never a wrong byte.
//
// Time comes from the injected clock (expiry is tested with a ManualClock).
// Thread-safe.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "dualpath/units.h"
#include "store/block_key.h"

namespace dualpath::store {

class DramTier {
 public:
  struct Options {
    uint64_t capacity_bytes = 0;  // 0: the tier is off (stores keep nothing)
    Duration ttl = std::chrono::seconds(480);
    uint64_t block_bytes = 0;  // one Full Block
    bool keep_bytes = true;    // false: bookkeeping only (the scheduler's mirror)
  };
  struct Stats {
    uint64_t used_bytes = 0;
    uint64_t capacity_bytes = 0;
    int64_t chains = 0;
    int64_t blocks = 0;
    int64_t stored = 0;       // chains kept
    int64_t not_kept = 0;     // chains larger than the tier, or empty
    int64_t evicted = 0;      // chains dropped for room before their TTL
    int64_t expired = 0;      // chains dropped after their TTL
    int64_t read_blocks = 0;  // blocks read() found
    int64_t missed_blocks = 0;  // blocks read() did not find
  };

  DramTier(const Options& options, const Clock& clock);
  DramTier(const DramTier&) = delete;
  DramTier& operator=(const DramTier&) = delete;

  bool enabled() const { return options_.capacity_bytes > 0; }
  // Whether a chain of `blocks` blocks could be kept at all (it fits the whole tier).
  bool can_hold(size_t blocks) const {
    return enabled() && blocks > 0 && options_.block_bytes > 0 &&
           blocks * options_.block_bytes <= options_.capacity_bytes;
  }
  // Keeps the chain `keys`. With keep_bytes, `bytes` holds the Full Blocks of keys[bytes_from..]
  // in order; the leading bytes_from blocks must be held already (resident_prefix(): a session's
  // next turn copies only its new blocks), else the chain is not kept. Returns whether it was.
  bool store(std::span<const BlockKey> keys,
             std::span<const std::byte> bytes,
             size_t bytes_from = 0);
  // The same with the blocks of keys[bytes_from..] as buffers of one Full Block each, taken
  // over (no copy).
  using BlockBytes = std::unique_ptr<std::byte[]>;
  bool store_blocks(std::span<const BlockKey> keys,
                    std::vector<BlockBytes> blocks,
                    size_t bytes_from);
  // The number of leading keys of `keys` that one held, unexpired chain covers. Every chain
  // starts at a prompt's first block, and a key names its whole prefix, so the held keys of a
  // prompt are always a prefix of it: a binary search finds its end.
  size_t resident_prefix(std::span<const BlockKey> keys);
  // Copies block `key` (a Full Block) into `out`; false when it is not held (or keep_bytes is
  // off). Reading does not renew the chain: the turn that reads it stores its own at its end.
  bool read(const BlockKey& key, std::span<std::byte> out);
  // Drops everything (a node that restarted).
  void clear();
  Stats stats() const;

 private:
  struct Chain {
    std::vector<BlockKey> keys;
    Duration expires{0};
  };
  using ChainList = std::list<Chain>;  // least recently stored first
  struct Block {
    int refs = 0;                        // chains holding it
    std::unique_ptr<std::byte[]> bytes;  // keep_bytes only
  };
  void drop_locked(ChainList::iterator it) DP_REQUIRES(mu_);
  void expire_locked() DP_REQUIRES(mu_);

  const Options options_;
  const Clock& clock_;
  mutable Mutex mu_;
  ChainList chains_ DP_GUARDED_BY(mu_);
  std::unordered_map<BlockKey, Block, BlockKeyHash> blocks_ DP_GUARDED_BY(mu_);
  // A chain's last key -> the chain (to replace what a new chain extends).
  std::unordered_map<BlockKey, ChainList::iterator, BlockKeyHash> by_last_ DP_GUARDED_BY(mu_);
  Stats stats_ DP_GUARDED_BY(mu_);
};

}  // namespace dualpath::store
