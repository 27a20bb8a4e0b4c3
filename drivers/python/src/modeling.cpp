// Modeling32 and Modeling64: the library's forward, adjoint, Born modelling, gradient,
// vector-Jacobian product and imaging (RTM, LSRTM) of a survey on numpy arrays
// (fwi::Modeling<float|double>).

#include "arrays.hpp"
#include "bindings.hpp"
#include "worker.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/imaging.hpp>
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
#include <algorithm>
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

namespace ksweep::python {
namespace {

/// The library's modelling of precision Real, with the arrays of one survey.
template <class Real>
class PyModeling {
 public:
  PyModeling(std::vector<int> const& shape, std::vector<double> const& dh, double dt, int nt, int order,
             std::vector<int> const& pml_faces, double pml_reflection, double pml_freq, bool free_surface,
             carray<double> const& sources, carray<double> const& receivers, int batch, std::string const& schedule,
             std::string const& strategy, std::string const& location, std::string const& dtype,
             std::string const& disk_dir, std::string const& physics, double pml_velocity, bool mpi,
             std::vector<int> const& domains) {
    fwi::ModelingSetup s;
    s.physics = fwi::parse_physics(physics);
    m_vd = fwi::has_parameter(s.physics, "rho");
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
    // The domains as Python's `_domains` gives them: [] (whole), [nx_parts] in 2D, [ny_parts,
    // nx_parts] in 3D.
    if (!domains.empty()) {
      s.domains.nx_parts = domains.back();
      if (domains.size() == 2) s.domains.ny_parts = domains.front();
    }
    on_worker([&] {
      ensure_initialized();
      // Collective over the process's ranks (mpirun; one rank otherwise): the shots shared, the
      // model split as asked, every rank given every result (fwi::ModelingSetup::ranks).
      if (mpi || s.domains.split()) s.ranks.emplace();
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
    if (!layer_vp != !layer_rho)
      throw py::value_error("set_model: give both the layer's velocity and density, or neither");
    std::vector<Real const*> layer;
    if (layer_vp) layer = {layer_vp->data(), layer_rho->data()};
    on_worker([&] { m_m->set_model({vp.data(), rho.data()}, layer); });
  }

  // ---------------------------------------------------------------------------------------------
  // Arrays in the build's memory space, used in place (fwi::Arrays::device; device_data: CUDA
  // arrays on a CUDA build, numpy arrays on host backends): nothing goes through the host.
  // ---------------------------------------------------------------------------------------------

  /// set_model() of one array per parameter of the physics (v; v and rho), the layer a copy of
  /// the model's edges.
  void set_model_device(py::list const& fields) {
    std::size_t const want = m_vd ? 2 : 1;
    KSWEEP_REQUIRE(fields.size() == want,
                   "set_model_device: " << fields.size() << " field(s) given, " << want << " expected");
    std::vector<py::ssize_t> const shape(m_shape.begin(), m_shape.end());
    std::vector<Real const*> f;
    for (std::size_t p = 0; p < fields.size(); ++p) {
      py::object const field = fields[p];  // kept alive by `fields` during the call
      f.push_back(device_data<Real>(field, shape, p == 0 ? "v" : "rho", false));
    }
    Device const on(*m_m);
    on_worker([&] { m_m->set_model(f); });
  }

  /// A state's part in the build's memory space (device_data), or null for None: a wavefield
  /// [shot, padded grid] or (`memory`) the layer memories [shot, values].
  Real* state_data(py::handle a, bool memory, char const* what, bool writes) const {
    if (a.is_none()) return nullptr;
    std::vector<py::ssize_t> shape;
    if (memory) shape = {m_shots, static_cast<py::ssize_t>(m_m->memory_values())};
    else
      for (long long n : wave_shape()) shape.push_back(static_cast<py::ssize_t>(n));
    return device_data<Real>(a, shape, what, writes);
  }

  /// The run's start (now, before, memory: u^0, u^-1, the layer memories; None: zero) and the
  /// end it hands on (end_now, end_before, end_memory; None: not written), as forward_state().
  fwi::ForwardState<Real> state_device(py::handle now, py::handle before, py::handle memory, py::handle end_now,
                                       py::handle end_before, py::handle end_memory) const {
    return {state_data(now, false, "the wavefield u^0 (wavefield_0)", false),
            state_data(before, false, "the wavefield u^-1 (wavefield_m1)", false),
            state_data(memory, true, "the layer memories", false),
            state_data(end_now, false, "u^nt (wavefield_nt)", true),
            state_data(end_before, false, "u^(nt-1) (wavefield_ntm1)", true),
            state_data(end_memory, true, "the end's layer memories", true)};
  }

  /// The gradient with respect to the end state (each None: zero), as adjoint()'s.
  fwi::EndGradient<Real> end_device(py::handle now, py::handle before, py::handle memory) const {
    return {state_data(now, false, "the gradient with respect to u^nt (wavefield_nt)", false),
            state_data(before, false, "the gradient with respect to u^(nt-1) (wavefield_ntm1)", false),
            state_data(memory, true, "the gradient with respect to the layer memories", false)};
  }

  /// forward() of `wavelets` [shot, source, nt] into `records` [shot, nt, receiver], from the
  /// start state given and handing on the end state asked for (state_device).
  void forward_device(py::handle wavelets, py::handle records, py::handle now, py::handle before, py::handle memory,
                      py::handle end_now, py::handle end_before, py::handle end_memory) {
    Real const* w = device_data<Real>(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes", false);
    Real* r = device_data<Real>(records, {m_shots, m_nt, m_nr}, "records", true);
    auto const st = state_device(now, before, memory, end_now, end_before, end_memory);
    Device const on(*m_m);
    on_worker([&] { m_m->forward(w, r, st); });
  }

  /// vjp() for dL/d(records) = `residual` [shot, nt, receiver] of the run from the start state
  /// (now, before, memory; None: zero) and dL/d(its end state) (end_now, end_before, end_memory;
  /// None: zero): the velocity's gradient into `grad` (float64, the model's shape), the
  /// density's into `grad_rho`, the amplitudes' into `wavelet_grad` [shot, source, nt] and the
  /// start's into (start_now, start_before, start_memory) (each None: not wanted); no
  /// illuminations.
  void vjp_device(py::handle wavelets, py::handle residual, py::handle grad, py::object const& grad_rho,
                  py::object const& wavelet_grad, py::handle now, py::handle before, py::handle memory,
                  py::handle end_now, py::handle end_before, py::handle end_memory, py::handle start_now,
                  py::handle start_before, py::handle start_memory) {
    Real const* w = device_data<Real>(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes", false);
    Real const* res = device_data<Real>(residual, {m_shots, m_nt, m_nr}, "grad_output", false);
    std::vector<py::ssize_t> const shape(m_shape.begin(), m_shape.end());
    fwi::ModelingImages out;
    out.grad.push_back(device_data<double>(grad, shape, "grad", true));
    if (m_vd) out.grad.push_back(grad_rho.is_none() ? nullptr : device_data<double>(grad_rho, shape, "grad_rho", true));
    fwi::VjpExtras<Real> more;
    if (!wavelet_grad.is_none())
      more.wavelet_grad = device_data<Real>(wavelet_grad, {m_shots, m_ns, m_nt}, "wavelet_grad", true);
    auto const st = state_device(now, before, memory, py::none(), py::none(), py::none());
    more.end = end_device(end_now, end_before, end_memory);
    more.start_now = state_data(start_now, false, "the gradient with respect to u^0 (start_now)", true);
    more.start_before = state_data(start_before, false, "the gradient with respect to u^-1 (start_before)", true);
    more.start_memory = state_data(start_memory, true, "the gradient with respect to the start's memories", true);
    Device const on(*m_m);
    on_worker([&] { m_m->vjp(w, res, out, st, more); });
  }

  /// adjoint() of `records` [shot, nt, receiver] and dL/d(the end state) (end_now, end_before,
  /// end_memory; None: zero) into `wavelet_grad` [shot, source, nt].
  void adjoint_device(py::handle records, py::handle wavelet_grad, py::handle end_now, py::handle end_before,
                      py::handle end_memory) {
    Real const* r = device_data<Real>(records, {m_shots, m_nt, m_nr}, "grad_output", false);
    Real* g = device_data<Real>(wavelet_grad, {m_shots, m_ns, m_nt}, "wavelet_grad", true);
    auto const end = end_device(end_now, end_before, end_memory);
    Device const on(*m_m);
    on_worker([&] { m_m->adjoint(r, g, end); });
  }

  py::array_t<Real> forward(carray<Real> const& wavelets) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    py::array_t<Real> rec({m_shots, m_nt, m_nr});
    Real* r = rec.mutable_data();
    on_worker([&] { m_m->forward(wavelets.data(), r); });
    return rec;
  }

  /// forward() from the state (now, before, memory) (each None: zero, rest), returning
  /// (records, now, before, memory) where it ends (fwi::ForwardState).
  py::tuple forward_state(carray<Real> const& wavelets, std::optional<carray<Real>> const& now,
                          std::optional<carray<Real>> const& before, std::optional<carray<Real>> const& memory) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_start(now, before, memory);
    auto const shape = wave_shape();
    long long const nm = m_m->memory_values();
    std::vector<py::ssize_t> const dims(shape.begin(), shape.end());
    py::array_t<Real> rec({m_shots, m_nt, m_nr}), u_now(dims), u_before(dims), mem({m_shots, nm});
    fwi::ForwardState<Real> const st{data_or_null(now),    data_or_null(before),    data_or_null(memory),
                                     u_now.mutable_data(), u_before.mutable_data(), mem.mutable_data()};
    Real* r = rec.mutable_data();
    on_worker([&] { m_m->forward(wavelets.data(), r, st); });
    return py::make_tuple(rec, u_now, u_before, mem);
  }

  /// A start state's shapes: the wavefields [shot, padded grid], the memories [shot, values].
  void check_start(std::optional<carray<Real>> const& now, std::optional<carray<Real>> const& before,
                   std::optional<carray<Real>> const& memory) const {
    auto const shape = wave_shape();
    if (now) check_shape(*now, shape, "the wavefield u^0 (wavefield_0)");
    if (before) check_shape(*before, shape, "the wavefield u^-1 (wavefield_m1)");
    if (memory) check_shape(*memory, {m_shots, m_m->memory_values()}, "the layer memories");
  }

  /// ForwardState's padded grid, [NZ, NX] or [NZ, NY, NX].
  std::vector<long long> padded_shape() const {
    auto const n = m_m->padded_shape();
    if (m_shape.size() == 2) return {n[0], n[2]};
    return {n[0], n[1], n[2]};
  }

  long long memory_values(int axis) const { return m_m->memory_values(axis); }

  /// The wavelets' gradient of a loss with the gradients `records` and, of the run's end state,
  /// (end_now, end_before, end_memory) (each None: zero), laid out as forward_state() returns it.
  py::array_t<Real> adjoint(carray<Real> const& records, std::optional<carray<Real>> const& end_now,
                            std::optional<carray<Real>> const& end_before,
                            std::optional<carray<Real>> const& end_memory) {
    check_shape(records, {m_shots, m_nt, m_nr}, "data");
    auto const end = end_gradient(end_now, end_before, end_memory);
    py::array_t<Real> w({m_shots, m_ns, m_nt});
    Real* p = w.mutable_data();
    on_worker([&] { m_m->adjoint(records.data(), p, end); });
    return w;
  }

  // The gradient with respect to the end state, its shapes checked.
  fwi::EndGradient<Real> end_gradient(std::optional<carray<Real>> const& now, std::optional<carray<Real>> const& before,
                                      std::optional<carray<Real>> const& memory) const {
    auto const shape = wave_shape();
    if (now) check_shape(*now, shape, "the gradient with respect to u^nt (wavefield_nt)");
    if (before) check_shape(*before, shape, "the gradient with respect to u^(nt-1) (wavefield_ntm1)");
    if (memory)
      check_shape(*memory, {m_shots, m_m->memory_values()}, "the gradient with respect to the layer memories");
    return {data_or_null(now), data_or_null(before), data_or_null(memory)};
  }

  py::tuple gradient(carray<Real> const& wavelets, carray<Real> const& observed, double scale) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_shape(observed, {m_shots, m_nt, m_nr}, "observed_data");
    auto img = images();
    py::array_t<Real> syn({m_shots, m_nt, m_nr});
    py::array_t<double> losses(m_shots);
    auto const out = outputs(img);
    Real* sp = syn.mutable_data();
    double* lp = losses.mutable_data();
    double loss = 0;
    on_worker([&] { loss = m_m->gradient(wavelets.data(), observed.data(), scale, out, sp, lp); });
    return py::make_tuple(loss, img[0], img[1], img[2], syn, losses, m_vd ? py::object(img[3]) : py::none());
  }

  /// The images for dL/d(records) = residual and, of the run's end state, (end_now, end_before,
  /// end_memory), of the run from the start state (now, before, memory) (each None: zero; all
  /// None: rest), as forward_state() takes and returns them: (grad, illum_src, illum_rec,
  /// grad_rho or None, the source amplitudes' gradient with `wavelet_grad` or None, the
  /// gradient with respect to the start state (dL/du^0, dL/du^-1, the memories') with
  /// `start_grad` or None), all from one reverse sweep (fwi::VjpExtras). Without `illuminations`
  /// the sweep does not sum them and both are None.
  py::tuple vjp(carray<Real> const& wavelets, carray<Real> const& residual, std::optional<carray<Real>> const& now,
                std::optional<carray<Real>> const& before, std::optional<carray<Real>> const& memory,
                std::optional<carray<Real>> const& end_now, std::optional<carray<Real>> const& end_before,
                std::optional<carray<Real>> const& end_memory, bool wavelet_grad, bool start_grad, bool illuminations) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_shape(residual, {m_shots, m_nt, m_nr}, "grad_output");
    check_start(now, before, memory);
    fwi::VjpExtras<Real> more;
    more.end = end_gradient(end_now, end_before, end_memory);
    auto img = images();
    auto out = outputs(img);
    if (!illuminations) out.illum_src = out.illum_rec = nullptr;
    fwi::ForwardState<Real> st;
    st.start_now = data_or_null(now);
    st.start_before = data_or_null(before);
    st.start_memory = data_or_null(memory);
    py::object wg = py::none(), sg = py::none();
    if (wavelet_grad) {
      py::array_t<Real> a({m_shots, m_ns, m_nt});
      more.wavelet_grad = a.mutable_data();
      wg = a;
    }
    if (start_grad) {
      auto const shape = wave_shape();
      std::vector<py::ssize_t> const dims(shape.begin(), shape.end());
      py::array_t<Real> u0(dims), um1(dims), mem({m_shots, m_m->memory_values()});
      more.start_now = u0.mutable_data();
      more.start_before = um1.mutable_data();
      more.start_memory = mem.mutable_data();
      sg = py::make_tuple(u0, um1, mem);
    }
    on_worker([&] { m_m->vjp(wavelets.data(), residual.data(), out, st, more); });
    auto const illum = [&](std::size_t k) { return illuminations ? py::object(img[k]) : py::none(); };
    return py::make_tuple(img[0], illum(1), illum(2), m_vd ? py::object(img[3]) : py::none(), wg, sg);
  }

