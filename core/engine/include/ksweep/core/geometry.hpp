#pragma once
/// \file geometry.hpp
/// The model grid, the absorbing layer around it, the acquisition geometry, and the checks on
/// them.

#include <ksweep/base/physics_table.hpp>

#include <array>
#include <string>
#include <vector>

namespace ksweep::core {

/// The physical model grid: a plane of nz cells in depth by nx along x (2D), or a volume of nz by
/// ny by nx cells (3D), cells of dh metres along every axis, or of their own size along each axis
/// (`spacing`). Values are stored row-major with x fastest: [nz][nx] in 2D, [nz][ny][nx] in 3D
/// (as nz ny rows of nx cells). The dimension is its own property, chosen by the constructor (a
/// plane) or volume(), not a value of ny.
///
/// With cells of different sizes, dh is the reference of c = v^2 dt^2 / dh^2 and each axis a's
/// second difference carries the weight (dh / d_a)^2 (`weight`), exactly 1 on an axis of size dh:
/// a grid of equal spacings computes the same bits whether it names them or not.
struct ModelGrid {
  int nz = 0;
  int nx = 0;
  double dh = 0.0;
  int ny = 1;  ///< cells along y (1 in a plane)
  /// Cell size (metres) along z, y and x; 0: dh. Set by set_spacing().
  std::array<double, 3> spacing = {0.0, 0.0, 0.0};

  ModelGrid() = default;
  /// A plane of nz x nx cells.
  ModelGrid(int nz_, int nx_, double dh_) : nz(nz_), nx(nx_), dh(dh_) {}
  /// A volume of nz x ny x nx cells.
  static ModelGrid volume(int nz, int ny, int nx, double dh) {
    ModelGrid g(nz, nx, dh);
    g.ny = ny;
    g.m_dim = 3;
    return g;
  }
  int dim() const { return m_dim; }
  /// Cell sizes along z and x (a plane; dh becomes dx), or z, y and x (a volume; dh becomes dx).
  ModelGrid& set_spacing(std::array<double, 3> const& zyx) {
    spacing = zyx;
    dh = zyx[2];
    return *this;
  }
  /// The cell size along geometric axis g (0 z, 1 y, 2 x).
  double step(int g) const { return spacing[g] > 0 ? spacing[g] : dh; }
  /// The cell size along axis a of the grid's own axes (z, x in 2D; z, y, x in 3D).
  double axis_step(int a) const { return step(m_dim == 3 ? a : 2 * a); }
  /// (dh / d_a)^2 of axis a of the grid's own axes: exactly 1 where d_a = dh.
  double weight(int a) const {
    double const q = dh / axis_step(a);
    return q * q;
  }
  /// Every axis' cell of size dh.
  bool uniform() const {
    for (int a = 0; a < m_dim; ++a)
      if (axis_step(a) != dh) return false;
    return true;
  }
  /// "dh = 10 m", or "dz = 10 m, dx = 5 m".
  std::string describe_spacing() const;
  /// Rows of nx cells: nz (2D) or nz ny (3D).
  long long rows() const { return static_cast<long long>(nz) * ny; }
  long long cells() const { return rows() * nx; }

