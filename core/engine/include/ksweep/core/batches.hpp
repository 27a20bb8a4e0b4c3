#pragma once
/// \file batches.hpp
/// The random batches of shots of a stochastic inversion.

#include <cstdint>
#include <random>
#include <vector>

namespace ksweep::core {

/// Draws `batch` distinct shots out of `n_shots` (0 <= batch <= n_shots) with a partial
/// Fisher-Yates shuffle of 0..n_shots-1: for i = 0..batch-1, position i is swapped with a
/// position drawn uniformly from [i, n_shots). Returns the first `batch` positions, in draw
/// order. The same generator state gives the same batch on every platform that implements
/// std::uniform_int_distribution the same way (the draw and the generator's state after it are
/// what a checkpoint records and a resumed run continues from).
std::vector<int> draw_batch(std::mt19937_64& rng, int n_shots, int batch);

}  // namespace ksweep::core