  /// fn(step, first_shot, shots, get, set, images) at the reverse steps `steps` of gradient() and
  /// vjp() (every step when empty; fn None: none), called from the thread that runs the sweep
  /// with the GIL taken (the other steps take neither the GIL nor a Python call): get() returns
  /// (lambda^n, lambda^{n+1}) [shots, *padded_shape()] (get(memories=True): and the adjoint layer
  /// memories [shots, memory_values()]; at step 0 the gradient with respect to the start state:
  /// lambda^0, -lambda^1 and the memories'), set(now, next, memory) sets them (None: kept),
  /// images() returns (grad, illum_src, illum_rec, grad_rho or None) of the steps so far. fn must
  /// not call this module (the sweep waits for it).
  void set_reverse_watch(py::object fn, std::vector<int> steps) {
    m_watch = fn;
    std::function<void(fwi::ReverseView<Real> const&)> w;
    if (!fn.is_none()) w = [this](fwi::ReverseView<Real> const& v) { call_watch(v); };
    on_worker([&] { m_m->set_reverse_watch(std::move(w), std::move(steps)); });
  }

  py::array_t<Real> born(carray<Real> const& wavelets, carray<Real> const& scatter) {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_model(scatter, "scatter");
    py::array_t<Real> rec({m_shots, m_nt, m_nr});
    Real* r = rec.mutable_data();
    on_worker([&] { m_m->born(wavelets.data(), scatter.data(), r); });
    return rec;
  }

