// A forward run's state in and out (fwi::ForwardState), in double precision:
//  - a run of nt1 samples and then nt2 more from where it ended gives the bits of one run of
//    nt1 + nt2 samples (records and final state), in 2D and 3D, constant and variable density,
//    with and without a free surface, on the batched and the shots schedule, with waves in the
//    absorbing layer when the run is cut (so that its memories matter: a continuation without
//    them differs);
//  - the start state against an independent path, the source injection: u^{-1} = -a at a cell
//    is a source of amplitude a at time 0 there, and u^0 = a (u^{-1} = 0) is that source one
//    step on, the same bits;
//  - the end state against the receivers: u^{nt} at a receiver's cell is its last sample;
//  - bad start states (and end states' gradients) are refused, naming the value and where it sits;
//  - the gradient (vjp) of a run from a state, the state held fixed: against central finite
//    differences of the loss, the model's edge cells included, with waves in the layer at the
//    start (2D and 3D, constant and variable density, free surface, both schedules, boundary and
//    full saving); the schedules the same bits; and, exactly, a start u^{-1} = -a at a cell
//    (what a source of amplitude a at time 0 does) gives that source run's gradient, the same
//    bits;
//  - the gradient of a loss of the end state (EndGradient) with respect to the model, the start and
//    the wavelets, against central differences.

#include <ksweep/base/error.hpp>
#include <ksweep/core/spare_buffer.hpp>
#include <ksweep/fwi/modeling.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace ksweep;

struct Case {
  int dim = 2;
  int order = 4;
  bool free_surface = false;
  bool vd = false;
  core::Schedule schedule = core::Schedule::automatic;
};

std::string describe(Case const& c) {
  return std::to_string(c.dim) + "D order " + std::to_string(c.order) + (c.vd ? ", variable density" : "") +
         (c.free_surface ? ", free surface" : "") + ", schedule " + core::to_string(c.schedule);
}

struct Survey {
  fwi::ModelingSetup setup;
  std::vector<double> v, rho, wavelets;  // wavelets [shot][source][nt]
};

// Two shots (in two batches of one when `batch` is 1) on a small heterogeneous model, each source
// next to a different face, receivers everywhere.
Survey make(Case const& c, int nt, int batch = 0) {
  Survey r;
  int const nz = c.dim == 3 ? 14 : 24, ny = 12, nx = c.dim == 3 ? 15 : 28;
  auto& s = r.setup;
  s.grid = c.dim == 3 ? core::ModelGrid::volume(nz, ny, nx, 10.0) : core::ModelGrid(nz, nx, 10.0);
  s.pml.width = c.vd ? c.order + 2 : 6;
  s.pml.free_surface = c.free_surface;
  s.order = c.order;
  s.dt = 0.0008;
  s.nt = nt;
  s.batch = batch;
  s.schedule = c.schedule;
  s.physics = c.vd ? fwi::Physics::acoustic_vd : fwi::Physics::acoustic;
  auto& sv = s.survey;
  sv.n_shots = 2;
  sv.n_sources = 1;
  sv.n_receivers = 4;
  int const z0 = c.free_surface ? 1 : 0, y = c.dim == 3 ? ny / 2 : 0;
  sv.sources = {{z0 + 1, nx / 2, y}, {nz - 2, 1, c.dim == 3 ? 1 : 0}};
  for (int sh = 0; sh < 2; ++sh)
    for (int k = 0; k < 4; ++k) sv.receivers.push_back({z0 + (5 * k + sh) % (nz - z0), (7 * k + 3) % nx, y});
  long long const cells = s.grid.cells();
  r.v.resize(static_cast<std::size_t>(cells));
  r.rho.resize(r.v.size());
  for (long long i = 0; i < cells; ++i) {
    double const z = static_cast<double>(i / (cells / nz)), x = static_cast<double>(i % nx);
    r.v[static_cast<std::size_t>(i)] = 1800.0 + 30.0 * z + 90.0 * std::sin(0.3 * x + 0.2 * z);
    r.rho[static_cast<std::size_t>(i)] = 2000.0 + 10.0 * z + 150.0 * std::cos(0.25 * x);
  }
  r.wavelets.assign(static_cast<std::size_t>(2 * nt), 0.0);
  for (int sh = 0; sh < 2; ++sh)
    for (int t = 0; t < nt; ++t) {
      double const a = M_PI * 30.0 * (t * s.dt - 0.035);
      r.wavelets[static_cast<std::size_t>(sh * nt + t)] = (1.0 - 2.0 * a * a) * std::exp(-a * a) * (sh + 1);
    }
  return r;
}

std::unique_ptr<fwi::Modeling<double>> modeling(Survey const& r, Case const& c) {
  auto m = std::make_unique<fwi::Modeling<double>>(r.setup);
  if (c.vd) m->set_model({r.v.data(), r.rho.data()});
  else m->set_velocity(r.v.data());
  return m;
}

// The samples [t0, t0 + n) of wavelets [shot][1][nt].
std::vector<double> window(std::vector<double> const& w, int nt, int t0, int n) {
  std::vector<double> out;
  for (int sh = 0; sh < 2; ++sh)
    for (int t = t0; t < t0 + n; ++t) out.push_back(w[static_cast<std::size_t>(sh * nt + t)]);
  return out;
}