 private:
  int m_dim = 2;
};

/// Convolutional PML (second-order form) around the model, and the optional free surface.
struct PmlConfig {
  int width = 20;             ///< cells per edge, added outside the model grid
  double reflection = 1e-3;   ///< theoretical normal-incidence reflection coefficient R
  double freq = 25.0;         ///< PML frequency (Hz) of the alpha (CFS) term
  bool free_surface = false;  ///< pressure-free top edge (image method) instead of a top layer
  /// Layer cells per face, in the order of `Face`; a negative entry takes `width`.
  std::array<int, 6> faces = {-1, -1, -1, -1, -1, -1};
  /// Faces where a subdomain meets its neighbour (domain decomposition, domain.hpp): no layer
  /// and no saved ring there; the fields' halo beyond them holds the neighbour's cells, filled
  /// by a halo exchange after every step. Only the y and x faces (front, back, left, right) can
  /// be cut.
  std::array<bool, 6> cut = {false, false, false, false, false, false};
  /// The velocity (m/s) of the damping profiles; 0: the model's maximum. The subdomains of a
  /// split model take the whole model's maximum, so that their layers damp as one model's.
  double profile_velocity = 0.0;
  enum Face { top, bottom, front, back, left, right };  ///< z low, z high, y low, y high, x low, x high
  /// Layer cells of face f (the top face of a free surface and cut faces have none).
  int face(int f) const { return (f == top && free_surface) || cut[f] ? 0 : (faces[f] >= 0 ? faces[f] : width); }
};

/// A grid cell (integer indices on the model grid: z down, x right, y across; y = 0 in 2D).
struct Cell {
  int z = 0;
  int x = 0;
  int y = 0;
};

/// A position anywhere in the model grid, in cells (fractional between cells): z down, x right,
/// y across (0 in 2D). Cell (z, x, y) is the position (z, x, y); metres are cells times dh.
struct Point {
  double z = 0.0;
  double x = 0.0;
  double y = 0.0;
};

/// Acquisition of a batch of shots. Every shot has the same number of source and receiver slots;
/// a shot with fewer receivers leaves the rest silent (receiver_count).
struct Survey {
  int n_shots = 0;
  int n_sources = 0;            ///< per shot
  int n_receivers = 0;          ///< per shot
  std::vector<Cell> sources;    ///< [shot * n_sources + i]
  std::vector<Cell> receivers;  ///< [shot * n_receivers + i]
  /// Positions off the grid (optional): when not empty, they place the sources (receivers),
  /// [shot * n + i] in cells, and `sources` (`receivers`) is not read. Points between cells are
  /// interpolated (point_taps); points on a cell are the cell itself, bit for bit.
  std::vector<Point> source_points;
  std::vector<Point> receiver_points;
  /// Receivers in use per shot (optional, [shot], each in [0, n_receivers]): receivers
  /// i >= receiver_count[s] of shot s are silent, at no position: they record zeros and inject
  /// nothing. Empty: every receiver is in use.
  std::vector<int> receiver_count;
  /// Points another subdomain holds (domain decomposition, optional, [shot * n + i], 1: away):
  /// silent here, like the receivers beyond receiver_count. Empty: every point is here.
  std::vector<unsigned char> away_sources, away_receivers;

  /// The shots `shots` (indices into this survey), in that order.
  Survey select(std::vector<int> const& shots) const;
  /// Position of source / receiver k ([shot * n + i]), from the points or the cells.
  Point source_at(std::size_t k) const;
  Point receiver_at(std::size_t k) const;
  /// Whether receiver i of shot s is in use.
  bool live(int s, int i) const {
    return (receiver_count.empty() || i < receiver_count[static_cast<std::size_t>(s)]) &&
           (away_receivers.empty() || !away_receivers[static_cast<std::size_t>(s) * n_receivers + i]);
  }
  /// Whether source i of shot s injects here (not away).
  bool source_live(int s, int i) const {
    return away_sources.empty() || !away_sources[static_cast<std::size_t>(s) * n_sources + i];
  }
};

/// Interpolation of positions between cells: Kaiser-windowed sinc (Hicks 2002, Geophysics 67(1)),
/// half-width `interpolation_radius` cells, Kaiser parameter `interpolation_kaiser_b` (Hicks'
/// table 1 value for r = 4, accurate up to 2/3 of the grid's Nyquist wavenumber).
inline constexpr int interpolation_radius = 4;
inline constexpr double interpolation_kaiser_b = 6.31;

/// 1D interpolation weights of position x (cells) on the nodes floor(x) - r + 1 ... floor(x) + r
/// (2 r weights, r = interpolation_radius); on a node (x integral): 1 at that node, 0 elsewhere.
std::vector<double> sinc_weights(double x);

/// The cells a kind of point (sources or receivers) reaches and their weights: point i has the
/// taps [i * per_point, (i + 1) * per_point). One tap of weight 1 per point when every point lies
/// on a cell (no weights); else (2 r)^dim taps per point, the product of the axes' sinc weights,
/// z slowest, with a free surface's mirror images (a tap above the surface adds its weight,
/// negated, to its image below; taps on the surface get weight 0). Silent points have weights 0.
/// Cells may lie in the absorbing layer; a tap beyond it is an error naming the point (the
/// positions must have passed check_positions).
struct PointTaps {
  int per_point = 1;
  std::vector<Cell> cells;      ///< [point * per_point + k]
  std::vector<double> weights;  ///< same index; empty: every weight 1
};
PointTaps source_taps(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml);
PointTaps receiver_taps(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml);

/// Padded-grid layout: the model grid plus the absorbing layer, for a stencil radius M. Axes are
/// z, y (3D only) and x; a 2D layout has ny = NY = 1 and no layer along y. The padded grid's
/// fields carry a halo of M zero cells on every side of every axis and are stored as rows of
/// NX + 2M cells: field_rows() rows, (NZ + 2M) in 2D and (NZ + 2M)(NY + 2M) in 3D.
struct Layout {
  int dim = 2;
  int nz = 0, ny = 1, nx = 0;                                         ///< model grid
  int top = 0, bottom = 0, front = 0, back = 0, left = 0, right = 0;  ///< layer cells per face
  int radius = 0;                                                     ///< stencil radius M
  int NZ = 0, NY = 1, NX = 0;                                         ///< padded grid
  bool free_surface = false;
  /// The axes' weights (dh / d_a)^2 (ModelGrid::weight), axis a of z, x (2D) or z, y, x (3D).
  std::array<double, 3> weight = {1.0, 1.0, 1.0};