  py::tuple rtm(carray<Real> const& wavelets, carray<Real> const& data, bool subtract_background, bool normalize,
                double stabilization, bool laplacian, std::optional<carray<double>> const& mask,
                std::string const& condition) {
    check_wavelets_and_data(wavelets, data);
    fwi::RtmOptions o;
    o.condition = fwi::parse_image_condition(condition);
    o.subtract_background = subtract_background;
    o.normalize = normalize;
    o.stabilization = stabilization;
    o.laplacian = laplacian;
    o.mask = mask_of(mask);
    fwi::RtmImage r;
    on_worker([&] { r = fwi::rtm(*m_m, wavelets.data(), data.data(), o); });
    return py::make_tuple(image(r.image), image(r.correlation), image(r.illumination));
  }

  py::tuple lsrtm(carray<Real> const& wavelets, carray<Real> const& data, int iterations, bool subtract_background,
                  bool precondition, double stabilization, std::optional<carray<double>> const& mask) {
    check_wavelets_and_data(wavelets, data);
    fwi::LsrtmOptions o;
    o.iterations = iterations;
    o.subtract_background = subtract_background;
    o.precondition = precondition;
    o.stabilization = stabilization;
    o.mask = mask_of(mask);
    fwi::LsrtmResult r;
    on_worker([&] { r = fwi::lsrtm(*m_m, wavelets.data(), data.data(), o); });
    py::array_t<double> misfit(static_cast<py::ssize_t>(r.misfit.size()));
    std::copy(r.misfit.begin(), r.misfit.end(), misfit.mutable_data());
    return py::make_tuple(image(r.image), misfit);
  }

