#pragma once
// The inversion through the library alone (fwi::Inversion on the default execution space, the
// space the library runs on: this header is compiled into that backend's test program only).

#include <test_utils.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/core/physics.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/spectral.hpp>
#include <ksweep/fwi/workflow.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace ksweep;

bool same_model_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
bool same_model_bits(fwi::Fields const& a, fwi::Fields const& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t p = 0; p < a.size(); ++p)
    if (!same_model_bits(a[p], b[p])) return false;
  return true;
}

// A small inversion through the library alone (no program, no files): a circular anomaly in a
// layered model, every shot per gradient. L-BFGS reaches a lower loss than Adam in the same
// number of gradient evaluations, and both lower the loss and the model error.
/// The small survey of both cases: 40 x 90 cells of 10 m, a 15-cell layer, order 4, 500 steps of
/// 1 ms, a 15 Hz Ricker; 6 shots at depth 1 and a receiver on every cell of row 1.
fwi::Problem small_problem(fwi::Physics physics) {
  fwi::Problem pb;
  int const nx = 90;
  pb.physics = physics;
  pb.grid = core::ModelGrid(40, nx, 10.0);
  pb.pml.width = 15;
  pb.order = 4;
  pb.dt = 1e-3;
  pb.nt = 500;
  pb.wavelet = core::ricker(15.0, 0.08, pb.dt, pb.nt);
  pb.survey.n_shots = 6;
  pb.survey.n_sources = 1;
  pb.survey.n_receivers = nx;
  for (int s = 0; s < 6; ++s) {
    pb.survey.sources.push_back({1, 5 + s * 16, 0});
    for (int r = 0; r < nx; ++r) pb.survey.receivers.push_back({1, r, 0});
  }
  return pb;
}

/// pb.observed: the records of pb's survey on `prop` (its model set).
template <class P>
void observe(fwi::Problem& pb, P& prop) {
  int const shots = pb.survey.n_shots;
  prop.set_survey(pb.survey);
  typename P::wavelet_view w("w", shots, 1, pb.nt);
  typename P::record_view rec("rec", shots, pb.nt, pb.survey.n_receivers);
  auto wh = Kokkos::create_mirror_view(w);
  for (int s = 0; s < shots; ++s)
    for (int t = 0; t < pb.nt; ++t) wh(s, 0, t) = static_cast<float>(pb.wavelet[t]);
  Kokkos::deep_copy(w, wh);
  prop.forward(w, rec);
  auto const rh = test::to_host(rec);
  pb.observed.assign(rh.data(), rh.data() + rh.span());
}

struct SmallInversion {
  fwi::Problem pb;
  SmallInversion() : pb(small_problem(fwi::Physics::acoustic)) {
    std::vector<float> vp, truth;
    for (int iz = 0; iz < pb.grid.nz; ++iz)
      for (int ix = 0; ix < pb.grid.nx; ++ix) {
        double const v = 1800 + 12.0 * iz;
        double const r2 = (iz - 24.0) * (iz - 24.0) + (ix - 45.0) * (ix - 45.0);
        vp.push_back(static_cast<float>(v));
        truth.push_back(static_cast<float>(r2 < 64 ? v + 250 : v));
      }
    pb.start = {vp};
    pb.truth = {truth};
    // Observed data: the truth modelled by the propagator.
    core::Propagator<float, 4, Kokkos::DefaultExecutionSpace, 2> prop(Kokkos::DefaultExecutionSpace(), pb.grid, pb.pml,
                                                                      pb.dt, 6);
    prop.set_velocity(pb.truth[0].data());
    observe(pb, prop);
  }
  fwi::Options options(fwi::Method m) const {
    fwi::Options o;
    o.method = m;
    o.batch = 6;
    o.water_rows = 4;  // the rows of the sources and receivers, where the gradient is largest
    o.bounds = {{1500, 2600}};
    o.adam.lr = 10;
    o.adam.eps = 1e-16;
    o.lbfgs.first_step = 25;
    return o;
  }
};

