/// \file deepwave_direct.hpp
/// Deepwave's 2D scalar propagator (its compiled library, `libdeepwave_C.so`, v0.0.27) called
/// directly: dlopen/dlsym of `scalar_iso_2d_<order>_float_{forward,backward}_{cpu,cuda}`, no
/// torch and no Python, with every argument prepared as `deepwave.scalar(v, dx, dt,
/// source_amplitudes=..., source_locations=..., receiver_locations=..., accuracy=A,
/// pml_width=W, pml_freq=F)` prepares it with its other options at their defaults (storage on
/// the device, no compression, no callbacks, the whole model, max_vel the model's largest |v|,
/// float32, one source per shot). "X.py:N" names the line of Deepwave's Python (git b5d34de)
/// each step mirrors. For the benchmarks that time Deepwave beside ksweep in one process, on a
/// CPU (`_cpu` entry points) or a GPU (`_cuda`, buffers in device memory, Deepwave's kernels on
/// the given stream): the library is one a user built (its path from KSWEEP_DEEPWAVE_LIB).
///
/// The gradient is v.grad after 0.5 * ((d - d_obs)**2).sum().backward(): the C backward's
/// grad_v plus what torch's autograd adds around the C call, (a) the source term (the
/// amplitudes are scaled by -v^2 dt^2 at the source cell, scalar.py:520) and (b) the backward of
/// the edge-replication pad (common.py:2081-2085).
///
/// Layouts (row-major, float32):
///   v, grad_v        [nz][nx]            (unpadded)
///   wavelets         [shot][1][nt]       (deepwave.scalar's source_amplitudes)
///   records/observed [shot][nr][nt]      (deepwave.scalar's receiver output)
///   where it computes: f, r, grad_r, grad_f [nt][shot][n] (time slowest, scalar.py:811,
///   common.py:1138), wavefields [shot][nzp][nxp].
///
/// Buffers: every array the library reads or writes goes through DeepwaveBuffers
/// (alloc/free/zero/to_device/to_host, `subtract` for the residual, `sync`), so one class drives
/// both entry points. For `_cuda`: the `n_threads` slot (Python's `aux`) takes the device id and
/// the last argument the cudaStream_t (scalar.py:819-820), and grad_v_thread is [n_shots][grid]
/// when n_shots > 1 (scalar.py:1195-1203).
///
/// Numerics: the host-side preparation (PML profiles, source scaling, v^2 dt^2) repeats
/// torch's float32 element-wise operations in their order, each rounded to float (rnd() keeps
/// the compiler from contracting them). Checked against Deepwave's Python with its CPU library
/// at orders 4 and 8 on the Marmousi batch (8 shots, 141 x 681, nt 2000): the records and the
/// gradient agree to float round-off. Two places differ from torch at the last bit: exp() here is
/// the C library's (torch's CPU exp, from SLEEF, differs by one ulp on some arguments, so a PML
/// coefficient can), and the source term's sum over time is a plain float sum (torch sums in a
/// cascade). Loading a library linked with -Ofast (Deepwave's own build) sets flush-to-zero in
/// the loading thread, as `import deepwave` does; the constructor restores the thread's mode, and
/// the caller chooses the mode Deepwave runs in.
#pragma once

#include <dlfcn.h>
#if !defined(__CUDA_ARCH__) && (defined(__x86_64__) || defined(__SSE__))
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ksweep::bench::deepwave {

// Memory where the library computes (host for _cpu, device for _cuda).
struct DeepwaveBuffers {
  std::function<void*(std::size_t bytes)> alloc;
  std::function<void(void*)> free;
  std::function<void(void*dst, void const*src, std::size_t bytes)> to_device, to_host;
  std::function<void(void* p, std::size_t bytes)> zero;
  // optional: out[i] = a[i] - b[i] on the device (n floats); host fallback if empty
  std::function<void(float* out, float const* a, float const* b, std::size_t n)> subtract;
  // optional: wait for all queued device work (cudaStreamSynchronize); no-op if empty
  std::function<void()> sync;
  bool cuda = false;
  int device = 0;          // CUDA device id -> the `aux` argument (scalar.py:819)
  void* stream = nullptr;  // cudaStream_t -> the last argument (scalar.py:820)
  int threads = 1;         // CPU: torch.get_num_threads(); aux = min(shots, threads)

  // Plain host memory, for the _cpu entry points.
  static DeepwaveBuffers host(int threads) {
    DeepwaveBuffers b;
    b.alloc = [](std::size_t n) -> void* {
      void* p = std::malloc(n ? n : 1);
      if (!p) throw std::bad_alloc();
      return p;
    };
    b.free = [](void* p) { std::free(p); };
    b.to_device = [](void* d, void const* s, std::size_t n) {
      if (n) std::memcpy(d, s, n);
    };
    b.to_host = b.to_device;
    b.zero = [](void* p, std::size_t n) {
      if (n) std::memset(p, 0, n);
    };
    b.subtract = [](float* o, float const* a, float const* c, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) o[i] = a[i] - c[i];
    };
    b.threads = threads;
    return b;
  }
};

