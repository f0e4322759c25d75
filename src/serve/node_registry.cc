#include "serve/node_registry.h"

#include <openssl/rand.h>

#include <fmt/format.h>

#include <set>
#include <thread>

#include "common/log.h"

namespace dualpath::serve {

using engine::NodeId;
using engine::NodeRole;

NodeRegistry::NodeRegistry(RegistryOptions options,
                           ClientFactory make_client,
                           RegistryListener listener,
                           const Clock& clock)
    : options_(std::move(options)),
      make_client_(std::move(make_client)),
      listener_(std::move(listener)),
      clock_(clock) {
  MutexLock lock(mu_);
  for (int n = 0; n < nodes(); ++n) {
    Slot s;
    s.id = n < options_.prefill_nodes ? NodeId{NodeRole::kPrefill, n}
                                      : NodeId{NodeRole::kDecode, n - options_.prefill_nodes};
    slots_.push_back(std::move(s));
  }
}

int NodeRegistry::node_id(const NodeId& id) const {
  return id.role == NodeRole::kPrefill ? id.index : options_.prefill_nodes + id.index;
}

std::string NodeRegistry::new_session() const {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof(b)) != 1) {
    // Unique is what matters (the transport already authenticated the node).
    static std::atomic<uint64_t> counter{0};  // relaxed: only hands out distinct values
    return fmt::format("s{:x}-{:x}", clock_.now().count(),
                       counter.fetch_add(1, std::memory_order_relaxed));
  }
  std::string hex;
  for (unsigned char c : b) hex += fmt::format("{:02x}", c);
  return hex;
}

int NodeRegistry::slot_of_session(const std::string& session) const {
  if (session.empty()) return -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].session == session) return static_cast<int>(i);
  }
  return -1;
}

int NodeRegistry::node_of_session(const std::string& session) const {
  MutexLock lock(mu_);
  return slot_of_session(session);
}

Result<NodeRegistry::Reservation> NodeRegistry::reserve(const control::pb::RegisterRequest& req) {
  DP_ASSIGN_OR_RETURN(const NodeRole role, control::from_proto(req.role()));
  if (req.protocol() != control::kProtocolVersion) {
    return Status::failed_precondition(fmt::format(
        "the node speaks protocol {} and the scheduler {}: run the same dualpath build on both",
        req.protocol(), control::kProtocolVersion));
  }
  if (req.control_address().empty() || req.control_address().size() > 256) {
    return Status::failed_precondition(
        "the registration names no control address for the scheduler to call; run the same "
        "dualpath build on both");
  }
  const bool prefill = role == NodeRole::kPrefill;
  const int count = prefill ? options_.prefill_nodes : options_.decode_nodes;
  const char* key = prefill ? "cluster.prefill_nodes" : "cluster.decode_nodes";
  const std::string_view name = engine::role_name(role);
  int index = req.index();
  std::shared_ptr<control::NodeClient> stale;  // a replaced registration of the same process
  Status stale_why;
  std::string stale_session;
  Reservation out;
  {
    MutexLock lock(mu_);
    auto slot = [&](int i) DP_REQUIRES(mu_) -> Slot& {
      return slots_[static_cast<size_t>(node_id({role, i}))];
    };
    if (index >= count) {
      return Status::failed_precondition(fmt::format(
          "{} node {}: the config ({}) declares {} {} node{} ({} = {}); raise {} or start the "
          "node with --index 0..{}",
          name, index, options_.origin, count, name, count == 1 ? "" : "s", key, count, key,
          count - 1));
    }
    if (index < -1) {
      return Status::failed_precondition(
          fmt::format("{} node index {}: give --index 0..{} or none", name, index, count - 1));
    }
    if (index < 0) {
      for (int i = 0; i < count && index < 0; ++i) {
        if (!slot(i).alive && !slot(i).joining) index = i;
      }
      if (index < 0) {
        return Status::failed_precondition(fmt::format(
            "all {} {} nodes of the config ({} = {}) are registered; raise {} to add one", count,
            name, key, count, key));
      }
    }
    Slot& s = slot(index);
    if (s.alive || s.joining) {
      // The same process registering again (its session broke and it noticed first): its old
      // registration is over. Another process claiming a held index is a mistake.
      if (s.host == req.host() && s.pid == req.pid()) {
        stale_why = Status::unavailable(
            fmt::format("{} registered again (its session was lost)", s.id.name()));
        if (s.alive) stale = std::move(s.client);
        stale_session = s.session;
        s.alive = false;
        s.joining = false;
      } else {
        return Status::already_exists(fmt::format(
            "duplicate node index: {} is already {} (host {}, pid {}); give another --index, or "
            "stop that node first",
            s.id.name(), s.alive ? "registered" : "registering", s.host, s.pid));
      }
    }
    s.joining = true;
    s.joining_since = clock_.now();
    s.session = new_session();
    s.generation += 1;
    s.host = req.host();
    s.pid = req.pid();
    s.control_address = req.control_address();
    out = {index, node_id({role, index}), s.session};
  }
  if (!stale_why.is_ok()) {
    if (stale) stale->close(stale_why);
    if (listener_.on_dead) listener_.on_dead(out.node, stale_why, stale_session);
  }
  return out;
}

