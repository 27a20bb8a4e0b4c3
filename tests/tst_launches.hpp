#pragma once
// Kernel launches per time step, counted through the Kokkos Tools callbacks: small problems are
// launch-bound on devices, so each step's launch count is part of the contract.
//   forward modelling: 2 (point work, stencil)
//   adjoint:           2
//   gradient forward:  4 (point work, stencil, ring encode, the layer terms of the model cells
//                      next to the layer saved)
//   gradient backward: 4 (the point work of both wavefields with the decoded ring, imaging
//                      with reconstruction, the layer terms added, adjoint stencil)
// The counts are slopes over two run lengths, so set-up launches do not enter.

#include <ksweep/core/gradient.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <ksweep/core/runtime.hpp>

#include <string>

namespace {

using namespace ksweep;

struct LaunchProblem {
  using P = core::Propagator<float, 8, TEST_EXECSPACE>;
  using E = core::GradientEngine<float, 8, TEST_EXECSPACE>;
  static constexpr int nz = 30, nx = 40, shots = 2;
  P prop;
  LaunchProblem() : prop(TEST_EXECSPACE(), core::ModelGrid{nz, nx, 10.0}, pml(), 1e-3, shots) {
    std::vector<float> v(static_cast<std::size_t>(nz) * nx, 2000.0f);
    prop.set_velocity(v.data());
    prop.set_survey(test::line_survey(shots, nz, nx, 2, 3, 12));
    // Launches per step of the device schedule: batched by rows, or by cells (as on devices)
    // when the test program runs with the cells schedule.
    prop.set_schedule(core::default_schedule() == core::Schedule::cells ? core::Schedule::cells
                                                                        : core::Schedule::batched);
  }
  static core::PmlConfig pml() {
    core::PmlConfig p;
    p.width = 6;
    return p;
  }
  P::wavelet_view wavelets(int nt) const { return P::wavelet_view("w", shots, 1, nt); }
  P::record_view records(int nt) const { return P::record_view("r", shots, nt, 12); }
};

// Launches of `run(nt, counter)` per step: (launches(nt2) - launches(nt1)) / (nt2 - nt1), each
// counted on a second run of its size (a first use allocates: the adjoint fields, a gradient's
// step store, which a run of the same size reuses).
template <class Run>
double launches_per_step(Run const& run, std::string* labels) {
  int const nt1 = 10, nt2 = 30;
  long counts[2];
  int i = 0;
  for (int nt : {nt1, nt2}) {
    {
      core::LaunchCounter warm_up;
      run(nt, warm_up);
    }
    core::LaunchCounter counter;
    run(nt, counter);
    counts[i++] = counter.count();
    if (nt == nt2) {
      labels->clear();
      for (auto const& [k, v] : counter.by_label()) *labels += "  " + k + ": " + std::to_string(v) + "\n";
    }
  }
  return static_cast<double>(counts[1] - counts[0]) / (nt2 - nt1);
}

KSWEEP_TEST(launches_per_step_forward_and_adjoint) {
  LaunchProblem p;
  // The schedule the test program asked for is the one that runs (see test_main.cpp).
  EXPECT_EQ(p.prop.runs_cells(),
            core::default_schedule() == core::Schedule::cells || !core::impl::runs_by_rows<TEST_EXECSPACE>);
  for (bool adjoint : {false, true}) {
    std::string labels;
    double const per_step = launches_per_step(
        [&](int nt, core::LaunchCounter&) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          if (adjoint) p.prop.adjoint(r, w);
          else p.prop.forward(w, r);
        },
        &labels);
    EXPECT_EQ(per_step, 2.0) << (adjoint ? "adjoint" : "forward") << "\n" << labels;
  }
}

KSWEEP_TEST(launches_per_step_gradient) {
  for (char const* strategy : {"boundary", "full"}) {
    LaunchProblem p;
    storage::StorageConfig cfg;
    cfg.strategy = storage::parse_strategy(strategy);
    cfg.dtype = storage::Dtype::int8;  // the codec with a block reduction
    LaunchProblem::E engine(p.prop, cfg);
    std::string labels;
    double const fwd = launches_per_step(
        [&](int nt, core::LaunchCounter&) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          engine.forward(w, r);
        },
        &labels);
    EXPECT_EQ(fwd, 4.0) << strategy << "\n" << labels;
    double const bwd = launches_per_step(
        [&](int nt, core::LaunchCounter& counter) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          engine.forward(w, r);
          counter.reset();  // the backward pass alone
          LaunchProblem::E::images_type images(LaunchProblem::nz, LaunchProblem::nx);
          engine.backward(w, r, images);
        },
        &labels);
    EXPECT_EQ(bwd, 4.0) << strategy << "\n" << labels;
  }
}

}  // namespace
