// Inversion: the library's inversion workflow (fwi::Workflow over fwi::Inversion) on numpy arrays,
// its options through the configuration's key table.

#include "arrays.hpp"
#include "bindings.hpp"
#include "worker.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/configured.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/memory.hpp>
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
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

namespace ksweep::python {
namespace {

/// The library inversion over this process's ranks: one rank, unless the process was started by
/// an MPI launcher (mpirun: this module then starts MPI) or MPI was started before (mpi4py).
/// The options of Inversion from Python keywords, through the configuration's key table
/// (ksweep/io/keys.hpp): each keyword is the key's Python name, converted to the key's type and
/// checked against the key's limits and choices as the program checks the key.
io::Config options_config(py::dict const& keywords) {
  io::Config c;
  for (auto const& item : keywords) {
    // Named handles, not structured bindings: a lambda below captures them (C++17).
    py::handle const name_object = item.first, value = item.second;
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
          bool const is_bool =
              py::isinstance<py::bool_>(value) || py::isinstance(value, py::module_::import("numpy").attr("bool_"));
          if constexpr (std::is_same_v<T, int>)
            KSWEEP_REQUIRE(!is_bool && (py::isinstance<py::int_>(value) || py::hasattr(value, "__index__")),
                           name << " = " << shown(py::repr(value).cast<std::string>()) << " must be an integer ("
                                << key->dotted() << ")");
          if constexpr (std::is_same_v<T, bool>)
            KSWEEP_REQUIRE(is_bool, name << " = " << shown(py::repr(value).cast<std::string>())
                                         << " must be True or False (" << key->dotted() << ")");
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
            KSWEEP_REQUIRE(false, name << " = " << shown(py::repr(value).cast<std::string>())
                                       << " is not of the type of " << key->dotted() << " (" << key->type() << ")");
          }
        },
        key->field);
    io::check_key(*key, c, name);
  }
  return c;
}

