#pragma once
/// \file imaging.hpp
/// Imaging on a smooth background model with the library's modelling (modeling.hpp): reverse-time
/// migration and least-squares reverse-time migration of a survey's data.
///
/// Both rest on Born modelling J (Modeling::born: the records a velocity perturbation scatters)
/// and its exact transpose J^T (Modeling::vjp's velocity image, by boundary saving with the
/// set-up's store and dtype):
///   RTM     the image J^T d of the reflected data d (the data less the background's own records,
///           which hold the direct wave): the zero-lag cross-correlation of the source
///           wavefield's second time difference with the receiver wavefield, weighted by 2 / v
///           (the Born adjoint), or, as chosen, the plain zero-lag cross-correlation of the two
///           wavefields (one backward pass gives both), then, as chosen, divided by the source illumination
///           (sum over time of the source wavefield squared) and filtered by a Laplacian
///           against the low-wavenumber artefacts of the turning and back-scattered waves;
///   LSRTM   the velocity perturbation m that minimises |J m - d|^2, by conjugate gradients on
///           the normal equations (CGLS: one Born modelling and one J^T per iteration), with the
///           relative data misfit |J m - d| / |d| of each iterate; preconditioned, as chosen, by
///           the inverse source illumination (m = P y, P = 1 / (illumination + stabilization
///           times its maximum): CGLS on J P), which balances the deep and the shallow cells.
/// Images are double, [nz][nx] or [nz][ny][nx] (m/s for LSRTM: a velocity perturbation). The
/// velocity (or velocity and density) must be set on the Modeling before the call; the density
/// is held fixed. On a Modeling whose shots are shared over ranks (ModelingSetup::ranks, with or
/// without a split model) the calls are collective and every rank returns the same images, the
/// same bits as one rank.

#include <ksweep/fwi/modeling.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ksweep::fwi {

/// The correlation RTM images with: the Born adjoint J^T d (the source wavefield's second time
/// difference times the adjoint wavefield, weighted by 2 / v: the velocity gradient's), or the
/// plain zero-lag cross-correlation of the source and adjoint wavefields, sum_n u^n lambda^{n+1}.
enum class ImageCondition { born, cross_correlation };

/// "born" or "cross-correlation" (the configuration's imaging.condition, Python's `condition`);
/// anything else is refused, naming the value and the choices.
ImageCondition parse_image_condition(std::string const& name);

/// The image conditions of RTM.
struct RtmOptions {
  ImageCondition condition = ImageCondition::born;
  /// Subtract the records of the background model from the data first (its direct wave and
  /// smooth response); false: the data are the reflections already.
  bool subtract_background = true;
  /// Divide by the source illumination plus `stabilization` times its maximum.
  bool normalize = true;
  double stabilization = 1e-3;
  /// Apply the negative Laplacian (unit spacing) to the image, after the normalisation.
  bool laplacian = true;
  /// A weight per cell (empty: none), 0 where the image is muted (above the water bottom, say),
  /// 1 where it is kept: applied after the normalisation and again after the filter.
  std::vector<double> mask;
};

/// What RTM returns: the image after its conditions, and the parts it is made of.
struct RtmImage {
  std::vector<double> image;         ///< after normalisation and filter, as chosen
  std::vector<double> correlation;   ///< J^T d, or sum u lambda (RtmOptions::condition)
  std::vector<double> illumination;  ///< the source illumination
};

/// Reverse-time migration of `data` [shot][nt][receiver] for `wavelets` [shot][source][nt].
template <class Real>
RtmImage rtm(Modeling<Real>& m, Real const* wavelets, Real const* data, RtmOptions const& options = {});

/// What LSRTM returns.
struct LsrtmResult {
  std::vector<double> image;   ///< the velocity perturbation (m/s) after the last iteration
  std::vector<double> misfit;  ///< |J m_i - d| / |d| after iteration i (i = 1..iterations)
};

/// The options of LSRTM.
struct LsrtmOptions {
  int iterations = 10;
  /// As RtmOptions::subtract_background.
  bool subtract_background = true;
  /// Precondition by the inverse source illumination (plus `stabilization` times its maximum).
  bool precondition = true;
  double stabilization = 1e-3;
  /// A weight per cell (empty: none), 0 where the perturbation is held at zero (the water, say):
  /// it multiplies the preconditioner (m = mask P y).
  std::vector<double> mask;
};

/// Least-squares RTM: `options.iterations` of CGLS from a zero perturbation on the reflected data.
/// `after_iteration(i, misfit)` (may be empty) is called after each; a throw from it stops the run.
template <class Real>
LsrtmResult lsrtm(Modeling<Real>& m, Real const* wavelets, Real const* data, LsrtmOptions const& options = {},
                  std::function<void(int, double)> const& after_iteration = {});

/// RTM and then LSRTM of the same data, as rtm() and lsrtm() give them (the same bits), with the
/// background's records and the first J^T computed once for both (one forward and one J^T fewer).
/// The two options agree on subtract_background.
template <class Real>
std::pair<RtmImage, LsrtmResult> rtm_and_lsrtm(Modeling<Real>& m, Real const* wavelets, Real const* data,
                                               RtmOptions const& rtm_options, LsrtmOptions const& lsrtm_options,
                                               std::function<void(int, double)> const& after_iteration = {});

/// The negative Laplacian (unit spacing, zero beyond the edges) of an image on `grid`.
std::vector<double> laplacian_filter(std::vector<double> const& image, core::ModelGrid const& grid);

/// The correlation coefficient of two images (0 when either is constant).
double correlation(std::vector<double> const& a, std::vector<double> const& b);

extern template RtmImage rtm<float>(Modeling<float>&, float const*, float const*, RtmOptions const&);
extern template RtmImage rtm<double>(Modeling<double>&, double const*, double const*, RtmOptions const&);
extern template LsrtmResult lsrtm<float>(Modeling<float>&, float const*, float const*, LsrtmOptions const&,
                                         std::function<void(int, double)> const&);
extern template LsrtmResult lsrtm<double>(Modeling<double>&, double const*, double const*, LsrtmOptions const&,
                                          std::function<void(int, double)> const&);
extern template std::pair<RtmImage, LsrtmResult> rtm_and_lsrtm<float>(Modeling<float>&, float const*, float const*,
                                                                      RtmOptions const&, LsrtmOptions const&,
                                                                      std::function<void(int, double)> const&);
extern template std::pair<RtmImage, LsrtmResult> rtm_and_lsrtm<double>(Modeling<double>&, double const*, double const*,
                                                                       RtmOptions const&, LsrtmOptions const&,
                                                                       std::function<void(int, double)> const&);

}  // namespace ksweep::fwi
