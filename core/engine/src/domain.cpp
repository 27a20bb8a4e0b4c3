#include <ksweep/base/error.hpp>
#include <ksweep/core/domain.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ksweep::core {

AxisPart axis_part(int n, int p, int parts, int align) {
  if (align <= 1) {
    int const base = n / parts, extra = n % parts;
    return {p * base + std::min(p, extra), base + (p < extra ? 1 : 0)};
  }
  // The cut before part q: the multiple of align nearest to q n / parts (ties to the lower one).
  auto cut = [&](int q) -> int {
    if (q <= 0) return 0;
    if (q >= parts) return n;
    long long const num = 2LL * q * n, den = 2LL * parts * align;
    long long const k = (num + static_cast<long long>(parts) * align - 1) / den;
    return static_cast<int>(std::min<long long>(n, k * align));
  };
  int const first = cut(p);
  return {first, std::max(0, cut(p + 1) - first)};
}

std::string describe(DomainSplit const& split, int dim) {
  return dim == 3 ? std::to_string(split.ny_parts) + " x " + std::to_string(split.nx_parts)
                  : std::to_string(split.nx_parts);
}

void check_split(ModelGrid const& grid, DomainSplit const& split, int radius, int ranks) {
  bool const three = grid.dim() == 3;
  std::string const what =
      three ? "parallel.domains = [" + std::to_string(split.ny_parts) + ", " + std::to_string(split.nx_parts) + "]"
            : "parallel.domains = [" + std::to_string(split.nx_parts) + "]";
  KSWEEP_REQUIRE(split.nx_parts >= 1 && split.ny_parts >= 1, what << ": every axis needs at least 1 part");
  KSWEEP_REQUIRE(three || split.ny_parts == 1, what << ": a 2D model is split along x only");
  KSWEEP_REQUIRE(split.align >= 1, what << ": the cut alignment " << split.align << " must be >= 1 cell");
  int const min_cells = 2 * radius + 1, align = split.align;
  auto thinnest = [&](int n, int parts) {
    int t = n;
    for (int p = 0; p < parts; ++p) t = std::min(t, axis_part(n, p, parts, align).count);
    return t;
  };
  auto check_axis = [&](int n, int parts, char const* axis) {
    int const t = thinnest(n, parts);
    if (t >= min_cells) return;
    int most = 1;
    while (most < n && thinnest(n, most + 1) >= min_cells) ++most;
    std::string const cuts = align > 1 ? ", cuts on multiples of " + std::to_string(align) +
                                             " cells (the codec blocks of the boundary storage)"
                                       : std::string();
    KSWEEP_REQUIRE(false, what << " leaves parts of " << t << " cells along " << axis << " (" << n << " cells in "
                               << parts << " parts" << cuts << "); each needs at least " << min_cells
                               << " cells (2 x the stencil radius " << radius << " + 1): at most " << most << " parts");
  };
  check_axis(grid.nx, split.nx_parts, "x");
  if (three) check_axis(grid.ny, split.ny_parts, "y");
  KSWEEP_REQUIRE(split.count() <= ranks, what << " makes " << split.count() << " subdomains, more than the " << ranks
                                              << " MPI ranks: run with at least " << split.count()
                                              << " ranks (mpirun -np " << split.count() << ")");
  KSWEEP_REQUIRE(ranks % split.count() == 0, what << " makes " << split.count() << " subdomains, and " << ranks
                                                  << " MPI ranks do not divide into shot groups of " << split.count()
                                                  << " ranks: run with a multiple of " << split.count() << " ranks");
}

Subdomain subdomain(ModelGrid const& grid, PmlConfig const& pml, DomainSplit const& split, int index,
                    double profile_velocity) {
  KSWEEP_REQUIRE(index >= 0 && index < split.count(),
                 "ksweep::core::subdomain: index " << index << " is outside [0, " << split.count() << ")");
  KSWEEP_REQUIRE(std::isfinite(profile_velocity) && profile_velocity > 0,
                 "ksweep::core::subdomain: the profile velocity " << profile_velocity << " m/s must be > 0");
  bool const three = grid.dim() == 3;
  Subdomain d;
  d.index = index;
  d.iy = index / split.nx_parts;
  d.ix = index % split.nx_parts;
  AxisPart const px = axis_part(grid.nx, d.ix, split.nx_parts, split.align);
  d.x0 = px.first;
  d.nx = px.count;
  if (three) {
    AxisPart const py = axis_part(grid.ny, d.iy, split.ny_parts, split.align);
    d.y0 = py.first;
    d.ny = py.count;
  }
  d.grid = three ? ModelGrid::volume(grid.nz, d.ny, d.nx, grid.dh) : ModelGrid(grid.nz, d.nx, grid.dh);
  d.grid.spacing = grid.spacing;
  d.pml = pml;
  d.pml.profile_velocity = profile_velocity;
  // Every face's width as the whole model has it, then the cut faces.
  for (int f = 0; f < 6; ++f)
    if (d.pml.faces[f] < 0) d.pml.faces[f] = pml.width;
  auto link = [&](int face, bool cut, int neighbour, int& out) {
    d.pml.cut[face] = cut;
    out = cut ? neighbour : -1;
  };
  link(PmlConfig::left, d.ix > 0, index - 1, d.left);
  link(PmlConfig::right, d.ix + 1 < split.nx_parts, index + 1, d.right);
  link(PmlConfig::front, three && d.iy > 0, index - split.nx_parts, d.front);
  link(PmlConfig::back, three && d.iy + 1 < split.ny_parts, index + split.nx_parts, d.back);
  return d;
}