namespace detail {
// Forces rounding of an intermediate to float (prevents FMA contraction / excess
// precision), so that each torch float32 op is reproduced as one rounded operation.
inline float rnd(float x) {
  volatile float y = x;
  return y;
}

// C signatures of scalar_iso_2d_<A>_float_{forward,backward}_{cpu,cuda}
// (scalar.c:149-232 / 421-511; ctypes templates backend_utils.py:37-95).
using ForwardFn = int (*)(float const* v, float const* f, float* wfc, float* wfp, float* psiy, float* psix,
                          float* psiyn, float* psixn, float* zetay, float* zetax, float* w_store_1a, float* w_store_1b,
                          void* w_store_2, void* w_store_3, char const* const* w_filenames, float* r, float const* ay,
                          float const* by, float const* dbydy, float const* ax, float const* bx, float const* dbxdx,
                          int64_t const* sources_i, int64_t const* receivers_i, float rdy, float rdx, float rdy2,
                          float rdx2, float dt2, int64_t nt, int64_t n_shots, int64_t ny, int64_t nx,
                          int64_t n_sources_per_shot, int64_t n_receivers_per_shot, int64_t step_ratio,
                          int64_t storage_mode, std::size_t shot_bytes_uncomp, std::size_t shot_bytes_comp,
                          bool v_requires_grad, bool v_batched, bool storage_compression, int64_t start_t,
                          int64_t pml_y0, int64_t pml_x0, int64_t pml_y1, int64_t pml_x1, int64_t aux, void* stream);

using BackwardFn = int (*)(float const* v2dt2, float const* grad_r, float* wfc, float* wfp, float* psiy, float* psix,
                           float* psiyn, float* psixn, float* zetay, float* zetax, float* zetayn, float* zetaxn,
                           float* w_store_1a, float* w_store_1b, void* w_store_2, void* w_store_3,
                           char const* const* w_filenames, float* grad_f, float* grad_v, float* grad_v_thread,
                           float const* ay, float const* by, float const* dbydy, float const* ax, float const* bx,
                           float const* dbxdx, int64_t const* sources_i, int64_t const* receivers_i, float rdy,
                           float rdx, float rdy2, float rdx2, int64_t nt, int64_t n_shots, int64_t ny, int64_t nx,
                           int64_t n_sources_per_shot, int64_t n_receivers_per_shot, int64_t step_ratio,
                           int64_t storage_mode, std::size_t shot_bytes_uncomp, std::size_t shot_bytes_comp,
                           bool v_requires_grad, bool v_batched, bool storage_compression, int64_t start_t,
                           int64_t pml_y0, int64_t pml_x0, int64_t pml_y1, int64_t pml_x1, int64_t aux, void* stream);

constexpr int64_t STORAGE_DEVICE = 0;  // common.py:40 StorageMode.DEVICE = 0

}  // namespace detail