class PyInversion {
 public:
  /// `options`: keywords of the key table (options_config); `pml_faces` the layer's width, or its six faces'
  /// (make_pml).
  PyInversion(std::vector<int> const& shape, double dh, double dt, std::vector<int> const& pml_faces,
              carray<double> const& sources, carray<double> const& receivers, carray<double> const& wavelet,
              carray<float> const& observed, carray<float> const& start, std::optional<carray<float>> const& truth,
              std::optional<carray<float>> const& density, std::optional<carray<float>> const& truth_density,
              py::dict const& options) {
    io::Config c = options_config(options);
    c.time.dt = dt;                                     // the problem's (the bound of vmax = 0 is of it)
    if (density) c.propagator.physics = "acoustic_vd";  // vp and rho: their bounds from the keys
    auto const& f = c.fwi;
    auto const& p = c.propagator;
    auto const field = [](auto const& a) { return std::vector<float>(a.data(), a.data() + a.size()); };
    fwi::Problem pb;
    pb.physics = fwi::parse_physics(p.physics);
    m_names = fwi::parameter_names(pb.physics);
    pb.start = {field(start)};
    pb.truth = {truth ? field(*truth) : std::vector<float>()};
    if (density) {
      pb.start.push_back(field(*density));
      pb.truth.push_back(truth_density ? field(*truth_density) : std::vector<float>());
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
    m_cells = static_cast<std::size_t>(pb.grid.cells());
    KSWEEP_REQUIRE(pb.start[0].size() == m_cells, "v has " << pb.start[0].size() << " cells, the grid " << m_cells);
    // The program's mapping of the keys (ksweep/fwi/configured.hpp): vmax = 0 is the stability
    // limit of dt for either physics.
    fwi::Options o = fwi::inversion_options(c, pb.grid, f.water_rows);
    std::vector<std::pair<int, double>> stages;
    for (auto const& st : f.stages) stages.emplace_back(st.iterations, st.max_freq);
    m_shape = shape;
    on_worker([&] {
      ensure_initialized();
      std::vector<fwi::Stage> st;
      for (auto const& [iterations, max_freq] : stages) st.push_back({iterations, max_freq});
      fwi::Stages plan(std::move(st), pb.wavelet, dt);
      // What one rank will hold, estimated as the program estimates it (before the allocation).
      comm::Communicator const ranks;
      m_estimate = fwi::estimate_inversion(fwi::run_shape(pb), o, ranks.size());
      // Refused as the program refuses it when it does not fit the machine (before anything large).
      fwi::check_memory({m_estimate}, fwi::machine_memory(c), ranks.local_size());
      m_flow = std::make_unique<fwi::Workflow>(std::move(pb), std::move(o), std::move(plan), ranks);
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
    d["rmse"] = r.rmse[0];
    d["rmse_density"] = r.rmse.size() > 1 ? r.rmse[1] : std::numeric_limits<double>::quiet_NaN();
    d["seconds"] = r.seconds;
    d["shots"] = r.shots;
    d["evaluations"] = r.evaluations;
    return d;
  }

  py::array_t<float> model() const {
    fwi::Fields v;
    on_worker([&] { v = m_inv->model(); });
    return shaped(v[0]);
  }
  py::object density() const {
    fwi::Fields v;
    on_worker([&] { v = m_inv->model(); });
    return v.size() < 2 ? py::object(py::none()) : py::object(shaped(v[1]));
  }
  /// The memory one rank was estimated to need before the allocation (fwi::estimate_inversion,
  /// as `ksweep fwi --dry-run` prints it): {'phase', 'items': [(what, place, bytes)], 'device',
  /// 'host', 'disk'} (totals in bytes).
  py::dict memory_estimate() const {
    py::dict d;
    d["phase"] = m_estimate.phase;
    py::list items;
    for (auto const& i : m_estimate.items) items.append(py::make_tuple(i.what, fwi::to_string(i.place), i.bytes));
    d["items"] = items;
    for (auto p : {fwi::Place::device, fwi::Place::host, fwi::Place::disk})
      d[fwi::to_string(p).c_str()] = m_estimate.total(p);
    return d;
  }

  void set_illuminations(bool on) {
    on_worker([&] { m_inv->set_illuminations(on); });
  }

  py::dict images() const {
    fwi::Images img;
    on_worker([&] { img = m_inv->images(); });
    py::dict d;
    d["grad"] = shaped(img.grad[0]);
    d["illum_src"] = shaped(img.illum_src);
    d["illum_rec"] = shaped(img.illum_rec);
    for (std::size_t q = 1; q < img.grad.size(); ++q) d[("grad_" + m_names[q]).c_str()] = shaped(img.grad[q]);
    return d;
  }
  int iteration() const { return m_inv->iteration(); }
  double rmse() const { return rmses()[0]; }
  double rmse_density() const {
    auto const r = rmses();
    return r.size() > 1 ? r[1] : std::numeric_limits<double>::quiet_NaN();
  }
  std::vector<double> rmses() const {
    std::vector<double> r;
    on_worker([&] { r = m_inv->rmse(); });
    return r;
  }

  py::dict state() const {
    fwi::State s;
    on_worker([&] { s = m_inv->state(); });
    py::dict d;
    d["iteration"] = s.iteration;
    d["rng"] = py::bytes(s.rng);
    d["model"] = shaped(s.model[0]);
    if (s.model.size() > 1) d["density"] = shaped(s.model[1]);
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
    s.model = {vec(d["model"])};
    if (d.contains("density")) s.model.push_back(vec(d["density"]));
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
  std::vector<std::string> m_names;  ///< the physics' parameters
  fwi::MemoryEstimate m_estimate;
};

}  // namespace

void bind_inversion(py::module_& m) {
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
      .def("set_illuminations", &PyInversion::set_illuminations, py::arg("on"))
      .def("memory_estimate", &PyInversion::memory_estimate)
      .def("iteration", &PyInversion::iteration)
      .def("rmse", &PyInversion::rmse)
      .def("state", &PyInversion::state)
      .def("restore", &PyInversion::restore)
      .def("set_data", &PyInversion::set_data)
      .def("restart_optimizer", &PyInversion::restart_optimizer);
}

}  // namespace ksweep::python
