#pragma once
/// \file geometry.hpp
/// The model grid, the absorbing layer around it, the acquisition geometry, and the checks on
/// them.

#include <string>
#include <vector>

namespace ksweep::core {

/// The physical model grid: nz rows (depth) by nx columns, square cells of size dh metres.
struct ModelGrid {
  int nz = 0;
  int nx = 0;
  double dh = 0.0;
};

/// Convolutional PML (second-order form) around the model, and the optional free surface.
struct PmlConfig {
  int width = 20;             ///< cells per edge, added outside the model grid
  double reflection = 1e-3;   ///< theoretical normal-incidence reflection coefficient R
  double freq = 25.0;         ///< PML frequency (Hz) of the alpha (CFS) term
  bool free_surface = false;  ///< pressure-free top edge (image method) instead of a top layer
};

/// A grid cell (integer indices on the model grid: z down, x right).
struct Cell {
  int z = 0;
  int x = 0;
};

/// Acquisition of a batch of shots. Every shot has the same number of sources and of receivers.
struct Survey {
  int n_shots = 0;
  int n_sources = 0;            ///< per shot
  int n_receivers = 0;          ///< per shot
  std::vector<Cell> sources;    ///< [shot * n_sources + i]
  std::vector<Cell> receivers;  ///< [shot * n_receivers + i]

  /// The shots `shots` (indices into this survey), in that order.
  Survey select(std::vector<int> const& shots) const;
};

/// Padded-grid layout: the model grid plus the absorbing layer, for a stencil radius M.
struct Layout {
  int nz = 0, nx = 0;  ///< model grid
  int width = 0;       ///< layer width W (left, right, bottom; top too unless free surface)
  int top = 0;         ///< rows above the model: 0 with a free surface, W otherwise
  int radius = 0;      ///< stencil radius M
  int NZ = 0, NX = 0;  ///< padded grid
  bool free_surface = false;

  Layout() = default;
  Layout(ModelGrid const& grid, PmlConfig const& pml, int order);
  long long padded_cells() const { return static_cast<long long>(NZ) * NX; }
};

/// Checks of the propagator set-up; each throws ksweep::Error naming the value and its limit.
void check_grid(ModelGrid const& grid, PmlConfig const& pml, int order);
void check_time(double dt, int nt);
void check_velocity(float const* vp, long long n);
/// CFL: vmax dt / dh must not exceed the leapfrog limit of `order`.
void check_cfl(double vmax, double dt, double dh, int order);
void check_survey(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml);

/// A warning (empty when none) when the wavelet is under-sampled: fewer than
/// `min_points` cells per shortest wavelength vmin / (2.5 freq).
std::string sampling_warning(double vmin, double freq, double dh, double min_points = 5.0);

}  // namespace ksweep::core