bool same_bits(std::vector<double> const& a, std::vector<double> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

struct Ends {
  std::vector<double> records, now, before, memory;
};

// A run of `nt` samples of `w` from `start` (null: rest), its records and end state.
Ends run(fwi::Modeling<double>& m, std::vector<double> const& w, Ends const* start) {
  auto const n = m.padded_shape();
  auto const& sv = m.setup().survey;
  std::size_t const shots = static_cast<std::size_t>(sv.n_shots), cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
  Ends e;
  e.records.assign(shots * static_cast<std::size_t>(m.setup().nt) * sv.n_receivers, -1.0);
  e.now.assign(shots * cells, -1.0);
  e.before.assign(shots * cells, -1.0);
  e.memory.assign(shots * static_cast<std::size_t>(m.memory_values()), -1.0);
  fwi::ForwardState<double> st;
  if (start) {
    st.start_now = start->now.data();
    st.start_before = start->before.data();
    st.start_memory = start->memory.data();
  }
  st.end_now = e.now.data();
  st.end_before = e.before.data();
  st.end_memory = e.memory.data();
  m.forward(w.data(), e.records.data(), st);
  return e;
}

// Records [shot][nt][receiver] of a first run of nt1 samples and a second of nt2, as one.
std::vector<double> joined(std::vector<double> const& a, int nt1, std::vector<double> const& b, int nt2, int nr) {
  std::vector<double> out;
  for (int sh = 0; sh < 2; ++sh) {
    auto const pa = a.begin() + static_cast<std::ptrdiff_t>(sh) * nt1 * nr;
    auto const pb = b.begin() + static_cast<std::ptrdiff_t>(sh) * nt2 * nr;
    out.insert(out.end(), pa, pa + nt1 * nr);
    out.insert(out.end(), pb, pb + nt2 * nr);
  }
  return out;
}

void check_split(Case const& c, int batch) {
  int const nt1 = c.dim == 3 ? 45 : 90, nt2 = c.dim == 3 ? 30 : 70, nt = nt1 + nt2;
  Survey const whole = make(c, nt, batch), first = make(c, nt1, batch), second = make(c, nt2, batch);
  auto m = modeling(whole, c);
  auto m1 = modeling(first, c);
  auto m2 = modeling(second, c);
  Ends const all = run(*m, whole.wavelets, nullptr);
  Ends const a = run(*m1, window(whole.wavelets, nt, 0, nt1), nullptr);
  Ends const b = run(*m2, window(whole.wavelets, nt, nt1, nt2), &a);
  int const nr = whole.setup.survey.n_receivers;
  std::string const what = describe(c) + ", batch " + std::to_string(batch);
  EXPECT_TRUE(same_bits(joined(a.records, nt1, b.records, nt2, nr), all.records)) << what;
  EXPECT_TRUE(same_bits(b.now, all.now)) << what;
  EXPECT_TRUE(same_bits(b.before, all.before)) << what;
  EXPECT_TRUE(same_bits(b.memory, all.memory)) << what;
  // The memories matter: waves are in the layer when the run is cut.
  double peak = 0;
  for (double x : a.memory) peak = std::max(peak, std::abs(x));
  EXPECT_GT(peak, 0.0) << what;
  Ends without = a;
  std::fill(without.memory.begin(), without.memory.end(), 0.0);
  Ends const c2 = run(*m2, window(whole.wavelets, nt, nt1, nt2), &without);
  EXPECT_FALSE(same_bits(c2.records, b.records)) << what << ": the layer memories made no difference";
}

// 2D order 8 and 3D order 4, constant and variable density, with and without a free surface.
std::vector<Case> physics_cases() {
  std::vector<Case> out;
  for (int dim : {2, 3})
    for (bool vd : {false, true})
      for (bool fs : {false, true}) {
        Case c;
        c.dim = dim;
        c.vd = vd;
        c.free_surface = fs;
        c.order = dim == 3 ? 4 : 8;
        out.push_back(c);
      }
  return out;
}

TEST(state, a_run_cut_in_two_gives_one_run_s_bits) {
  for (Case c : physics_cases())
    for (auto sched : {core::Schedule::batched, core::Schedule::shots}) {
      c.schedule = sched;
      check_split(c, 0);
    }
  Case c;
  c.order = 2;
  check_split(c, 1);  // two batches of one shot
}

// Padded index of model cell (z, x) (2D) in a shot's padded grid.
std::size_t padded_index(fwi::Modeling<double> const& m, int z, int x) {
  core::Layout const l(m.setup().grid, m.setup().pml, m.setup().order);
  return static_cast<std::size_t>(z + l.top) * static_cast<std::size_t>(l.NX) + static_cast<std::size_t>(x + l.left);
}

// The start state that stands for a source of amplitude a[shot] at time 0 at each shot's
// source cell: u^{-1} = -a there, the rest zero.
Ends kick_state(fwi::Modeling<double> const& m, double const* a) {
  Ends start;
  auto const n = m.padded_shape();
  std::size_t const cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
  start.now.assign(2 * cells, 0.0);
  start.before.assign(2 * cells, 0.0);
  start.memory.assign(2 * static_cast<std::size_t>(m.memory_values()), 0.0);
  for (int sh = 0; sh < 2; ++sh) {
    auto const& p = m.setup().survey.sources[static_cast<std::size_t>(sh)];
    start.before[sh * cells + padded_index(m, p.z, p.x)] = -a[sh];
  }
  return start;
}

TEST(state, a_start_wavefield_is_the_source_it_stands_for) {
  for (bool fs : {false, true}) {
    Case c;
    c.free_surface = fs;
    int const nt = 120;
    Survey r = make(c, nt);
    // One kick of amplitude a at time 0 in each shot, at its source cell.
    double const a[2] = {0.75, -1.25};
    std::fill(r.wavelets.begin(), r.wavelets.end(), 0.0);
    for (int sh = 0; sh < 2; ++sh) r.wavelets[static_cast<std::size_t>(sh * nt)] = a[sh];
    auto m = modeling(r, c);
    Ends const kicked = run(*m, r.wavelets, nullptr);
    Ends start = kick_state(*m, a);
    std::vector<double> const silent(r.wavelets.size(), 0.0);
    Ends const from_before = run(*m, silent, &start);
    EXPECT_TRUE(same_bits(from_before.records, kicked.records)) << describe(c);
    EXPECT_TRUE(same_bits(from_before.now, kicked.now)) << describe(c);
    // u^0 = a there (u^{-1} = 0): the kicked run one sample on.
    std::swap(start.now, start.before);
    for (double& x : start.now) x = -x;
    Ends const from_now = run(*m, silent, &start);
    int const nr = r.setup.survey.n_receivers;
    for (int sh = 0; sh < 2; ++sh)
      for (int t = 0; t + 1 < nt; ++t)
        for (int k = 0; k < nr; ++k) {
          auto const i = static_cast<std::size_t>((sh * nt + t) * nr + k);
          ASSERT_EQ(from_now.records[i], kicked.records[i + static_cast<std::size_t>(nr)])
              << describe(c) << ": shot " << sh << ", sample " << t << ", receiver " << k;
        }
  }
}

TEST(state, the_end_wavefield_holds_the_last_record) {
  Case c;
  int const nt = 100;
  Survey const r = make(c, nt);
  auto m = modeling(r, c);
  Ends const e = run(*m, r.wavelets, nullptr);
  auto const n = m->padded_shape();
  std::size_t const cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
  int const nr = r.setup.survey.n_receivers;
  double peak = 0;
  for (int sh = 0; sh < 2; ++sh)
    for (int k = 0; k < nr; ++k) {
      auto const& p = r.setup.survey.receivers[static_cast<std::size_t>(sh * nr + k)];
      double const last = e.records[static_cast<std::size_t>((sh * nt + nt - 1) * nr + k)];
      EXPECT_EQ(e.now[sh * cells + padded_index(*m, p.z, p.x)], last) << "shot " << sh << ", receiver " << k;
      peak = std::max(peak, std::abs(last));
    }
  EXPECT_GT(peak, 0.0);
}

TEST(state, bad_start_states_are_refused) {
  Case c;
  Survey const r = make(c, 20);
  auto m = modeling(r, c);
  auto const n = m->padded_shape();
  std::size_t const cells = static_cast<std::size_t>(n[0]) * n[1] * n[2];
  EXPECT_EQ(n[1], 1);
  EXPECT_EQ(n[0], 24 + 12);
  EXPECT_EQ(n[2], 28 + 12);
  std::vector<double> now(2 * cells, 0.0), records(2 * 20 * 4);
  now[cells + 17] = std::nan("");
  fwi::ForwardState<double> st;
  st.start_now = now.data();
  try {
    m->forward(r.wavelets.data(), records.data(), st);
    ADD_FAILURE() << "a wavefield with a NaN was taken";
  } catch (Error const& e) {
    std::string const msg = e.what();
    EXPECT_NE(msg.find("u^0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shot 1, padded cell 17"), std::string::npos) << msg;
  }
  // A gradient with respect to the end state, likewise, in vjp and adjoint.
  std::vector<double> residual(records.size(), 0.0), wg(r.wavelets.size()), g(static_cast<std::size_t>(24 * 28));
  fwi::ModelingImages out;
  out.grad = {g.data()};
  fwi::VjpExtras<double> more;
  more.end.before = now.data();
  for (int call = 0; call < 2; ++call) {
    try {
      if (call == 0) m->vjp(r.wavelets.data(), residual.data(), out, fwi::ForwardState<double>{}, more);
      else m->adjoint(residual.data(), wg.data(), more.end);
      ADD_FAILURE() << "an end state's gradient with a NaN was taken";
    } catch (Error const& e) {
      std::string const msg = e.what();
      EXPECT_NE(msg.find(call == 0 ? "Modeling::vjp: the gradient with respect to u^(nt-1)"
                                   : "Modeling::adjoint: the gradient with respect to u^(nt-1)"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("shot 1, padded cell 17"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(m->memory_values(2), Error);
}

// The images of vjp(w, r) from `start` (null: rest).
fwi::ModelingImages images_into(std::vector<double>& g, std::vector<double>& grho, std::vector<double>& irec,
                                long long cells, bool vd) {
  g.assign(static_cast<std::size_t>(cells), 0.0);
  irec.assign(g.size(), 0.0);
  grho.assign(vd ? g.size() : 0, 0.0);
  fwi::ModelingImages out;
  out.grad = {g.data()};
  if (vd) out.grad.push_back(grho.data());
  out.illum_rec = irec.data();
  return out;
}

struct Grads {
  std::vector<double> v, rho, irec;
};

Grads vjp(fwi::Modeling<double>& m, std::vector<double> const& w, std::vector<double> const& r, Ends const* start) {
  Grads g;
  auto const out =
      images_into(g.v, g.rho, g.irec, m.setup().grid.cells(), m.setup().physics == fwi::Physics::acoustic_vd);
  fwi::ForwardState<double> st;
  if (start) {
    st.start_now = start->now.data();
    st.start_before = start->before.data();
    st.start_memory = start->memory.data();
  }
  m.vjp(w.data(), r.data(), out, st);
  return g;
}

bool same_grads(Grads const& a, Grads const& b) {
  return same_bits(a.v, b.v) && same_bits(a.rho, b.rho) && same_bits(a.irec, b.irec);
}

// A smooth residual [shot][nt][receiver], not zero anywhere in particular.
std::vector<double> residual(int nt, int nr) {
  std::vector<double> r;
  for (int sh = 0; sh < 2; ++sh)
    for (int t = 0; t < nt; ++t)
      for (int k = 0; k < nr; ++k) r.push_back(std::sin(0.07 * t + 1.3 * k + 0.5 * sh) * (1.0 + 0.01 * t));
  return r;
}

double dot(std::vector<double> const& a, std::vector<double> const& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// <r, records> of a run from `start` on the model (v, rho).
double loss(Survey const& r, Case const& c, std::vector<double> const& v, std::vector<double> const& rho,
            std::vector<double> const& res, Ends const& start) {
  Survey s = r;
  s.v = v;
  s.rho = rho;
  auto m = modeling(s, c);
  return dot(res, run(*m, s.wavelets, &start).records);
}

// The largest relative differences seen by check_start_gradient: vp everywhere, vp at the edge
// cells, rho.
double worst_fd[3] = {0, 0, 0};
void note(int k, double fd, double an) { worst_fd[k] = std::max(worst_fd[k], std::abs(fd - an) / std::abs(an)); }

// The gradient of <r, records> of the second piece of a run cut in two (waves in the layer at
// the cut), its start held fixed, against central differences along a direction that moves
// every cell (the edge cells, whose derivative takes the layer's chain rule, too). Returns the
// gradients, for the schedules' comparison.
Grads check_start_gradient(Case const& c, storage::Strategy strategy) {
  int const nt1 = c.dim == 3 ? 40 : 80, nt2 = c.dim == 3 ? 30 : 60;
  Survey first = make(c, nt1), second = make(c, nt2);
  for (Survey* s : {&first, &second}) {
    s->setup.storage.strategy = strategy;
    s->setup.pml.profile_velocity = 3000.0;  // the damping held fixed, as the gradient holds it
  }
  second.wavelets = window(make(c, nt1 + nt2).wavelets, nt1 + nt2, nt1, nt2);
  auto m1 = modeling(first, c);
  Ends const start = run(*m1, first.wavelets, nullptr);
  int const nr = second.setup.survey.n_receivers;
  auto const res = residual(nt2, nr);
  auto m2 = modeling(second, c);
  Grads const g = vjp(*m2, second.wavelets, res, &start);
  std::string const what = describe(c) + (strategy == storage::Strategy::full ? ", full" : ", boundary");
  std::size_t const n = second.v.size();
  std::vector<double> dv(n), drho(n);
  for (std::size_t i = 0; i < n; ++i) {
    dv[i] = 40.0 * std::sin(0.37 * static_cast<double>(i) + 0.2);
    drho[i] = 30.0 * std::cos(0.23 * static_cast<double>(i));
  }
  double const eps = 1e-3;
  auto shifted = [&](std::vector<double> const& x, std::vector<double> const& d, double k) {
    std::vector<double> y(x);
    for (std::size_t i = 0; i < n; ++i) y[i] += k * eps * d[i];
    return y;
  };
  double const fd_v = (loss(second, c, shifted(second.v, dv, 1), second.rho, res, start) -
                       loss(second, c, shifted(second.v, dv, -1), second.rho, res, start)) /
                      (2 * eps);
  double const an_v = dot(g.v, dv);
  note(0, fd_v, an_v);
  EXPECT_GT(std::abs(an_v), 0.0) << what;
  EXPECT_LE(std::abs(fd_v - an_v), 1e-6 * std::abs(an_v))
      << what << ": vp, finite difference " << fd_v << ", gradient " << an_v;
  // The edge cells alone (the layer's chain rule, and the ring that rebuilds u^0).
  std::vector<double> edge(n, 0.0);
  auto const& grid = second.setup.grid;
  int const nz = grid.nz, nx = grid.nx;
  int const ny = static_cast<int>(n / static_cast<std::size_t>(nz) / static_cast<std::size_t>(nx));
  for (std::size_t i = 0; i < n; ++i) {
    int const z = static_cast<int>(i / (n / nz)), x = static_cast<int>(i % nx), y = static_cast<int>((i / nx) % ny);
    bool const y_edge = c.dim == 3 && (y == 0 || y == ny - 1);
    if (z == 0 || z == nz - 1 || x == 0 || x == nx - 1 || y_edge) edge[i] = dv[i];
  }
  double const fd_e = (loss(second, c, shifted(second.v, edge, 1), second.rho, res, start) -
                       loss(second, c, shifted(second.v, edge, -1), second.rho, res, start)) /
                      (2 * eps);
  double const an_e = dot(g.v, edge);
  note(1, fd_e, an_e);
  EXPECT_LE(std::abs(fd_e - an_e), 1e-6 * std::abs(an_e))
      << what << ": vp at the edge cells, finite difference " << fd_e << ", gradient " << an_e;
  if (c.vd) {
    // The layer's density is held fixed by the gradient (a copy of the edge cells' when the
    // model sets it): the density moves off the edge cells only.
    for (std::size_t i = 0; i < n; ++i)
      if (edge[i] != 0.0) drho[i] = 0.0;
    double const fd_r = (loss(second, c, second.v, shifted(second.rho, drho, 1), res, start) -
                         loss(second, c, second.v, shifted(second.rho, drho, -1), res, start)) /
                        (2 * eps);
    double const an_r = dot(g.rho, drho);
    note(2, fd_r, an_r);
    EXPECT_LE(std::abs(fd_r - an_r), 1e-6 * std::abs(an_r))
        << what << ": rho, finite difference " << fd_r << ", gradient " << an_r;
  }
  // The start matters: from rest, the gradient differs.
  EXPECT_FALSE(same_bits(vjp(*m2, second.wavelets, res, nullptr).v, g.v)) << what;
  return g;
}

TEST(state, the_gradient_from_a_state_against_finite_differences) {
  for (Case c : physics_cases())
    for (auto strategy : {storage::Strategy::boundary, storage::Strategy::full}) {
      c.schedule = core::Schedule::batched;
      Grads const batched = check_start_gradient(c, strategy);
      c.schedule = core::Schedule::shots;
      Grads const shots = check_start_gradient(c, strategy);
      EXPECT_TRUE(same_grads(batched, shots)) << describe(c) << ": the schedules' gradients differ";
    }
  std::printf(
      "gradient from a state against central differences, worst relative difference over 32 cases: vp %.2e, vp at "
      "the edge cells %.2e, rho %.2e\n",
      worst_fd[0], worst_fd[1], worst_fd[2]);
}

// Also with fp16 storage (the program's default): the saved steps u^1 ... u^nt are the same in
// both runs, so their blocks code alike, and u^0 (zero in both) is kept beside the store.
TEST(state, the_gradient_from_a_start_is_the_source_s_it_stands_for) {
  for (auto strategy : {storage::Strategy::boundary, storage::Strategy::full})
    for (bool vd : {false, true}) {
      std::vector<double> lossless;  // fp32's gradient, the first dtype's
      for (auto dtype : {storage::Dtype::fp32, storage::Dtype::fp16}) {
        Case c;
        c.vd = vd;
        int const nt = 100;
        Survey r = make(c, nt);
        r.setup.storage.strategy = strategy;
        r.setup.storage.dtype = dtype;
        double const a[2] = {0.75, -1.25};
        std::fill(r.wavelets.begin(), r.wavelets.end(), 0.0);
        for (int sh = 0; sh < 2; ++sh) r.wavelets[static_cast<std::size_t>(sh * nt)] = a[sh];
        auto m = modeling(r, c);
        auto const res = residual(nt, r.setup.survey.n_receivers);
        Grads const kicked = vjp(*m, r.wavelets, res, nullptr);
        Ends const start = kick_state(*m, a);
        std::vector<double> const silent(r.wavelets.size(), 0.0);
        Grads const from = vjp(*m, silent, res, &start);
        double peak = 0;
        for (double x : kicked.v) peak = std::max(peak, std::abs(x));
        EXPECT_GT(peak, 0.0);
        // (Full saving from rest leaves step 0 out of the receiver illumination: u^0 = 0 adds nothing
        // to the gradients, and the images from a state take it.)
        bool const full = strategy == storage::Strategy::full;
        std::string const what = describe(c) + (full ? ", full, " : ", boundary, ") + storage::to_string(dtype);
        EXPECT_TRUE(same_bits(from.v, kicked.v) && same_bits(from.rho, kicked.rho) &&
                    (full || same_bits(from.irec, kicked.irec)))
            << what;
        if (dtype == storage::Dtype::fp32) {
          lossless = from.v;
          continue;
        }
        // fp16 codes the saved steps: its gradient is another, close to fp32's.
        double diff = 0, norm = 0;
        for (std::size_t i = 0; i < lossless.size(); ++i) {
          diff += (from.v[i] - lossless[i]) * (from.v[i] - lossless[i]);
          norm += lossless[i] * lossless[i];
        }
        EXPECT_GT(diff, 0.0) << what << ": the same bits as fp32 storage";
        EXPECT_LT(std::sqrt(diff / norm), 1e-2) << what;
      }
    }
}

// A run cut in two, for each physics case, strategy and batching (two shots in one batch on the
// batched schedule, or in batches of one on the `shots` one): f(case, strategy, batch, second,
// start) with the second piece's survey (its wavelets the whole run's later samples; the damping
// profile's velocity fixed at 3000 m/s with `fixed_damping`) and the first piece's end, its start
// (waves in the layer).
template <class F>
void for_each_cut_run(bool fixed_damping, F&& f) {
  for (Case c : physics_cases())
    for (auto strategy : {storage::Strategy::boundary, storage::Strategy::full})
      for (int batch : {0, 1}) {
        c.schedule = batch == 1 ? core::Schedule::shots : core::Schedule::batched;
        int const nt1 = c.dim == 3 ? 30 : 60, nt2 = c.dim == 3 ? 20 : 40;
        Survey first = make(c, nt1), second = make(c, nt2, batch);
        second.setup.storage.strategy = strategy;
        if (fixed_damping) second.setup.pml.profile_velocity = 3000.0;
        second.wavelets = window(make(c, nt1 + nt2).wavelets, nt1 + nt2, nt1, nt2);
        Ends const start = run(*modeling(first, c), first.wavelets, nullptr);
        f(c, strategy, batch, second, start);
      }
}

// A loss linear in what moves: its central difference `fd` and the gradient's `an` agree to
// round-off (and the gradient is not zero). Returns their relative difference.
double check_linear(double fd, double an, std::string const& what) {
  EXPECT_GT(std::abs(an), 0.0) << what;
  EXPECT_LE(std::abs(fd - an), 1e-10 * std::abs(an)) << what << ", finite difference " << fd << ", gradient " << an;
  return std::abs(fd - an) / std::abs(an);
}

// The gradient with respect to the start state (ReverseView::get and ::memory at step 0 of a
// vjp from a start: dL/du^0 = lambda^0, dL/du^{-1} = -lambda^1, the memories' as they are),
// against central differences of <r, records> along directions that move every value of each
// part: u^0, u^{-1}, the memories (the loss is linear in the start, so the differences are exact
// to round-off). The start is the end of an earlier run (waves in the layer); each schedule, both
// strategies, and shots in two batches of one (the watch per batch). vjp's own output of it
// (VjpExtras, no watch: the `shots` schedule where asked) is the watch's, the same bits.
TEST(state, the_gradient_with_respect_to_the_start_state_against_finite_differences) {
  double worst = 0;
  int checked = 0;
  for_each_cut_run(
      false, [&](Case const& c, storage::Strategy strategy, int batch, Survey const& second, Ends const& start) {
        auto m = modeling(second, c);
        int const nr = second.setup.survey.n_receivers;
        auto const res = residual(second.setup.nt, nr);
        Ends g;  // the gradient with respect to `start`, part by part
        g.now.assign(start.now.size(), 0.0);
        g.before.assign(start.before.size(), 0.0);
        g.memory.assign(start.memory.size(), 0.0);
        std::size_t const field = start.now.size() / 2, mem = start.memory.size() / 2;
        m->set_reverse_watch([&](fwi::ReverseView<double> const& v) {
          if (v.step != 0) return;
          std::size_t const f0 = static_cast<std::size_t>(v.first_shot) * field;
          std::size_t const m0 = static_cast<std::size_t>(v.first_shot) * mem;
          v.get(g.now.data() + f0, g.before.data() + f0);
          v.memory(g.memory.data() + m0);
          for (std::size_t i = 0; i < static_cast<std::size_t>(v.shots) * field; ++i) g.before[f0 + i] *= -1.0;
        });
        (void)vjp(*m, second.wavelets, res, &start);
        m->set_reverse_watch(nullptr);
        // The same from vjp's own output (VjpExtras: no watch, so the schedule asked for runs):
        // the same bits.
        {
          Ends out;
          out.now.assign(start.now.size(), -1.0);
          out.before.assign(start.before.size(), -1.0);
          out.memory.assign(start.memory.size(), -1.0);
          Grads gv;
          auto const img = images_into(gv.v, gv.rho, gv.irec, second.setup.grid.cells(), c.vd);
          fwi::ForwardState<double> st;
          st.start_now = start.now.data();
          st.start_before = start.before.data();
          st.start_memory = start.memory.data();
          fwi::VjpExtras<double> more;
          more.start_now = out.now.data();
          more.start_before = out.before.data();
          more.start_memory = out.memory.data();
          m->vjp(second.wavelets.data(), res.data(), img, st, more);
          EXPECT_TRUE(same_bits(out.now, g.now) && same_bits(out.before, g.before) && same_bits(out.memory, g.memory))
              << describe(c) << ": the start's gradient from vjp's output and from the watch at step 0 differ";
        }
        std::string const what = describe(c) + (strategy == storage::Strategy::full ? ", full" : ", boundary") +
                                 (batch == 1 ? ", batches of one shot" : "");
        // The part `part` of the start moved along a direction d that moves every value.
        auto part_of = [](auto& e, int part) -> auto& { return part == 0 ? e.now : part == 1 ? e.before : e.memory; };
        for (int part = 0; part < 3; ++part) {
          std::vector<double> const& x = part_of(start, part);
          std::vector<double> d(x.size());
          double scale = 0;
          for (double xi : x) scale = std::max(scale, std::abs(xi));
          for (std::size_t i = 0; i < d.size(); ++i) d[i] = scale * std::sin(0.61 * static_cast<double>(i) + 0.3);
          double const eps = 1.0;  // the loss is linear in the start: any step is exact but for round-off
          auto moved = [&](double k) {
            Ends e = start;
            auto& y = part_of(e, part);
            for (std::size_t i = 0; i < y.size(); ++i) y[i] += k * eps * d[i];
            return dot(res, run(*m, second.wavelets, &e).records);
          };
          char const* name[] = {"u^0", "u^{-1}", "the layer memories"};
          worst = std::max(worst, check_linear((moved(1) - moved(-1)) / (2 * eps), dot(part_of(g, part), d),
                                               what + ": " + name[part]));
          ++checked;
        }
      });
  std::printf(
      "gradient with respect to the start state against central differences, worst relative difference over "
      "%d checks: %.2e\n",
      checked, worst);
}

// A loss of where a run ends: sum over the parts of <weights, the run's part>, records and end
// state alike (ForwardState's end fields; a part with no weights adds nothing).
double end_loss(fwi::Modeling<double>& m, std::vector<double> const& w, Ends const& start, Ends const& weights) {
  Ends const e = run(m, w, &start);
  double l = 0;
  for (auto part : {&Ends::records, &Ends::now, &Ends::before, &Ends::memory})
    if (!(weights.*part).empty()) l += dot(weights.*part, e.*part);
  return l;
}

// The gradient of a loss of the end state (fwi::EndGradient: dL/du^{nt}, dL/du^{nt-1}, dL/d(the
// layer memories at the end)), one part at a time (the records' weights zero): with respect to
// the model (vjp with `end`) against central differences along a direction that moves every
// cell, then the edge cells alone, then the density; with respect to the start and the
// wavelets (adjoint with `end`), whose differences are exact to
// round-off (the loss is linear in them); vjp's own wavelet gradient (the same sweep as the
// model's and the start's, VjpExtras) is adjoint()'s, the same bits. The run starts and ends with waves in the layer
// (its memories matter); each schedule, both strategies, shots in two batches of one.
TEST(state, the_gradient_of_a_loss_of_the_end_state_against_finite_differences) {
  double worst_model = 0, worst_linear = 0;
  int checked = 0;
  // The damping held fixed, as the gradient holds it.
  for_each_cut_run(true, [&](Case const& c, storage::Strategy strategy, int batch, Survey const& second,
                             Ends const& start) {
    auto m = modeling(second, c);
    Ends const plain = run(*m, second.wavelets, &start);
    std::size_t const n = second.v.size();
    for (int part = 0; part < 3; ++part) {
      char const* name[] = {"u^nt", "u^(nt-1)", "the layer memories at the end"};
      std::string const what = describe(c) + (strategy == storage::Strategy::full ? ", full" : ", boundary") +
                               (batch == 1 ? ", batches of one shot" : "") + ", a loss of " + name[part];
      // Weights on every value of the part, scaled to it.
      Ends weights;
      weights.records.assign(plain.records.size(), 0.0);
      std::vector<double> const& x = part == 0 ? plain.now : part == 1 ? plain.before : plain.memory;
      double peak = 0;
      for (double xi : x) peak = std::max(peak, std::abs(xi));
      ASSERT_GT(peak, 0.0) << what;
      std::vector<double> wgt(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) wgt[i] = std::sin(0.53 * static_cast<double>(i) + 0.4) / peak;
      (part == 0 ? weights.now : part == 1 ? weights.before : weights.memory) = wgt;
      fwi::EndGradient<double> end;
      (part == 0 ? end.now : part == 1 ? end.before : end.memory) = wgt.data();
      // The model: vjp with the end's gradient.
      Grads g;
      auto const out = images_into(g.v, g.rho, g.irec, second.setup.grid.cells(), c.vd);
      fwi::ForwardState<double> st;
      st.start_now = start.now.data();
      st.start_before = start.before.data();
      st.start_memory = start.memory.data();
      // ... and, from the same sweep, the start's and the wavelets' (no watch: the schedule
      // asked for runs).
      Ends gs;
      gs.now.assign(start.now.size(), -1.0);
      gs.before.assign(start.before.size(), -1.0);
      gs.memory.assign(start.memory.size(), -1.0);
      std::vector<double> wg_sweep(second.wavelets.size(), -1.0);
      fwi::VjpExtras<double> more;
      more.end = end;
      more.wavelet_grad = wg_sweep.data();
      more.start_now = gs.now.data();
      more.start_before = gs.before.data();
      more.start_memory = gs.memory.data();
      m->vjp(second.wavelets.data(), weights.records.data(), out, st, more);
      auto model_loss = [&](std::vector<double> const& v, std::vector<double> const& rho) {
        Survey s = second;
        s.v = v;
        s.rho = rho;
        return end_loss(*modeling(s, c), s.wavelets, start, weights);
      };
      // 1e-4: a loss of u^(nt-1) in 3D with variable density and a free surface has a small
      // derivative along dv (cancelling terms), where 1e-3's truncation error is 2e-4 of it.
      double const eps = 1e-4;
      auto shifted = [&](std::vector<double> const& y, std::vector<double> const& d, double k) {
        std::vector<double> z(y);
        for (std::size_t i = 0; i < n; ++i) z[i] += k * eps * d[i];
        return z;
      };
      std::vector<double> dv(n), edge(n, 0.0), drho(n);
      auto const& grid = second.setup.grid;
      int const nz = grid.nz, nx = grid.nx, ny = static_cast<int>(n / static_cast<std::size_t>(nz * nx));
      for (std::size_t i = 0; i < n; ++i) {
        dv[i] = 40.0 * std::sin(0.37 * static_cast<double>(i) + 0.2);
        drho[i] = 30.0 * std::cos(0.23 * static_cast<double>(i));
        int const z = static_cast<int>(i / (n / nz)), xx = static_cast<int>(i % nx);
        int const y = static_cast<int>((i / nx) % ny);
        bool const y_edge = c.dim == 3 && (y == 0 || y == ny - 1);
        if (z == 0 || z == nz - 1 || xx == 0 || xx == nx - 1 || y_edge) edge[i] = dv[i], drho[i] = 0.0;
      }
      for (auto const* d : {&dv, &edge}) {
        double const fd =
            (model_loss(shifted(second.v, *d, 1), second.rho) - model_loss(shifted(second.v, *d, -1), second.rho)) /
            (2 * eps);
        double const an = dot(g.v, *d);
        EXPECT_GT(std::abs(an), 0.0) << what;
        EXPECT_LE(std::abs(fd - an), 1e-6 * std::abs(an)) << what << (d == &edge ? ": vp at the edge cells" : ": vp")
                                                          << ", finite difference " << fd << ", gradient " << an;
        worst_model = std::max(worst_model, std::abs(fd - an) / std::abs(an));
        ++checked;
      }
      if (c.vd) {  // the layer's density is held fixed: off the edge cells only
        double const fd =
            (model_loss(second.v, shifted(second.rho, drho, 1)) - model_loss(second.v, shifted(second.rho, drho, -1))) /
            (2 * eps);
        double const an = dot(g.rho, drho);
        EXPECT_LE(std::abs(fd - an), 1e-6 * std::abs(an))
            << what << ": rho, finite difference " << fd << ", gradient " << an;
        worst_model = std::max(worst_model, std::abs(fd - an) / std::abs(an));
        ++checked;
      }
      // The start's parts and the wavelets: linear, so any step is exact but for round-off.
      std::vector<double> wg(second.wavelets.size(), 0.0);
      m->adjoint(weights.records.data(), wg.data(), end);
      EXPECT_TRUE(same_bits(wg, wg_sweep)) << what << ": the wavelets' gradient of vjp's sweep and of adjoint()";
      for (int sp = 0; sp < 4; ++sp) {
        Ends moved_start = start;
        std::vector<double> wave = second.wavelets;
        std::vector<double>& y = sp == 0   ? moved_start.now
                                 : sp == 1 ? moved_start.before
                                 : sp == 2 ? moved_start.memory
                                           : wave;
        std::vector<double> const& grad = sp == 0 ? gs.now : sp == 1 ? gs.before : sp == 2 ? gs.memory : wg;
        double scale = 0;
        for (double yi : y) scale = std::max(scale, std::abs(yi));
        std::vector<double> d(y.size());
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = scale * std::sin(0.61 * static_cast<double>(i) + 0.3);
        auto moved = [&](double k) {
          std::vector<double> const keep = y;
          for (std::size_t i = 0; i < y.size(); ++i) y[i] += k * d[i];
          double const l = end_loss(*m, wave, moved_start, weights);
          y = keep;
          return l;
        };
        char const* of[] = {"u^0", "u^-1", "the start's layer memories", "the wavelets"};
        worst_linear =
            std::max(worst_linear, check_linear((moved(1) - moved(-1)) / 2, dot(grad, d), what + ": " + of[sp]));
        ++checked;
      }
    }
  });
  std::printf(
      "gradient of a loss of the end state against central differences, worst relative difference over %d checks: "
      "the model %.2e, the start and the wavelets %.2e\n",
      checked, worst_model, worst_linear);
}

// A reverse watch (Modeling::set_reverse_watch): called at every step from nt - 1 down to 0; one
// that reads leaves the images' bits alone (the `shots` schedule's, in chunks of one step),
// and its images at step 0 are those bits. Setting the adjoint wavefields: put back as read they
// give the gradient to round-off (lambda = mu / c and back); zeroed at step k in a reflecting box
// (no layer memories, which the view does not reach) they end the images' sums there.
TEST(state, a_reverse_watch_sees_every_step_and_the_images_so_far) {
  for (Case c : physics_cases()) {
    if (c.free_surface) continue;
    c.schedule = core::Schedule::shots;
    int const nt = 80, k = 30;
    for (bool box : {false, true}) {
      if (box && c.vd) continue;  // variable density needs its layer
      Survey r = make(c, nt);
      if (box) r.setup.pml.width = 0;
      auto m = modeling(r, c);
      int const nr = r.setup.survey.n_receivers;
      auto res = residual(nt, nr);
      for (int sh = 0; sh < 2; ++sh)  // no residual at the records of u^1 .. u^{k+2}
        std::fill_n(res.begin() + static_cast<std::ptrdiff_t>(sh) * nt * nr, (k + 2) * nr, 0.0);
      Grads const plain = vjp(*m, r.wavelets, res, nullptr);
      auto const shape = m->padded_shape();
      std::size_t const field = static_cast<std::size_t>(2) * shape[0] * shape[1] * shape[2];
      std::vector<int> steps;
      Grads at0, atk;
      enum { look, put_back, zero } action = look;
      double peak = 0;
      long long const cells = m->setup().grid.cells();
      m->set_reverse_watch([&](fwi::ReverseView<double> const& v) {
        steps.push_back(v.step);
        EXPECT_EQ(v.first_shot, 0);
        EXPECT_EQ(v.shots, 2);
        std::vector<double> now(field), next(field);
        v.get(now.data(), next.data());
        for (double x : now) peak = std::max(peak, std::abs(x));
        if (v.step == 0) v.images(images_into(at0.v, at0.rho, at0.irec, cells, c.vd));
        if (v.step != k) return;
        v.images(images_into(atk.v, atk.rho, atk.irec, cells, c.vd));
        if (action == zero) std::fill(now.begin(), now.end(), 0.0), std::fill(next.begin(), next.end(), 0.0);
        if (action != look) v.set(now.data(), next.data());
      });
      std::string const what = describe(c) + (box ? ", reflecting box" : "");
      Grads const watched = vjp(*m, r.wavelets, res, nullptr);
      ASSERT_EQ(steps.size(), static_cast<std::size_t>(nt)) << what;
      for (int i = 0; i < nt; ++i) EXPECT_EQ(steps[static_cast<std::size_t>(i)], nt - 1 - i) << what;
      EXPECT_GT(peak, 0.0) << what;
      EXPECT_TRUE(same_grads(plain, watched)) << what << ": a watch that reads changed the images";
      EXPECT_TRUE(same_grads(plain, at0)) << what << ": the images so far at step 0";
      Grads const before = atk;
      action = box ? zero : put_back;
      Grads const changed = vjp(*m, r.wavelets, res, nullptr);
      EXPECT_TRUE(same_grads(before, atk)) << what;
      if (box) {
        EXPECT_TRUE(same_grads(changed, atk)) << what << ": the images after zeroing the adjoint at step " << k;
        EXPECT_FALSE(same_bits(changed.v, plain.v)) << what;
      } else {
        double diff = 0, norm = 0;
        for (std::size_t i = 0; i < plain.v.size(); ++i) {
          diff = std::max(diff, std::abs(changed.v[i] - plain.v[i]));
          norm = std::max(norm, std::abs(plain.v[i]));
        }
        EXPECT_GT(norm, 0.0);
        EXPECT_LT(diff, 1e-12 * norm) << what << ": the adjoint wavefields put back as read";
      }
      m->set_reverse_watch(nullptr);
      EXPECT_TRUE(same_grads(plain, vjp(*m, r.wavelets, res, nullptr))) << what;
    }
  }
}

// The kernels named `name` launched since the counter was set (Kokkos Tools' parallel_for
// callback).
std::string counted_kernel;
int counted_launches = 0;
void count_launch(char const* name, uint32_t, uint64_t*) {
  if (counted_kernel == name) ++counted_launches;
}

// A reverse watch of a few steps keeps the `shots` schedule: its chunks end at the watched steps
// (`backward_shots` launches), the watch is called at those steps alone, and what it reads there,
// the images so far, and the gradient after it changes the adjoint wavefields are the bits of the
// batched schedule's. The steps are given unsorted, two of them adjacent, one at the last step.
TEST(state, a_reverse_watch_of_a_few_steps_keeps_the_shots_schedule) {
  int const nt = 80;
  std::vector<int> const watched = {31, 57, 0, 79, 30};
  std::vector<int> const expected = {79, 57, 31, 30, 0};
  for (Case c : physics_cases()) {
    if (c.free_surface) continue;
    struct Seen {
      std::vector<int> steps;
      std::vector<double> levels;  // lambda^n and lambda^{n+1} at each watched step
      Grads at30, changed;
    } seen[2];
    Grads plain;
    for (int i = 0; i < 2; ++i) {
      c.schedule = i == 0 ? core::Schedule::batched : core::Schedule::shots;
      Survey const r = make(c, nt);
      auto m = modeling(r, c);
      auto const res = residual(nt, r.setup.survey.n_receivers);
      if (i == 0) plain = vjp(*m, r.wavelets, res, nullptr);
      auto const shape = m->padded_shape();
      std::size_t const field = static_cast<std::size_t>(2) * shape[0] * shape[1] * shape[2];
      long long const cells = m->setup().grid.cells();
      Seen& s = seen[i];
      m->set_reverse_watch(
          [&](fwi::ReverseView<double> const& v) {
            s.steps.push_back(v.step);
            std::vector<double> now(field), next(field);
            v.get(now.data(), next.data());
            s.levels.insert(s.levels.end(), now.begin(), now.end());
            s.levels.insert(s.levels.end(), next.begin(), next.end());
            if (v.step != 30) return;
            v.images(images_into(s.at30.v, s.at30.rho, s.at30.irec, cells, c.vd));
            for (double& x : now) x *= 0.5;
            v.set(now.data(), nullptr);
          },
          watched);
      counted_kernel = "ksweep::core::backward_shots";
      counted_launches = 0;
      Kokkos::Tools::Experimental::set_begin_parallel_for_callback(count_launch);
      s.changed = vjp(*m, r.wavelets, res, nullptr);
      Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
      std::string const what = describe(c);
      if (i == 0) EXPECT_EQ(counted_launches, 0) << what;
      else EXPECT_GE(counted_launches, 5) << what << ": the shots schedule did not run";
      EXPECT_EQ(s.steps, expected) << what;
      EXPECT_FALSE(same_bits(s.changed.v, plain.v)) << what << ": the watch's change did nothing";
    }
    std::string const what = describe(c);
    EXPECT_TRUE(same_bits(seen[0].levels, seen[1].levels)) << what << ": the adjoint wavefields at the watched steps";
    EXPECT_TRUE(same_grads(seen[0].at30, seen[1].at30)) << what << ": the images so far at step 30";
    EXPECT_TRUE(same_grads(seen[0].changed, seen[1].changed)) << what << ": the gradient after the change";
  }
}

// A gradient asked for without its illuminations skips their sums (GradientEngine::
// set_illuminations) and gives the same loss, records and gradients, bit for bit, on both
// schedules; asked for, the source illumination is sum_n (u^n)^2 over n = 0 .. nt-1, checked in
// 2D against u^n from nt one-sample forward runs (the sweep rebuilds u^n: equal to rounding).
TEST(state, the_gradient_alone_is_the_gradient_of_a_run_with_its_illuminations) {
  int const nt = 40;
  for (Case c : physics_cases())
    for (auto sched : {core::Schedule::batched, core::Schedule::shots}) {
      c.schedule = sched;
      std::string const what = describe(c);
      Survey const r = make(c, nt);
      auto m = modeling(r, c);
      long long const cells = m->setup().grid.cells();
      std::size_t const records = static_cast<std::size_t>(2 * nt * r.setup.survey.n_receivers);
      std::vector<double> observed(records);
      for (std::size_t i = 0; i < records; ++i) observed[i] = 1e-3 * std::sin(0.37 * static_cast<double>(i));
      struct Out {
        std::vector<double> v, rho, isrc, irec, synthetic, losses;
        double loss = 0;
      } all, alone;
      for (Out* o : {&all, &alone}) {
        bool const illum = o == &all;
        o->v.assign(static_cast<std::size_t>(cells), 0.0);
        o->rho.assign(c.vd ? o->v.size() : 0, 0.0);
        o->isrc.assign(o->v.size(), -1.0);
        o->irec.assign(o->v.size(), -1.0);
        o->synthetic.assign(records, 0.0);
        o->losses.assign(2, 0.0);
        fwi::ModelingImages out;
        out.grad = {o->v.data()};
        if (c.vd) out.grad.push_back(o->rho.data());
        if (illum) {
          out.illum_src = o->isrc.data();
          out.illum_rec = o->irec.data();
        }
        // At step 0 a watch reads the images so far, illuminations included: zero when the call
        // asked for none (the sweep did not sum them).
        std::vector<double> so_far_v, so_far_rho, so_far_src(static_cast<std::size_t>(cells), -1.0), so_far_rec;
        m->set_reverse_watch(
            [&](fwi::ReverseView<double> const& v) {
              auto into = images_into(so_far_v, so_far_rho, so_far_rec, cells, c.vd);
              into.illum_src = so_far_src.data();
              v.images(into);
            },
            {0});
        o->loss = m->gradient(r.wavelets.data(), observed.data(), 0.5, out, o->synthetic.data(), o->losses.data());
        m->set_reverse_watch(nullptr);
        double const src_peak = *std::max_element(so_far_src.begin(), so_far_src.end());
        double const rec_peak = *std::max_element(so_far_rec.begin(), so_far_rec.end());
        if (illum) {
          EXPECT_GT(src_peak, 0.0) << what;
          EXPECT_GT(rec_peak, 0.0) << what;
        } else {
          EXPECT_EQ(src_peak, 0.0) << what << ": the source illumination was summed, not asked for";
          EXPECT_EQ(rec_peak, 0.0) << what << ": the receiver illumination was summed, not asked for";
          EXPECT_EQ(*std::min_element(so_far_src.begin(), so_far_src.end()), 0.0) << what;
        }
      }
      EXPECT_EQ(all.loss, alone.loss) << what;
      EXPECT_TRUE(same_bits(all.synthetic, alone.synthetic)) << what;
      EXPECT_TRUE(same_bits(all.losses, alone.losses)) << what;
      EXPECT_TRUE(same_bits(all.v, alone.v)) << what << ": the velocity's gradient";
      EXPECT_TRUE(same_bits(all.rho, alone.rho)) << what << ": the density's gradient";
      EXPECT_GT(*std::max_element(all.irec.begin(), all.irec.end()), 0.0) << what << ": no receiver illumination";
      if (c.dim != 2 || sched != core::Schedule::shots) continue;
      // sum_n (u^n)^2 from one-sample runs: u^0 = 0 (rest), u^{n+1} the end of the run of sample n.
      Survey const one = make(c, 1);
      auto m1 = modeling(one, c);
      auto const shape = m1->padded_shape();
      std::size_t const field = static_cast<std::size_t>(shape[0]) * shape[1] * shape[2];
      std::vector<double> expected(static_cast<std::size_t>(cells), 0.0);
      std::vector<Ends> u;  // u[k]: the state after k + 1 samples
      for (int n = 0; n + 1 < nt; ++n)
        u.push_back(run(*m1, window(r.wavelets, nt, n, 1), n == 0 ? nullptr : &u.back()));
      int const nz = r.setup.grid.nz, nx = r.setup.grid.nx;
      for (int n = nt - 1; n >= 1; --n)  // the sweep's order: n = nt - 1 down to 0 (u^0 adds 0)
        for (int sh = 0; sh < 2; ++sh)
          for (int z = 0; z < nz; ++z)
            for (int x = 0; x < nx; ++x) {
              double const un = u[static_cast<std::size_t>(n - 1)].now[sh * field + padded_index(*m1, z, x)];
              expected[static_cast<std::size_t>(z * nx + x)] += un * un;
            }
      double peak = 0, diff = 0;
      for (int z = c.free_surface ? 1 : 0; z < nz; ++z)  // a free surface's row 0 holds u = 0: not imaged
        for (int x = 0; x < nx; ++x) {
          std::size_t const i = static_cast<std::size_t>(z * nx + x);
          peak = std::max(peak, expected[i]);
          diff = std::max(diff, std::abs(all.isrc[i] - expected[i]));
        }
      EXPECT_GT(peak, 0.0) << what;
      EXPECT_LT(diff, 1e-9 * peak) << what << ": the source illumination against sum (u^n)^2";
    }
}

// Bytes allocated under `counted_label` since the counter was set (Kokkos Tools).
std::string counted_label;
std::uint64_t counted_bytes = 0;
void count_allocation(Kokkos::Profiling::SpaceHandle const, char const* label, void const*, std::uint64_t size) {
  if (counted_label == label) counted_bytes += size;
}

// The layer's saved differences (the largest buffer of a gradient) come from the process's spare
// on host backends (core::SpareBuffer): a modelling made after another one has gone takes its
// buffer instead of allocating one (a new modelling per call, as ksweep.scalar makes, touches no
// fresh pages), gives the same bits, and a larger one allocates.
TEST(state, a_new_modelling_takes_the_layer_buffer_of_one_gone) {
  Case c;
  int const nt = 60;
  Survey r = make(c, nt);
  auto const res = residual(nt, r.setup.survey.n_receivers);
  auto vjp_counted = [&](Survey const& sv, std::vector<double> const& rr) {
    auto m = modeling(sv, c);
    counted_label = "ksweep::core::layer_d";
    counted_bytes = 0;
    Kokkos::Tools::Experimental::set_allocate_data_callback(count_allocation);
    Grads const g = vjp(*m, sv.wavelets, rr, nullptr);
    Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
    return std::make_pair(g, counted_bytes);
  };
  using Spare = core::SpareBuffer<double, Kokkos::DefaultExecutionSpace::memory_space>;
  Spare::release();
  auto const [first, first_bytes] = vjp_counted(r, res);
  auto const [second, second_bytes] = vjp_counted(r, res);
  EXPECT_GT(first_bytes, 0u) << "the first modelling allocates the layer's differences";
  if constexpr (Spare::kept) EXPECT_EQ(second_bytes, 0u) << "the second modelling allocated them again";
  else EXPECT_EQ(second_bytes, first_bytes) << "device memory is not held back";
  EXPECT_TRUE(same_grads(first, second));
  Survey const longer = make(c, 2 * nt);  // needs twice the values
  auto const [third, third_bytes] = vjp_counted(longer, residual(2 * nt, longer.setup.survey.n_receivers));
  EXPECT_GE(third_bytes, 2 * first_bytes) << "a larger buffer than the spare";
  EXPECT_GT(third.v.size(), 0u);
}

// A gradient's saved steps are kept for the next run of the same size (GradientEngine::forward):
// the second call of a modelling, and its second batch, allocate no saved-step memory (device
// and host storage, fp32 and the program's default fp16) and give the first call's bits; a run
// whose saved wavefield overflowed throws, and the next run on the same store is right again.
TEST(state, the_saved_steps_are_kept_for_the_next_run_of_their_size) {
  Case c;
  int const nt = 60;
  for (char const* location : {"device", "host"})
    for (char const* dtype : {"fp32", "fp16"}) {
      Survey r = make(c, nt, 1);  // two batches of one shot
      r.setup.storage = storage::make_storage_config("boundary", location, dtype, 16, "", true);
      auto const res = residual(nt, r.setup.survey.n_receivers);
      auto m = modeling(r, c);
      std::string const what = std::string(location) + " " + dtype;
      counted_label = std::string("ksweep::storage::") + location;
      std::uint64_t bytes[2];
      Grads g[2];
      for (int call = 0; call < 2; ++call) {
        counted_bytes = 0;
        Kokkos::Tools::Experimental::set_allocate_data_callback(count_allocation);
        g[call] = vjp(*m, r.wavelets, res, nullptr);
        Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
        bytes[call] = counted_bytes;
      }
      EXPECT_GT(bytes[0], 0u) << what << ": the first call allocates the saved steps";
      EXPECT_EQ(bytes[1], 0u) << what << ": the second call allocated them again";
      EXPECT_TRUE(same_grads(g[0], g[1])) << what;
    }
  // An overflow, then a good run on the same store.
  Survey const r = make(c, nt);
  auto const res = residual(nt, r.setup.survey.n_receivers);
  fwi::ModelingSetup setup = r.setup;
  fwi::Modeling<float> m(setup);
  std::vector<float> const v(r.v.begin(), r.v.end()), w(r.wavelets.begin(), r.wavelets.end()),
      rf(res.begin(), res.end());
  m.set_velocity(v.data());
  // A start state of the largest finite values, u^0 = -u^{-1}: its first step, 2 u^0 - u^{-1},
  // overflows everywhere, the saved ring included.
  auto const shape = m.padded_shape();
  std::size_t const field = static_cast<std::size_t>(2) * shape[0] * shape[1] * shape[2];
  std::vector<float> const now(field, 3e38f), before(field, -3e38f);
  fwi::ForwardState<float> huge;
  huge.start_now = now.data();
  huge.start_before = before.data();
  auto run_vjp = [&](fwi::ForwardState<float> const& start) {
    std::vector<double> grad(static_cast<std::size_t>(setup.grid.cells()), 0.0);
    fwi::ModelingImages out;
    out.grad = {grad.data()};
    m.vjp(w.data(), rf.data(), out, start);
    return grad;
  };
  auto const good = run_vjp({});
  try {
    run_vjp(huge);
    ADD_FAILURE() << "an overflowing run went through";
  } catch (std::exception const& e) {
    EXPECT_NE(std::string(e.what()).find("NaN or infinity"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(same_bits(run_vjp({}), good)) << "the run after the overflow";
}

// Arrays in the default execution space's memory (Modeling::set_arrays(Arrays::device): a CUDA
// tensor's on a CUDA build, host memory here) are used in place and give the bits of host
// arrays: forward, adjoint, gradient (images and illuminations), vjp with the amplitudes'
// gradient and born, constant and variable density (whose model is copied to the host); their
// values are checked with the same message. States too: a forward run from a start state handing
// on its end, the vjp of such a run with the end's and the start's gradients, and the adjoint
// with the end's gradient (the propagator moves states through host copies on a device backend).
TEST(state, arrays_on_the_device_give_the_bits_of_host_arrays) {
  using Space = Kokkos::DefaultExecutionSpace;
  using dview = Kokkos::View<double*, Space::memory_space>;
  int const nt = 50;
  auto on_device = [](std::vector<double> const& h, char const* label) {
    dview d(std::string(label), h.size());
    Kokkos::deep_copy(d, Kokkos::View<double const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), h.size()));
    return d;
  };
  auto to_host = [](dview const& d) {
    std::vector<double> h(d.extent(0));
    Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), h.size()), d);
    return h;
  };
  for (bool vd : {false, true}) {
    Case c;
    c.vd = vd;
    std::string const what = describe(c);
    Survey const r = make(c, nt);
    auto const res = residual(nt, r.setup.survey.n_receivers);
    std::size_t const cells = static_cast<std::size_t>(r.setup.grid.cells());
    std::size_t const records = res.size(), samples = r.wavelets.size();
    std::vector<double> scatter(cells);
    for (std::size_t i = 0; i < cells; ++i) scatter[i] = 20.0 * std::sin(0.05 * static_cast<double>(i));
    // Host arrays.
    auto m = modeling(r, c);
    struct Results {
      std::vector<double> records, wavelet_grad, grad, grho, isrc, irec, synthetic, vjp_grad, vjp_wgrad, born;
      double loss = 0;
    } host, dev;
    host.records.assign(records, 0.0);
    m->forward(r.wavelets.data(), host.records.data());
    host.wavelet_grad.assign(samples, 0.0);
    m->adjoint(res.data(), host.wavelet_grad.data());
    for (auto* v : {&host.grad, &host.grho, &host.isrc, &host.irec}) v->assign(cells, 0.0);
    host.synthetic.assign(records, 0.0);
    fwi::ModelingImages out;
    out.grad = {host.grad.data()};
    if (vd) out.grad.push_back(host.grho.data());
    out.illum_src = host.isrc.data();
    out.illum_rec = host.irec.data();
    host.loss = m->gradient(r.wavelets.data(), res.data(), 0.5, out, host.synthetic.data());
    host.vjp_grad.assign(cells, 0.0);
    host.vjp_wgrad.assign(samples, 0.0);
    fwi::ModelingImages vout;
    vout.grad = {host.vjp_grad.data()};
    fwi::VjpExtras<double> more;
    more.wavelet_grad = host.vjp_wgrad.data();
    m->vjp(r.wavelets.data(), res.data(), vout, {}, more);
    if (!vd) {
      host.born.assign(records, 0.0);
      m->born(r.wavelets.data(), scatter.data(), host.born.data());
    }
    // The same on device arrays, in a modelling whose model came from device arrays too.
    auto md = std::make_unique<fwi::Modeling<double>>(r.setup);
    md->set_arrays(fwi::Arrays::device);
    EXPECT_EQ(md->arrays(), fwi::Arrays::device);
    auto const v_d = on_device(r.v, "v"), rho_d = on_device(r.rho, "rho"), w_d = on_device(r.wavelets, "w"),
               res_d = on_device(res, "res"), scatter_d = on_device(scatter, "scatter");
    if (vd) md->set_model({v_d.data(), rho_d.data()});
    else md->set_velocity(v_d.data());
    dview rec_d("records", records), wg_d("wavelet_grad", samples), g_d("grad", cells), grho_d("grho", cells),
        isrc_d("isrc", cells), irec_d("irec", cells), syn_d("synthetic", records), vg_d("vjp_grad", cells),
        vwg_d("vjp_wgrad", samples), born_d("born", records);
    md->forward(w_d.data(), rec_d.data());
    md->adjoint(res_d.data(), wg_d.data());
    fwi::ModelingImages dout;
    dout.grad = {g_d.data()};
    if (vd) dout.grad.push_back(grho_d.data());
    dout.illum_src = isrc_d.data();
    dout.illum_rec = irec_d.data();
    dev.loss = md->gradient(w_d.data(), res_d.data(), 0.5, dout, syn_d.data());
    fwi::ModelingImages dvout;
    dvout.grad = {vg_d.data()};
    fwi::VjpExtras<double> dmore;
    dmore.wavelet_grad = vwg_d.data();
    md->vjp(w_d.data(), res_d.data(), dvout, {}, dmore);
    if (!vd) md->born(w_d.data(), scatter_d.data(), born_d.data());
    EXPECT_EQ(host.loss, dev.loss) << what;
    EXPECT_TRUE(same_bits(host.records, to_host(rec_d))) << what << ": forward";
    EXPECT_TRUE(same_bits(host.wavelet_grad, to_host(wg_d))) << what << ": adjoint";
    EXPECT_TRUE(same_bits(host.grad, to_host(g_d))) << what << ": gradient";
    if (vd) {
      EXPECT_TRUE(same_bits(host.grho, to_host(grho_d))) << what << ": the density's gradient";
    }
    EXPECT_TRUE(same_bits(host.isrc, to_host(isrc_d))) << what << ": source illumination";
    EXPECT_TRUE(same_bits(host.irec, to_host(irec_d))) << what << ": receiver illumination";
    EXPECT_TRUE(same_bits(host.synthetic, to_host(syn_d))) << what << ": synthetic";
    EXPECT_TRUE(same_bits(host.vjp_grad, to_host(vg_d))) << what << ": vjp";
    EXPECT_TRUE(same_bits(host.vjp_wgrad, to_host(vwg_d))) << what << ": vjp's wavelet gradient";
    if (!vd) {
      EXPECT_TRUE(same_bits(host.born, to_host(born_d))) << what << ": born";
    }
    EXPECT_GT(*std::max_element(host.grad.begin(), host.grad.end()), 0.0) << what;
    // Checked values: the message of host arrays.
    auto message = [](auto&& f) {
      try {
        f();
      } catch (std::exception const& e) {  // the message without the source position " [file:line]"
        std::string const text = e.what();
        return text.substr(0, text.rfind(" ["));
      }
      return std::string("no error");
    };
    std::vector<double> bad = r.wavelets;
    bad[bad.size() - 3] = std::nan("");
    bad[7] = std::numeric_limits<double>::infinity();
    auto const bad_d = on_device(bad, "bad");
    m->set_arrays(fwi::Arrays::host);
    std::string const host_message = message([&] { m->forward(bad.data(), host.records.data()); });
    std::string const device_message = message([&] { md->forward(bad_d.data(), rec_d.data()); });
    EXPECT_NE(host_message.find("2 sample(s) that are not finite (the first: inf at shot 0, source 0, time sample 7)"),
              std::string::npos)
        << host_message;
    EXPECT_EQ(device_message, host_message);
    // States on device arrays: a run from where a first run ended (u^nt, u^(nt-1), the layer
    // memories), handing on its own end; the vjp of that run with a gradient of its end state,
    // the amplitudes' and the start's gradients; the adjoint with the end's gradient.
    auto const shape = m->padded_shape();
    std::size_t const shots = static_cast<std::size_t>(r.setup.survey.n_shots);
    std::size_t const sizes[3] = {shots * shape[0] * shape[1] * shape[2], shots * shape[0] * shape[1] * shape[2],
                                  shots * static_cast<std::size_t>(m->memory_values())};
    std::vector<double> start[3], eg[3];
    for (int k = 0; k < 3; ++k) {
      start[k].assign(sizes[k], 0.0);
      eg[k].resize(sizes[k]);
      for (std::size_t i = 0; i < sizes[k]; ++i) eg[k][i] = 1e-3 * std::cos(0.01 * static_cast<double>(i) + k);
    }
    fwi::ForwardState<double> first;
    first.end_now = start[0].data();
    first.end_before = start[1].data();
    first.end_memory = start[2].data();
    m->forward(r.wavelets.data(), host.records.data(), first);
    struct StateResults {
      std::vector<double> end[3], records, grad, wavelet_grad, start_grad[3], adjoint;
    } hs, ds;
    for (int k = 0; k < 3; ++k) hs.end[k].assign(sizes[k], 0.0), hs.start_grad[k].assign(sizes[k], 0.0);
    hs.records.assign(records, 0.0);
    hs.grad.assign(cells, 0.0);
    hs.wavelet_grad.assign(samples, 0.0);
    hs.adjoint.assign(samples, 0.0);
    fwi::ForwardState<double> const hst{start[0].data(),  start[1].data(),  start[2].data(),
                                        hs.end[0].data(), hs.end[1].data(), hs.end[2].data()};
    m->forward(r.wavelets.data(), hs.records.data(), hst);
    fwi::ForwardState<double> const hfrom{start[0].data(), start[1].data(), start[2].data()};
    fwi::VjpExtras<double> hx;
    hx.end = {eg[0].data(), eg[1].data(), eg[2].data()};
    hx.wavelet_grad = hs.wavelet_grad.data();
    hx.start_now = hs.start_grad[0].data();
    hx.start_before = hs.start_grad[1].data();
    hx.start_memory = hs.start_grad[2].data();
    fwi::ModelingImages hg;
    hg.grad = {hs.grad.data()};
    m->vjp(r.wavelets.data(), res.data(), hg, hfrom, hx);
    m->adjoint(res.data(), hs.adjoint.data(), {eg[0].data(), eg[1].data(), eg[2].data()});
    auto const nonzero = [](std::vector<double> const& x) {
      return std::any_of(x.begin(), x.end(), [](double a) { return a != 0.0; });
    };
    EXPECT_TRUE(nonzero(start[0]) && nonzero(start[2])) << what << ": a start at rest";
    EXPECT_TRUE(nonzero(hs.start_grad[0]) && nonzero(hs.start_grad[2])) << what << ": no start gradient";
    // The same on device arrays.
    dview const start_d[3] = {on_device(start[0], "u0"), on_device(start[1], "um1"), on_device(start[2], "mem")};
    dview const eg_d[3] = {on_device(eg[0], "eg0"), on_device(eg[1], "eg1"), on_device(eg[2], "eg2")};
    dview end_d[3], sg_d[3];
    for (int k = 0; k < 3; ++k) end_d[k] = dview("end", sizes[k]), sg_d[k] = dview("start_grad", sizes[k]);
    dview srec_d("records", records), sgrad_d("grad", cells), swg_d("wavelet_grad", samples), sadj_d("adj", samples);
    md->forward(
        w_d.data(), srec_d.data(),
        {start_d[0].data(), start_d[1].data(), start_d[2].data(), end_d[0].data(), end_d[1].data(), end_d[2].data()});
    fwi::VjpExtras<double> dx;
    dx.end = {eg_d[0].data(), eg_d[1].data(), eg_d[2].data()};
    dx.wavelet_grad = swg_d.data();
    dx.start_now = sg_d[0].data();
    dx.start_before = sg_d[1].data();
    dx.start_memory = sg_d[2].data();
    fwi::ModelingImages dg;
    dg.grad = {sgrad_d.data()};
    md->vjp(w_d.data(), res_d.data(), dg, {start_d[0].data(), start_d[1].data(), start_d[2].data()}, dx);
    md->adjoint(res_d.data(), sadj_d.data(), {eg_d[0].data(), eg_d[1].data(), eg_d[2].data()});
    char const* const part[3] = {"u^n", "u^(n-1)", "the layer memories"};
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(same_bits(hs.end[k], to_host(end_d[k]))) << what << ": the end state's " << part[k];
      EXPECT_TRUE(same_bits(hs.start_grad[k], to_host(sg_d[k]))) << what << ": the start's gradient, " << part[k];
    }
    EXPECT_TRUE(same_bits(hs.records, to_host(srec_d))) << what << ": forward from a start";
    EXPECT_TRUE(same_bits(hs.grad, to_host(sgrad_d))) << what << ": vjp from a start with an end's gradient";
    EXPECT_TRUE(same_bits(hs.wavelet_grad, to_host(swg_d))) << what << ": its wavelet gradient";
    EXPECT_TRUE(same_bits(hs.adjoint, to_host(sadj_d))) << what << ": adjoint with an end's gradient";
    // A start's value checked: the message of host arrays.
    std::vector<double> bad_start = start[2];
    bad_start[5] = std::nan("");
    auto const bad_start_d = on_device(bad_start, "bad_start");
    std::string const host_state = message([&] {
      m->forward(r.wavelets.data(), host.records.data(), {nullptr, nullptr, bad_start.data()});
    });
    std::string const device_state = message([&] {
      md->forward(w_d.data(), rec_d.data(), {nullptr, nullptr, bad_start_d.data()});
    });
    EXPECT_NE(host_state.find("the layer memories holds 1 sample(s) that are not finite"), std::string::npos)
        << host_state;
    EXPECT_EQ(device_state, host_state);
  }
}

}  // namespace