// L-BFGS resumed from its state (what a checkpoint holds) takes the steps of an uninterrupted
// run: 6 iterations equal 3, a new inversion restored from the state, and 3 more. Without the
// pairs (a state of checkpoint format 2) it starts afresh: other bits.
KSWEEP_TEST(lbfgs_resumes_bit_for_bit) {
  SmallInversion const small;
  comm::Communicator comm;
  auto o = small.options(fwi::Method::lbfgs);
  o.lbfgs.memory = 2;  // full after 2 iterations: the resumed run replaces pairs too
  fwi::Inversion ref(small.pb, o, comm);
  std::vector<fwi::Report> want;
  for (int it = 0; it < 6; ++it) want.push_back(ref.step());
  fwi::Inversion first(small.pb, o, comm);
  for (int it = 0; it < 3; ++it) first.step();
  auto const st = first.state();
  ASSERT_EQ(st.lbfgs.pairs, 2) << "the state holds L-BFGS's pairs";
  fwi::Inversion resumed(small.pb, o, comm);
  resumed.restore(st);
  for (std::size_t it = 3; it < 6; ++it) {
    auto const r = resumed.step();
    EXPECT_EQ(std::memcmp(&r.loss, &want[it].loss, sizeof r.loss), 0)
        << "loss of iteration " << it + 1 << ": " << r.loss << " vs " << want[it].loss;
    EXPECT_EQ(r.evaluations, want[it].evaluations) << "evaluations of iteration " << it + 1;
  }
  auto const a = resumed.model()[0], b = ref.model()[0];
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "the resumed model differs";
  fwi::Inversion fresh(small.pb, o, comm);
  auto bare = st;
  bare.lbfgs = {};
  fresh.restore(bare);
  for (int it = 3; it < 6; ++it) fresh.step();
  auto const c = fresh.model()[0];
  EXPECT_NE(std::memcmp(c.data(), b.data(), c.size() * sizeof(float)), 0) << "the pairs made no difference";
  // A state that does not fit is refused by name.
  auto bad = st;
  bad.lbfgs.rho.pop_back();
  fwi::Inversion other(small.pb, o, comm);
  EXPECT_THROW(other.restore(bad), Error);
}

// The workflow's stages (fwi::Workflow, which the program and Python run): each stage's data from
// its first iteration and the optimizer restarted there, the steps of set_data() and
// restart_optimizer() by hand; restored inside a stage or at a stage's first iteration (Adam's
// step count from the stage's start), the uninterrupted run's bits. Fails if a switch comes an
// iteration early or late, or if restore() keeps the first stage's data.
KSWEEP_TEST(workflow_stages_match_by_hand_and_restore_bit_for_bit) {
  SmallInversion const small;
  comm::Communicator const comm;
  auto o = small.options(fwi::Method::adam);
  o.batch = 2;
  o.seed = 5;
  auto const& pb = small.pb;
  int const shots = pb.survey.n_shots, nr = pb.survey.n_receivers;
  fwi::Stages const stages({{2, 8.0}, {2, 14.0}}, pb.wavelet, pb.dt);
  ASSERT_FALSE(stages.keeps(0));
  ASSERT_EQ(stages.iterations(), 4);
  fwi::Workflow whole(pb, o, stages, comm);
  std::vector<fwi::Report> want;
  for (int it = 0; it < 5; ++it) want.push_back(whole.step());  // the last stage goes on past its iterations
  auto staged = pb;
  staged.wavelet = stages.wavelet(0);
  staged.observed = stages.observed(0, pb.observed, shots, pb.nt, nr);
  fwi::Inversion hand(staged, o, comm);
  for (int it = 0; it < 5; ++it) {
    if (it == 2) {
      hand.set_data(stages.wavelet(1), stages.observed(1, pb.observed, shots, pb.nt, nr));
      hand.restart_optimizer();
    }
    auto const r = hand.step();
    EXPECT_EQ(std::memcmp(&r.loss, &want[it].loss, sizeof r.loss), 0)
        << "iteration " << it + 1 << ": " << r.loss << " by hand, " << want[it].loss << " by the workflow";
  }
  EXPECT_TRUE(same_model_bits(hand.model(), whole.inversion().model()));
  for (int at : {1, 2, 3}) {
    fwi::Workflow first(pb, o, stages, comm);
    for (int it = 0; it < at; ++it) first.step();
    auto st = first.inversion().state();
    st.optimizer_steps = -1;  // counted from the stage's start by restore()
    fwi::Workflow resumed(pb, o, stages, comm);
    resumed.restore(st);
    EXPECT_EQ(resumed.stage().index, at < 2 ? 0 : 1);
    for (int it = at; it < 5; ++it) {
      auto const r = resumed.step();
      EXPECT_EQ(std::memcmp(&r.loss, &want[static_cast<std::size_t>(it)].loss, sizeof r.loss), 0)
          << "restored after " << at << ", iteration " << it + 1;
    }
    EXPECT_TRUE(same_model_bits(resumed.inversion().model(), whole.inversion().model())) << "restored after " << at;
  }
}

