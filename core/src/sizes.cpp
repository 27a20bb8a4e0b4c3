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
  auto const ext = strip_extents(l);
  sz layer = 0;
  for (int a = 0; a < l.dim; ++a) layer += static_cast<sz>(ext[static_cast<sz>(a)][0]) * ext[static_cast<sz>(a)][1];
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

long long layer_term_cells(Layout const& l, int reach) {
  if (reach <= 0) return 0;
  long long const n[3] = {l.nz, l.dim == 3 ? l.ny : 1, l.nx};
  int const faces[3] = {(l.top > 0) + (l.bottom > 0), l.dim == 3 ? (l.front > 0) + (l.back > 0) : 0,
                        (l.left > 0) + (l.right > 0)};
  long long cells = 0;
  for (int a = 0; a < 3; ++a) cells += faces[a] * reach * (n[0] * n[1] * n[2] / n[a]);
  return cells;
}

long long ring_stride(long long cells, storage::Dtype dtype) {
  if (!storage::block_coupled(dtype)) return cells;
  long long const b = static_cast<long long>(storage::block_size);
  return (cells + b - 1) / b * b;
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