Result<int> NodeRegistry::join(const std::string& session, const engine::NodeHello& hello) {
  int node = -1;
  uint64_t generation = 0;
  NodeId id;
  std::string address;
  {
    MutexLock lock(mu_);
    node = slot_of_session(session);
    if (node < 0) return Status::failed_precondition("unknown session: register first");
    const Slot& s = slots_[static_cast<size_t>(node)];
    if (!s.joining) {
      return Status::failed_precondition(fmt::format("{} has already joined", s.id.name()));
    }
    if (hello.role != s.id.role || hello.index != s.id.index) {
      return Status::failed_precondition(
          fmt::format("the hello names {} but this session registered {}",
                      NodeId{hello.role, hello.index}.name(), s.id.name()));
    }
    id = s.id;
    generation = s.generation;
    address = s.control_address;
  }
  std::shared_ptr<control::NodeClient> client = make_client_(address, id.name(), session);
  engine::NodeHello own_hello = hello;
  own_hello.epoch = generation;  // peers reconnect to a node that registered again
  control::pb::PeersRequest to_others;
  *to_others.add_peers() = control::to_proto(own_hello);
  // Rounds: connect to every live node of the other role not connected yet, both ways at once,
  // each call with its own deadline and no lock held; then, under the lock, become alive if no
  // other node became alive meanwhile (a node joining at the same time), else another round. A
  // node that becomes alive later connects to this one in its own join.
  std::set<int> connected;
  for (bool first = true;; first = false) {
    std::vector<int> ids;
    std::vector<engine::NodeHello> hellos;
    std::vector<std::shared_ptr<control::NodeClient>> clients;
    {
      MutexLock lock(mu_);
      Slot& s = slots_[static_cast<size_t>(node)];
      if (s.generation != generation || !s.joining) {
        client->close(Status::unavailable(fmt::format("{} registered again", id.name())));
        return Status::aborted(fmt::format("{} registered again while it joined", id.name()));
      }
      for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& o = slots_[i];
        if (o.id.role != id.role && o.alive && o.client && !connected.contains(static_cast<int>(i))) {
          ids.push_back(static_cast<int>(i));
          hellos.push_back(o.hello);
          clients.push_back(o.client);
        }
      }
      // Connected to every live peer (the first round always calls the node: its control
      // service must answer before it gets work).
      if (ids.empty() && !first) {
        s.joining = false;
        s.alive = true;
        s.client = client;
        s.hello = own_hello;
        s.last_report = clock_.now();
        s.registrations += 1;
        break;
      }
    }
    control::pb::PeersRequest to_new;
    to_new.set_reset(first);  // a rejoining node's old connections may be broken
    for (const auto& h : hellos) *to_new.add_peers() = control::to_proto(h);
    Status own;
    std::vector<Status> theirs(clients.size());
    {
      std::vector<std::thread> calls;
      calls.emplace_back([&] { own = client->peers(to_new, options_.peers_timeout); });
      for (size_t i = 0; i < clients.size(); ++i) {
        calls.emplace_back(
            [&, i] { theirs[i] = clients[i]->peers(to_others, options_.peers_timeout); });
      }
      for (auto& t : calls) t.join();
    }
    for (size_t i = 0; i < theirs.size(); ++i) {
      if (!theirs[i].is_ok()) {
        DP_LOG_WARN("{} cannot connect to {}: {}", clients[i]->name(), id.name(),
                    theirs[i].message());
      }
    }
    if (!own.is_ok()) {
      client->close(own);
      MutexLock lock(mu_);
      Slot& s = slots_[static_cast<size_t>(node)];
      if (s.generation == generation) s.joining = false;
      return own.with_context(fmt::format("{} cannot connect to its peers", id.name()));
    }
    connected.insert(ids.begin(), ids.end());
  }
  if (listener_.on_alive) listener_.on_alive(node, true);
  return node;
}

