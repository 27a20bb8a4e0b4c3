#pragma once
/// \file cpml.hpp
/// Damping profiles of the convolutional PML in its second-order form (Pasalic and McGarry
/// 2010; Komatitsch and Martin 2007): per axis, a = exp(-(sigma + alpha) dt) and
/// b = sigma / (sigma + alpha) (a - 1), with sigma = sigma0 f^2, sigma0 = -3 vmax ln(R) / (2 L),
/// alpha = pi f_pml (1 - f), and f the normalised depth into the layer (1/W at the first layer
/// cell, 1 at the outer edge).

#include <ksweep/core/geometry.hpp>

#include <vector>

namespace ksweep::core {

/// Profiles along one axis of the padded grid, with `radius` halo cells on each side:
/// index i + radius for padded coordinate i in [-radius, n + radius). Outside the layer
/// a = b = mask = 0; inside, mask = 1.
struct CpmlProfile {
  std::vector<double> a, b, mask;
};

/// Profile along an axis of `n_model` model cells with `before` layer cells on the low side
/// (0 for a free surface) and `after` on the high side. A cell's depth into the layer is 1 for
/// the first layer cell; with `half_points`, index i + radius holds the profile at the half-point
/// i + 1/2 (staggered derivatives), half a cell less deep (1/2 between the model's last cell and
/// the layer). `inset` (cells) leaves the part of the layer next to the model undamped: the
/// profile at depth d is that of depth d - inset in a layer `inset` cells thinner, zero where
/// d <= inset (variable density: M + 1/2, so that no stencil reaching a model cell or its
/// half-points reads a layer memory).
CpmlProfile cpml_profile(int n_model, int before, int after, int radius, double dh, double dt, double vmax,
                         PmlConfig const& pml, bool half_points = false, double inset = 0.0);

}  // namespace ksweep::core
