#pragma once
/// \file sizes.hpp
/// The sizes of what the propagator and the gradient engine allocate, from the layout alone: the
/// allocations are made with these functions (or check their result against them), and the
/// memory estimate of a run calls them, so that the two cannot drift apart
/// (tests/tst_gradient.hpp measures every allocation against them).

#include <ksweep/core/geometry.hpp>
#include <ksweep/storage/codec.hpp>
#include <ksweep/storage/step_store.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace ksweep::core {

/// Values of one wavefield level of `shots` shots: field rows (halo included) of NX + 2M cells.
std::size_t level_values(Layout const& l, int shots);

/// Extents after [side][shot] of the layer memories of each axis (z, (y,) x), as the propagator
/// allocates them: [axis][0] and [axis][1]; unused axes are {0, 0}.
std::array<std::array<int, 2>, 3> strip_extents(Layout const& l);

/// Values of the working state of one direction (forward or adjoint): two wavefield levels and
/// the layer memories psi and zeta of every axis, two levels each.
std::size_t state_values(Layout const& l, int shots);

/// Values of the velocity coefficients c (padded grid with its halo) and the model copy.
std::size_t coefficient_values(Layout const& l);

/// An allocation a physics' coefficients add to the propagator's (Physics::coefficients::
/// memory_items), as the memory estimate lists it: what it holds, where (the device, else the
/// host) and its bytes.
struct CoefficientMemory {
  std::string what;
  bool device;
  std::size_t bytes;
};

/// Cells the gradient saves per shot and step (what ring_layout lists): the box within M of the
/// model (above row 0 excluded with a free surface), without the model cells for `boundary`.
long long ring_cells(Layout const& l, bool full);
/// Entries of the gradient's layer terms per shot and step (core::layer_term_cells): the model
/// cells within `reach` of a layer face, once per axis of such a face (reach 0: none).
long long layer_term_cells(Layout const& l, int reach);

/// Cells of the absorbing layer per shot (the padded grid without the model): what the
/// gradient's layer chain rule saves every step (GradientEngine::set_layer_chain).
long long layer_cells(Layout const& l);

/// The width (model cells along y and x) of the tiles whose saved cells a codec with a scale per
/// block codes together (1 for the codecs without: their codes do not depend on other values).
/// A model split into domains with cuts on multiples of it codes every tile alike on every
/// split: the same bits. It is the smallest power of two (2D: at most 64; 3D: at most 8) for
/// which a tile's cells fill whole codec blocks (storage::block_size), from the saved rows of a
/// column (M above and below the model where there is a layer, the model's depth for `full`),
/// so that tiles away from the model's edges need no padding. The same on every subdomain.
int cut_alignment(Layout const& l, bool full, storage::Dtype dtype);

/// The saved values of a shot, in the order the step store holds them: an offset >= 0 is the
/// offset of a saved cell in a shot's padded field (a halo of M cells on every side, row-major,
/// the last axis fastest), an offset < 0 is padding (-1 - p for the p-th padding value). Without
/// a scale per block: the ring_cells cells in increasing offset order. With one: the cells
/// grouped by tiles of cut_alignment cells along y and x (the layer's cells beyond the model in
/// the edge tiles), tiles in row-major order, each tile's cells in increasing offset order and
/// padded to whole codec blocks, so that a block's cells and code depend neither on the shot's
/// neighbours in the batch nor on the split of the model (cuts on tile boundaries).
std::vector<int> ring_layout(Layout const& l, bool full, storage::Dtype dtype);

/// Saved values per shot and step: ring_layout's size, counted without listing the cells.
long long ring_stride(Layout const& l, bool full, storage::Dtype dtype);

/// Steps per chunk of the gradient's `shots` schedule: the ring of `shots` shots (stride values
/// of `real` bytes each) staged for at most 16 MiB and 32 steps.
int chunk_steps(int shots, long long stride, std::size_t real);

/// Bytes of the image accumulators of an engine of `shots` shots and the summed images
/// (double): per-shot gradient and illuminations, and the three sums.
std::size_t image_bytes(Layout const& l, int shots);

/// Bytes the step store of `steps` steps of `step_bytes` bytes each holds at its location, and
/// the device staging of host and disk storage (two chunks of transfer_interval steps).
struct StoreBytes {
  std::size_t stored = 0, staging = 0;
};
StoreBytes store_bytes(storage::StorageConfig const& cfg, std::size_t step_bytes, int steps);

}  // namespace ksweep::core