void NodeRegistry::start_failed(const std::string& session, const Status& why) {
  MutexLock lock(mu_);
  const int node = slot_of_session(session);
  if (node < 0) return;
  Slot& s = slots_[static_cast<size_t>(node)];
  DP_LOG_ERROR("{} could not start: {}", s.id.name(), why.message());
  if (s.joining) s.joining = false;
}

bool NodeRegistry::report(const std::string& session, const engine::LoadReport& report) {
  int node = -1;
  {
    MutexLock lock(mu_);
    node = slot_of_session(session);
    if (node < 0) return false;
    Slot& s = slots_[static_cast<size_t>(node)];
    if (!s.alive) return false;
    s.report = report;
    s.last_report = clock_.now();
  }
  if (listener_.on_report) listener_.on_report(node, report);
  return true;
}

void NodeRegistry::session_ended(const std::string& session, const Status& why) {
  int node = -1;
  {
    MutexLock lock(mu_);
    node = slot_of_session(session);
    if (node < 0) return;
    Slot& s = slots_[static_cast<size_t>(node)];
    if (s.joining) {
      s.joining = false;  // it never joined: the slot is free
      return;
    }
    if (!s.alive) return;
  }
  mark_dead(node, why);
}

std::vector<int> NodeRegistry::expire() {
  std::vector<int> dead;
  const Duration now = clock_.now();
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.alive && now - s.last_report > options_.lease_ttl) dead.push_back(static_cast<int>(i));
      if (s.joining && now - s.joining_since > options_.join_timeout) {
        DP_LOG_WARN("{} registered {:.0f} s ago and never joined; its slot is free again",
                    s.id.name(), to_seconds(now - s.joining_since));
        s.joining = false;
      }
    }
  }
  for (int node : dead) {
    mark_dead(node, Status::unavailable(fmt::format(
                        "no load report for {:.1f} s (scheduler.lease_ttl_ms = {})",
                        to_seconds(options_.lease_ttl),
                        std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_ttl)
                            .count())));
  }
  return dead;
}

void NodeRegistry::mark_dead(int node, const Status& why) {
  std::shared_ptr<control::NodeClient> client;
  std::string session;
  {
    MutexLock lock(mu_);
    Slot& s = slots_[static_cast<size_t>(node)];
    if (!s.alive) return;
    s.alive = false;
    client = std::move(s.client);
    session = s.session;
  }
  // The placer first: the calls failed below retry or migrate at once, and must not be placed on
  // this node again. (Told after them, a migrating turn went back to the dead node, found no
  // client, and spent every attempt in a microsecond; the netns partition test caught it once
  // the DE tie-break stopped preferring node 0.)
  if (listener_.on_alive) listener_.on_alive(node, false);
  // Every call in flight to it fails now, with the reason.
  if (client) client->close(why);
  if (listener_.on_dead) listener_.on_dead(node, why, session);
}

std::shared_ptr<control::NodeClient> NodeRegistry::client(int node) const {
  MutexLock lock(mu_);
  const Slot& s = slots_[static_cast<size_t>(node)];
  return s.alive ? s.client : nullptr;
}

std::vector<std::shared_ptr<control::NodeClient>> NodeRegistry::clients() const {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<control::NodeClient>> out;
  for (const Slot& s : slots_) {
    if (s.alive && s.client) out.push_back(s.client);
  }
  return out;
}

NodeId NodeRegistry::id_of(int node) const {
  MutexLock lock(mu_);
  return slots_[static_cast<size_t>(node)].id;
}

bool NodeRegistry::alive(int node) const {
  MutexLock lock(mu_);
  return slots_[static_cast<size_t>(node)].alive;
}

bool NodeRegistry::all_alive() const {
  MutexLock lock(mu_);
  for (const Slot& s : slots_) {
    if (!s.alive) return false;
  }
  return true;
}

std::vector<NodeStatus> NodeRegistry::status() const {
  const Duration now = clock_.now();
  MutexLock lock(mu_);
  std::vector<NodeStatus> out;
  for (const Slot& s : slots_) {
    NodeStatus n;
    n.id = s.id;
    n.alive = s.alive;
    n.host = s.host;
    n.pid = s.pid;
    n.control_address = s.control_address;
    n.report = s.report;
    n.registrations = s.registrations;
    n.last_report_age_s = s.registrations > 0 ? to_seconds(now - s.last_report) : 0;
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<std::string> NodeRegistry::missing() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const Slot& s : slots_) {
    if (!s.alive) out.push_back(s.id.name());
  }
  return out;
}

}  // namespace dualpath::serve
