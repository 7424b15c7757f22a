// Python binding of the native kernels: converts arrays, releases the GIL, and
// nothing else. Validation and dtype policy live in the Python wrappers.
#include <nanobind/nanobind.h>
#include <omp.h>

namespace nb = nanobind;

NB_MODULE(_native, m) {
  m.doc() = "fastsample C++/OpenMP kernels";
  m.def("max_threads", []() { return omp_get_max_threads(); },
        "OpenMP's thread count for the next parallel region (OMP_NUM_THREADS).");
}