class DeepwaveScalar2D {
 public:
  DeepwaveScalar2D(std::string const& library, DeepwaveBuffers buffers, int accuracy, int nz, int nx, double dz,
                   double dx, double dt, int pml_width, double pml_freq, std::vector<float> const& v /*[nz][nx]*/,
                   int shots, std::vector<std::array<int, 2>> const& sources /*[shot] (z,x)*/,
                   std::vector<std::array<int, 2>> const& receivers /*[shot*nr] (z,x)*/, int nr, int nt)
      : b_(std::move(buffers)),
        acc_(accuracy),
        nz_(nz),
        nx_(nx),
        shots_(shots),
        nr_(nr),
        nt_(nt),
        pml_(pml_width),
        dz_(dz),
        dx_(dx),
        dt_(dt),
        pml_freq_(pml_freq) {
    if (!b_.alloc || !b_.free || !b_.to_device || !b_.to_host || !b_.zero)
      throw std::runtime_error("DeepwaveBuffers: alloc/free/to_device/to_host/zero required");
    if (acc_ != 2 && acc_ != 4 && acc_ != 6 && acc_ != 8)
      throw std::runtime_error("accuracy must be 2, 4, 6 or 8");  // common.py:746
    if ((int64_t)v.size() != (int64_t)nz * nx) throw std::runtime_error("v size != nz*nx");
    if ((int)sources.size() != shots) throw std::runtime_error("need one source per shot");
    if ((int64_t)receivers.size() != (int64_t)shots * nr) throw std::runtime_error("receivers size != shots*nr");
    load_library(library);

    // ---- setup_propagator (common.py:412) -------------------------------------
    // max_model_vel = v.abs().max().item() (scalar.py:458); set_max_vel -> max_vel
    float vmax = 0.f;
    for (float a : v) vmax = std::max(vmax, std::fabs(a));
    max_vel_ = (double)vmax;
    // cfl_condition_n (common.py:2329): max_dt = c_max/sqrt(sum 1/h^2)/(vmax^2+eps)*vmax,
    // step_ratio = ceil(|dt|/max_dt). Only step_ratio == 1 is supported (no resampling
    // of wavelets/records by FFT upsample/downsample, common.py:1290/1366).
    {
      double const max_dt =
          (0.6 / std::sqrt(1.0 / (dz * dz) + 1.0 / (dx * dx)) / (max_vel_ * max_vel_ + 1e-15)) * max_vel_;
      int64_t const step_ratio = (int64_t)std::ceil(std::fabs(dt) / max_dt);
      if (step_ratio != 1)
        throw std::runtime_error("dt exceeds Deepwave's CFL limit (step_ratio " + std::to_string(step_ratio) +
                                 "); only step_ratio 1 supported");
    }
    fd_ = acc_ / 2;  // fd_pad = [accuracy // 2] * 2 * ndim (scalar.py:459)
    // extract_survey/extract_models (common.py:1454/2012): survey_pad None -> full model;
    // pad = fd_pad + pml_width on every side; F.pad(mode="replicate") (scalar.py:483
    // model_pad_modes ["replicate"]).
    pad_ = fd_ + pml_;
    nzp_ = nz_ + 2 * pad_;
    nxp_ = nx_ + 2 * pad_;
    grid_ = (int64_t)nzp_ * nxp_;
    vpad_.resize(grid_);
    for (int64_t iz = 0; iz < nzp_; ++iz) {
      int64_t const sz = std::clamp<int64_t>(iz - pad_, 0, nz_ - 1);
      for (int64_t ix = 0; ix < nxp_; ++ix) {
        int64_t const sx = std::clamp<int64_t>(ix - pad_, 0, nx_ - 1);
        vpad_[iz * nxp_ + ix] = v[sz * nx_ + sx];
      }
    }
    // extract_locations (common.py:2188, _calculate_origin_and_stride :2125,
    // _convert_to_1d_and_check_uniqueness :2144): origin = -pad, stride = (nxp, 1),
    // index = (z + pad) * nxp + (x + pad), int64, shape [shot][n].
    sources_i_.resize(shots_);
    for (int s = 0; s < shots_; ++s) sources_i_[s] = loc1d(sources[s]);
    receivers_i_.resize((std::size_t)shots_ * nr_);
    for (std::size_t i = 0; i < receivers_i_.size(); ++i) {
      receivers_i_[i] = loc1d(receivers[i]);
    }
    for (int s = 0; s < shots_; ++s) {  // uniqueness check (common.py:2179)
      std::vector<int64_t> r(receivers_i_.begin() + (int64_t)s * nr_, receivers_i_.begin() + (int64_t)(s + 1) * nr_);
      std::sort(r.begin(), r.end());
      if (std::adjacent_find(r.begin(), r.end()) != r.end())
        throw std::runtime_error("receiver locations must be unique within each shot");
    }
    // set_pml_profiles (regular_grid.py:15) with shape = padded model shape
    // (scalar.py:532-543).
    make_pml_profiles();
    // Region bounds of the C loops. Forward (scalar.py:786-793):
    //   pml_b = min(pml_width[2i] + 2*fd_pad, shape[i] - fd_pad)
    //   pml_e = max(pml_b, shape[i] - pml_width[2i+1] - 2*fd_pad)
    // backward (scalar.py:1168-1175): the same with 3*fd_pad.
    int64_t const shape[2] = {nzp_, nxp_};
    for (int i = 0; i < 2; ++i) {
      fpml_b_[i] = std::min<int64_t>(pml_ + 2 * fd_, shape[i] - fd_);
      fpml_e_[i] = std::max<int64_t>(fpml_b_[i], shape[i] - pml_ - 2 * fd_);
      bpml_b_[i] = std::min<int64_t>(pml_ + 3 * fd_, shape[i] - fd_);
      bpml_e_[i] = std::max<int64_t>(bpml_b_[i], shape[i] - pml_ - 3 * fd_);
    }
    // rdx = [1/dx ...], rdx2 = [1/dx**2 ...] computed in double, passed as c_float
    // (scalar.py:837-838); dt**2 likewise (scalar.py:893).
    rdz_ = (float)(1.0 / dz_);
    rdx_ = (float)(1.0 / dx_);
    rdz2_ = (float)(1.0 / (dz_ * dz_));
    rdx2_ = (float)(1.0 / (dx_ * dx_));
    dt2_ = (float)(dt_ * dt_);
    // aux (scalar.py:817-825): CUDA -> device id; CPU with OpenMP -> min(n_shots,
    // torch.get_num_threads()).
    aux_ = b_.cuda ? (int64_t)b_.device : (int64_t)std::min(shots_, std::max(1, b_.threads));

    // ---- device buffers needed by the forward ------------------------------------
    ws_ = (std::size_t)shots_ * grid_;  // one wavefield: [shot][nzp][nxp]
    d_v_ = upload(vpad_);
    for (int k = 0; k < 6; ++k) d_prof_[k] = upload(prof_[k]);
    d_src_ = upload(sources_i_);
    d_rec_ = upload(receivers_i_);
    d_f_ = alloc<float>((std::size_t)nt_ * shots_);
    for (auto& p : d_wf_) p = alloc<float>(ws_);
    d_r_ = alloc<float>((std::size_t)nt_ * shots_ * nr_);
  }

