#pragma once
/// \file workflow.hpp
/// The inversion's workflow over ksweep::fwi::Inversion, the same for the program, C++ callers
/// and Python: frequency continuation in stages (Stages) and an inversion that walks them
/// (Workflow).
///
/// Stages: each stage runs its `iterations` on the observed data and the wavelet low-passed with
/// zero phase below its `max_freq` (spectral.hpp's low_pass; a stage whose cut-off is above the
/// wavelet's band uses both as they are), and the optimizer starts afresh at its first iteration.
/// Past the last stage's iterations the last stage goes on.
///
/// Workflow: step() switches the data at a stage's first iteration and restarts the optimizer
/// there; restore() continues inside a stage with that stage's data and Adam's step count from
/// the stage's start. A run stopped and restored at any iteration takes the uninterrupted run's
/// steps (the same bits).

#include <ksweep/comm/communicator.hpp>
#include <ksweep/fwi/inversion.hpp>

#include <cstddef>
#include <vector>

namespace ksweep::fwi {

/// One stage of frequency continuation.
struct Stage {
  int iterations = 0;   ///< iterations of the stage (>= 1)
  double max_freq = 0;  ///< the low-pass's cut-off (Hz, > 0)
};

/// The stages of a run and each stage's wavelet, low-passed once.
class Stages {
 public:
  /// Where an iteration sits: its stage (-1: no stages, the whole band) and the stage's first
  /// iteration (0-based).
  struct At {
    int index = -1;
    int first = 0;
  };

  /// No stages: the whole band throughout.
  Stages() = default;
  /// `wavelet` (the run's, the whole band, sampled at `dt` s) low-passed for every stage. Throws
  /// naming the stage whose iterations or max_freq are out of range.
  Stages(std::vector<Stage> stages, std::vector<double> wavelet, double dt);

  bool empty() const { return m_stages.empty(); }
  std::size_t size() const { return m_stages.size(); }
  Stage const& operator[](std::size_t k) const { return m_stages[k]; }
  /// The iterations of every stage together.
  int iterations() const;
  /// The stage of iteration `it` (0-based).
  At at(int it) const;
  /// The wavelet of stage `index` (-1: the whole band).
  std::vector<double> const& wavelet(int index) const;
  /// The observed data [shot][nt][receiver] as stage `index` uses them (a copy, low-passed alike;
  /// -1: as they are).
  std::vector<float> observed(int index, std::vector<float> const& data, int shots, int nt, int receivers) const;
  /// Whether stage `index` uses the wavelet and the data as they are (its cut-off is above the
  /// wavelet's band: spectral.hpp's low_pass_keeps).
  bool keeps(int index) const { return m_keeps[static_cast<std::size_t>(index)] != 0; }
  /// The share of the stage's wavelet energy the low-pass spread before t = 0 or past the record
  /// (spectral.hpp's `outside`), which the modelling cannot inject while data low-passed alike
  /// keep it: above ~1 %, the stage's data and modelling differ by that much.
  double outside(int index) const { return m_outside[static_cast<std::size_t>(index)]; }
  /// The sampling interval of the wavelets (s).
  double dt() const { return m_dt; }

 private:
  std::vector<Stage> m_stages;
  std::vector<double> m_wavelet;
  std::vector<std::vector<double>> m_wavelets;
  std::vector<double> m_outside;
  std::vector<char> m_keeps;
  double m_dt = 0;
};

/// An inversion over stages of frequency continuation (collective calls, as Inversion's).
class Workflow {
 public:
  /// `problem.wavelet` and `problem.observed` are the whole band (the stages low-pass them;
  /// `stages` was made from the same wavelet). The data of the first stage are the inversion's
  /// from the start; restore() switches to a later one.
  Workflow(Problem problem, Options options, Stages stages, comm::Communicator const& comm);

  /// Continues from `s` with the data of the stage of s.iteration. A state without Adam's step
  /// count (optimizer_steps < 0) counts them from the stage's first iteration.
  void restore(State s);
  /// One iteration (collective): at a stage's first iteration (after the first) its data replace
  /// the previous stage's and the optimizer starts afresh.
  Report step();
  /// The stage the next step() runs in.
  Stages::At stage() const { return m_stages.at(m_inv.iteration()); }
  Stages const& stages() const { return m_stages; }
  Inversion& inversion() { return m_inv; }
  Inversion const& inversion() const { return m_inv; }

 private:
  /// The data of stage `to` replace those of m_current (collective).
  void switch_to(int to);

  Stages m_stages;
  std::vector<float> m_whole_observed;  ///< kept with stages only (the inversion holds the one copy otherwise)
  int m_shots = 0, m_nt = 0, m_receivers = 0;
  int m_current = -1;  ///< the stage whose data the inversion holds
  Inversion m_inv;
};

}  // namespace ksweep::fwi
