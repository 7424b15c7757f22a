// Global-id -> local-id maps sized by the batch, not the graph: a rank's sampler memory is
// O(batch), not 8 bytes per node of the whole graph (0.9 GiB per rank on papers100M).
//
// Two layouts, one interface. Up to direct_map_nodes nodes (a table of at most 64 MiB) a
// direct array indexed by the global id, 8 bytes an entry (tag | local id): the fastest,
// and small. Its entries count only while their tag (a 32-bit generation) is the map's
// current one; each call takes a fresh generation, so the array is "cleared" in O(1) (only
// when the generation wraps is it zeroed). Above, a hash table: open addressing with
// linear probing over a power-of-two table of 8-byte slots (global id + 1 | local id; 0 is
// empty), at most half full, zeroed at each call (a few MiB: ~1 % of a call). A slot holds
// its key, so a lookup reads nothing else: reading the key from the call's source list
// instead (half-size slots) cost a second dependent load per lookup, 16-21 % of sampling
// time on a 16M-node graph against the array, where this is within ~5 %. Global ids must
// then fit 32 bits (below 2^32 - 1 nodes). Maps are reused call after call (a pool, one
// map per call in flight).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
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
      if (num_nodes >= int64_t{0xffffffff})
        throw std::length_error("the native sampler's node map takes graphs of fewer than 2^32 - 1 nodes");
      resize(capacity_for(entries));
    }
  }
  bool direct() const { return direct_; }
  int64_t capacity() const { return direct_ ? static_cast<int64_t>(slots_.size()) : static_cast<int64_t>(table_.size()); }

  // Start a call: every entry becomes absent.
  void next_generation() {
    std::fill(table_.begin(), table_.end(), 0);
    if (++gen_ == 0) {
      std::fill(slots_.begin(), slots_.end(), 0);
      gen_ = 1;
    }
    tag_ = static_cast<uint64_t>(gen_) << 32;
  }

  // Where `key`'s lookup starts (to prefetch).
  const void* slot_ptr(uint64_t key) const {
    return direct_ ? static_cast<const void*>(&slots_[key]) : static_cast<const void*>(&table_[slot_of(key)]);
  }

  // The local id of `key`; absent, it is entered as `next` (the caller's next free id) and
  // `inserted` is set. The caller keeps a hash table at most half full (grow).
  int64_t find_or_insert(uint64_t key, int64_t next, bool& inserted) {
    if (direct_) {  // branch-free: whether a node is new is unpredictable
      const uint64_t x = slots_[key];
      inserted = (x & kGenMask) != tag_;
      const int64_t id = inserted ? next : static_cast<int64_t>(static_cast<uint32_t>(x));
      slots_[key] = tag_ | static_cast<uint64_t>(id);
      return id;
    }
    return hashed(key, next, inserted);
  }

  // The low bits as they are, the high ones folded in: ids that are close (a partition's
  // relabelling makes neighbours' ids close) stay close in the table, as in a direct map.
  uint64_t slot_of(uint64_t key) const { return (key ^ (key >> bits_) ^ (key >> (2 * bits_))) & mask_; }

  // A slot holds (key + 1) << 32 | local id, 8 bytes; 0 is an empty slot.
  int64_t hashed(uint64_t key, int64_t next, bool& inserted) {
    const uint64_t high = (key + 1) << 32;
    for (uint64_t s = slot_of(key);; s = (s + 1) & mask_) {
      const uint64_t e = table_[s];
      if (e == 0) {
        table_[s] = high | static_cast<uint64_t>(next);
        inserted = true;
        return next;
      }
      if ((e & kGenMask) == high) {
        inserted = false;
        return static_cast<uint32_t>(e);
      }
    }
  }

  // Whether `entries` fit (a hash table: at most half full).
  bool fits(int64_t entries) const { return direct_ || 2 * entries <= capacity(); }

  // Room for `entries`, keeping the current ones (rehashed from the old table).
  void grow(int64_t entries) {
    if (fits(entries)) return;
    std::vector<uint64_t> old;
    old.swap(table_);  // freed below: growing holds both tables only while it rehashes
    resize(capacity_for(entries));
    bool inserted;
    for (const uint64_t e : old)
      if (e != 0) hashed((e >> 32) - 1, static_cast<uint32_t>(e), inserted);
  }

 private:
  static int64_t capacity_for(int64_t entries) {
    int64_t c = 1 << 12;
    while (c < 2 * entries) c <<= 1;
    return c;
  }

  void resize(int64_t capacity) {
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
    m->grow(entries);
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
