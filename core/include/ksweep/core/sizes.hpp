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

/// Cells the gradient saves per shot and step (what saved_cells lists): the box within M of the
/// model (above row 0 excluded with a free surface), without the model cells for `boundary`.
long long ring_cells(Layout const& l, bool full);
/// Entries of the gradient's layer terms per shot and step (core::layer_term_cells): the model
/// cells within `reach` of a layer face, once per axis of such a face (reach 0: none).
long long layer_term_cells(Layout const& l, int reach);

/// Saved values per shot and step: the ring, padded to whole codec blocks for the codecs with
/// a scale per block.
long long ring_stride(long long ring_cells, storage::Dtype dtype);

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
