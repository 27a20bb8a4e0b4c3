#include <ksweep/base/error.hpp>
#include <ksweep/core/batches.hpp>

#include <numeric>
#include <utility>

namespace ksweep::core {

std::vector<int> draw_batch(std::mt19937_64& rng, int n_shots, int batch) {
  KSWEEP_REQUIRE(n_shots >= 0 && batch >= 0 && batch <= n_shots, "ksweep::core::draw_batch: a batch of "
                                                                     << batch << " shots out of " << n_shots
                                                                     << " (needs 0 <= batch <= shots)");
  std::vector<int> all(static_cast<std::size_t>(n_shots));
  std::iota(all.begin(), all.end(), 0);
  for (int i = 0; i < batch; ++i) {  // no repeats
    std::uniform_int_distribution<int> pick(i, n_shots - 1);
    std::swap(all[i], all[pick(rng)]);
  }
  all.resize(static_cast<std::size_t>(batch));
  return all;
}

}  // namespace ksweep::core
