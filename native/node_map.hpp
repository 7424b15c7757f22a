// Global-id -> local-id maps sized by the batch, not the graph: a rank's sampler memory is
// O(batch), not 8 bytes per node of the whole graph (0.9 GiB per rank on papers100M).
//
// Two layouts, one interface. Up to direct_map_nodes nodes (a table of at most 64 MiB) a
// direct array indexed by the global id, 8 bytes an entry (tag | local id): the fastest,
// and small. Above, a hash table: open addressing with linear probing over a power-of-two
// table of 8-byte slots (tag | local id), at most half full; a slot's global id is read
// from the call's source list (hashed). In both, an entry counts only while its tag (a
// 32-bit generation) is the map's current one; each call takes a fresh generation, so a map is
// "cleared" in O(1) and its table is reused call after call (a pool, one map per call in
// flight). Only when the generation wraps is the table zeroed.
//
// The relabelling inserts the nodes of a call in order and never removes one, and a
// node's local id is its position in the call's source list (fused_sample.cpp), so growing
// the table rehashes from that list: no per-entry bookkeeping beyond the table itself.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace fastsample {

constexpr uint64_t kGenMask = ~uint64_t{0xffffffff};

// direct up to this many nodes: 8 B x 8M = 64 MiB (settable, so tests reach both layouts)
inline std::atomic<int64_t> direct_map_nodes{int64_t{8} << 20};

class NodeMap {
 public:
  // A map for a graph of `num_nodes` with room for `entries`.
  NodeMap(int64_t num_nodes, int64_t entries) : direct_(num_nodes <= direct_map_nodes.load()) {
    if (direct_) {
      slots_.assign(num_nodes, 0);
    } else {
      resize(capacity_for(entries));
    }
  }
  bool direct() const { return direct_; }
  int64_t capacity() const { return direct_ ? static_cast<int64_t>(slots_.size()) : static_cast<int64_t>(table_.size()); }

  // Start a call: every entry becomes absent.
  void next_generation() {
    if (++gen_ == 0) {
      std::fill(slots_.begin(), slots_.end(), 0);
      std::fill(table_.begin(), table_.end(), 0);
      gen_ = 1;
    }
    tag_ = static_cast<uint64_t>(gen_) << 32;
  }

  // Where `key`'s lookup starts (to prefetch).
  const void* slot_ptr(uint64_t key) const {
    return direct_ ? static_cast<const void*>(&slots_[key]) : static_cast<const void*>(&table_[slot_of(key)]);
  }

  // The local id of `key`; absent, it is entered as `next` (the caller's next free id) and
  // `inserted` is set. `ids`: the global id of each local id so far (the call's sources;
  // ids[next] is written by the caller afterwards). The caller keeps a hash table at most
  // half full (grow).
  template <typename Id>
  int64_t find_or_insert(uint64_t key, int64_t next, bool& inserted, const Id* ids) {
    if (direct_) {  // branch-free: whether a node is new is unpredictable
      const uint64_t x = slots_[key];
      inserted = (x & kGenMask) != tag_;
      const int64_t id = inserted ? next : static_cast<int64_t>(static_cast<uint32_t>(x));
      slots_[key] = tag_ | static_cast<uint64_t>(id);
      return id;
    }
    return hashed(key, next, inserted, ids);
  }

  // The low bits as they are, the high ones folded in: ids that are close (a partition's
  // relabelling makes neighbours' ids close) stay close in the table, as in a direct map.
  uint64_t slot_of(uint64_t key) const { return (key ^ (key >> bits_) ^ (key >> (2 * bits_))) & mask_; }

  // A slot holds tag | local id, 8 bytes; the key is the local id's entry in `ids` (as
  // Python's dict keeps an index table beside its entries), so the table is half the size.
  template <typename Id>
  int64_t hashed(uint64_t key, int64_t next, bool& inserted, const Id* ids) {
    for (uint64_t s = slot_of(key);; s = (s + 1) & mask_) {
      const uint64_t e = table_[s];
      if ((e & kGenMask) != tag_) {
        table_[s] = tag_ | static_cast<uint64_t>(next);
        inserted = true;
        return next;
      }
      const int64_t id = static_cast<uint32_t>(e);
      if (static_cast<uint64_t>(ids[id]) == key) {
        inserted = false;
        return id;
      }
    }
  }

  // Whether `entries` fit (a hash table: at most half full).
  bool fits(int64_t entries) const { return direct_ || 2 * entries <= capacity(); }

  // Room for `entries`, keeping the current ones: the ids ids[0..count) with local ids
  // 0..count-1 (the call's sources so far, in order).
  template <typename Id>
  void grow(int64_t entries, const Id* ids, int64_t count) {
    if (fits(entries)) return;
    resize(capacity_for(entries));
    gen_ = 1;
    tag_ = uint64_t{1} << 32;
    bool inserted;
    for (int64_t i = 0; i < count; ++i) hashed(static_cast<uint64_t>(ids[i]), i, inserted, ids);
  }

 private:
  static int64_t capacity_for(int64_t entries) {
    int64_t c = 1 << 12;
    while (c < 2 * entries) c <<= 1;
    return c;
  }

  void resize(int64_t capacity) {
    table_ = std::vector<uint64_t>();  // freed first: growing never holds both tables
    table_.assign(capacity, 0);
    bits_ = 0;
    while ((int64_t{1} << bits_) < capacity) ++bits_;
    mask_ = static_cast<uint64_t>(capacity - 1);
  }

  bool direct_;
  std::vector<uint64_t> slots_;  // direct
  std::vector<uint64_t> table_;  // hashed
  int bits_ = 12;
  uint64_t mask_ = 0;
  uint32_t gen_ = 0;
  uint64_t tag_ = 0;
};

class NodeMapPool {
 public:
  // A map for a graph of `num_nodes` with room for `entries` (the call's seeds; a hash
  // table grows as the call needs, and keeps its size for the next calls).
  std::unique_ptr<NodeMap> acquire(int64_t num_nodes, int64_t entries) {
    std::unique_ptr<NodeMap> m;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const bool direct = num_nodes <= direct_map_nodes.load();
      NodeMap* best = nullptr;
      size_t at = 0;
      for (size_t i = 0; i < free_.size(); ++i) {  // same layout; direct: big enough; hashed: the largest
        NodeMap* c = free_[i].get();
        if (c->direct() != direct || (direct && c->capacity() < num_nodes)) continue;
        if (!best || (!direct && c->capacity() > best->capacity())) best = c, at = i;
      }
      if (best) {
        m = std::move(free_[at]);
        free_.erase(free_.begin() + at);
      }
    }
    if (!m) m = std::make_unique<NodeMap>(num_nodes, entries);
    m->next_generation();
    if (!m->fits(entries)) m->grow<int64_t>(entries, nullptr, 0);
    return m;
  }

  void release(std::unique_ptr<NodeMap> m) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(m));
  }

  static NodeMapPool& global() {
    static NodeMapPool pool;
    return pool;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<NodeMap>> free_;
};

}  // namespace fastsample
