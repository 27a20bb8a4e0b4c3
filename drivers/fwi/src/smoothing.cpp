#include <ksweep/base/error.hpp>
#include <ksweep/fwi/smoothing.hpp>

#include <algorithm>
#include <cmath>

namespace ksweep::fwi {

std::vector<double> gaussian_weights(double sigma) {
  // 3 sigma cells on each side: a kernel of 2 ceil(3 sigma) + 1 weights.
  KSWEEP_REQUIRE(std::isfinite(sigma) && sigma > 0 && sigma <= 1e6,
                 "Gaussian smoothing of sigma = " << sigma << " cells: sigma must be in (0, 1e6]");
  int const r = static_cast<int>(std::ceil(3 * sigma));
  std::vector<double> k(2 * static_cast<std::size_t>(r) + 1);
  double sum = 0;
  for (int i = -r; i <= r; ++i) sum += k[static_cast<std::size_t>(i + r)] = std::exp(-0.5 * i * i / (sigma * sigma));
  for (auto& x : k) x /= sum;
  return k;
}

std::vector<double> gaussian_smooth(std::vector<double> const& f, int nz, int ny, int nx, double sigma,
                                    std::function<void()> const& between_blocks) {
  if (sigma <= 0) return f;
  auto const k = gaussian_weights(sigma);
  int const r = static_cast<int>(k.size() / 2);
  // One pass along an axis of n cells with stride `stride`, over every line of that axis.
  auto pass = [&](std::vector<double> const& in, int n, std::size_t stride) {
    std::vector<double> out(in.size());
    std::size_t const block = stride * n;  // cells of one step along the axis above it
    for (std::size_t base = 0; base < in.size(); base += block) {
      if (between_blocks) between_blocks();  // a wide kernel on a large model takes a while
      for (std::size_t j = 0; j < stride; ++j)
        for (int i = 0; i < n; ++i) {
          double s = 0;
          for (int d = -r; d <= r; ++d)
            s += k[static_cast<std::size_t>(d + r)] * in[base + j + std::clamp(i + d, 0, n - 1) * stride];
          out[base + j + i * stride] = s;
        }
    }
    return out;
  };
  auto out = pass(f, nx, 1);
  if (ny > 1) out = pass(out, ny, static_cast<std::size_t>(nx));
  return pass(out, nz, static_cast<std::size_t>(ny) * nx);
}

}  // namespace ksweep::fwi