  ~DeepwaveScalar2D() {
    for (auto& a : allocs_) b_.free(a.first);
    if (lib_) dlclose(lib_);
  }
  DeepwaveScalar2D(DeepwaveScalar2D const&) = delete;
  DeepwaveScalar2D& operator=(DeepwaveScalar2D const&) = delete;

  // ---- convenience, host in / host out --------------------------------------------
  // records [shot][nr][nt] of wavelets [shot][1][nt] (v not requiring grad)
  void forward(std::vector<float> const& wavelets, std::vector<float>& records) {
    prepare_forward(wavelets);
    run_forward();
    fetch_records(records);
  }
  // loss 0.5*sum((d-observed)^2) and dloss/dv [nz][nx], as torch autograd gives
  double gradient(std::vector<float> const& wavelets, std::vector<float> const& observed, std::vector<float>& grad_v) {
    prepare_gradient(wavelets, observed);
    run_gradient();
    fetch_gradient(grad_v);
    return last_loss();
  }

  // ---- prepared / timed interface ----------------------------------------------------
  // Uploads the scaled source amplitudes (scalar.py:509-531):
  //   f[t][s][0] = ((-w[s][0][t]) * (vpad[src_s] * vpad[src_s])) * float(dt**2)
  // (movedim(-1, 0) in set_source_amplitudes, common.py:1138; gather from the padded
  // model at the 1D source index; ** 2 is x*x; each op rounded to float32).
  void prepare_forward(std::vector<float> const& wavelets) {
    if ((int64_t)wavelets.size() != (int64_t)shots_ * nt_) throw std::runtime_error("wavelets size != shots*1*nt");
    std::vector<float> f((std::size_t)nt_ * shots_);
    float const dt2 = (float)(dt_ * dt_);
    for (int s = 0; s < shots_; ++s) {
      float const g = vpad_[sources_i_[s]];
      float const g2 = detail::rnd(g * g);
      for (int t = 0; t < nt_; ++t) {
        float const a = detail::rnd(-wavelets[(std::size_t)s * nt_ + t] * g2);
        f[(std::size_t)t * shots_ + s] = detail::rnd(a * dt2);
      }
    }
    b_.to_device(d_f_, f.data(), f.size() * sizeof(float));
    wavelets_ = wavelets;
  }

  // Forward on the prepared buffers. Records stay on the device in r [nt][shot][nr].
  void run_forward() {
    forward_call(false);
    sync();
  }

  // Uploads source amplitudes and observed data (transposed to [nt][shot][nr], the
  // layout of grad_r: movedim in downsample_and_movedim common.py:661 and .contiguous()
  // at scalar.py:1112), and allocates the snapshot store plus backward buffers on first
  // use.
  void prepare_gradient(std::vector<float> const& wavelets, std::vector<float> const& observed) {
    prepare_forward(wavelets);
    if ((int64_t)observed.size() != (int64_t)shots_ * nr_ * nt_)
      throw std::runtime_error("observed size != shots*nr*nt");
    ensure_gradient_buffers();
    std::vector<float> obs_t(observed.size());
    for (int s = 0; s < shots_; ++s)
      for (int r = 0; r < nr_; ++r)
        for (int t = 0; t < nt_; ++t)
          obs_t[((std::size_t)t * shots_ + s) * nr_ + r] = observed[((std::size_t)s * nr_ + r) * nt_ + t];
    b_.to_device(d_obs_, obs_t.data(), obs_t.size() * sizeof(float));
    if (!b_.subtract) obs_host_ = std::move(obs_t);
  }

  // Forward with snapshot storage, residual, backward. grad_v (padded, C part) and
  // grad_f stay on the device; fetch_gradient() finishes on the host.
  void run_gradient() {
    forward_call(true);
    // grad of 0.5*((d-d_obs)**2).sum() w.r.t. d is exactly d - d_obs (0.5*(2*x) is
    // exact), moved to [nt][shot][nr].
    std::size_t const nrec = (std::size_t)nt_ * shots_ * nr_;
    if (b_.subtract) {
      b_.subtract(d_grad_r_, d_r_, d_obs_, nrec);
    } else {
      std::vector<float> r(nrec);
      sync();
      b_.to_host(r.data(), d_r_, nrec * sizeof(float));
      for (std::size_t i = 0; i < nrec; ++i) r[i] = r[i] - obs_host_[i];
      b_.to_device(d_grad_r_, r.data(), nrec * sizeof(float));
    }
    backward_call();
    sync();
  }