// The options' checks name the program's keys when it asks (the library's own names otherwise),
// and hold for every caller: L-BFGS takes the gradient of the loss as it is.
KSWEEP_TEST(check_options_names_the_callers_keys) {
  SmallInversion const small;
  auto o = small.options(fwi::Method::lbfgs);
  o.grad_smooth = 2;
  auto const message = [&](fwi::Options const& opt, fwi::OptionNames const& names) -> std::string {
    try {
      fwi::check_options(small.pb, opt, names);
    } catch (Error const& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(o, {"fwi.", "time.dt"}).find("fwi.optimizer = \"lbfgs\" needs the gradient of the loss as it is"),
            std::string::npos);
  EXPECT_NE(message(o, {}).find("optimizer = \"lbfgs\" needs"), std::string::npos);
  EXPECT_THROW(fwi::Inversion(small.pb, o, comm::Communicator()), Error);
  o.grad_smooth = 0;
  EXPECT_EQ(message(o, {"fwi.", "time.dt"}), "");
  o.bounds[0].max = 1e5;
  EXPECT_NE(message(o, {"fwi.", "time.dt"}).find("fwi.vmax = 100000 m/s lets the model reach velocities that time.dt"),
            std::string::npos);
  o = small.options(fwi::Method::adam);
  o.batch = 7;
  EXPECT_NE(message(o, {"fwi.", "time.dt"}).find("fwi.batch = 7 shots must be in [1, 6]"), std::string::npos);
}

KSWEEP_TEST(lbfgs_inversion_beats_adam_in_evaluations) {
  SmallInversion const small;
  comm::Communicator const comm;
  fwi::Inversion lbfgs(small.pb, small.options(fwi::Method::lbfgs), comm);
  double const rmse0 = lbfgs.rmse()[0];
  int evaluations = 0;
  double lbfgs_loss = 0, first_loss = 0;
  while (evaluations < 14) {
    auto const r = lbfgs.step();
    evaluations += r.evaluations;
    lbfgs_loss = r.loss;
    if (first_loss == 0) first_loss = r.loss;
    EXPECT_EQ(r.shots.size(), 6u);
  }
  fwi::Inversion adam(small.pb, small.options(fwi::Method::adam), comm);
  double adam_loss = 0;
  for (int i = 0; i < evaluations + 1; ++i) adam_loss = adam.step().loss;  // the loss after `evaluations` steps
  EXPECT_LT(lbfgs_loss, adam_loss) << "L-BFGS after " << evaluations << " gradients vs Adam after as many steps";
  EXPECT_LT(lbfgs_loss, 0.1 * first_loss);
  // Adam moves every cell by about lr per step, so its model error grows on this small case;
  // L-BFGS moves the cells the data constrain.
  EXPECT_LT(lbfgs.rmse()[0], rmse0);
  EXPECT_LT(lbfgs.rmse()[0], adam.rmse()[0]);
  // The state is the whole state: a second inversion restored from it continues alike.
  auto const st = adam.state();
  fwi::Inversion again(small.pb, small.options(fwi::Method::adam), comm);
  again.restore(st);
  EXPECT_TRUE(same_model_bits(again.model(), adam.model()));
  EXPECT_EQ(again.step().loss, adam.step().loss);
  EXPECT_TRUE(same_model_bits(again.model(), adam.model()));
}

// Frequency continuation through the library: stages switch the data and the wavelet
// (set_data) and restart the optimizer; a run stopped at a stage's first iteration or inside a
// stage and restored (its state, Adam's steps since the stage began) continues with the same bits
// as the run that went on.
KSWEEP_TEST(stages_resume_with_the_same_bits) {
  SmallInversion const small;
  comm::Communicator const comm;
  auto const opt = small.options(fwi::Method::adam);
  auto stage = [&](double max_freq) {
    auto obs = small.pb.observed;
    fwi::low_pass_records(obs, small.pb.survey.n_shots, small.pb.nt, small.pb.survey.n_receivers, small.pb.dt,
                          max_freq);
    return std::make_pair(fwi::low_pass(small.pb.wavelet, small.pb.dt, max_freq), obs);
  };
  auto const low = stage(10.0), high = stage(20.0);
  // Two stages of 3 iterations: the reference run, uninterrupted.
  auto start = [&](std::pair<std::vector<double>, std::vector<float>> const& data) {
    auto pb = small.pb;
    pb.wavelet = data.first;
    pb.observed = data.second;
    return pb;
  };
  fwi::Inversion ref(start(low), opt, comm);
  std::vector<fwi::State> states;
  std::vector<double> losses;
  for (int it = 0; it < 6; ++it) {
    if (it == 3) {
      ref.set_data(high.first, high.second);
      ref.restart_optimizer();
    }
    states.push_back(ref.state());
    losses.push_back(ref.step().loss);
  }
  EXPECT_NE(losses[2], losses[3]);
  // Resumed at the second stage's first iteration (3) and inside it (4): what a program does.
  for (int at : {3, 4}) {
    fwi::Inversion again(start(high), opt, comm);
    auto st = states[static_cast<std::size_t>(at)];
    st.optimizer_steps = at - 3;
    again.restore(st);
    if (at == 3) again.restart_optimizer();
    for (int it = at; it < 6; ++it)
      EXPECT_EQ(again.step().loss, losses[static_cast<std::size_t>(it)]) << at << " " << it;
    EXPECT_TRUE(same_model_bits(again.model(), ref.model())) << "resumed at " << at;
  }
  // Without the stage's step count (Adam then counts every iteration) the bias correction
  // differs: the test can tell.
  fwi::Inversion wrong(start(high), opt, comm);
  auto st = states[4];
  EXPECT_EQ(st.optimizer_steps, 1);
  st.optimizer_steps = -1;
  wrong.restore(st);
  wrong.step();
  EXPECT_NE(wrong.step().loss, losses[5]);
  EXPECT_THROW(ref.set_data(std::vector<double>(3), high.second), Error);
  EXPECT_THROW(ref.set_data(high.first, std::vector<float>(5)), Error);
}

// The wavelet estimate (fwi::estimate_wavelet): data modelled with a wavelet that is not a
// Ricker (a 90-degree-rotated Gabor pulse, 12 Hz, delayed 0.15 s) give it back from the
// response of the same model to a 15 Hz Ricker reference, noise-free, within 1e-3 (relative L2);
// on the smoothed starting model (the program's case) within 1e-2. The records are long enough
// (0.9 s) to hold every arrival: a record cut while the data still carry signal breaks the
// convolution the estimate inverts (0.5 s records here: 1.7e-2 on the true model).
KSWEEP_TEST(wavelet_estimate_recovers_a_gabor_wavelet) {
  SmallInversion const small;
  fwi::Problem pb = small.pb;
  pb.nt = 900;
  pb.wavelet = core::ricker(15.0, 0.08, pb.dt, pb.nt);
  int const shots = pb.survey.n_shots, nt = pb.nt, nr = pb.survey.n_receivers;
  std::vector<double> gabor(static_cast<std::size_t>(nt));
  for (int t = 0; t < nt; ++t) {
    double const tau = t * pb.dt - 0.15;
    gabor[static_cast<std::size_t>(t)] = std::sin(2 * M_PI * 12.0 * tau) * std::exp(-(tau / 0.06) * (tau / 0.06));
  }
  using Prop = core::Propagator<float, 4, Kokkos::DefaultExecutionSpace, 2>;
  auto records = [&](std::vector<float> const& model, std::vector<double> const& wavelet) {
    fwi::Problem p = pb;
    p.wavelet = wavelet;
    Prop prop(Kokkos::DefaultExecutionSpace(), p.grid, p.pml, p.dt, shots);
    prop.set_velocity(model.data());
    observe(p, prop);
    return p.observed;
  };
  auto const observed = records(pb.truth[0], gabor);
  auto error = [&](std::vector<double> const& w) {
    double num = 0, den = 0;
    for (int t = 0; t < nt; ++t) {
      double const d = w[static_cast<std::size_t>(t)] - gabor[static_cast<std::size_t>(t)];
      num += d * d;
      den += gabor[static_cast<std::size_t>(t)] * gabor[static_cast<std::size_t>(t)];
    }
    return std::sqrt(num / den);
  };
  auto const est =
      fwi::estimate_wavelet(observed, records(pb.truth[0], pb.wavelet), pb.wavelet, shots, nt, nr, pb.dt, 1e-6);
  std::printf("wavelet estimate on the true model: relative error %.3e, unexplained data %.3e (Ricker: %.3f)\n",
              error(est.wavelet), est.residual, est.residual_reference);
  EXPECT_LT(error(est.wavelet), 1e-3);
  EXPECT_LT(est.residual, 1e-5);
  EXPECT_GT(est.residual_reference, 0.5);  // the Ricker itself explains little of these data
  auto const start =
      fwi::estimate_wavelet(observed, records(pb.start[0], pb.wavelet), pb.wavelet, shots, nt, nr, pb.dt, 1e-3);
  std::printf("wavelet estimate on the starting model: relative error %.3e, unexplained data %.3e\n",
              error(start.wavelet), start.residual);
  EXPECT_LT(error(start.wavelet), 1e-2);
  // Silent synthetic data, or sizes that disagree, are refused.
  std::vector<float> const silent(observed.size(), 0.f);
  EXPECT_THROW(fwi::estimate_wavelet(observed, silent, pb.wavelet, shots, nt, nr, pb.dt, 1e-3), Error);
  EXPECT_THROW(fwi::estimate_wavelet(observed, observed, pb.wavelet, shots, nt, nr - 1, pb.dt, 1e-3), Error);
  EXPECT_THROW(fwi::estimate_wavelet(observed, observed, pb.wavelet, shots, nt, nr, pb.dt, 0.0), Error);
}

// The zero-phase low-pass: a symmetric pulse stays symmetric about its centre; a cosine at
// max_freq comes out at half its amplitude, one at 2 max_freq at 1/4097, one at max_freq / 4 at
// 1/(1 + 4^-12) (away from the ends, where the padding cuts it off).
KSWEEP_TEST(low_pass_is_zero_phase_with_its_stated_gain) {
  double const dt = 1e-3;
  int const nt = 1201, mid = 600;
  std::vector<double> pulse(static_cast<std::size_t>(nt), 0.0);
  for (int t = mid - 20; t <= mid + 20; ++t) pulse[static_cast<std::size_t>(t)] = 1.0 - std::abs(t - mid) / 21.0;
  auto const f = fwi::low_pass(pulse, dt, 15.0);
  for (int k = 1; k < 300; ++k)
    EXPECT_NEAR(f[static_cast<std::size_t>(mid - k)], f[static_cast<std::size_t>(mid + k)], 1e-12) << k;
  EXPECT_EQ(std::max_element(f.begin(), f.end()) - f.begin(), mid);
  for (double ratio : {0.25, 1.0, 2.0}) {
    double const max_freq = 10.0, freq = ratio * max_freq;
    std::vector<double> c(static_cast<std::size_t>(nt));
    for (int t = 0; t < nt; ++t) c[static_cast<std::size_t>(t)] = std::cos(2 * M_PI * freq * (t - mid) * dt);
    auto const g = fwi::low_pass(c, dt, max_freq);
    double const want = fwi::low_pass_gain(freq, max_freq);
    EXPECT_NEAR(want, 1.0 / (1.0 + std::pow(ratio, 12)), 1e-15);
    // Within 0.2 s of the middle, far from the ends where the record is cut, the output is the
    // cosine times the gain (its amplitude by projection onto the cosine; what the cut leaks
    // there is below 1e-4 of the input).
    double gc = 0, cc = 0;
    for (int t = mid - 200; t <= mid + 200; ++t) {
      gc += g[static_cast<std::size_t>(t)] * c[static_cast<std::size_t>(t)];
      cc += c[static_cast<std::size_t>(t)] * c[static_cast<std::size_t>(t)];
    }
    EXPECT_NEAR(gc / cc, want, 1e-4 + 1e-3 * want) << "ratio " << ratio;
  }
  EXPECT_THROW(fwi::low_pass(pulse, dt, 0.0), Error);
  EXPECT_THROW(fwi::low_pass(pulse, 0.0, 5.0), Error);
}

// Variable density through the library: a density anomaly (the velocity known and layered)
// under a start of constant density. Both parameters inverted (the optimizer's vector stacks
// vp and rho): the loss and the density error fall; the state (velocity, density, moments of
// both) restores bit for bit; bad set-ups are refused with the parameter named.
struct SmallDensityInversion {
  fwi::Problem pb;
  SmallDensityInversion() : pb(small_problem(fwi::Physics::acoustic_vd)) {
    std::vector<float> vp, rho, rho_true;
    for (int iz = 0; iz < pb.grid.nz; ++iz)
      for (int ix = 0; ix < pb.grid.nx; ++ix) {
        double const v = 1800 + 12.0 * iz;
        double const r2 = (iz - 24.0) * (iz - 24.0) + (ix - 45.0) * (ix - 45.0);
        vp.push_back(static_cast<float>(v));
        rho.push_back(2000.f);
        rho_true.push_back(r2 < 64 ? 2500.f : 2000.f);
      }
    pb.start = {vp, rho};
    pb.truth = {vp, rho_true};
    core::Propagator<float, 4, Kokkos::DefaultExecutionSpace, 2, core::AcousticVd> prop(Kokkos::DefaultExecutionSpace(),
                                                                                        pb.grid, pb.pml, pb.dt, 6);
    prop.set_model({pb.truth[0].data(), pb.truth[1].data()});
    observe(pb, prop);
  }
  fwi::Options options(fwi::Method m) const {
    fwi::Options o;
    o.method = m;
    o.batch = 6;
    o.water_rows = 4;
    o.bounds = {{1500, 2600, 0}, {1500, 3000, 20}};  // vp (Adam's step: adam.lr), rho
    o.invert = {"vp", "rho"};
    o.adam.lr = 5;
    o.adam.eps = 1e-16;
    o.lbfgs.first_step = 50;
    return o;
  }
};

KSWEEP_TEST(variable_density_inversion_recovers_the_density) {
  SmallDensityInversion const small;
  comm::Communicator const comm;
  fwi::Inversion lbfgs(small.pb, small.options(fwi::Method::lbfgs), comm);
  double const rho0 = lbfgs.rmse()[1], vp0 = lbfgs.rmse()[0];
  EXPECT_EQ(vp0, 0.0);  // the velocity starts at its true value
  double first = 0, last = 0;
  for (int i = 0; i < 8; ++i) {
    auto const r = lbfgs.step();
    if (i == 0) first = r.loss;
    last = r.loss;
    EXPECT_EQ(r.rmse, lbfgs.rmse());
  }
  // Measured: the loss falls to 0.23 of the first iteration's, the density error by 4 % (a
  // surface survey resolves the anomaly's top and bottom), and the density's change correlates
  // with the true anomaly at 0.39.
  EXPECT_LT(last, 0.4 * first);
  EXPECT_LT(lbfgs.rmse()[1], 0.98 * rho0) << "density RMSE " << lbfgs.rmse()[1] << " from " << rho0;
  auto const rho = lbfgs.model()[1];
  auto const& rho_start = small.pb.start[1];
  auto const& rho_true = small.pb.truth[1];
  double dt = 0, dd = 0, tt = 0;
  for (std::size_t i = 0; i < rho.size(); ++i) {
    double const d = rho[i] - rho_start[i], t = rho_true[i] - rho_start[i];
    dt += d * t, dd += d * d, tt += t * t;
  }
  EXPECT_GT(dt / std::sqrt(dd * tt), 0.25) << "the density's change does not follow the true anomaly";
  auto const img = lbfgs.images();
  ASSERT_EQ(img.grad.size(), 2u);
  ASSERT_EQ(img.grad[1].size(), rho_start.size());
  ASSERT_EQ(lbfgs.model().size(), 2u);
  // Adam's state (both parameters' moments) restores bit for bit.
  fwi::Inversion adam(small.pb, small.options(fwi::Method::adam), comm);
  adam.step();
  adam.step();
  auto const st = adam.state();
  EXPECT_EQ(st.first.size(), 2 * rho_start.size());
  fwi::Inversion again(small.pb, small.options(fwi::Method::adam), comm);
  again.restore(st);
  EXPECT_EQ(again.step().loss, adam.step().loss);
  EXPECT_TRUE(same_model_bits(again.model(), adam.model()));
}

KSWEEP_TEST(variable_density_inversion_refuses_bad_setups) {
  SmallDensityInversion const small;
  comm::Communicator const comm;
  auto refuses = [&](fwi::Problem const& pb, fwi::Options const& o, char const* needle) {
    try {
      fwi::Inversion inv(pb, o, comm);
      ADD_FAILURE() << "accepted; expected an error naming " << needle;
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto o = small.options(fwi::Method::adam);
  o.invert = {"vp", "eta"};
  refuses(small.pb, o, "parameter \"eta\" is not one of acoustic_vd's");
  o.invert = {"rho", "rho"};
  refuses(small.pb, o, "invert names parameter \"rho\" twice");
  o = small.options(fwi::Method::adam);
  auto pb = small.pb;
  pb.start[1].pop_back();
  refuses(pb, o, "a starting rho (density) of 3599 cells for a grid of 3600");
  pb = small.pb;
  pb.start[1][7] = -1.f;
  refuses(pb, o, "density at cell 7 is -1 kg/m^3");
  pb = small.pb;
  pb.start.pop_back();
  refuses(pb, o, "a starting model of 1 field(s) for physics \"acoustic_vd\", whose 2 parameter(s) are vp, rho");
  pb = small.pb;
  o.bounds[1] = {3000, 1500, 0};
  refuses(pb, o, "the bounds rho_min = 3000 and rho_max = 1500 kg/m^3 must be finite");
  o = small.options(fwi::Method::adam);
  o.bounds.push_back({1, 2, 0});
  refuses(pb, o, "bounds for 3 parameters, physics \"acoustic_vd\" has 2: vp, rho");
  o = small.options(fwi::Method::adam);
  pb.physics = fwi::Physics::acoustic;
  o.invert = {"vp"};
  o.bounds.pop_back();
  refuses(pb, o, "(variable density is physics \"acoustic_vd\")");
}

}  // namespace