namespace {
// The part of an axis holding cell `c`.
int part_of(int n, int parts, int align, int c) {
  for (int p = 0; p < parts; ++p) {
    AxisPart const a = axis_part(n, p, parts, align);
    if (c < a.first + a.count) return p;
  }
  return parts - 1;
}
}  // namespace

Survey local_survey(Survey const& survey, ModelGrid const& whole, DomainSplit const& split, Subdomain const& d) {
  Survey out = survey;
  bool const three = whole.dim() == 3;
  int const r = interpolation_radius;
  // The interpolation taps of coordinate v along an axis: the cell itself on a node, else the
  // window floor(v) - r + 1 ... floor(v) + r.
  auto window = [&](double v, int& lo, int& hi) {
    int const f = static_cast<int>(std::floor(v));
    bool const node = v == std::floor(v);
    lo = node ? f : f - r + 1;
    hi = node ? f : f + r;
  };
  auto place = [&](Point const& p, bool& here, std::string const& what) {
    int const cx = static_cast<int>(std::floor(p.x)), cy = three ? static_cast<int>(std::floor(p.y)) : 0;
    int const ix = part_of(whole.nx, split.nx_parts, split.align, std::clamp(cx, 0, whole.nx - 1));
    int const iy = three ? part_of(whole.ny, split.ny_parts, split.align, std::clamp(cy, 0, whole.ny - 1)) : 0;
    // The taps must stay in the owner's cells (its layer included on the model's edges).
    auto check_axis = [&](double v, int n, int parts, int part, char const* axis) {
      int lo = 0, hi = 0;
      window(v, lo, hi);
      AxisPart const a = axis_part(n, part, parts, split.align);
      int const first = part > 0 ? a.first : -1000000, last = part + 1 < parts ? a.first + a.count - 1 : 1000000;
      KSWEEP_REQUIRE(lo >= first && hi <= last,
                     what << " at " << axis << " = " << v << " cells: its interpolation taps " << axis << " = " << lo
                          << " ... " << hi << " reach across the cut at " << axis << " = "
                          << (lo < first ? first : last + 1) << " between two domains of the split "
                          << describe(split, whole.dim())
                          << "; move the point onto a cell or choose another parallel.domains");
    };
    check_axis(p.x, whole.nx, split.nx_parts, ix, "x");
    if (three) check_axis(p.y, whole.ny, split.ny_parts, iy, "y");
    here = ix == d.ix && iy == d.iy;
  };
  auto localise = [&](std::vector<Cell>& cells, std::vector<Point>& points, std::vector<unsigned char>& away, int n,
                      bool receivers, char const* kind) {
    std::size_t const total = static_cast<std::size_t>(survey.n_shots) * n;
    away.assign(total, 0);
    for (std::size_t k = 0; k < total; ++k) {
      int const s = static_cast<int>(k / n), i = static_cast<int>(k % n);
      bool const live = receivers ? survey.live(s, i) : survey.source_live(s, i);
      if (!live) continue;  // silent everywhere: the taps of every subdomain have weight 0
      Point const p = receivers ? survey.receiver_at(k) : survey.source_at(k);
      bool here = false;
      place(p, here, std::string(kind) + " " + std::to_string(i) + " of shot " + std::to_string(s));
      away[k] = here ? 0 : 1;
    }
    for (auto& c : cells) {
      c.x -= d.x0;
      c.y -= d.y0;
    }
    for (auto& p : points) {
      p.x -= d.x0;
      p.y -= d.y0;
    }
  };
  localise(out.sources, out.source_points, out.away_sources, survey.n_sources, false, "source");
  localise(out.receivers, out.receiver_points, out.away_receivers, survey.n_receivers, true, "receiver");
  return out;
}

}  // namespace ksweep::core
