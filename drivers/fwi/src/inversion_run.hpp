#pragma once
// What Inversion's facade calls: the inversion of one stencil order and dimension behind a
// virtual interface (inversion_impl.hpp holds the template).

#include <ksweep/fwi/inversion.hpp>

#include <memory>
#include <vector>

namespace ksweep::fwi {

struct Inversion::Impl {
  virtual ~Impl() = default;
  virtual void restore(State const& s) = 0;
  virtual void set_data(std::vector<double> wavelet, std::vector<float> observed) = 0;
  virtual void restart_optimizer() = 0;
  virtual Report step() = 0;
  virtual int iteration() const = 0;
  virtual State state() const = 0;
  virtual Fields model() const = 0;
  virtual Images images() const = 0;
  virtual void set_illuminations(bool on) = 0;
  /// Per parameter, of `model` (nullptr: the current model).
  virtual std::vector<double> rmse(Fields const* model) const = 0;
  virtual core::MemoryReport memory() const = 0;
};

/// The inversion of stencil order `Order` on a `Dim`-dimensional grid, of the core physics
/// `Physics` (core::Acoustic, core::AcousticVd).
template <int Order, int Dim, class Physics>
std::unique_ptr<Inversion::Impl> make_inversion(Problem problem, Options options, comm::Communicator const& comm);

}  // namespace ksweep::fwi
