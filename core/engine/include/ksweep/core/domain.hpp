#pragma once
/// \file domain.hpp
/// A model split into subdomains (domain decomposition): the model cells are cut along x (2D),
/// or along y and x (3D), into parts of nearly equal width (the first cells % parts parts take
/// one more); the absorbing layer of each face goes with the subdomains on that face, so every
/// cut lies between model cells. Each subdomain runs the propagator on its own padded grid with
/// cut faces (PmlConfig::cut): no layer there, and a halo holding the neighbour's cells after
/// every step (halo.hpp, comm::HaloExchange). Every cell is computed by exactly the arithmetic of
/// one domain, so records, gradients and images are the same bits for any split.

#include <ksweep/core/geometry.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ksweep::core {

/// Parts along y (3D only) and x, and the cells the cuts are multiples of: `align` = 1 cuts
/// anywhere; a boundary storage whose codec keeps a scale per block (fp16, int8) needs its
/// cut_alignment (core/sizes.hpp), so that every codec block is coded alike on every split.
struct DomainSplit {
  int ny_parts = 1, nx_parts = 1;
  int align = 1;
  int count() const { return ny_parts * nx_parts; }
  bool split() const { return count() > 1; }
};

/// One subdomain: position (iy, ix) in the split (index = iy nx_parts + ix), its model cells
/// [y0, y0 + ny) x [x0, x0 + nx) of every depth, its grid and layer (cut faces towards its
/// neighbours, the damping profiles of the whole model's velocity), and its neighbours'
/// indices (-1: the model's edge).
struct Subdomain {
  int index = 0, iy = 0, ix = 0;
  int x0 = 0, nx = 0, y0 = 0, ny = 1;
  ModelGrid grid;
  PmlConfig pml;
  int left = -1, right = -1, front = -1, back = -1;
  /// Model cells of the subdomain.
  long long cells() const { return grid.cells(); }
};

/// The first cell and the count of part p of `parts` along an axis of `n` cells: parts of
/// nearly equal width, each cut at the multiple of `align` nearest to p n / parts (align 1: the
/// first n % parts parts take one cell more). A part may be empty when align is coarse for n
/// (check_split refuses that).
struct AxisPart {
  int first = 0, count = 0;
};
AxisPart axis_part(int n, int p, int parts, int align = 1);

/// Checks a split of `grid` for a stencil of radius `radius` over `ranks` ranks: at least one
/// part per axis, y parts only in 3D, every part (cut on multiples of split.align) at least
/// 2 radius + 1 cells wide, no more
/// subdomains than ranks, and ranks a multiple of the subdomains (the rest are shot groups).
/// The errors name the value and its limit.
void check_split(ModelGrid const& grid, DomainSplit const& split, int radius, int ranks);

/// Subdomain `index` of `split` (check_split first). `profile_velocity` (m/s, > 0) is the
/// whole model's maximum velocity (the damping profiles of every subdomain).
Subdomain subdomain(ModelGrid const& grid, PmlConfig const& pml, DomainSplit const& split, int index,
                    double profile_velocity);

/// The survey as subdomain `d` sees it: positions in its cells, the points of the other
/// subdomains away (Survey::away_sources, away_receivers). A point belongs to the subdomain of
/// its cell (off the grid: the cell below its position); an off-grid point whose interpolation
/// taps reach across a cut is an error naming the point, its taps and the cut.
Survey local_survey(Survey const& survey, ModelGrid const& whole, DomainSplit const& split, Subdomain const& d);

/// The subdomain's cells of a whole-model array [nz][ny][nx] (2D: [nz][nx]), row-major.
template <class T>
std::vector<T> extract(T const* whole, ModelGrid const& grid, Subdomain const& d) {
  std::vector<T> out(static_cast<std::size_t>(d.cells()));
  std::size_t k = 0;
  for (int z = 0; z < grid.nz; ++z)
    for (int y = d.y0; y < d.y0 + d.ny; ++y) {
      T const* row = whole + (static_cast<std::size_t>(z) * grid.ny + y) * grid.nx + d.x0;
      for (int x = 0; x < d.nx; ++x) out[k++] = row[x];
    }
  return out;
}

/// Writes the subdomain's cells `part` (row-major, as extract() gives them) into a whole-model
/// array.
template <class T>
void insert(T const* part, ModelGrid const& grid, Subdomain const& d, T* whole) {
  std::size_t k = 0;
  for (int z = 0; z < grid.nz; ++z)
    for (int y = d.y0; y < d.y0 + d.ny; ++y) {
      T* row = whole + (static_cast<std::size_t>(z) * grid.ny + y) * grid.nx + d.x0;
      for (int x = 0; x < d.nx; ++x) row[x] = part[k++];
    }
}

/// "2 x 3" (3D) or "3" (2D): the split as a person writes it.
std::string describe(DomainSplit const& split, int dim);

}  // namespace ksweep::core
