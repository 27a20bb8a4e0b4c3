// ksweep._ksweep: the compiled part of the Python package (ksweep/__init__.py holds the API
// users call, with its argument checks and the conversions between the peers' array layouts
// and the library's). Arrays cross the boundary as pointers into numpy's buffers: the library
// reads and writes them in place on host backends; no wavefield ever leaves the library.
//
// All of Kokkos runs on one thread of this module's (the worker): Kokkos 3.4's OpenMP backend
// serves only the thread that started it, and Python code may call from any thread. A call
// hands its work to the worker and waits with the GIL released; a caller on Python's main
// thread looks for signals while it waits, and on Ctrl-C the work stops at the end of the
// running batch of shots and KeyboardInterrupt is raised. Library errors become ValueError (bad
// input), MemoryError (allocation) and FloatingPointError (a non-finite inversion).

#include "arrays.hpp"
#include "bindings.hpp"
#include "worker.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/revision.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/workflow.hpp>
#include <ksweep/fwi/spectral.hpp>
#include <ksweep/fwi/modeling.hpp>
#include <ksweep/fwi/smoothing.hpp>
#include <ksweep/io/keys.hpp>
#include <ksweep/io/velocity.hpp>

#include <Kokkos_Core.hpp>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

using namespace ksweep;
using namespace ksweep::python;

