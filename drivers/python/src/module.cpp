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

#include <ksweep/base/config.hpp>
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

namespace py = pybind11;
using namespace ksweep;

namespace {

/// A request to stop, set by a caller that saw Ctrl-C, read by the work between batches.
std::atomic<bool> g_cancel{false};

/// What stops work at the end of a batch after Ctrl-C (the caller then raises KeyboardInterrupt).
struct Cancelled : std::exception {
  char const* what() const noexcept override { return "interrupted"; }
};

/// Whether this process is a fork() of one that had started Kokkos (set in the child by the
/// handler installed at import), and whether this process started it (read by that handler).
std::atomic<bool> g_forked_after_start{false};
std::atomic<bool> g_kokkos_started{false};
std::atomic<bool> g_forked{false};

/// The error of every call in a child forked after Kokkos started: neither the worker nor the
/// backend's threads exist there, and Kokkos cannot be started twice in one process.
[[noreturn]] void refuse_forked_child() {
  throw std::runtime_error(
      "ksweep: this process is a fork() of one that had already run ksweep; the threads that run its "
      "computations exist only in the parent, and ksweep cannot start again here. Start workers with "
      "multiprocessing's 'spawn' or 'forkserver' method (multiprocessing.get_context('spawn')), or fork "
      "before the first ksweep computation");
}

/// The thread that runs everything touching Kokkos, one piece of work at a time.
class Worker {
 public:
  static Worker& get() {
    // Never destroyed: the thread lives as long as the process. A child forked before Kokkos
    // started gets a worker of its own (the parent's thread does not exist in it).
    static Worker* w = new Worker();
    if (g_forked.exchange(false)) {
      if (g_forked_after_start) refuse_forked_child();
      auto const main = w->m_python_main;
      w = new Worker();
      w->m_python_main = main;
    }
    if (g_forked_after_start) refuse_forked_child();
    return *w;
  }
  /// Installed once at import: marks a forked child.
  static void on_fork_child() {
    g_forked = true;
    if (g_kokkos_started) g_forked_after_start = true;
  }

  /// Runs `f` on the worker and waits for it with the GIL released (called with the GIL held).
  /// Exceptions of `f` are rethrown here; a signal seen while waiting (on the main thread)
  /// cancels the work at its next batch boundary and is raised as Python's exception.
  template <class F>
  void run(F&& f) {
    std::exception_ptr error;
    bool interrupted = false;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> one_call(m_call);
      m_caller = std::this_thread::get_id();
      g_cancel = false;
      std::unique_lock<std::mutex> lock(m_mutex);
      m_job = [&] {
        try {
          f();
        } catch (...) {
          error = std::current_exception();
        }
      };
      m_done = false;
      m_wake.notify_all();
      bool const main_thread = std::this_thread::get_id() == m_python_main;
      while (!m_done) {
        m_finished.wait_for(lock, std::chrono::milliseconds(50));
        if (m_done || !main_thread || interrupted) continue;
        lock.unlock();
        {
          py::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) interrupted = true;  // the exception waits in the thread state
        }
        if (interrupted) g_cancel = true;
        lock.lock();
      }
      // What Python freed while this caller looked for signals (a handler's or the collector's
      // work), freed here on the worker.
      if (!m_graveyard.empty()) {
        m_job = [graves = std::move(m_graveyard)]() mutable { graves.clear(); };
        m_graveyard.clear();
        m_done = false;
        m_wake.notify_all();
        m_finished.wait(lock, [&] { return m_done; });
      }
      m_caller = std::thread::id();
    }
    if (interrupted) throw py::error_already_set();
    if (error) std::rethrow_exception(error);
  }

  /// Python's main thread (where signals are handled), set at import.
  void set_main_thread() { m_python_main = std::this_thread::get_id(); }

  /// Frees `p` on the worker; when this thread is already waiting in run() (Python code ran while
  /// it looked for signals), at the end of that run instead of waiting for itself.
  template <class T>
  void free(std::unique_ptr<T>& p) {
    if (std::this_thread::get_id() == m_caller) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_graveyard.emplace_back(p.release(), [](void* q) { delete static_cast<T*>(q); });
      return;
    }
    run([&] { p.reset(); });
  }

 private:
  Worker() {
    std::thread([this] { loop(); }).detach();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
      m_wake.wait(lock, [&] { return static_cast<bool>(m_job); });
      auto job = std::move(m_job);
      m_job = nullptr;
      lock.unlock();
      job();
      lock.lock();
      m_done = true;
      m_finished.notify_all();
    }
  }

  std::mutex m_call, m_mutex;
  std::condition_variable m_wake, m_finished;
  std::function<void()> m_job;
  bool m_done = true;
  std::thread::id m_python_main;
  std::atomic<std::thread::id> m_caller{};         // the thread inside run(), if any
  std::vector<std::shared_ptr<void>> m_graveyard;  // freed at the end of the current run()
};