  Layout() = default;
  /// The layout for a stencil of `radius` cells (< 0: order / 2, the constant-density stencil).
  Layout(ModelGrid const& grid, PmlConfig const& pml, int order, int radius = -1);
  long long padded_cells() const { return static_cast<long long>(NZ) * NY * NX; }
  /// Rows of the padded grid (no halo) per shot: NZ NY.
  int rows() const { return NZ * NY; }
  /// Rows of the model grid: nz ny.
  int model_rows() const { return nz * ny; }
  /// Rows of a field with its halo: (NZ + 2M)(NY + 2M) in 3D, NZ + 2M in 2D.
  int field_rows() const { return (NZ + 2 * radius) * (dim == 3 ? NY + 2 * radius : 1); }
  /// The field row (halo included) of padded cell (iz, iy).
  int field_row(int iz, int iy) const {
    return dim == 3 ? (iz + radius) * (NY + 2 * radius) + iy + radius : iz + radius;
  }
};

/// Checks of the propagator set-up; each throws ksweep::Error naming the value and its limit.
/// `radius`: the reach of the physics' stencil (< 0: order / 2).
void check_grid(ModelGrid const& grid, PmlConfig const& pml, int order, int radius = -1);
/// Face f's layer width named as the program's configuration and Python set it:
/// "propagator.pml_left = 0 cells (Python: pml_width[4]; the absorbing layer's left face)", or
/// "propagator.pml_width = ..." when the face takes the common width.
std::string describe_pml_face(PmlConfig const& pml, int f);
void check_time(double dt, int nt);
/// Every one of the n values of a field of parameter `p` (base/physics_table.hpp) is finite and
/// > p.lower; else an error naming the first cell (row-major), its value and unit, and the limit.
void check_parameter(Parameter const& p, float const* x, long long n);
void check_parameter(Parameter const& p, double const* x, long long n);
/// The error of check_parameter for the value `value` at cell `cell`.
[[noreturn]] void parameter_error(Parameter const& p, long long cell, double value);
/// check_parameter of the velocity and of the density, for callers that hold one.
void check_velocity(float const* vp, long long n);
void check_velocity(double const* vp, long long n);
void check_density(float const* rho, long long n);
void check_density(double const* rho, long long n);
/// CFL: vmax dt / dh must not exceed the leapfrog limit of `order` in `dim` dimensions.
void check_cfl(double vmax, double dt, double dh, int order, int dim = 2);
/// CFL on the grid's spacings: vmax dt / h, 1 / h^2 the mean of 1 / d_a^2 over the axes (h = dh
/// on a uniform grid), must not exceed the leapfrog limit of `order` in the grid's dimensions.
void check_cfl(double vmax, double dt, ModelGrid const& grid, int order);
/// The h of check_cfl: 1 / sqrt(mean over the axes of 1 / d_a^2); dh on a uniform grid.
double cfl_spacing(ModelGrid const& grid);
/// The survey's sizes, and every live point inside the model grid (on a free surface: below it);
/// errors name the shot, the point and its position in cells and metres.
void check_positions(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml);
/// check_positions, and every point's interpolation taps inside the padded grid (source_taps and
/// receiver_taps refuse the others).
void check_survey(Survey const& survey, ModelGrid const& grid, PmlConfig const& pml);

/// A warning (empty when none) when the wavelet is under-sampled: fewer than
/// `min_points` cells per shortest wavelength vmin / (2.5 freq).
std::string sampling_warning(double vmin, double freq, double dh, double min_points = 5.0);

}  // namespace ksweep::core