  // records [shot][nr][nt] from the last run (movedim(0, -1), common.py:689)
  void fetch_records(std::vector<float>& records) {
    std::vector<float> r((std::size_t)nt_ * shots_ * nr_);
    sync();
    b_.to_host(r.data(), d_r_, r.size() * sizeof(float));
    records.resize(r.size());
    for (int t = 0; t < nt_; ++t)
      for (int s = 0; s < shots_; ++s)
        for (int k = 0; k < nr_; ++k)
          records[((std::size_t)s * nr_ + k) * nt_ + t] = r[((std::size_t)t * shots_ + s) * nr_ + k];
  }

  // dloss/dv [nz][nx] after run_gradient(): C grad_v + source-scaling term, folded
  // back through the replicate pad. Also computes the loss (from r and observed).
  void fetch_gradient(std::vector<float>& grad_v) {
    sync();
    std::vector<float> g(grid_), gf((std::size_t)nt_ * shots_);
    b_.to_host(g.data(), d_grad_v_, g.size() * sizeof(float));
    b_.to_host(gf.data(), d_grad_f_, gf.size() * sizeof(float));
    // (a) Autograd through f = ((-w) * G**2) * c, c = dt**2 (scalar.py:520-531), with
    // grad_f = dL/df from the C backward (scalar.py:1336, returned as result[1]):
    //   dL/dG = sum_t( (grad_f*c) * (-w) ) * (2*G)       (MulBackward1, MulBackward0
    //   + sum_to_size over t, PowBackward0); gather/expand backward scatter-add it to
    //   the source cell (one source per shot and distinct cells, so the shot sum is
    //   exact).
    float const c = (float)(dt_ * dt_);
    for (int s = 0; s < shots_; ++s) {
      auto term = [&](int64_t t) {
        float const g1 = detail::rnd(gf[(std::size_t)t * shots_ + s] * c);
        return detail::rnd(g1 * -wavelets_[(std::size_t)s * nt_ + t]);
      };
      float gP = 0.f;  // torch sums in a cascade: the same to round-off
      for (int64_t t = 0; t < nt_; ++t) gP = detail::rnd(gP + term(t));
      float const G = vpad_[sources_i_[s]];
      float& cell = g[sources_i_[s]];
      cell = detail::rnd(cell + detail::rnd(gP * detail::rnd(2.0f * G)));
    }
    // (b) Backward of F.pad(mode="replicate") (common.py:2081-2085; torch 1.13
    // replication_pad2d_backward): grad_in starts at 0; loop over padded cells in
    // row-major order, adding each to its clamped source cell.
    grad_v.assign((std::size_t)nz_ * nx_, 0.f);
    for (int64_t iz = 0; iz < nzp_; ++iz) {
      int64_t const sz = std::clamp<int64_t>(iz - pad_, 0, nz_ - 1);
      for (int64_t ix = 0; ix < nxp_; ++ix) {
        int64_t const sx = std::clamp<int64_t>(ix - pad_, 0, nx_ - 1);
        float& o = grad_v[sz * nx_ + sx];
        o = detail::rnd(o + g[iz * nxp_ + ix]);
      }
    }
    // loss (float sum in torch; double here, for information)
    std::vector<float> gr((std::size_t)nt_ * shots_ * nr_);
    b_.to_host(gr.data(), d_grad_r_, gr.size() * sizeof(float));
    double loss = 0.0;
    for (float x : gr) loss += 0.5 * (double)x * (double)x;
    loss_ = loss;
  }
  double last_loss() const { return loss_; }

  // ---- introspection ----------------------------------------------------------------
  std::size_t peak_bytes() const { return peak_; }
  std::size_t current_bytes() const { return cur_; }
  // PML profiles [ay, by, dbydy, ax, bx, dbxdx] (regular_grid.py:78 order)
  std::array<std::vector<float>, 6> const& pml_profiles() const { return prof_; }
  int padded_nz() const { return (int)nzp_; }
  int padded_nx() const { return (int)nxp_; }
  int64_t aux() const { return aux_; }

 private:
  // ---------------------------------------------------------------------------------
  void load_library(std::string const& library) {
#if !defined(__CUDA_ARCH__) && (defined(__x86_64__) || defined(__SSE__))
    unsigned const csr = _mm_getcsr();  // a library linked with -Ofast sets FTZ/DAZ as it loads:
#endif                                  // this thread's mode is the caller's business
    lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
#if !defined(__CUDA_ARCH__) && (defined(__x86_64__) || defined(__SSE__))
    _mm_setcsr(csr);
#endif
    if (!lib_) throw std::runtime_error("dlopen(" + library + ") failed: " + dlerror());
    // function names: backend_utils.py:622 f"{propagator}_iso_{ndim}d_{accuracy}_{dtype}_
    // {pass}{extra}_{device}"
    std::string const dev = b_.cuda ? "cuda" : "cpu";
    std::string const base = "scalar_iso_2d_" + std::to_string(acc_) + "_float_";
    std::string const fn = base + "forward_" + dev, bn = base + "backward_" + dev;
    fwd_ = reinterpret_cast<detail::ForwardFn>(dlsym(lib_, fn.c_str()));
    bwd_ = reinterpret_cast<detail::BackwardFn>(dlsym(lib_, bn.c_str()));
    std::string missing;
    if (!fwd_) missing += " " + fn;
    if (!bwd_) missing += " " + bn;
    if (!missing.empty()) {
      dlclose(lib_);
      lib_ = nullptr;
      throw std::runtime_error(library + " lacks:" + missing);
    }
  }

