#include <ksweep/base/error.hpp>
#include <ksweep/fwi/spectral.hpp>
#include <ksweep/fwi/workflow.hpp>

#include <cmath>
#include <utility>

namespace ksweep::fwi {

Stages::Stages(std::vector<Stage> stages, std::vector<double> wavelet, double dt)
    : m_stages(std::move(stages)), m_wavelet(std::move(wavelet)), m_dt(dt) {
  KSWEEP_REQUIRE(m_stages.empty() || (std::isfinite(dt) && dt > 0),
                 "ksweep::fwi::Stages: dt = " << dt << " s must be a finite number > 0");
  for (std::size_t k = 0; k < m_stages.size(); ++k) {
    auto const& st = m_stages[k];
    // The configuration's wording (fwi.stages[k]), without its section.
    KSWEEP_REQUIRE(st.iterations >= 1, "stages[" << k << "].iterations = " << st.iterations << " must be >= 1");
    double const nyquist = 0.5 / dt;
    KSWEEP_REQUIRE(std::isfinite(st.max_freq) && st.max_freq > 0 && st.max_freq < nyquist,
                   "stages[" << k << "].max_freq = " << st.max_freq << " Hz must be in (0, " << nyquist
                             << ") Hz, below the Nyquist frequency of dt = " << dt << " s");
    double outside = 0;
    bool const keeps = low_pass_keeps(m_wavelet, dt, st.max_freq);
    m_wavelets.push_back(keeps ? m_wavelet : low_pass(m_wavelet, dt, st.max_freq, &outside));
    m_outside.push_back(outside);
    m_keeps.push_back(keeps ? 1 : 0);
  }
}

int Stages::iterations() const {
  int n = 0;
  for (auto const& st : m_stages) n += st.iterations;
  return n;
}

Stages::At Stages::at(int it) const {
  int first = 0;
  for (std::size_t k = 0; k < m_stages.size(); ++k) {
    if (it < first + m_stages[k].iterations || k + 1 == m_stages.size()) return {static_cast<int>(k), first};
    first += m_stages[k].iterations;
  }
  return {};
}

std::vector<double> const& Stages::wavelet(int index) const {
  return index < 0 ? m_wavelet : m_wavelets[static_cast<std::size_t>(index)];
}

std::vector<float> Stages::observed(int index, std::vector<float> const& data, int shots, int nt, int receivers) const {
  std::vector<float> out = data;
  if (index < 0 || out.empty() || keeps(index)) return out;
  low_pass_records(out, shots, nt, receivers, m_dt, m_stages[static_cast<std::size_t>(index)].max_freq);
  return out;
}

namespace {

/// The problem with the first stage's data (the whole band without stages).
Problem first_stage(Problem pb, Stages const& stages) {
  if (stages.empty()) return pb;
  KSWEEP_REQUIRE(stages.wavelet(-1) == pb.wavelet,
                 "ksweep::fwi::Workflow: the stages were made from another wavelet than the problem's");
  pb.wavelet = stages.wavelet(0);
  pb.observed = stages.observed(0, pb.observed, pb.survey.n_shots, pb.nt, pb.survey.n_receivers);
  return pb;
}

}  // namespace

Workflow::Workflow(Problem problem, Options options, Stages stages, comm::Communicator const& comm)
    : m_stages(std::move(stages)),
      m_whole_observed(m_stages.empty() ? std::vector<float>() : problem.observed),
      m_shots(problem.survey.n_shots),
      m_nt(problem.nt),
      m_receivers(problem.survey.n_receivers),
      m_current(m_stages.empty() ? -1 : 0),
      m_inv(first_stage(std::move(problem), m_stages), std::move(options), comm) {}

void Workflow::switch_to(int to) {
  m_inv.set_data(m_stages.wavelet(to), m_stages.observed(to, m_whole_observed, m_shots, m_nt, m_receivers));
  m_current = to;
}

void Workflow::restore(State s) {
  auto const at = m_stages.at(s.iteration);
  if (at.index >= 0 && s.optimizer_steps < 0) s.optimizer_steps = s.iteration - at.first;
  m_inv.restore(s);  // checked before the data change
  if (at.index != m_current) switch_to(at.index);
}

Report Workflow::step() {
  int const it = m_inv.iteration();
  if (auto const now = m_stages.at(it); now.index >= 0 && it == now.first && it > 0) {
    if (now.index != m_current) switch_to(now.index);
    m_inv.restart_optimizer();
  }
  return m_inv.step();
}

}  // namespace ksweep::fwi
