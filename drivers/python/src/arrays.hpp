#pragma once
// numpy arrays as the library takes them: C-ordered arrays of a type, positions of points, the
// survey, the grid and the absorbing layer of the bindings' arguments.

#include <ksweep/base/error.hpp>
#include <ksweep/core/geometry.hpp>

#include <Kokkos_Core.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ksweep::python {

namespace py = pybind11;

template <class T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <class T>
T const* data_or_null(std::optional<carray<T>> const& a) {
  return a ? a->data() : nullptr;
}

/// Whether the build's arrays in place (fwi::Arrays::device) are CUDA arrays (a CUDA build) or
/// host arrays (host backends, whose memory space is the host's).
inline bool device_is_cuda() {
  return !Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
}

/// The data of `a`, an array in the build's memory space used in place (fwi::Arrays::device): on
/// a CUDA build an object with __cuda_array_interface__ (a CUDA torch tensor), on host backends a
/// numpy array; C-contiguous, of type T and shape `shape`, writable when `writes`. Errors name
/// `what` and what differs.
template <class T>
T* device_data(py::handle a, std::vector<py::ssize_t> const& shape, char const* what, bool writes) {
  auto const shape_text = [](auto const& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  };
  std::string const want = std::string(sizeof(T) == 4 ? "float32" : "float64") + " " + shape_text(shape);
  if (device_is_cuda()) {
    KSWEEP_REQUIRE(py::hasattr(a, "__cuda_array_interface__"),
                   what << ": a CUDA array (a torch tensor on the GPU) of " << want << " expected");
    auto const d = a.attr("__cuda_array_interface__").cast<py::dict>();
    auto const type = d["typestr"].cast<std::string>();
    std::vector<py::ssize_t> got;
    for (auto const& n : d["shape"].cast<py::tuple>()) got.push_back(n.cast<py::ssize_t>());
    KSWEEP_REQUIRE(type.size() == 3 && type[1] == 'f' && type[2] - '0' == static_cast<int>(sizeof(T)) && got == shape,
                   what << ": " << type << " " << shape_text(got) << " given, " << want << " expected");
    if (d.contains("strides") && !d["strides"].is_none()) {
      std::vector<py::ssize_t> strides;
      for (auto const& n : d["strides"].cast<py::tuple>()) strides.push_back(n.cast<py::ssize_t>());
      py::ssize_t step = sizeof(T);
      for (std::size_t i = shape.size(); i-- > 0;) {
        KSWEEP_REQUIRE(shape[i] <= 1 || strides[i] == step, what << ": a C-contiguous array expected");
        step *= shape[i];
      }
    }
    auto const data = d["data"].cast<py::tuple>();
    KSWEEP_REQUIRE(!writes || !data[1].cast<bool>(), what << ": the array is read-only");
    return reinterpret_cast<T*>(data[0].cast<std::uintptr_t>());
  }
  KSWEEP_REQUIRE(py::isinstance<py::array>(a), what << ": a numpy array of " << want << " expected");
  auto arr = py::reinterpret_borrow<py::array>(a);
  std::vector<py::ssize_t> const got(arr.shape(), arr.shape() + arr.ndim());
  KSWEEP_REQUIRE(arr.dtype().is(py::dtype::of<T>()) && got == shape, what << ": " << std::string(py::str(arr.dtype()))
                                                                          << " " << shape_text(got) << " given, "
                                                                          << want << " expected");
  KSWEEP_REQUIRE((arr.flags() & py::array::c_style) != 0, what << ": a C-contiguous array expected");
  KSWEEP_REQUIRE(!writes || arr.writeable(), what << ": the array is read-only");
  return static_cast<T*>(const_cast<void*>(arr.data()));
}

/// Positions [shot][point][dim] in cells, in the model array's axis order ((z, x) or (z, y, x)).
inline std::vector<core::Point> points_of(carray<double> const& a, int dim, char const* what) {
  KSWEEP_REQUIRE(a.ndim() == 3 && a.shape(2) == dim,
                 what << " must be [shot, point, " << dim << "], got " << a.ndim() << " dimensions");
  std::vector<core::Point> out;
  auto const* p = a.data();
  std::size_t const n = static_cast<std::size_t>(a.shape(0) * a.shape(1));
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    double const* c = p + i * static_cast<std::size_t>(dim);
    out.push_back({c[0], c[dim - 1], dim == 3 ? c[1] : 0.0});
  }
  return out;
}

/// The survey of positions in cells [shot][source][dim] and [shot][receiver][dim] (positions
/// between cells are interpolated; see core::source_taps).
inline core::Survey make_survey(carray<double> const& sources, carray<double> const& receivers, int dim) {
  core::Survey s;
  s.n_shots = static_cast<int>(sources.shape(0));
  s.n_sources = static_cast<int>(sources.shape(1));
  s.n_receivers = static_cast<int>(receivers.shape(1));
  s.source_points = points_of(sources, dim, "source_locations");
  s.receiver_points = points_of(receivers, dim, "receiver_locations");
  return s;
}

inline core::PmlConfig make_pml(std::vector<int> const& faces, double reflection, double freq, bool free_surface,
                                double velocity) {
  core::PmlConfig p;
  KSWEEP_REQUIRE(faces.size() == 1 || faces.size() == 6,
                 "pml_width: one width or 6 faces expected, got " << faces.size());
  p.width = faces[0];  // one width: every face takes it (PmlConfig::faces stay -1)
  if (faces.size() == 6)
    for (int f = 0; f < 6; ++f) p.faces[static_cast<std::size_t>(f)] = faces[static_cast<std::size_t>(f)];
  p.reflection = reflection;
  p.freq = freq;
  p.free_surface = free_surface;
  KSWEEP_REQUIRE(std::isfinite(velocity) && velocity >= 0,
                 "pml_velocity = " << velocity << " m/s must be >= 0 (0 or None: the model's maximum)");
  p.profile_velocity = velocity;
  return p;
}

inline core::ModelGrid make_grid(std::vector<int> const& shape, double dh) {
  KSWEEP_REQUIRE(shape.size() == 2 || shape.size() == 3,
                 "the model must be 2D [nz, nx] or 3D [nz, ny, nx], got " << shape.size() << " dimensions");
  return shape.size() == 3 ? core::ModelGrid::volume(shape[0], shape[1], shape[2], dh)
                           : core::ModelGrid(shape[0], shape[1], dh);
}

/// The grid of `shape` with one spacing on every axis, or one per axis ([dz, dx] or [dz, dy, dx]).
inline core::ModelGrid make_grid(std::vector<int> const& shape, std::vector<double> const& spacing) {
  KSWEEP_REQUIRE(
      spacing.size() == 1 || spacing.size() == shape.size(),
      "dh has " << spacing.size() << " values: give one spacing, or one per axis of the " << shape.size() << "D model");
  auto g = make_grid(shape, spacing.back());
  if (spacing.size() > 1) g.set_spacing({spacing[0], shape.size() == 3 ? spacing[1] : 0.0, spacing.back()});
  return g;
}

}  // namespace ksweep::python
