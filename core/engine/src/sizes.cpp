#include <ksweep/core/sizes.hpp>

#include <algorithm>

namespace ksweep::core {

using sz = std::size_t;

sz level_values(Layout const& l, int shots) {
  return static_cast<sz>(shots) * static_cast<sz>(l.field_rows()) * static_cast<sz>(l.NX + 2 * l.radius);
}

std::array<std::array<int, 2>, 3> strip_extents(Layout const& l) {
  int const M = l.radius;
  std::array<std::array<int, 2>, 3> ext{};
  int const last = l.dim - 1;
  ext[0] = {std::max(l.top, l.bottom) + 4 * M, l.NY * l.NX};
  if (l.dim == 3) ext[1] = {l.NZ * (std::max(l.front, l.back) + 4 * M), l.NX};
  ext[static_cast<sz>(last)] = {l.NZ * l.NY, std::max(l.left, l.right) + 4 * M};
  return ext;
}

sz state_values(Layout const& l, int shots) {
  sz layer = 0;
  for (auto const& e : strip_extents(l)) layer += static_cast<sz>(e[0]) * static_cast<sz>(e[1]);  // unused axes: 0
  // Two levels of u; psi and zeta of each axis, two levels each, [side][shot][...].
  return 2 * level_values(l, shots) + 2 * 2 * 2 * static_cast<sz>(shots) * layer;
}

sz coefficient_values(Layout const& l) {
  return static_cast<sz>(l.field_rows()) * (l.NX + 2 * l.radius) + static_cast<sz>(l.model_rows()) * l.nx;
}

long long ring_cells(Layout const& l, bool full) {
  long long const M = l.radius;
  // M cells beyond the model on each side with a layer (none at a free surface or a cut).
  auto const span = [M](int n, int before, int after) { return n + (before > 0 ? M : 0) + (after > 0 ? M : 0); };
  long long const rows = span(l.nz, l.top, l.bottom), cols = span(l.nx, l.left, l.right);
  long long const box = rows * cols * (l.dim == 3 ? span(l.ny, l.front, l.back) : 1);
  return full ? box : box - static_cast<long long>(l.model_rows()) * l.nx;
}

int cut_alignment(Layout const& l, bool full, storage::Dtype dtype) {
  if (!storage::block_coupled(dtype)) return 1;
  long long const M = l.radius, B = storage::block_size;
  long long const column = (l.top > 0 ? M : 0) + (l.bottom > 0 ? M : 0) + (full ? l.nz : 0);
  int const largest = l.dim == 3 ? 8 : 64;
  int g = 1;
  while (g < largest && (column * g * (l.dim == 3 ? g : 1)) % B != 0) g *= 2;
  return g;
}

std::vector<int> ring_layout(Layout const& l, bool full, storage::Dtype dtype) {
  int const D = l.dim, m = l.radius;
  struct Axis {
    int n, lo, N;
  };
  std::array<Axis, 3> ax{};
  ax[0] = {l.nz, l.top, l.NZ};
  if (D == 3) ax[1] = {l.ny, l.front, l.NY};
  ax[static_cast<sz>(D - 1)] = {l.nx, l.left, l.NX};
  int lo[3] = {}, hi[3] = {}, i[3] = {};
  long long stride[3] = {};
  for (int a = D; a-- > 0;) {
    auto const& x = ax[static_cast<sz>(a)];
    // No ring on a side without layer: a free surface, a cut between subdomains.
    lo[a] = x.lo == 0 ? 0 : x.lo - m;
    hi[a] = x.lo + x.n + (x.lo + x.n < x.N ? m : 0);
    stride[a] = a + 1 == D ? 1 : stride[a + 1] * (ax[static_cast<sz>(a + 1)].N + 2 * m);
    i[a] = lo[a];
  }
  int const g = cut_alignment(l, full, dtype);
  bool const tiled = storage::block_coupled(dtype);
  // The tile of a cell along axis a >= 1: model cells in tiles of g from the model's first
  // cell, the layer's cells beyond the model in the edge tiles.
  auto tiles = [&](int a) { return a == 0 ? 1 : (ax[static_cast<sz>(a)].n + g - 1) / g; };
  auto tile = [&](int a) {
    int const t = (i[a] - ax[static_cast<sz>(a)].lo) / g;
    return i[a] < ax[static_cast<sz>(a)].lo ? 0 : std::min(t, tiles(a) - 1);
  };
  int const ty = D == 3 ? tiles(1) : 1, tx = tiles(D - 1);
  std::vector<std::vector<int>> by_tile(tiled ? static_cast<sz>(ty) * tx : 1);
  while (i[0] < hi[0]) {
    bool model = true;
    long long o = 0;
    for (int a = 0; a < D; ++a) {
      auto const& x = ax[static_cast<sz>(a)];
      model = model && i[a] >= x.lo && i[a] < x.lo + x.n;
      o += (i[a] + m) * stride[a];
    }
    if (full || !model) {
      sz const k = tiled ? static_cast<sz>(D == 3 ? tile(1) : 0) * tx + static_cast<sz>(tile(D - 1)) : 0;
      by_tile[k].push_back(static_cast<int>(o));
    }
    for (int a = D; a-- > 0;) {  // the next cell, last axis fastest
      if (++i[a] < hi[a] || a == 0) break;
      i[a] = lo[a];
    }
  }
  std::vector<int> out;
  int pad = 0;
  for (auto const& cells : by_tile) {
    out.insert(out.end(), cells.begin(), cells.end());
    if (tiled)
      while (out.size() % storage::block_size != 0) out.push_back(-1 - pad++);
  }
  return out;
}

long long ring_stride(Layout const& l, bool full, storage::Dtype dtype) {
  if (!storage::block_coupled(dtype)) return ring_cells(l, full);
  // Per tile (ring_layout's order): its box cells, less its model cells for `boundary`, rounded
  // up to whole blocks; counted without listing the cells (a large model's estimate stays cheap).
  long long const M = l.radius, B = storage::block_size;
  int const g = cut_alignment(l, full, dtype);
  long long const rows = (l.top > 0 ? M : 0) + l.nz + (l.bottom > 0 ? M : 0);
  struct Tiles {
    long long n, before, after;  // model cells, layer cells saved before and after the model
    long long count(int g) const { return (n + g - 1) / g; }
    long long model(long long t, int g) const { return std::min<long long>(g, n - t * g); }
    long long box(long long t, int g) const {
      return model(t, g) + (t == 0 ? before : 0) + (t + 1 == count(g) ? after : 0);
    }
  };
  Tiles const x{l.nx, l.left > 0 ? M : 0, l.right > 0 ? M : 0};
  Tiles const y = l.dim == 3 ? Tiles{l.ny, l.front > 0 ? M : 0, l.back > 0 ? M : 0} : Tiles{1, 0, 0};
  long long stride = 0;
  for (long long ty = 0; ty < y.count(l.dim == 3 ? g : 1); ++ty)
    for (long long tx = 0; tx < x.count(g); ++tx) {
      int const gy = l.dim == 3 ? g : 1;
      long long const cells =
          rows * y.box(ty, gy) * x.box(tx, g) - (full ? 0 : l.nz * y.model(ty, gy) * x.model(tx, g));
      stride += (cells + B - 1) / B * B;
    }
  return stride;
}

long long layer_cells(Layout const& l) { return l.padded_cells() - static_cast<long long>(l.nz) * l.ny * l.nx; }

long long layer_term_cells(Layout const& l, int reach) {
  if (reach <= 0) return 0;
  long long const n[3] = {l.nz, l.dim == 3 ? l.ny : 1, l.nx};
  int const faces[3] = {(l.top > 0) + (l.bottom > 0), l.dim == 3 ? (l.front > 0) + (l.back > 0) : 0,
                        (l.left > 0) + (l.right > 0)};
  long long cells = 0;
  for (int a = 0; a < 3; ++a) cells += faces[a] * reach * (n[0] * n[1] * n[2] / n[a]);
  return cells;
}

int chunk_steps(int shots, long long stride, sz real) {
  sz const step = static_cast<sz>(std::max(shots, 1)) * static_cast<sz>(std::max<long long>(stride, 1)) * real;
  return static_cast<int>(std::clamp<sz>((sz(16) << 20) / step, 1, 32));
}

sz image_bytes(Layout const& l, int shots) {
  return (3 * static_cast<sz>(shots) + 3) * static_cast<sz>(l.model_rows()) * l.nx * sizeof(double);
}

StoreBytes store_bytes(storage::StorageConfig const& cfg, sz step_bytes, int steps) {
  StoreBytes b;
  b.stored = step_bytes * static_cast<sz>(steps);
  if (cfg.location != storage::Location::device)
    b.staging = 2 * step_bytes * static_cast<sz>(std::min(cfg.transfer_interval, steps));
  return b;
}

}  // namespace ksweep::core
