// A pool of global-id -> local-id maps (int64, -1 = absent), so relabelling never pays
// O(|V|) per call: a kernel takes a map, sets only the entries it touches, resets exactly
// those, and returns it. A map is used by one call at a time; one that may be dirty
// (the call threw) is dropped instead of returned.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace fastsample {

class NodeMapPool {
 public:
  using Map = std::vector<int64_t>;

  std::unique_ptr<Map> acquire(int64_t num_nodes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (static_cast<int64_t>(free_[i]->size()) >= num_nodes) {
          std::unique_ptr<Map> m = std::move(free_[i]);
          free_.erase(free_.begin() + i);
          return m;
        }
      }
    }
    return std::make_unique<Map>(num_nodes, -1);
  }

  void release(std::unique_ptr<Map> m) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(m));
  }

  static NodeMapPool& global() {
    static NodeMapPool pool;
    return pool;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Map>> free_;
};

}  // namespace fastsample