template <class F>
void on_worker(F&& f) {
  Worker::get().run(std::forward<F>(f));
}

/// Frees what `p` owns on the worker (views are freed where Kokkos runs); from destructors.
template <class T>
void release(std::unique_ptr<T>& p) noexcept {
  if (!p) return;
  try {
    Worker::get().free(p);
  } catch (...) {
    PyErr_Clear();  // a signal while freeing: freeing finished anyway
  }
}

bool g_we_initialized = false;
// Objects holding Kokkos memory, and whether the interpreter asked to finalize: Kokkos is
// finalized at exit once the last of them is gone (Python may destroy them after atexit runs).
int g_live = 0;
bool g_exit_requested = false;

// MPI, started by this module (on the worker, before Kokkos) when the process was launched by
// an MPI launcher and nothing (mpi4py) started it; finalized after Kokkos at exit.
std::unique_ptr<comm::Environment> g_mpi;

bool launched_by_mpi() {
  for (char const* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void start_mpi_if_launched() {
  if (g_mpi || !KSWEEP_ENABLE_MPI || !launched_by_mpi()) return;
  static char name[] = "ksweep";
  static char* args[] = {name, nullptr};
  int argc = 1;
  char** argv = args;
  g_mpi = std::make_unique<comm::Environment>(argc, argv);
}

void finalize_when_done() {
  if (g_forked_after_start) return;  // nothing of Kokkos' runs in a forked child
  if (g_exit_requested && g_live == 0 && g_we_initialized)
    on_worker([] {
      if (Kokkos::is_initialized()) Kokkos::finalize();
      g_mpi.reset();
    });
}

/// Counts an object that holds Kokkos memory for as long as it lives.
struct Live {
  Live() { ++g_live; }
  ~Live() {
    --g_live;
    finalize_when_done();
  }
  Live(Live const&) = delete;
  Live& operator=(Live const&) = delete;
};

/// Starts Kokkos (once) with `threads` host threads (0: Kokkos' default, from OMP_NUM_THREADS
/// or the machine) and the GPU `device` (-1: KSWEEP_DEVICE where set, else the node-local rank
/// modulo the visible devices: core::device_for_process).
void initialize(int threads, int device) {
  if (Kokkos::is_initialized()) {
    KSWEEP_REQUIRE(threads <= 0 && device < 0, "ksweep.initialize: Kokkos is already running (with "
                                                   << core::default_concurrency()
                                                   << " threads); threads and device can only "
                                                      "be chosen before the first computation");
    return;
  }
  KSWEEP_REQUIRE(threads >= 0, "ksweep.initialize: threads = " << threads << " must be >= 1 (or None)");
  KSWEEP_REQUIRE(threads <= core::max_host_threads(),
                 "ksweep.initialize: threads = " << threads << ": more host threads than the backend runs (at most "
                                                 << core::max_host_threads() << ")");
  // The program's choice where none is given (OMP_NUM_THREADS checked, the node's cores shared
  // among its ranks).
  if (threads == 0) threads = core::HostThreads::choose(0, nullptr).threads;
#if KOKKOS_VERSION >= 40000
  std::string const t = "--kokkos-num-threads=", d = "--kokkos-device-id=";
#else
  std::string const t = "--kokkos-threads=", d = "--kokkos-device=";
#endif
  std::vector<std::string> args{"ksweep"};
  if (threads > 0) args.push_back(t + std::to_string(threads));
  if (device < 0) device = core::device_for_process(-1);
  if (device >= 0) args.push_back(d + std::to_string(device));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  start_mpi_if_launched();
  try {
    Kokkos::initialize(argc, argv.data());
  } catch (std::exception const& e) {
    std::string reason = e.what();
    if (auto const nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
    throw std::runtime_error("cannot start Kokkos: " + reason);
  }
  g_we_initialized = true;
  g_kokkos_started = true;
}

void ensure_initialized() {
  if (!Kokkos::is_initialized()) initialize(0, -1);
}

/// Called by the library after each batch of shots (on the worker): stops after Ctrl-C.
void stop_if_cancelled(int, int) {
  if (g_cancel) throw Cancelled();
}

template <class T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <class T>
T const* data_or_null(std::optional<carray<T>> const& a) {
  return a ? a->data() : nullptr;
}

/// Positions [shot][point][dim] in cells, in the model array's axis order ((z, x) or (z, y, x)).
std::vector<core::Point> points_of(carray<double> const& a, int dim, char const* what) {
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
core::Survey make_survey(carray<double> const& sources, carray<double> const& receivers, int dim) {
  core::Survey s;
  s.n_shots = static_cast<int>(sources.shape(0));
  s.n_sources = static_cast<int>(sources.shape(1));
  s.n_receivers = static_cast<int>(receivers.shape(1));
  s.source_points = points_of(sources, dim, "source_locations");
  s.receiver_points = points_of(receivers, dim, "receiver_locations");
  return s;
}

core::PmlConfig make_pml(std::vector<int> const& faces, double reflection, double freq, bool free_surface,
                         double velocity) {
  core::PmlConfig p;
  KSWEEP_REQUIRE(faces.size() == 6, "pml_width: 6 faces expected, got " << faces.size());
  p.width = faces[0];
  for (int f = 0; f < 6; ++f) p.faces[static_cast<std::size_t>(f)] = faces[static_cast<std::size_t>(f)];
  p.reflection = reflection;
  p.freq = freq;
  p.free_surface = free_surface;
  KSWEEP_REQUIRE(std::isfinite(velocity) && velocity >= 0,
                 "pml_velocity = " << velocity << " m/s must be >= 0 (0 or None: the model's maximum)");
  p.profile_velocity = velocity;
  return p;
}

core::ModelGrid make_grid(std::vector<int> const& shape, double dh) {
  KSWEEP_REQUIRE(shape.size() == 2 || shape.size() == 3,
                 "the model must be 2D [nz, nx] or 3D [nz, ny, nx], got " << shape.size() << " dimensions");
  return shape.size() == 3 ? core::ModelGrid::volume(shape[0], shape[1], shape[2], dh)
                           : core::ModelGrid(shape[0], shape[1], dh);
}

/// The library's modelling of precision Real, with the arrays of one survey.
template <class Real>
class PyModeling {
 public:
  PyModeling(std::vector<int> const& shape, double dh, double dt, int nt, int order, std::vector<int> const& pml_faces,
             double pml_reflection, double pml_freq, bool free_surface, carray<double> const& sources,
             carray<double> const& receivers, int batch, std::string const& schedule, std::string const& strategy,
             std::string const& location, std::string const& dtype, std::string const& disk_dir,
             std::string const& physics, double pml_velocity) {
    fwi::ModelingSetup s;
    s.physics = fwi::parse_physics(physics);
    m_vd = s.physics == fwi::Physics::acoustic_vd;
    s.grid = make_grid(shape, dh);
    int const dim = static_cast<int>(shape.size());
    s.pml = make_pml(pml_faces, pml_reflection, pml_freq, free_surface, pml_velocity);
    s.order = order;
    s.dt = dt;
    s.nt = nt;
    s.survey = make_survey(sources, receivers, dim);
    s.batch = batch;
    s.schedule = core::parse_schedule(schedule);
    s.storage = storage::make_storage_config(strategy, location, dtype, 64, disk_dir, true);
    m_shots = s.survey.n_shots;
    m_ns = s.survey.n_sources;
    m_nr = s.survey.n_receivers;
    m_nt = nt;
    m_shape = shape;
    on_worker([&] {
      ensure_initialized();
      m_m = std::make_unique<fwi::Modeling<Real>>(std::move(s));
      m_m->set_after_batch(stop_if_cancelled);
    });
  }
  ~PyModeling() { release(m_m); }
  PyModeling(PyModeling const&) = delete;
  PyModeling& operator=(PyModeling const&) = delete;

  void set_velocity(carray<Real> const& vp, std::optional<carray<Real>> const& layer) {
    check_model(vp, "v");
    if (layer) check_model(*layer, "layer_velocity");
    Real const* l = data_or_null(layer);
    on_worker([&] { m_m->set_velocity(vp.data(), l); });
  }

  void set_model(carray<Real> const& vp, carray<Real> const& rho, std::optional<carray<Real>> const& layer_vp,
                 std::optional<carray<Real>> const& layer_rho) {
    check_model(vp, "v");
    check_model(rho, "rho");
    if (layer_vp) check_model(*layer_vp, "layer_velocity");
    if (layer_rho) check_model(*layer_rho, "layer_density");
    Real const* lv = data_or_null(layer_vp);
    Real const* lr = data_or_null(layer_rho);
    on_worker([&] { m_m->set_model(vp.data(), rho.data(), lv, lr); });
  }

  py::array_t<Real> forward(carray<Real> const& wavelets) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    py::array_t<Real> rec({m_shots, m_nt, m_nr});
    Real* r = rec.mutable_data();
    on_worker([&] { m_m->forward(wavelets.data(), r); });
    return rec;
  }

  py::array_t<Real> adjoint(carray<Real> const& records) {
    check_shape(records, {m_shots, m_nt, m_nr}, "data");
    py::array_t<Real> w({m_shots, m_ns, m_nt});
    Real* p = w.mutable_data();
    on_worker([&] { m_m->adjoint(records.data(), p); });
    return w;
  }

  py::tuple gradient(carray<Real> const& wavelets, carray<Real> const& observed, double scale) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_shape(observed, {m_shots, m_nt, m_nr}, "observed_data");
    auto img = images();
    py::array_t<Real> syn({m_shots, m_nt, m_nr});
    py::array_t<double> losses(m_shots);
    fwi::ModelingImages out{img[0].mutable_data(), img[1].mutable_data(), img[2].mutable_data(),
                            m_vd ? img[3].mutable_data() : nullptr};
    Real* sp = syn.mutable_data();
    double* lp = losses.mutable_data();
    double loss = 0;
    on_worker([&] { loss = m_m->gradient(wavelets.data(), observed.data(), scale, out, sp, lp); });
    return py::make_tuple(loss, img[0], img[1], img[2], syn, losses, m_vd ? py::object(img[3]) : py::none());
  }

  py::tuple vjp(carray<Real> const& wavelets, carray<Real> const& residual) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_shape(residual, {m_shots, m_nt, m_nr}, "grad_output");
    auto img = images();
    fwi::ModelingImages out{img[0].mutable_data(), img[1].mutable_data(), img[2].mutable_data(),
                            m_vd ? img[3].mutable_data() : nullptr};
    on_worker([&] { m_m->vjp(wavelets.data(), residual.data(), out); });
    return py::make_tuple(img[0], img[1], img[2], m_vd ? py::object(img[3]) : py::none());
  }

 private:
  std::vector<py::array_t<double>> images() const {
    std::vector<py::ssize_t> const shape(m_shape.begin(), m_shape.end());
    std::vector<py::array_t<double>> img{py::array_t<double>(shape), py::array_t<double>(shape),
                                         py::array_t<double>(shape)};
    if (m_vd) img.emplace_back(shape);
    return img;
  }
  void check_model(carray<Real> const& a, char const* what) const {
    std::vector<long long> want(m_shape.begin(), m_shape.end());
    check_shape(a, want, what);
  }
  static void check_shape(py::array const& a, std::vector<long long> const& want, char const* what) {
    bool ok = a.ndim() == static_cast<py::ssize_t>(want.size());
    for (std::size_t i = 0; ok && i < want.size(); ++i) ok = a.shape(static_cast<py::ssize_t>(i)) == want[i];
    if (!ok) {
      std::string got, exp;
      for (py::ssize_t i = 0; i < a.ndim(); ++i) got += (i ? ", " : "") + std::to_string(a.shape(i));
      for (std::size_t i = 0; i < want.size(); ++i) exp += (i ? ", " : "") + std::to_string(want[i]);
      throw Error(std::string(what) + " has shape (" + got + "), expected (" + exp + ")");
    }
  }

  Live m_live;  // declared first: destroyed after the modelling's memory
  std::unique_ptr<fwi::Modeling<Real>> m_m;
  long long m_shots = 0, m_ns = 0, m_nr = 0, m_nt = 0;
  std::vector<int> m_shape;
  bool m_vd = false;  // variable density: a density gradient too
};

template <class Real>
void bind_modeling(py::module_& m, char const* name) {
  py::class_<PyModeling<Real>>(m, name)
      .def(py::init<std::vector<int> const&, double, double, int, int, std::vector<int> const&, double, double, bool,
                    carray<double> const&, carray<double> const&, int, std::string const&, std::string const&,
                    std::string const&, std::string const&, std::string const&, std::string const&, double>(),
           py::arg("shape"), py::arg("dh"), py::arg("dt"), py::arg("nt"), py::arg("order"), py::arg("pml_faces"),
           py::arg("pml_reflection"), py::arg("pml_freq"), py::arg("free_surface"), py::arg("sources"),
           py::arg("receivers"), py::arg("batch"), py::arg("schedule"), py::arg("strategy"), py::arg("location"),
           py::arg("dtype"), py::arg("disk_dir"), py::arg("physics") = "acoustic", py::arg("pml_velocity") = 0.0)
      .def("set_velocity", &PyModeling<Real>::set_velocity, py::arg("v"), py::arg("layer") = py::none())
      .def("set_model", &PyModeling<Real>::set_model, py::arg("v"), py::arg("rho"), py::arg("layer_v") = py::none(),
           py::arg("layer_rho") = py::none())
      .def("forward", &PyModeling<Real>::forward)
      .def("adjoint", &PyModeling<Real>::adjoint)
      .def("gradient", &PyModeling<Real>::gradient)
      .def("vjp", &PyModeling<Real>::vjp);
}

/// The library inversion over this process's ranks: one rank, unless the process was started by
/// an MPI launcher (mpirun: this module then starts MPI) or MPI was started before (mpi4py).
/// The options of Inversion from Python keywords, through the configuration's key table
/// (ksweep/io/keys.hpp): each keyword is the key's Python name, converted to the key's type and
/// checked against the key's limits and choices as the program checks the key.
io::Config options_config(py::dict const& keywords) {
  io::Config c;
  for (auto const& [name_object, value] : keywords) {
    std::string const name = py::str(name_object);
    io::Key const* key = nullptr;
    std::string known;
    for (auto const& k : io::keys()) {
      if (k.python.empty()) continue;
      known += (known.empty() ? "" : ", ") + k.python;
      if (k.python == name) key = &k;
    }
    KSWEEP_REQUIRE(key != nullptr, "unknown option " << shown(name) << " (options: " << known << ")");
    std::visit(
        [&](auto field) {
          auto& out = field(c);
          using T = std::decay_t<decltype(out)>;
          // As strict as the file's reader: no float or bool for an integer, no number for a bool.
          bool const is_bool = py::isinstance<py::bool_>(value) ||
                               py::str(value.get_type()).cast<std::string>() == "<class 'numpy.bool_'>";
          if constexpr (std::is_same_v<T, int>)
            KSWEEP_REQUIRE(
                !is_bool && (py::isinstance<py::int_>(value) || py::hasattr(value, "__index__")),
                name << " = " << shown(py::repr(value).cast<std::string>()) << " must be an integer (" << key->dotted() << ")");
          if constexpr (std::is_same_v<T, bool>)
            KSWEEP_REQUIRE(is_bool, name << " = " << shown(py::repr(value).cast<std::string>()) << " must be True or False ("
                                         << key->dotted() << ")");
          try {
            if constexpr (std::is_same_v<T, std::vector<io::FwiSection::Stage>>) {
              out.clear();
              for (auto const& [iterations, max_freq] : py::cast<std::vector<std::pair<int, double>>>(value))
                out.push_back({max_freq, iterations});
            } else if constexpr (std::is_same_v<T, std::optional<std::array<int, 2>>>) {
              out = py::cast<std::array<int, 2>>(value);
            } else {
              out = py::cast<T>(value);
            }
          } catch (py::cast_error const&) {
            KSWEEP_REQUIRE(false, name << " = " << shown(py::repr(value).cast<std::string>()) << " is not of the type of "
                                       << key->dotted() << " (" << key->type() << ")");
          }
        },
        key->field);
    io::check_key(*key, c, name);
  }
  return c;
}

class PyInversion {
 public:
  /// `options`: keywords of the key table (options_config); `pml_faces` the layer's six widths.
  PyInversion(std::vector<int> const& shape, double dh, double dt, std::vector<int> const& pml_faces,
              carray<double> const& sources, carray<double> const& receivers, carray<double> const& wavelet,
              carray<float> const& observed, carray<float> const& start, std::optional<carray<float>> const& truth,
              std::optional<carray<float>> const& density, std::optional<carray<float>> const& truth_density,
              py::dict const& options) {
    io::Config const c = options_config(options);
    auto const& f = c.fwi;
    auto const& p = c.propagator;
    fwi::Problem pb;
    if (density) {
      pb.physics = fwi::Physics::acoustic_vd;
      pb.density.assign(density->data(), density->data() + density->size());
      if (truth_density) pb.truth_density.assign(truth_density->data(), truth_density->data() + truth_density->size());
    }
    pb.grid = make_grid(shape, dh);
    int const dim = static_cast<int>(shape.size());
    pb.pml = make_pml(pml_faces, p.pml_reflection, p.pml_freq, p.free_surface, p.pml_velocity);
    pb.order = p.order;
    pb.dt = dt;
    pb.nt = static_cast<int>(wavelet.size());
    pb.survey = make_survey(sources, receivers, dim);
    pb.wavelet.assign(wavelet.data(), wavelet.data() + wavelet.size());
    pb.observed.assign(observed.data(), observed.data() + observed.size());
    pb.start.assign(start.data(), start.data() + start.size());
    if (truth) pb.truth.assign(truth->data(), truth->data() + truth->size());
    m_cells = static_cast<std::size_t>(pb.grid.cells());
    KSWEEP_REQUIRE(pb.start.size() == m_cells, "v has " << pb.start.size() << " cells, the grid " << m_cells);
    fwi::Options o;
    o.method = f.optimizer == "lbfgs" ? fwi::Method::lbfgs : fwi::Method::adam;
    o.batch = f.batch;
    o.seed = static_cast<std::uint64_t>(f.seed);
    o.loss_sum = f.loss_norm == "sum";
    o.water_rows = f.water_rows;
    o.grad_smooth = f.grad_smooth;
    o.precondition = f.precondition;
    o.vmin = f.vmin;
    o.vmax = f.vmax;
    o.adam.lr = f.lr;
    o.adam.beta1 = f.beta1;
    o.adam.beta2 = f.beta2;
    o.adam.eps = f.eps;
    o.lbfgs.first_step = f.lr;
    o.lbfgs.memory = f.lbfgs_memory;
    o.storage = storage::make_storage_config(c.storage.strategy, c.storage.location, c.storage.dtype,
                                             c.storage.transfer_interval, c.storage.disk_dir, c.storage.pinned);
    o.storage.layer_chain = c.storage.layer_chain;
    o.schedule = core::parse_schedule(p.schedule);
    o.invert = f.invert;
    o.rho_min = f.rho_min;
    o.rho_max = f.rho_max;
    o.lr_rho = f.lr_rho;
    // [nx parts] (2D) or [ny parts, nx parts] (3D), checked by the package.
    auto const& domains = c.parallel.domains;
    if (domains.size() == 1) o.domains = {1, domains[0]};
    if (domains.size() == 2) o.domains = {domains[0], domains[1]};
    std::vector<std::pair<int, double>> stages;
    for (auto const& st : f.stages) stages.emplace_back(st.iterations, st.max_freq);
    m_shape = shape;
    on_worker([&] {
      ensure_initialized();
      std::vector<fwi::Stage> st;
      for (auto const& [iterations, max_freq] : stages) st.push_back({iterations, max_freq});
      fwi::Stages plan(std::move(st), pb.wavelet, dt);
      m_flow = std::make_unique<fwi::Workflow>(std::move(pb), std::move(o), std::move(plan), comm::Communicator());
      m_inv = &m_flow->inversion();
    });
  }
  ~PyInversion() { release(m_flow); }
  PyInversion(PyInversion const&) = delete;
  PyInversion& operator=(PyInversion const&) = delete;

  py::dict step() {
    fwi::Report r;
    int stage = -1;
    on_worker([&] {
      stage = m_flow->stage().index;
      r = m_flow->step();
    });
    py::dict d;
    d["stage"] = stage + 1;  // 1-based; 0 without stages
    d["iteration"] = r.iteration;
    d["loss"] = r.loss;
    d["loss_start"] = r.loss_start;
    d["rmse"] = r.rmse;
    d["rmse_density"] = r.rmse_density;
    d["seconds"] = r.seconds;
    d["shots"] = r.shots;
    d["evaluations"] = r.evaluations;
    return d;
  }

  py::array_t<float> model() const {
    std::vector<float> v;
    on_worker([&] { v = m_inv->model(); });
    return shaped(v);
  }
  py::object density() const {
    std::vector<float> v;
    on_worker([&] { v = m_inv->density(); });
    return v.empty() ? py::object(py::none()) : py::object(shaped(v));
  }
  py::dict images() const {
    fwi::Images img;
    on_worker([&] { img = m_inv->images(); });
    py::dict d;
    d["grad"] = shaped(img.grad);
    d["illum_src"] = shaped(img.illum_src);
    d["illum_rec"] = shaped(img.illum_rec);
    if (!img.grad_density.empty()) d["grad_rho"] = shaped(img.grad_density);
    return d;
  }
  int iteration() const { return m_inv->iteration(); }
  double rmse() const {
    double r = 0;
    on_worker([&] { r = m_inv->rmse(); });
    return r;
  }
  double rmse_density() const {
    double r = 0;
    on_worker([&] { r = m_inv->rmse_density(); });
    return r;
  }

  py::dict state() const {
    fwi::State s;
    on_worker([&] { s = m_inv->state(); });
    py::dict d;
    d["iteration"] = s.iteration;
    d["rng"] = py::bytes(s.rng);
    d["model"] = shaped(s.model);
    if (!s.density.empty()) d["density"] = shaped(s.density);
    d["first"] = py::array_t<float>(static_cast<py::ssize_t>(s.first.size()), s.first.data());
    d["second"] = py::array_t<float>(static_cast<py::ssize_t>(s.second.size()), s.second.data());
    d["optimizer_steps"] = s.optimizer_steps;
    if (s.lbfgs.iterations > 0 || !s.lbfgs.gradient.empty()) {  // L-BFGS: its memory
      auto const& lb = s.lbfgs;
      py::dict m;
      auto arr = [](auto const& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
      };
      m["pairs"] = lb.pairs;
      m["s"] = arr(lb.s);
      m["y"] = arr(lb.y);
      m["rho"] = arr(lb.rho);
      m["gradient"] = arr(lb.gradient);
      m["loss"] = lb.loss;
      m["gamma"] = lb.gamma;
      m["iterations"] = lb.iterations;
      m["evaluations"] = lb.evaluations;
      d["lbfgs"] = m;
    }
    return d;
  }

  void set_data(carray<double> const& wavelet, carray<float> const& observed) {
    std::vector<double> w(wavelet.data(), wavelet.data() + wavelet.size());
    std::vector<float> o(observed.data(), observed.data() + observed.size());
    on_worker([&] { m_inv->set_data(std::move(w), std::move(o)); });
  }
  void restart_optimizer() {
    on_worker([&] { m_inv->restart_optimizer(); });
  }

  void restore(py::dict const& d) {
    fwi::State s;
    s.iteration = d["iteration"].cast<int>();
    s.rng = d["rng"].cast<std::string>();
    auto vec = [](py::handle h) {
      auto const a = h.cast<carray<float>>();
      return std::vector<float>(a.data(), a.data() + a.size());
    };
    s.model = vec(d["model"]);
    if (d.contains("density")) s.density = vec(d["density"]);
    s.first = vec(d["first"]);
    s.second = vec(d["second"]);
    if (d.contains("optimizer_steps")) s.optimizer_steps = d["optimizer_steps"].cast<int>();
    if (d.contains("lbfgs")) {
      auto const m = d["lbfgs"].cast<py::dict>();
      auto& lb = s.lbfgs;
      lb.pairs = m["pairs"].cast<int>();
      lb.s = vec(m["s"]);
      lb.y = vec(m["y"]);
      auto const rho = m["rho"].cast<carray<double>>();
      lb.rho.assign(rho.data(), rho.data() + rho.size());
      lb.gradient = vec(m["gradient"]);
      lb.loss = m["loss"].cast<double>();
      lb.gamma = m["gamma"].cast<double>();
      lb.iterations = m["iterations"].cast<int>();
      lb.evaluations = m["evaluations"].cast<int>();
    }
    on_worker([&] { m_flow->restore(std::move(s)); });
  }

 private:
  py::array_t<float> shaped(std::vector<float> const& v) const {
    std::vector<py::ssize_t> const shape(m_shape.begin(), m_shape.end());
    py::array_t<float> a(shape);
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  }
  Live m_live;  // declared first: destroyed after the inversion's memory
  std::unique_ptr<fwi::Workflow> m_flow;
  fwi::Inversion* m_inv = nullptr;  ///< the workflow's inversion
  std::size_t m_cells = 0;
  std::vector<int> m_shape;
};

}  // namespace

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
  m.def("_cpp_forward_seconds",
        [](std::vector<int> const& shape, double dh, double dt, int order, int pml_width, carray<double> const& sources,
           carray<double> const& receivers, carray<float> const& amplitudes, carray<float> const& v) {
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
            auto const t0 = std::chrono::steady_clock::now();
            fwi::Modeling<float> modeling(s);
            modeling.set_velocity(vp.data());
            std::vector<float> records(static_cast<std::size_t>(s.survey.n_shots) * s.nt * s.survey.n_receivers);
            modeling.forward(w.data(), records.data());
            seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          });
          return seconds;
        });
  bind_modeling<float>(m, "Modeling32");
  bind_modeling<double>(m, "Modeling64");
  py::class_<PyInversion>(m, "Inversion")
      .def(py::init<std::vector<int> const&, double, double, std::vector<int> const&, carray<double> const&,
                    carray<double> const&, carray<double> const&, carray<float> const&, carray<float> const&,
                    std::optional<carray<float>> const&, std::optional<carray<float>> const&,
                    std::optional<carray<float>> const&, py::dict const&>())
      .def("step", &PyInversion::step)
      .def("model", &PyInversion::model)
      .def("density", &PyInversion::density)
      .def("rmse_density", &PyInversion::rmse_density)
      .def("images", &PyInversion::images)
      .def("iteration", &PyInversion::iteration)
      .def("rmse", &PyInversion::rmse)
      .def("state", &PyInversion::state)
      .def("restore", &PyInversion::restore)
      .def("set_data", &PyInversion::set_data)
      .def("restart_optimizer", &PyInversion::restart_optimizer);
}