PYBIND11_MODULE(_ksweep, m) {
  m.doc() = "ksweep's compiled core; use the ksweep package";
  m.attr("__version__") = KSWEEP_VERSION_STRING;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (fwi::IterationError const& e) {
      PyErr_SetString(PyExc_FloatingPointError, e.what());
    } catch (Error const& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  Worker::get().set_main_thread();  // the module is imported on Python's main thread
  pthread_atfork(nullptr, nullptr, &Worker::on_fork_child);
  m.def(
      "initialize", [](int threads, int device) { on_worker([&] { initialize(threads, device); }); },
      py::arg("threads") = 0, py::arg("device") = -1);
  m.def("is_initialized", [] {
    bool r = false;
    on_worker([&] { r = Kokkos::is_initialized(); });
    return r;
  });
  m.def("finalize", [] {
    g_exit_requested = true;
    finalize_when_done();
  });
  m.def("info", [] {
    std::string kokkos, backend, build, device, mpi_device_data;
    std::vector<std::string> backends;
    int concurrency = 0, ranks = 1, device_id = -1;
    bool gpu_aware = false;
    on_worker([&] {
      ensure_initialized();
      kokkos = core::kokkos_version();
      backends = core::enabled_backends();
      backend = core::default_backend();
      concurrency = core::default_concurrency();
      ranks = comm::world_size();  // not collective: info() may be asked on one rank
      build = core::describe_build(false);
      device = core::device_description();
      device_id = core::device_id();
      gpu_aware = comm::gpu_aware_mpi();
      mpi_device_data = comm::gpu_aware_mpi_reason();
    });
    py::dict d;
    d["version"] = KSWEEP_VERSION_STRING;
    d["git"] = KSWEEP_GIT_REVISION;
    d["kokkos"] = kokkos;
    d["backends"] = backends;
    d["backend"] = backend;
    d["concurrency"] = concurrency;
    d["mpi"] = static_cast<bool>(KSWEEP_ENABLE_MPI);
    d["ranks"] = ranks;
    d["device"] = device;
    d["device_id"] = device_id;
    d["gpu_aware_mpi"] = gpu_aware;
    d["mpi_device_data"] = mpi_device_data;
    d["build"] = build;
    // Which arrays the build uses in place (Modeling's *_device methods): "cuda" (CUDA arrays,
    // on device `device_id`) or "cpu" (host arrays).
    d["arrays_in_place"] = device_is_cuda() ? "cuda" : "cpu";
    return d;
  });
  // The configuration's key table (ksweep/io/keys.hpp); values as JSON text.
  m.def("keys", [] {
    py::list out;
    io::Config const defaults;
    for (auto const& k : io::keys()) {
      py::dict d;
      d["key"] = k.dotted();
      d["section"] = k.section;
      d["name"] = k.name;
      d["type"] = k.type();
      d["unit"] = k.unit;
      d["default"] = io::key_value(k, defaults).dump();
      d["allowed"] = k.limits();
      d["note"] = k.note;
      d["help"] = k.help;
      d["python"] = k.python;
      d["python_default"] = k.python_default;
      out.append(d);
    }
    return out;
  });
  m.def("ricker", &core::ricker, py::arg("freq"), py::arg("delay"), py::arg("dt"), py::arg("nt"));
  m.def(
      "load_model",
      [](std::string const& source, int decimate, std::optional<std::array<int, 2>> crop_z,
         std::optional<std::array<int, 2>> crop_y, std::optional<std::array<int, 2>> crop_x, int nz, int ny, int nx,
         double dh) {
        io::ModelSection s;
        s.source = source;
        s.decimate = decimate;
        s.crop_z = crop_z;
        s.crop_y = crop_y;
        s.crop_x = crop_x;
        s.nz = nz;
        s.ny = ny;
        s.nx = nx;
        s.dh = dh;
        io::VelocityModel vm;
        {
          py::gil_scoped_release nogil;
          vm = io::load_velocity(s);
        }
        std::vector<py::ssize_t> shape{vm.nz, vm.nx};
        if (vm.ny > 0) shape = {vm.nz, vm.ny, vm.nx};
        py::array_t<float> a(shape);
        std::copy(vm.vp.begin(), vm.vp.end(), a.mutable_data());
        return py::make_tuple(a, vm.dh, vm.description);
      },
      py::arg("source"), py::arg("decimate"), py::arg("crop_z"), py::arg("crop_y"), py::arg("crop_x"), py::arg("nz"),
      py::arg("ny"), py::arg("nx"), py::arg("dh"));
  m.def(
      "gaussian_smooth",
      [](carray<double> const& f, double sigma) {
        KSWEEP_REQUIRE(f.ndim() == 2 || f.ndim() == 3, "gaussian_smooth: a 2D or 3D array, got " << f.ndim() << "D");
        int const nz = static_cast<int>(f.shape(0)), nx = static_cast<int>(f.shape(f.ndim() - 1)),
                  ny = f.ndim() == 3 ? static_cast<int>(f.shape(1)) : 1;
        KSWEEP_REQUIRE(sigma >= 0, "sigma = " << sigma << " must be >= 0");
        std::vector<double> const in(f.data(), f.data() + f.size());
        std::vector<double> out;
        {
          py::gil_scoped_release nogil;
          out = fwi::gaussian_smooth(in, nz, ny, nx, sigma, std::function<void()>());
        }
        py::array_t<double> a(std::vector<py::ssize_t>(f.shape(), f.shape() + f.ndim()));
        std::copy(out.begin(), out.end(), a.mutable_data());
        return a;
      },
      py::arg("f"), py::arg("sigma"));
  m.def(
      "low_pass",
      [](carray<double> const& trace, double dt, double max_freq) {
        KSWEEP_REQUIRE(trace.ndim() == 1, "low_pass: a 1D trace, got " << trace.ndim() << "D");
        std::vector<double> const in(trace.data(), trace.data() + trace.size());
        std::vector<double> out;
        {
          py::gil_scoped_release nogil;
          out = fwi::low_pass(in, dt, max_freq);
        }
        return py::array_t<double>(static_cast<py::ssize_t>(out.size()), out.data());
      },
      py::arg("trace"), py::arg("dt"), py::arg("max_freq"));
  m.def(
      "low_pass_keeps",
      [](carray<double> const& wavelet, double dt, double max_freq) {
        KSWEEP_REQUIRE(wavelet.ndim() == 1, "low_pass_keeps: a 1D wavelet, got " << wavelet.ndim() << "D");
        std::vector<double> const in(wavelet.data(), wavelet.data() + wavelet.size());
        return fwi::low_pass_keeps(in, dt, max_freq);
      },
      py::arg("wavelet"), py::arg("dt"), py::arg("max_freq"));
  m.def(
      "low_pass_records",
      [](carray<float> const& records, double dt, double max_freq) {
        KSWEEP_REQUIRE(records.ndim() == 3,
                       "low_pass_records: [shot][nt][receiver] records, got " << records.ndim() << "D");
        std::vector<float> v(records.data(), records.data() + records.size());
        {
          py::gil_scoped_release nogil;
          fwi::low_pass_records(v, static_cast<int>(records.shape(0)), static_cast<int>(records.shape(1)),
                                static_cast<int>(records.shape(2)), dt, max_freq);
        }
        py::array_t<float> a(std::vector<py::ssize_t>(records.shape(), records.shape() + 3));
        std::copy(v.begin(), v.end(), a.mutable_data());
        return a;
      },
      py::arg("records"), py::arg("dt"), py::arg("max_freq"));
  m.def(
      "estimate_wavelet",
      [](carray<float> const& observed, carray<float> const& synthetic, carray<double> const& reference, double dt,
         double stabilisation) {
        KSWEEP_REQUIRE(observed.ndim() == 3,
                       "estimate_wavelet: [shot][nt][receiver] observed records, got " << observed.ndim() << "D");
        int const shots = static_cast<int>(observed.shape(0)), nt = static_cast<int>(observed.shape(1)),
                  nr = static_cast<int>(observed.shape(2));
        std::vector<float> const o(observed.data(), observed.data() + observed.size()),
            syn(synthetic.data(), synthetic.data() + synthetic.size());
        std::vector<double> const r(reference.data(), reference.data() + reference.size());
        fwi::WaveletEstimate e;
        {
          py::gil_scoped_release nogil;
          e = fwi::estimate_wavelet(o, syn, r, shots, nt, nr, dt, stabilisation);
        }
        return py::make_tuple(py::array_t<double>(static_cast<py::ssize_t>(e.wavelet.size()), e.wavelet.data()),
                              e.residual, e.residual_reference);
      },
      py::arg("observed"), py::arg("synthetic"), py::arg("reference"), py::arg("dt"), py::arg("stabilisation"));
  // The same forward as ksweep.forward, from C++ alone (for the overhead benchmark,
  // scripts/bench_python.py): set-up, velocity and forward of float32 arrays, timed on the worker.
  // With `end_state`, it also hands back where the run ends (u^nt, u^(nt-1) and the layer
  // memories, into host arrays), as ksweep.scalar does.
  m.def(
      "_cpp_forward_seconds",
      [](std::vector<int> const& shape, double dh, double dt, int order, int pml_width, carray<double> const& sources,
         carray<double> const& receivers, carray<float> const& amplitudes, carray<float> const& v, bool end_state) {
        int const dim = static_cast<int>(shape.size());
        fwi::ModelingSetup s;
        s.grid = make_grid(shape, dh);
        s.pml.width = pml_width;
        s.order = order;
        s.dt = dt;
        s.nt = static_cast<int>(amplitudes.shape(2));
        s.survey = make_survey(sources, receivers, dim);
        std::vector<float> const w(amplitudes.data(), amplitudes.data() + amplitudes.size());
        std::vector<float> const vp(v.data(), v.data() + v.size());
        double seconds = 0;
        on_worker([&] {
          ensure_initialized();
          // The end state's arrays are the caller's, made before the clock starts (as Python's
          // come from memory it has used before).
          std::vector<float> now, before, memories;
          if (end_state) {
            fwi::Modeling<float> const sizes(s);
            auto const n = sizes.padded_shape();
            std::size_t const shots = static_cast<std::size_t>(s.survey.n_shots),
                              cells = static_cast<std::size_t>(n[0]) * n[1] * n[2],
                              memory = static_cast<std::size_t>(sizes.memory_values());
            now.resize(shots * cells), before.resize(shots * cells), memories.resize(shots * memory);
          }
          auto const t0 = std::chrono::steady_clock::now();
          fwi::Modeling<float> modeling(s);
          modeling.set_velocity(vp.data());
          std::vector<float> records(static_cast<std::size_t>(s.survey.n_shots) * s.nt * s.survey.n_receivers);
          if (end_state) {
            fwi::ForwardState<float> state;
            state.end_now = now.data();
            state.end_before = before.data();
            state.end_memory = memories.data();
            modeling.forward(w.data(), records.data(), state);
          } else {
            modeling.forward(w.data(), records.data());
          }
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        });
        return seconds;
      },
      py::arg("shape"), py::arg("dh"), py::arg("dt"), py::arg("order"), py::arg("pml_width"), py::arg("sources"),
      py::arg("receivers"), py::arg("amplitudes"), py::arg("v"), py::arg("end_state") = false);
  python::bind_modeling(m);
  python::bind_inversion(m);
}
