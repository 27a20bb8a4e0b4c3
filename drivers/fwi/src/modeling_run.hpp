#pragma once
// What Modeling's facade calls: the modelling of one precision, stencil order and dimension
// behind a virtual interface (modeling_impl.hpp holds the template).

#include <ksweep/fwi/modeling.hpp>

#include <functional>
#include <memory>

namespace ksweep::fwi {

template <class Real>
struct Modeling<Real>::Impl {
  explicit Impl(ModelingSetup s) : setup(std::move(s)) {}
  virtual ~Impl() = default;
  virtual void set_model(std::vector<Real const*> const& fields, std::vector<Real const*> const& layer) = 0;
  /// From rest for a state of nulls (Modeling::forward without one).
  virtual void forward(Real const* wavelets, Real* records, ForwardState<Real> const& state) = 0;
  virtual std::array<int, 3> padded_shape() const = 0;
  virtual long long memory_values(int axis) const = 0;
  virtual void adjoint(Real const* records, Real* wavelet_grad, EndGradient<Real> const& end) = 0;
  virtual double gradient(Real const* wavelets, Real const* observed, double scale, ModelingImages const& out,
                          Real* synthetic, double* shot_losses) = 0;
  /// From rest for a start of nulls (Modeling::vjp without one); the end fields are not read.
  virtual void vjp(Real const* wavelets, Real const* residual, ModelingImages const& out,
                   ForwardState<Real> const& start, VjpExtras<Real> const& more) = 0;
  virtual void born(Real const* wavelets, Real const* scatter, Real* records) = 0;
  ModelingSetup setup;
  std::function<void(int, int)> after_batch;
  bool cross_correlation = false;                               // Modeling::set_cross_correlation
  Arrays arrays = Arrays::host;                                 // Modeling::set_arrays
  std::function<void(ReverseView<Real> const&)> reverse_watch;  // Modeling::set_reverse_watch
  std::vector<int> reverse_watch_steps;                         // its steps (empty: every step)
};

/// The modelling of precision `Real`, stencil order `Order` on a `Dim`-dimensional grid, of the
/// core physics `Physics` (core::Acoustic, core::AcousticVd).
template <class Real, int Order, int Dim, class Physics>
std::unique_ptr<typename Modeling<Real>::Impl> make_modeling(ModelingSetup setup);

}  // namespace ksweep::fwi