  int64_t loc1d(std::array<int, 2> const& zx) const {
    if (zx[0] < 0 || zx[0] >= nz_ || zx[1] < 0 || zx[1] >= nx_)
      throw std::runtime_error("location outside the model");  // common.py:1594
    return (int64_t)(zx[0] + pad_) * nxp_ + (zx[1] + pad_);
  }

  // setup_pml (common.py:2486) + diffx1 (regular_grid.py:156) in float32, op by op.
  void make_pml_profiles() {
    using detail::rnd;
    double const max_pml = std::max(pml_ * dz_, pml_ * dx_);  // regular_grid.py:55-60
    int64_t const shape[2] = {nzp_, nxp_};
    double const h[2] = {dz_, dx_};
    for (int dim = 0; dim < 2; ++dim) {
      int64_t const n = shape[dim];
      std::vector<float> a(n, 0.f), bb(n, 0.f), db(n, 0.f);
      if (max_pml != 0.0) {
        // pml_start = [fd_pad + pml_width, shape - 1 - fd_pad - pml_width] (regular_grid.py:49)
        float const start0 = (float)(double)(fd_ + pml_);
        float const start1 = (float)(double)(n - 1 - fd_ - pml_);
        double const sigma0 = -(1 + 2) * max_vel_ * std::log(0.001) / (2 * max_pml);  // n_power 2, r_val 1e-3
        double const alpha0 = M_PI * pml_freq_;
        float const sigma0f = (float)sigma0, alpha0f = (float)alpha0;
        float const dtf = (float)std::fabs(dt_), wf = (float)pml_;
        for (int64_t i = 0; i < n; ++i) {
          float const x = (float)i;                                           // torch.arange(start, start+n)
          float const f0 = pml_ ? rnd(rnd(start0 - x) / wf) : 0.f;            // (pml_start[0]-x)/w
          float const f1 = pml_ ? rnd(rnd(x - start1) / wf) : 0.f;            // (x-pml_start[1])/w
          float const frac = std::min(std::max(std::max(f0, f1), 0.f), 1.f);  // clamp(maximum)
          float const sigma = rnd(sigma0f * rnd(frac * frac));                // sigma0 * frac**2
          float const alpha = rnd(alpha0f * rnd(1.f - frac));                 // alpha0 * (1 - frac)
          float const sa = rnd(sigma + alpha);
          float const e = rnd(-sa * dtf);                // -sigmaalpha * abs(dt)
          float const av = std::exp(e);                  // torch.exp (to one ulp: see the file comment)
          bb[i] = rnd(rnd(sigma / sa) * rnd(av - 1.f));  // sigma/sigmaalpha*(a-1)
          a[i] = (frac == 0.f) ? 0.f : av;               // a[pml_frac == 0] = 0
        }
        // db = diffx1(b, accuracy, 1/grid_spacing) (regular_grid.py:75, :156): the
        // stencil over the interior, zero-padded by accuracy/2 on each side; each term
        // c_k * (b[i+k] - b[i-k]), summed left to right, then * rdx.
        static double const c2[] = {1.0 / 2};
        static double const c4[] = {8.0 / 12, -1.0 / 12};
        static double const c6[] = {3.0 / 4, -3.0 / 20, 1.0 / 60};
        static double const c8[] = {4.0 / 5, -1.0 / 5, 4.0 / 105, -1.0 / 280};
        double const* c = acc_ == 2 ? c2 : acc_ == 4 ? c4 : acc_ == 6 ? c6 : c8;
        float const rh = (float)(1.0 / h[dim]);
        for (int64_t i = fd_; i < n - fd_; ++i) {
          float sum = 0.f;
          for (int k = 1; k <= fd_; ++k) {
            float const term = rnd((float)c[k - 1] * rnd(bb[i + k] - bb[i - k]));
            sum = (k == 1) ? term : rnd(sum + term);
          }
          db[i] = rnd(sum * rh);
        }
      }
      prof_[3 * dim + 0] = std::move(a);
      prof_[3 * dim + 1] = std::move(bb);
      prof_[3 * dim + 2] = std::move(db);
    }
  }

