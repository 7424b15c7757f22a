// A pool of global-id -> local-id maps, so relabelling never pays O(|V|) per call.
//
// An entry is (generation << 32 | local id) and counts only while its generation is the
// map's current one; each call takes a fresh generation, so a map is "cleared" in O(1)
// and nothing is ever reset entry by entry. Only when the 32-bit generation wraps is the
// whole map zeroed (once per ~4 billion calls). A map is used by one call at a time.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace fastsample {

class NodeMap {
 public:
  explicit NodeMap(int64_t num_nodes) : slots_(num_nodes, 0) {}
  int64_t size() const { return static_cast<int64_t>(slots_.size()); }

  // Start a call: every entry becomes absent.
  void next_generation() {
    if (++gen_ == 0) {
      std::fill(slots_.begin(), slots_.end(), 0);
      gen_ = 1;
    }
    tag_ = static_cast<uint64_t>(gen_) << 32;
  }
  uint64_t* slots() { return slots_.data(); }
  uint64_t tag() const { return tag_; }

 private:
  std::vector<uint64_t> slots_;
  uint32_t gen_ = 0;
  uint64_t tag_ = 0;
};

class NodeMapPool {
 public:
  std::unique_ptr<NodeMap> acquire(int64_t num_nodes) {
    std::unique_ptr<NodeMap> m;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i]->size() >= num_nodes) {
          m = std::move(free_[i]);
          free_.erase(free_.begin() + i);
          break;
        }
      }
    }
    if (!m) m = std::make_unique<NodeMap>(num_nodes);
    m->next_generation();
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