 private:
  // The library's outputs into images(): the gradient per parameter (vp, then rho with variable
  // density) and the two illuminations.
  fwi::ModelingImages outputs(std::vector<py::array_t<double>>& img) const {
    fwi::ModelingImages out;
    out.grad.push_back(img[0].mutable_data());
    if (m_vd) out.grad.push_back(img[3].mutable_data());
    out.illum_src = img[1].mutable_data();
    out.illum_rec = img[2].mutable_data();
    return out;
  }
  std::vector<py::array_t<double>> images() const {
    std::vector<py::ssize_t> const shape(m_shape.begin(), m_shape.end());
    std::vector<py::array_t<double>> img{py::array_t<double>(shape), py::array_t<double>(shape),
                                         py::array_t<double>(shape)};
    if (m_vd) img.emplace_back(shape);
    return img;
  }
  py::array_t<double> image(std::vector<double> const& v) const {
    std::vector<py::ssize_t> const shape(m_shape.begin(), m_shape.end());
    py::array_t<double> a(shape);
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  }
  // The Python watch of one reverse step (on the worker thread).
  void call_watch(fwi::ReverseView<Real> const& v) {
    py::gil_scoped_acquire gil;
    auto shape = padded_shape();
    shape.insert(shape.begin(), v.shots);
    std::vector<py::ssize_t> const dims(shape.begin(), shape.end());
    // Out of the lambdas: nvcc's front end misreads a braced list as an argument inside them.
    std::vector<long long> const memory_shape{v.shots, static_cast<long long>(m_m->memory_values())};
    auto get = py::cpp_function(
        [this, &v, dims](bool memories) {
          py::array_t<Real> now(dims), next(dims);
          Real* a = now.mutable_data();
          Real* b = next.mutable_data();
          py::array_t<Real> memory;
          if (memories)
            memory =
                py::array_t<Real>({static_cast<py::ssize_t>(v.shots), static_cast<py::ssize_t>(m_m->memory_values())});
          Real* c = memories ? memory.mutable_data() : nullptr;
          {
            py::gil_scoped_release nogil;
            v.get(a, b);
            if (c) v.memory(c);
          }
          return memories ? py::make_tuple(now, next, memory) : py::make_tuple(now, next);
        },
        py::arg("memories") = false);
    auto set = py::cpp_function(
        [&v, shape, memory_shape](std::optional<carray<Real>> const& now, std::optional<carray<Real>> const& next,
                                  std::optional<carray<Real>> const& memory) {
          if (now) check_shape(*now, shape, "the adjoint wavefield lambda^n (wavefield_0)");
          if (next) check_shape(*next, shape, "the adjoint wavefield lambda^{n+1} (wavefield_m1)");
          if (memory) check_shape(*memory, memory_shape, "the adjoint layer memories");
          Real const* a = data_or_null(now);
          Real const* b = data_or_null(next);
          Real const* c = data_or_null(memory);
          py::gil_scoped_release nogil;
          if (a || b) v.set(a, b);
          if (c) v.set_memory(c);
        },
        py::arg("now") = py::none(), py::arg("next") = py::none(), py::arg("memory") = py::none());
    auto images_so_far = py::cpp_function([this, &v] {
      auto img = images();
      auto const out = outputs(img);
      {
        py::gil_scoped_release nogil;
        v.images(out);
      }
      return py::make_tuple(img[0], img[1], img[2], m_vd ? py::object(img[3]) : py::none());
    });
    m_watch(v.step, v.first_shot, v.shots, get, set, images_so_far);
  }
  std::vector<long long> wave_shape() const {
    auto w = padded_shape();
    w.insert(w.begin(), m_shots);
    return w;
  }
  void check_wavelets_and_data(carray<Real> const& wavelets, carray<Real> const& data) const {
    check_shape(wavelets, {m_shots, m_ns, m_nt}, "source_amplitudes");
    check_shape(data, {m_shots, m_nt, m_nr}, "data");
  }
  std::vector<double> mask_of(std::optional<carray<double>> const& mask) const {
    if (!mask) return {};
    std::vector<long long> want(m_shape.begin(), m_shape.end());
    check_shape(*mask, want, "mask");
    return std::vector<double>(mask->data(), mask->data() + mask->size());
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

  // Device arrays for one call (fwi::Modeling::set_arrays), host arrays again after it.
  struct Device {
    fwi::Modeling<Real>& m;
    explicit Device(fwi::Modeling<Real>& modeling) : m(modeling) { m.set_arrays(fwi::Arrays::device); }
    ~Device() { m.set_arrays(fwi::Arrays::host); }
    Device(Device const&) = delete;
    Device& operator=(Device const&) = delete;
  };

  Live m_live;  // declared first: destroyed after the modelling's memory
  std::unique_ptr<fwi::Modeling<Real>> m_m;
  long long m_shots = 0, m_ns = 0, m_nr = 0, m_nt = 0;
  std::vector<int> m_shape;
  bool m_vd = false;                // variable density: a density gradient too
  py::object m_watch = py::none();  // set_reverse_watch's function
};

template <class Real>
void bind_modeling_of(py::module_& m, char const* name) {
  py::class_<PyModeling<Real>>(m, name)
      .def(py::init<std::vector<int> const&, std::vector<double> const&, double, int, int, std::vector<int> const&,
                    double, double, bool, carray<double> const&, carray<double> const&, int, std::string const&,
                    std::string const&, std::string const&, std::string const&, std::string const&, std::string const&,
                    double, bool, std::vector<int> const&>(),
           py::arg("shape"), py::arg("dh"), py::arg("dt"), py::arg("nt"), py::arg("order"), py::arg("pml_faces"),
           py::arg("pml_reflection"), py::arg("pml_freq"), py::arg("free_surface"), py::arg("sources"),
           py::arg("receivers"), py::arg("batch"), py::arg("schedule"), py::arg("strategy"), py::arg("location"),
           py::arg("dtype"), py::arg("disk_dir"), py::arg("physics") = "acoustic", py::arg("pml_velocity") = 0.0,
           py::arg("mpi") = false, py::arg("domains") = std::vector<int>{})
      .def("set_velocity", &PyModeling<Real>::set_velocity, py::arg("v"), py::arg("layer") = py::none())
      .def("set_model", &PyModeling<Real>::set_model, py::arg("v"), py::arg("rho"), py::arg("layer_v") = py::none(),
           py::arg("layer_rho") = py::none())
      .def("forward", &PyModeling<Real>::forward)
      .def("set_model_device", &PyModeling<Real>::set_model_device, py::arg("fields"))
      .def("forward_device", &PyModeling<Real>::forward_device, py::arg("wavelets"), py::arg("records"),
           py::arg("now") = py::none(), py::arg("before") = py::none(), py::arg("memory") = py::none(),
           py::arg("end_now") = py::none(), py::arg("end_before") = py::none(), py::arg("end_memory") = py::none())
      .def("vjp_device", &PyModeling<Real>::vjp_device, py::arg("wavelets"), py::arg("residual"), py::arg("grad"),
           py::arg("grad_rho") = py::none(), py::arg("wavelet_grad") = py::none(), py::arg("now") = py::none(),
           py::arg("before") = py::none(), py::arg("memory") = py::none(), py::arg("end_now") = py::none(),
           py::arg("end_before") = py::none(), py::arg("end_memory") = py::none(), py::arg("start_now") = py::none(),
           py::arg("start_before") = py::none(), py::arg("start_memory") = py::none())
      .def("adjoint_device", &PyModeling<Real>::adjoint_device, py::arg("records"), py::arg("wavelet_grad"),
           py::arg("end_now") = py::none(), py::arg("end_before") = py::none(), py::arg("end_memory") = py::none())
      .def("forward_state", &PyModeling<Real>::forward_state, py::arg("wavelets"), py::arg("now") = py::none(),
           py::arg("before") = py::none(), py::arg("memory") = py::none())
      .def("padded_shape", &PyModeling<Real>::padded_shape)
      .def("memory_values", &PyModeling<Real>::memory_values, py::arg("axis"))
      .def("adjoint", &PyModeling<Real>::adjoint, py::arg("records"), py::arg("end_now") = py::none(),
           py::arg("end_before") = py::none(), py::arg("end_memory") = py::none())
      .def("gradient", &PyModeling<Real>::gradient)
      .def("vjp", &PyModeling<Real>::vjp, py::arg("wavelets"), py::arg("residual"), py::arg("now") = py::none(),
           py::arg("before") = py::none(), py::arg("memory") = py::none(), py::arg("end_now") = py::none(),
           py::arg("end_before") = py::none(), py::arg("end_memory") = py::none(), py::arg("wavelet_grad") = false,
           py::arg("start_grad") = false, py::arg("illuminations") = true)
      .def("set_reverse_watch", &PyModeling<Real>::set_reverse_watch, py::arg("fn"),
           py::arg("steps") = std::vector<int>{})
      .def("born", &PyModeling<Real>::born)
      .def("rtm", &PyModeling<Real>::rtm, py::arg("wavelets"), py::arg("data"), py::arg("subtract_background"),
           py::arg("normalize"), py::arg("stabilization"), py::arg("laplacian"), py::arg("mask"),
           py::arg("condition") = "born")
      .def("lsrtm", &PyModeling<Real>::lsrtm);
}

}  // namespace

void bind_modeling(py::module_& m) {
  bind_modeling_of<float>(m, "Modeling32");
  bind_modeling_of<double>(m, "Modeling64");
}

}  // namespace ksweep::python
