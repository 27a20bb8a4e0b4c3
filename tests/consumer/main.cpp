// A user's program on the installed library: Kokkos started through ksweep, one forward
// modelling of a constant-velocity model with fwi::Modeling, and bad input refused with
// ksweep::Error across the library's boundary. Exit 0 when all holds.

#include <ksweep/base/error.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/fwi/modeling.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char* argv[]) {
  using namespace ksweep;
  core::KokkosSession kokkos(argc, argv);
  int const nz = 20, nx = 30, nt = 250;
  double const dh = 10.0, dt = 1e-3, v = 2000.0;
  fwi::ModelingSetup s;
  s.grid = core::ModelGrid(nz, nx, dh);
  s.pml.width = 6;
  s.order = 4;
  s.dt = dt;
  s.nt = nt;
  s.survey.n_shots = 1;
  s.survey.n_sources = 1;
  s.survey.n_receivers = 1;
  s.survey.sources = {{10, 5, 0}};
  s.survey.receivers = {{10, 25, 0}};  // 20 cells away: the direct wave arrives after 0.1 s
  fwi::Modeling<double> m(s);
  std::vector<double> model(static_cast<std::size_t>(nz) * nx, v), wavelet(nt, 0.0), records(nt, 0.0);
  for (int t = 0; t < nt; ++t) {
    double const a = M_PI * 25.0 * (t * dt - 0.04);
    wavelet[static_cast<std::size_t>(t)] = (1.0 - 2.0 * a * a) * std::exp(-a * a);
  }
  m.set_velocity(model.data());
  m.forward(wavelet.data(), records.data());
  int peak = 0;
  for (int t = 0; t < nt; ++t) {
    if (!std::isfinite(records[static_cast<std::size_t>(t)])) {
      std::printf("consumer: record %d is not finite\n", t);
      return 1;
    }
    if (std::abs(records[static_cast<std::size_t>(t)]) > std::abs(records[static_cast<std::size_t>(peak)])) peak = t;
  }
  // The wavelet peaks at 0.04 s and the direct wave travels 200 m at 2000 m/s: its peak about
  // 0.14 s, sample 140 (a little later in 2D, whose Green's function has a tail).
  double const expected = 0.04 + 20 * dh / v;
  std::printf("consumer: %s; records peak |%.3e| at sample %d (direct wave's peak at %.3f s)\n",
              core::describe_build().substr(0, core::describe_build().find('\n')).c_str(),
              std::abs(records[static_cast<std::size_t>(peak)]), peak, expected);
  if (!(std::abs(records[static_cast<std::size_t>(peak)]) > 0) || peak < 130 || peak > 165) {
    std::printf("consumer: no direct wave at the receiver\n");
    return 1;
  }
  // Bad input: a negative velocity is refused with ksweep::Error, and the value named.
  model[17] = -1500.0;
  try {
    m.set_velocity(model.data());
  } catch (Error const& e) {
    std::string const what = e.what();
    std::printf("consumer: refused as expected: %s\n", what.c_str());
    return what.find("-1500") != std::string::npos ? 0 : 1;
  }
  std::printf("consumer: a negative velocity was accepted\n");
  return 1;
}
