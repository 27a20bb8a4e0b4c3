// A run from its configuration (configured.hpp): the inversion's state in a checkpoint and back,
// and a checkpoint's checks against the run that continues from it.

#include <ksweep/base/error.hpp>
#include <ksweep/fwi/configured.hpp>

#include <algorithm>
#include <cstring>

namespace ksweep::fwi {

namespace {

/// L-BFGS's memory between fwi::LbfgsState and the checkpoint's record of it (the same fields).
template <class From, class To>
void copy_lbfgs(From const& a, To& b) {
  b.pairs = a.pairs;
  b.s = a.s;
  b.y = a.y;
  b.rho = a.rho;
  b.gradient = a.gradient;
  b.loss = a.loss;
  b.gamma = a.gamma;
  b.iterations = a.iterations;
  b.evaluations = a.evaluations;
}

}  // namespace

io::Checkpoint to_checkpoint(io::Config const& cfg, State const& st) {
  io::Checkpoint c;
  c.iteration = st.iteration;
  c.rng = st.rng;
  for (auto const& field : st.model) c.model.insert(c.model.end(), field.begin(), field.end());
  c.parameters = static_cast<int>(st.model.size());
  c.moments = static_cast<int>(cfg.fwi.invert.size());
  // L-BFGS keeps no moments (zeros there) but its memory, so that a resumed run takes the
  // uninterrupted run's steps.
  std::size_t const nm = static_cast<std::size_t>(c.moments) * st.model.front().size();
  c.m = st.first.empty() ? std::vector<float>(nm, 0.f) : st.first;
  c.v = st.second.empty() ? std::vector<float>(nm, 0.f) : st.second;
  if (cfg.fwi.optimizer == "lbfgs") copy_lbfgs(st.lbfgs, c.lbfgs);
  return c;
}

State from_checkpoint(io::Checkpoint const& ck) {
  auto const n = static_cast<std::ptrdiff_t>(ck.model.size() / static_cast<std::size_t>(ck.parameters));
  State s;
  s.iteration = ck.iteration;
  s.rng = ck.rng;
  for (int p = 0; p < ck.parameters; ++p)
    s.model.emplace_back(ck.model.begin() + p * n, ck.model.begin() + (p + 1) * n);
  s.first = ck.m;
  s.second = ck.v;
  s.optimizer_steps = -1;  // counted from the start of the stage (Workflow::restore)
  if (ck.lbfgs.pairs >= 0) copy_lbfgs(ck.lbfgs, s.lbfgs);
  return s;
}

void check_checkpoint(io::Config const& cfg, io::Checkpoint const& ck, std::string const& where, Problem const& setup,
                      Options const& options, Fields const& start) {
  auto const& f = cfg.fwi;
  OptionNames const keys{"fwi.", "time.dt"};
  std::size_t const n = static_cast<std::size_t>(setup.grid.cells());
  std::size_t const plane = n / static_cast<std::size_t>(setup.grid.nz);
  KSWEEP_REQUIRE(f.iterations > ck.iteration,
                 "--resume: fwi.iterations = "
                     << f.iterations
                     << (f.iterations == ck.iteration ? " iterations are all done" : " is smaller than the ")
                     << (f.iterations == ck.iteration ? std::string(" (") : std::to_string(ck.iteration))
                     << (f.iterations == ck.iteration ? "" : " iterations already done in ") << where
                     << (f.iterations == ck.iteration ? ")" : "")
                     << ": nothing is left to run; set fwi.iterations above " << ck.iteration << " to continue");
  KSWEEP_REQUIRE(f.optimizer != "lbfgs" || ck.lbfgs.pairs >= 0,
                 "--resume: the checkpoint " << where
                                             << " holds no L-BFGS memory (it was written in checkpoint format 2, "
                                                "before checkpoints kept L-BFGS's correction pairs): an L-BFGS run "
                                                "cannot continue from it with the steps it would have taken; start "
                                                "the run again");
  auto const& names = physics_parameters(setup.physics);
  int const params = static_cast<int>(names.size());
  int const moments = static_cast<int>(f.invert.size());
  KSWEEP_REQUIRE(ck.parameters == params && ck.moments == moments,
                 "--resume: the checkpoint " << where << " holds " << ck.parameters << " parameter(s) and moments of "
                                             << ck.moments << ", this run has " << params << " and " << moments
                                             << " (propagator.physics, fwi.invert)");
  Fields held;
  for (int p = 0; p < params; ++p)
    held.emplace_back(ck.model.begin() + static_cast<std::ptrdiff_t>(p * n),
                      ck.model.begin() + static_cast<std::ptrdiff_t>((p + 1) * n));
  check_bounds(setup, options, held, "--resume: the checkpoint " + where, keys);
  double const vck = *std::max_element(held[0].begin(), held[0].end());
  double const vstable = stable_velocity(cfg, setup.grid.dh, setup.grid.dim());
  KSWEEP_REQUIRE(vck <= vstable, "--resume: the checkpoint "
                                     << where << " holds velocities up to " << vck << " m/s, above the " << vstable
                                     << " m/s that time.dt allows: its contents are out of range");
  // The water rows are never updated: a checkpoint whose water differs from the starting
  // model's was edited (its checksum resealed) or made from another model.
  int const water = options.water_rows;
  std::size_t const water_cells = static_cast<std::size_t>(water) * plane;
  for (std::size_t p = 0; p < static_cast<std::size_t>(params); ++p) {
    auto const& s = start[p];
    auto const& h = held[p];
    for (std::size_t i = 0; i < water_cells && i < s.size(); ++i)
      KSWEEP_REQUIRE(std::memcmp(&h[i], &s[i], sizeof(float)) == 0,
                     "--resume: the checkpoint " << where << "'s " << names[p].noun << " (" << names[p].name
                                                 << ") holds " << h[i] << " at cell " << i << " of the " << water
                                                 << " water row(s), which the inversion never changes "
                                                 << "(the starting model has " << s[i]
                                                 << " there): the checkpoint was edited or made from another model");
  }
}

}  // namespace ksweep::fwi