  template <class T>
  T* alloc(std::size_t n) {
    std::size_t const bytes = n * sizeof(T);
    void* p = b_.alloc(bytes);
    allocs_.emplace_back(p, bytes);
    cur_ += bytes;
    peak_ = std::max(peak_, cur_);
    return static_cast<T*>(p);
  }
  template <class T>
  T* upload(std::vector<T> const& h) {
    T* p = alloc<T>(h.size());
    b_.to_device(p, h.data(), h.size() * sizeof(T));
    return p;
  }
  void sync() {
    if (b_.sync) b_.sync();
  }

  // StorageManager (common.py:116) with storage_mode DEVICE, no compression, v
  // requiring grad (allocate, common.py:178-203): store_1a = zeros(nt // step_ratio,
  // n_shots, *shape); store_1b/store_2/store_3 empty (data_ptr 0); w_filenames an empty
  // ctypes array (never read in this mode; nullptr here). shot_bytes_uncomp =
  // numel(shape)*4, shot_bytes_comp = 0. Backward extras: zetan (scalar.py:1162),
  // grad_v (:1156-1158), grad_v_tmp (:1193-1218), grad_f [nt][shot][n_src] (:1180), grad_r,
  // observed.
  void ensure_gradient_buffers() {
    if (d_store_) return;
    d_store_ = alloc<float>((std::size_t)nt_ * ws_);  // written before read, no zeroing
    d_zetayn_ = alloc<float>(ws_);
    d_zetaxn_ = alloc<float>(ws_);
    d_grad_v_ = alloc<float>(grid_);
    // grad_v_tmp: CPU: [aux][shape] if aux > 1 (scalar.py:1205-1218), CUDA: [n_shots]
    // [shape] if n_shots > 1 (:1195-1203); otherwise the C code accumulates into grad_v.
    int64_t const nthr = b_.cuda ? shots_ : aux_;
    d_grad_v_tmp_ = nthr > 1 ? alloc<float>((std::size_t)nthr * grid_) : d_grad_v_;
    grad_v_tmp_n_ = nthr > 1 ? (std::size_t)nthr * grid_ : 0;
    d_grad_f_ = alloc<float>((std::size_t)nt_ * shots_);
    d_grad_r_ = alloc<float>((std::size_t)nt_ * shots_ * nr_);
    d_obs_ = alloc<float>((std::size_t)nt_ * shots_ * nr_);
  }

  void zero(float* p, std::size_t n) { b_.zero(p, n * sizeof(float)); }

  // ScalarForwardFunc.forward (scalar.py:600-935), no callback: a single call with
  // step_nt*step_ratio = nt steps, start_t = 0.
  void forward_call(bool requires_grad) {
    // Fresh zero wavefields each call: create_or_pad -> torch.zeros (scalar.py:745-755);
    // zero_interior on psi/zeta (:768-769) is a no-op on zeros; psin zeros_like (:776).
    // receiver_amplitudes resize_ + fill_(0) (:811-812).
    for (auto p : d_wf_) zero(p, ws_);
    zero(d_r_, (std::size_t)nt_ * shots_ * nr_);
    auto const [wfc, wfp, psiy, psix, psiyn, psixn, zetay, zetax] = d_wf_;
    int const rc = fwd_(d_v_, d_f_, wfc, wfp, psiy, psix, psiyn, psixn, zetay, zetax,
                        requires_grad ? d_store_ : nullptr, nullptr, nullptr, nullptr, nullptr,  // storage_ptrs
                        d_r_, d_prof_[0], d_prof_[1], d_prof_[2], d_prof_[3], d_prof_[4], d_prof_[5], d_src_, d_rec_,
                        rdz_, rdx_, rdz2_, rdx2_, dt2_, (int64_t)nt_ /*step_nt*step_ratio*/, (int64_t)shots_, nzp_,
                        nxp_, (int64_t)1 /*n_sources_per_shot*/, (int64_t)nr_, (int64_t)1 /*step_ratio*/,
                        detail::STORAGE_DEVICE, (std::size_t)grid_ * sizeof(float) /*shot_bytes_uncomp*/,
                        (std::size_t)0 /*shot_bytes_comp*/, requires_grad /*v.requires_grad and storage_mode != NONE*/,
                        false /*v_batched*/, false /*storage_compression*/, (int64_t)0 /*start_t = step*step_ratio*/,
                        fpml_b_[0], fpml_b_[1], fpml_e_[0], fpml_e_[1], aux_, b_.stream);
    if (rc != 0) throw std::runtime_error("Deepwave forward returned " + std::to_string(rc));
    // Ping-pong (scalar.py:918-921): after an odd number of steps the current
    // wavefield is in the wfp buffer (and psi in psin). Only the returned final
    // wavefields depend on this; they are not used here.
    odd_ = (nt_ % 2) != 0;
  }

