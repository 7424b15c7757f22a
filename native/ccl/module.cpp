// fastsample._ccl: the few oneCCL collectives fastsample needs, on numpy buffers.
// Built only when oneCCL's headers are found (FASTSAMPLE_CCL_ROOT; scripts/install-ccl.sh).
// Bootstrap stays in Python (fastsample/comm/ccl.py): rank 0 makes the main key-value
// store, MPI broadcasts its address, every rank attaches and creates the communicator.
// Counts are in elements; buffers are C-contiguous and of one dtype. The GIL is released
// while oneCCL works, so another thread (the prefetching loader's) can run meanwhile.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <oneapi/ccl.hpp>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

using Array = nb::ndarray<nb::c_contig, nb::device::cpu>;
using ConstArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Counts = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void init_once() {
  static bool done = false;
  if (!done) {
    ccl::init();
    done = true;
  }
}

template <typename A>
ccl::datatype datatype_of(const A& a) {
  auto t = a.dtype();
  if (t == nb::dtype<float>()) return ccl::datatype::float32;
  if (t == nb::dtype<double>()) return ccl::datatype::float64;
  if (t == nb::dtype<int64_t>()) return ccl::datatype::int64;
  if (t == nb::dtype<int32_t>()) return ccl::datatype::int32;
  if (t.code == (uint8_t)nb::dlpack::dtype_code::Float && t.bits == 16) return ccl::datatype::float16;
  if (t == nb::dtype<uint8_t>()) return ccl::datatype::uint8;  // rows moved as bytes (fastsample/comm/ccl.py)
  throw nb::type_error("_ccl: arrays must be float32, float64, float16, int64, int32 or uint8");
}

std::vector<size_t> counts_of(const Counts& c, int size, size_t capacity, const char* name) {
  if ((int)c.shape(0) != size)
    throw nb::value_error((std::string("_ccl: ") + name + " must have one count per rank").c_str());
  std::vector<size_t> out(size);
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    if (c.data()[r] < 0) throw nb::value_error((std::string("_ccl: negative count in ") + name).c_str());
    out[r] = (size_t)c.data()[r];
    total += out[r];
  }
  if (total > capacity) throw nb::value_error((std::string("_ccl: ") + name + " exceed the buffer").c_str());
  return out;
}

struct KVS {
  ccl::shared_ptr_class<ccl::kvs> kvs;

  static KVS create_main() {
    init_once();
    return KVS{ccl::create_main_kvs()};
  }
  static KVS attach(nb::bytes address) {
    init_once();
    ccl::kvs::address_type a{};
    if (address.size() != a.size()) throw nb::value_error("_ccl: a KVS address has a fixed size");
    std::memcpy(a.data(), address.c_str(), a.size());
    nb::gil_scoped_release release;  // connects to rank 0's store
    return KVS{ccl::create_kvs(a)};
  }
  nb::bytes address() const {
    auto a = kvs->get_address();
    return nb::bytes(reinterpret_cast<const char*>(a.data()), a.size());
  }
};

struct Communicator {
  KVS store;  // kept alive as long as the communicator
  std::optional<ccl::communicator> comm;
  int size;

  Communicator(int size_, int rank, const KVS& kvs) : store(kvs), size(size_) {
    nb::gil_scoped_release release;  // returns once every rank has joined
    comm.emplace(ccl::create_communicator(size_, rank, store.kvs));
  }
  const ccl::communicator& get() const {
    if (!comm) throw nb::value_error("_ccl: the communicator is closed");
    return *comm;
  }
  void alltoallv(ConstArray send, Counts send_counts, Array recv, Counts recv_counts) {
    const auto& c = get();
    if (send.dtype() != recv.dtype()) throw nb::type_error("_ccl: send and recv dtypes differ");
    auto type = datatype_of(send);
    auto sc = counts_of(send_counts, size, send.size(), "send_counts");
    auto rc = counts_of(recv_counts, size, recv.size(), "recv_counts");
    nb::gil_scoped_release release;
    ccl::alltoallv(send.data(), sc, recv.data(), rc, type, c).wait();
  }
  void allreduce(Array array, const std::string& op) {
    const auto& c = get();
    auto type = datatype_of(array);
    ccl::reduction r;
    if (op == "sum") r = ccl::reduction::sum;
    else if (op == "max") r = ccl::reduction::max;
    else throw nb::value_error("_ccl: op must be sum or max");
    nb::gil_scoped_release release;
    ccl::allreduce(array.data(), array.data(), array.size(), type, r, c).wait();
  }
  void barrier() {
    const auto& c = get();
    nb::gil_scoped_release release;
    ccl::barrier(c).wait();
  }
  void close() {
    comm.reset();
    store.kvs.reset();
  }
};

}  // namespace

NB_MODULE(_ccl, m) {
  m.doc() = "fastsample's oneCCL binding (alltoallv, allreduce, barrier)";
  m.def("version", []() { return std::string(ccl::get_library_version().full); });
  nb::class_<KVS>(m, "KVS")
      .def_static("create_main", &KVS::create_main, "rank 0: a new main key-value store")
      .def_static("attach", &KVS::attach, nb::arg("address"), "the other ranks: rank 0's store at address")
      .def("address", &KVS::address);
  nb::class_<Communicator>(m, "Communicator")
      .def(nb::init<int, int, const KVS&>(), nb::arg("size"), nb::arg("rank"), nb::arg("kvs"))
      .def("alltoallv", &Communicator::alltoallv, nb::arg("send"), nb::arg("send_counts").noconvert(),
           nb::arg("recv"), nb::arg("recv_counts").noconvert())
      .def("allreduce", &Communicator::allreduce, nb::arg("array"), nb::arg("op") = "sum")
      .def("barrier", &Communicator::barrier)
      .def("close", &Communicator::close);
}