  // ScalarBackwardFunc.forward (scalar.py:1026-1342).
  void backward_call() {
    // grad wavefields: zeros from create_or_pad of the zero output grads (:1123-1132),
    // zero_interior (:1139-1145), zeros_like for psin/zetan (:1151-1152). The forward
    // wavefield buffers are reused (the C forward is finished with them).
    // grad_wfp = -grad_wfp (:1242): negated zeros, nothing to do except the sign of 0.
    for (auto p : d_wf_) zero(p, ws_);
    zero(d_zetayn_, ws_);
    zero(d_zetaxn_, ws_);
    zero(d_grad_v_, grid_);                                 // grad_v.fill_(0) (:1158)
    if (grad_v_tmp_n_) zero(d_grad_v_tmp_, grad_v_tmp_n_);  // grad_v_tmp.fill_(0)
    zero(d_grad_f_, (std::size_t)nt_ * shots_);             // grad_f.fill_(0) (:1181)
    // v2dt2 = v**2 * dt**2 (:1230) = (v*v) * float(dt*dt); computed once.
    if (!d_v2dt2_) {
      std::vector<float> v2(grid_);
      float const c = (float)(dt_ * dt_);
      for (int64_t i = 0; i < grid_; ++i) v2[i] = detail::rnd(detail::rnd(vpad_[i] * vpad_[i]) * c);
      d_v2dt2_ = upload(v2);
    }
    auto const [wfc, wfp, psiy, psix, psiyn, psixn, zetay, zetax] = d_wf_;
    int const rc = bwd_(
        d_v2dt2_, d_grad_r_, wfc, wfp, psiy, psix, psiyn, psixn, zetay, zetax, d_zetayn_, d_zetaxn_, d_store_, nullptr,
        nullptr, nullptr, nullptr,  // storage_ptrs
        d_grad_f_, d_grad_v_, d_grad_v_tmp_, d_prof_[0], d_prof_[1], d_prof_[2], d_prof_[3], d_prof_[4], d_prof_[5],
        d_src_, d_rec_, rdz_, rdx_, rdz2_, rdx2_, (int64_t)nt_ /*step_nt*step_ratio*/, (int64_t)shots_, nzp_, nxp_,
        // n_sources_per_shot * source_amplitudes_requires_grad (:1274): the scaled
        // amplitudes depend on v, so they require grad -> 1
        (int64_t)1, (int64_t)nr_, (int64_t)1 /*step_ratio*/, detail::STORAGE_DEVICE, (std::size_t)grid_ * sizeof(float),
        (std::size_t)0, true /*v.requires_grad and storage_mode != NONE*/, false /*v_batched*/,
        false /*storage_compression*/, (int64_t)nt_ /*start_t = step*step_ratio, step = nt*/, bpml_b_[0], bpml_b_[1],
        bpml_e_[0], bpml_e_[1], aux_, b_.stream);
    if (rc != 0) throw std::runtime_error("Deepwave backward returned " + std::to_string(rc));
    // (:1294-1297 swaps on odd step counts and :1334 grad_wfp = -grad_wfp only affect
    // the gradients w.r.t. initial wavefields, which are not returned here.)
  }

  DeepwaveBuffers b_;
  void* lib_ = nullptr;
  detail::ForwardFn fwd_ = nullptr;
  detail::BackwardFn bwd_ = nullptr;
  int acc_, nz_, nx_, shots_, nr_, nt_, pml_;
  double dz_, dx_, dt_, pml_freq_, max_vel_ = 0;
  int fd_ = 0, pad_ = 0;
  int64_t nzp_ = 0, nxp_ = 0, grid_ = 0, aux_ = 1;
  std::size_t ws_ = 0, grad_v_tmp_n_ = 0;
  int64_t fpml_b_[2]{}, fpml_e_[2]{}, bpml_b_[2]{}, bpml_e_[2]{};
  float rdz_ = 0, rdx_ = 0, rdz2_ = 0, rdx2_ = 0, dt2_ = 0;
  bool odd_ = false;
  std::vector<float> vpad_;
  std::vector<int64_t> sources_i_, receivers_i_;
  std::array<std::vector<float>, 6> prof_;
  std::vector<float> wavelets_, obs_host_;
  double loss_ = 0;
  // device pointers
  float* d_v_ = nullptr;
  float* d_v2dt2_ = nullptr;
  std::array<float*, 6> d_prof_{};
  int64_t* d_src_ = nullptr;
  int64_t* d_rec_ = nullptr;
  float* d_f_ = nullptr;
  std::array<float*, 8> d_wf_{};  // wfc, wfp, psiy, psix, psiyn, psixn, zetay, zetax
  float* d_r_ = nullptr;
  float* d_store_ = nullptr;
  float* d_zetayn_ = nullptr;
  float* d_zetaxn_ = nullptr;
  float* d_grad_v_ = nullptr;
  float* d_grad_v_tmp_ = nullptr;
  float* d_grad_f_ = nullptr;
  float* d_grad_r_ = nullptr;
  float* d_obs_ = nullptr;
  std::vector<std::pair<void*, std::size_t>> allocs_;
  std::size_t cur_ = 0, peak_ = 0;
};

}  // namespace ksweep::bench::deepwave
