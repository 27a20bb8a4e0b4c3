// A model split into domains on real MPI ranks (run by ctest with 1 to 4 ranks): every split
// the ranks allow (1 to 4 domains along x, uneven included; 2 x 2 in 3D; one or two shot groups)
// gives the records, misfits, gradients and illuminations of one domain on one rank, bit for
// bit, with CPML and a free surface, sources and receivers on every subdomain and on the cells
// next to every cut, boundary saving in every location and in the dtypes whose codes do not
// depend on their neighbours (fp32, bf16), full storage, and the batched and cells schedules.
// Bad splits are refused with one message before anything is allocated.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/gradient.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/domains.hpp>
#include <ksweep/fwi/imaging.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/modeling.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace ksweep;
using Space = Kokkos::DefaultExecutionSpace;
using Real = float;

comm::Communicator const& world() {
  static comm::Communicator c;
  return c;
}

/// A layered, faulted model with lateral variation along x and y, [nz][ny][nx].
std::vector<float> model(core::ModelGrid const& g, double shift) {
  std::vector<float> v(static_cast<std::size_t>(g.cells()));
  for (int z = 0; z < g.nz; ++z)
    for (int y = 0; y < g.ny; ++y)
      for (int x = 0; x < g.nx; ++x) {
        double const fault = x > g.nx / 2 ? 0.15 * g.nz : 0.0;
        double const depth = z + 0.2 * x * std::sin(0.05 * x) + 0.1 * y - fault + shift;
        double const layer = std::floor(depth / (g.nz / 5.0));
        v[(static_cast<std::size_t>(z) * g.ny + y) * g.nx + x] = static_cast<float>(
            z < 3 ? 1500.0 : 1800.0 + 220.0 * layer + 60.0 * std::sin(0.7 * layer + 0.1 * x + 0.13 * y));
      }
  return v;
}

struct Problem {
  core::ModelGrid grid;
  core::PmlConfig pml;
  double dt = 1e-3;
  int nt = 0;
  core::Survey survey;
  std::vector<float> v_true, v0;
  std::vector<double> wavelet;
};

/// 2D: 40 x 93 cells, 3 shots, a receiver on every cell of row 3 (so on both sides of every cut);
/// cells of 10 m, or of their own size per axis (`spacing`: dz, 0, dx).
Problem problem_2d(bool free_surface, std::array<double, 3> const& spacing = {}) {
  Problem p;
  p.grid = core::ModelGrid(40, 93, 10.0);
  if (spacing[0] > 0) p.grid.set_spacing(spacing);
  p.pml.width = 10;
  p.pml.free_surface = free_surface;
  p.nt = 260;
  p.survey.n_shots = 3;
  p.survey.n_sources = 1;
  p.survey.n_receivers = p.grid.nx;
  for (int x : {5, 46, 70}) p.survey.sources.push_back({2, x, 0});
  for (int s = 0; s < 3; ++s)
    for (int x = 0; x < p.grid.nx; ++x) p.survey.receivers.push_back({3, x, 0});
  p.v_true = model(p.grid, 0.0);
  p.v0 = model(p.grid, 1.5);
  p.wavelet = core::ricker(15.0, 0.08, p.dt, p.nt);
  return p;
}

/// problem_2d with points between cells: receivers half a cell off the grid wherever their
/// interpolation taps stay clear of every cut of 2, 3 and 4 domains (x = 24, 31, 47, 62, 70),
/// on cells elsewhere, and a source between cells.
Problem problem_2d_off_grid() {
  Problem p = problem_2d(false);
  std::vector<int> const cuts{24, 31, 47, 62, 70};
  for (std::size_t k = 0; k < p.survey.receivers.size(); ++k) {
    auto const& c = p.survey.receivers[k];
    bool clear = c.x + 1 < p.grid.nx;
    for (int cut : cuts) clear = clear && (c.x + 4 < cut || c.x - 3 >= cut);
    p.survey.receiver_points.push_back({3.0, c.x + (clear ? 0.5 : 0.0), 0.0});
  }
  for (auto const& c : p.survey.sources) p.survey.source_points.push_back({2.25, c.x + (c.x == 5 ? 0.5 : 0.0), 0.0});
  return p;
}

/// 3D: 20 x 26 x 27 cells (z, y, x), 2 shots, receivers every other cell of plane z = 3; cells of
/// 10 m, or of their own size per axis (`spacing`: dz, dy, dx).
Problem problem_3d(std::array<double, 3> const& spacing = {}) {
  Problem p;
  p.grid = core::ModelGrid::volume(20, 26, 27, 10.0);
  if (spacing[0] > 0) p.grid.set_spacing(spacing);
  p.pml.width = 6;
  p.pml.free_surface = true;
  p.nt = 140;
  p.survey.n_shots = 2;
  p.survey.n_sources = 1;
  for (auto [y, x] : {std::pair{6, 7}, std::pair{13, 14}}) p.survey.sources.push_back({2, x, y});
  for (int s = 0; s < 2; ++s)
    for (int y = 0; y < p.grid.ny; y += 2)
      for (int x = 0; x < p.grid.nx; x += 2) p.survey.receivers.push_back({3, x, y});
  p.survey.n_receivers = static_cast<int>(p.survey.receivers.size()) / 2;
  p.v_true = model(p.grid, 0.0);
  p.v0 = model(p.grid, 1.5);
  p.wavelet = core::ricker(15.0, 0.08, p.dt, p.nt);
  return p;
}

/// What a gradient run gives, for the whole model and every shot (host arrays).
struct Result {
  std::vector<float> records;  // [shot][nt][receiver]
  std::vector<double> losses;  // [shot]
  std::vector<double> grad, illum_src, illum_rec;
  double halo_bytes = 0;  // per exchange, this rank
};

template <class View>
std::vector<typename View::non_const_value_type> to_host(View const& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<typename View::non_const_value_type>(h.data(), h.data() + h.span());
}

template <class T>
void bor(comm::Communicator const& c, std::vector<T>& v) {
  c.allreduce_bor(v.data(), v.size() * sizeof(T));
}

/// Rank 0's values on every rank.
template <class... T>
void share(std::vector<T>&... v) {
  (world().broadcast(v), ...);
}
inline void share(double& x) { world().broadcast_bytes(&x, sizeof x); }

/// A one-rank reference, computed by rank 0 alone (on its own communicator, `one`) and
/// broadcast: the ranks of these tests share the machine's cores, and each computing it would
/// cost every one of them its time. `share_result(r)` broadcasts what `compute` returned.
template <class F, class Share>
auto one_rank_reference(F&& compute, Share&& share_result) {
  comm::Communicator const one = world().split(world().rank(), 0);  // collective: every rank
  decltype(compute(one)) r{};
  if (world().is_root()) r = compute(one);
  share_result(r);
  return r;
}

/// The observed records of every shot in the true model, on one domain (every rank alike).
template <int Order, int Dim>
std::vector<float> observed(Problem const& p) {
  Space space;
  core::Propagator<Real, Order, Space, Dim> prop(space, p.grid, p.pml, p.dt, p.survey.n_shots);
  prop.set_velocity(p.v_true.data());
  prop.set_survey(p.survey);
  int const S = p.survey.n_shots;
  typename decltype(prop)::wavelet_view w("w", S, 1, p.nt);
  auto wh = Kokkos::create_mirror_view(w);
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < p.nt; ++t) wh(s, 0, t) = static_cast<Real>(p.wavelet[t]);
  Kokkos::deep_copy(w, wh);
  typename decltype(prop)::record_view r("r", S, p.nt, p.survey.n_receivers);
  prop.forward(w, r);
  return to_host(r);
}

/// The gradient of every shot over `split` (the world's ranks in shot groups of split.count()),
/// gathered on every rank; split {1, 1} on a one-rank communicator is the reference.
template <int Order, int Dim>
Result gradient(Problem const& p, std::vector<float> const& obs, core::DomainSplit const& split,
                storage::StorageConfig const& cfg, comm::Communicator const& ranks, core::Schedule schedule,
                bool overlap = true) {
  using Prop = core::Propagator<Real, Order, Space, Dim>;
  using Engine = core::GradientEngine<Real, Order, Space, Dim>;
  Space space;
  auto const dec = fwi::decompose(ranks, split, p.grid, Order / 2);
  double const vmax = *std::max_element(p.v0.begin(), p.v0.end());
  auto const sub = core::subdomain(p.grid, p.pml, split, dec.domain_index, vmax);
  auto const shots = comm::slice_of(p.survey.n_shots, dec.group_index, dec.groups);
  Prop prop(space, sub.grid, sub.pml, p.dt, std::max(shots.count, 1));
  prop.set_schedule(schedule);
  prop.set_overlap(overlap);
  auto const halo = fwi::link_halo(prop, dec, sub);
  auto const part = core::extract(p.v0.data(), p.grid, sub);
  prop.set_velocity(part.data());
  std::vector<int> ids;
  for (int s = shots.first; s < shots.first + shots.count; ++s) ids.push_back(s);
  if (!ids.empty()) prop.set_survey(core::local_survey(p.survey.select(ids), p.grid, split, sub));
  int const S = shots.count, nr = p.survey.n_receivers, nt = p.nt;
  typename Prop::wavelet_view w("w", S, 1, nt);
  typename Prop::record_view o("o", S, nt, nr), syn("syn", S, nt, nr);
  auto wh = Kokkos::create_mirror_view(w);
  auto oh = Kokkos::create_mirror_view(o);
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < nt; ++t) wh(s, 0, t) = static_cast<Real>(p.wavelet[t]);
    for (int t = 0; t < nt; ++t)
      for (int r = 0; r < nr; ++r) oh(s, t, r) = obs[(static_cast<std::size_t>(shots.first + s) * nt + t) * nr + r];
  }
  Kokkos::deep_copy(w, wh);
  Kokkos::deep_copy(o, oh);
  Engine eng(prop, cfg);
  typename Engine::images_type img(space, sub.grid.nz * sub.grid.ny, sub.grid.nx);
  if (S > 0) eng.compute(w, o, 0.5, syn);
  // Images summed over the shot groups in group order: the shots' order of one rank.
  dec.group.sum_in_rank_order(
      space,
      [&] {
        if (S > 0) eng.accumulate(img);
      },
      img.grads, img.illum_src, img.illum_rec);
  Result res;
  std::size_t const cells = static_cast<std::size_t>(p.grid.cells());
  auto whole = [&](auto const& view) {
    std::vector<double> out(cells, 0.0);
    auto const h = to_host(view);
    core::insert(h.data(), p.grid, sub, out.data());
    bor(dec.domain, out);
    return out;
  };
  res.grad = whole(img.grad);
  res.illum_src = whole(img.illum_src);
  res.illum_rec = whole(img.illum_rec);
  // Records and misfits of the group's shots into every shot's place, then over the groups.
  res.records.assign(static_cast<std::size_t>(p.survey.n_shots) * nt * nr, 0.0f);
  res.losses.assign(p.survey.n_shots, 0.0);
  if (S > 0) {
    auto const rh = to_host(syn);
    std::copy(rh.begin(), rh.end(), res.records.begin() + static_cast<std::ptrdiff_t>(shots.first) * nt * nr);
    for (int s = 0; s < S; ++s) res.losses[shots.first + s] = eng.shot_losses()[s];
  }
  bor(dec.group, res.records);
  bor(dec.group, res.losses);
  res.halo_bytes = static_cast<double>(halo->bytes_per_exchange(std::max(S, 1)));
  return res;
}

template <class T>
long differing(std::vector<T> const& a, std::vector<T> const& b) {
  if (a.size() != b.size()) return -1;
  long n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

/// The splits of the world's ranks: every split of the model into d domains (d dividing the
/// ranks), in 2D along x, in 3D along y, x and both.
std::vector<core::DomainSplit> splits(int dim, int ranks) {
  std::vector<core::DomainSplit> out;
  for (int d = 1; d <= ranks; ++d) {
    if (ranks % d != 0) continue;
    out.push_back({1, d});
    if (dim == 3 && d > 1) out.push_back({d, 1});
    if (dim == 3 && d == 4) out.push_back({2, 2});
  }
  return out;
}

template <int Order, int Dim>
void same_bits(Problem const& p, std::vector<storage::StorageConfig> const& cfgs) {
  auto const obs = one_rank_reference([&](comm::Communicator const&) { return observed<Order, Dim>(p); },
                                      [](std::vector<float>& v) { share(v); });
  for (std::size_t c = 0; c < cfgs.size(); ++c) {
    auto const& cfg = cfgs[c];
    auto const ref = one_rank_reference(
        [&](comm::Communicator const& one) {
          return gradient<Order, Dim>(p, obs, {1, 1}, cfg, one, core::Schedule::automatic);
        },
        [](Result& r) {
          share(r.records, r.losses, r.grad, r.illum_src, r.illum_rec);
          share(r.halo_bytes);
        });
    double norm = 0;
    for (double g : ref.grad) norm += g * g;
    ASSERT_GT(norm, 0) << "the reference gradient is zero";
    // The steps overlap their exchange with the inner cells (the default); the first storage
    // also without overlap, and with the cells schedule.
    struct Run {
      core::Schedule schedule;
      bool overlap;
    };
    // Cuts where the codec's blocks end (every cut for the codecs without a scale per block).
    int const align =
        core::cut_alignment(core::Layout(p.grid, p.pml, Order), cfg.strategy == storage::Strategy::full, cfg.dtype);
    for (auto split : splits(Dim, world().size())) {
      split.align = align;
      try {
        core::check_split(p.grid, split, Order / 2, world().size());
      } catch (Error const& e) {
        ASSERT_GT(align, 1) << e.what();  // only the tiles of a block codec may leave a part too thin
        if (world().is_root())
          std::printf("domains %s with %s: refused (%s)\n", core::describe(split, Dim).c_str(),
                      storage::to_string(cfg.dtype).c_str(), e.what());
        continue;
      }
      for (auto run : {Run{core::Schedule::automatic, true}, Run{core::Schedule::automatic, false},
                       Run{core::Schedule::cells, true}}) {
        if (c > 0 && (run.schedule == core::Schedule::cells || !run.overlap)) continue;
        auto const schedule = run.schedule;
        auto const got = gradient<Order, Dim>(p, obs, split, cfg, world(), schedule, run.overlap);
        std::string const what = "order " + std::to_string(Order) + ", " + std::to_string(Dim) + "D, domains " +
                                 core::describe(split, Dim) + ", " + std::to_string(world().size() / split.count()) +
                                 " shot group(s), " + storage::to_string(cfg.location) + " " +
                                 storage::to_string(cfg.dtype) + " " + storage::to_string(cfg.strategy) + ", " +
                                 core::to_string(schedule) + (run.overlap ? ", overlapped" : ", not overlapped") +
                                 ", rank " + std::to_string(world().rank());
        EXPECT_EQ(differing(got.records, ref.records), 0) << "records: " << what;
        EXPECT_EQ(differing(got.losses, ref.losses), 0) << "misfits: " << what;
        EXPECT_EQ(differing(got.grad, ref.grad), 0) << "gradient: " << what;
        EXPECT_EQ(differing(got.illum_src, ref.illum_src), 0) << "source illumination: " << what;
        EXPECT_EQ(differing(got.illum_rec, ref.illum_rec), 0) << "receiver illumination: " << what;
        if (world().is_root())
          std::printf("%s: the same bits as one domain (halo %.0f B per exchange on rank 0)\n", what.c_str(),
                      got.halo_bytes);
      }
    }
  }
}

storage::StorageConfig cfg(char const* strategy, char const* location, char const* dtype) {
  return storage::make_storage_config(strategy, location, dtype, 16, "", true);
}

TEST(domains, split_2d_same_bits_as_one_domain_order_8) {
  same_bits<8, 2>(problem_2d(false),
                  {cfg("boundary", "device", "fp32"), cfg("boundary", "host", "bf16"), cfg("full", "disk", "fp32")});
}

// Cells of their own size per axis (dz 12.5 m, dx 8 m): every subdomain weighs its axes alike,
// with fp32 storage and with the shipped fp16 (a scale per block of the weighed layer terms).
TEST(domains, split_2d_free_surface_same_bits_order_4) {
  same_bits<4, 2>(problem_2d(true, {12.5, 0.0, 8.0}),
                  {cfg("boundary", "device", "fp32"), cfg("boundary", "host", "fp16")});
}

// The faces and gathers staged through host copies (as for device memory without GPU-aware MPI)
// give the bits of one domain too.
TEST(domains, split_2d_staged_through_host_same_bits) {
  comm::set_staging(comm::Staging::staged);
  same_bits<4, 2>(problem_2d(true), {cfg("boundary", "device", "fp32")});
  comm::set_staging(comm::Staging::automatic);
}

TEST(domains, split_2d_points_between_cells_same_bits) {
  same_bits<8, 2>(problem_2d_off_grid(), {cfg("boundary", "device", "fp32")});
}

// Cells of their own size per axis (dz 12 m, dy 9 m, dx 10 m).
TEST(domains, split_3d_same_bits_as_one_domain_order_4) {
  same_bits<4, 3>(problem_3d({12.0, 9.0, 10.0}), {cfg("boundary", "device", "fp32")});
}

// Codecs with a scale per block of saved values (fp16, the shipped default, and int8): the blocks
// are tiles of the whole model's geometry and the cuts fall on tile boundaries, so every block
// codes alike on every split: the same bits as one domain, on every storage location, 2D and 3D.
TEST(domains, split_with_block_codecs_same_bits) {
  same_bits<8, 2>(problem_2d(false), {cfg("boundary", "device", "fp16"), cfg("boundary", "disk", "int8")});
  same_bits<4, 2>(problem_2d(true), {cfg("boundary", "host", "fp16")});
  same_bits<4, 3>(problem_3d(), {cfg("boundary", "device", "fp16"), cfg("full", "host", "int8")});
}

// The inversion library on a split model: Adam over batches of 2 of 3 shots, 3 iterations; the
// models, losses and images of every split are those of one rank, bit for bit.
fwi::Inversion inversion(Problem const& p, core::DomainSplit const& split, comm::Communicator const& ranks,
                         storage::Dtype dtype = storage::Dtype::fp32) {
  fwi::Problem pb;
  pb.grid = p.grid;
  pb.pml = p.pml;
  pb.order = 8;
  pb.dt = p.dt;
  pb.nt = p.nt;
  pb.survey = p.survey;
  pb.wavelet = p.wavelet;
  pb.observed = observed<8, 2>(p);
  pb.start = {p.v0};
  pb.truth = {p.v_true};
  fwi::Options o;
  o.batch = 2;
  o.seed = 5;
  o.bounds = {{1000, 3500}};  // below the starting model's slowest cell (1141 m/s): nothing clipped at the start
  o.adam.lr = 20;
  o.water_rows = 3;
  o.grad_smooth = 1.5;
  o.precondition = true;
  o.domains = split;
  o.storage.dtype = dtype;
  return fwi::Inversion(pb, o, ranks);
}

TEST(domains, inversion_on_a_split_model_same_bits) {
  auto const p = problem_2d(false);
  comm::Communicator const one = world().split(world().rank(), 0);
  for (auto const dtype : {storage::Dtype::fp32, storage::Dtype::fp16}) {
    auto ref = inversion(p, {1, 1}, one, dtype);
    std::vector<double> ref_loss;
    for (int it = 0; it < 3; ++it) ref_loss.push_back(ref.step().loss);
    auto const ref_images = ref.images();
    for (auto const& split : splits(2, world().size())) {
      auto inv = inversion(p, split, world(), dtype);  // the library aligns the cuts for fp16
      std::string const what = storage::to_string(dtype) + " storage, domains " + core::describe(split, 2) + ", " +
                               std::to_string(world().size() / split.count()) + " shot group(s), rank " +
                               std::to_string(world().rank());
      for (int it = 0; it < 3; ++it) {
        double const loss = inv.step().loss;
        EXPECT_EQ(std::memcmp(&loss, &ref_loss[static_cast<std::size_t>(it)], sizeof loss), 0)
            << "loss of iteration " << it + 1 << ": " << loss << " vs " << ref_loss[static_cast<std::size_t>(it)]
            << ", " << what;
      }
      EXPECT_EQ(differing(inv.model()[0], ref.model()[0]), 0) << "model: " << what;
      auto const images = inv.images();
      EXPECT_EQ(differing(images.grad[0], ref_images.grad[0]), 0) << "gradient: " << what;
      EXPECT_EQ(differing(images.illum_src, ref_images.illum_src), 0) << "illumination: " << what;
      auto const st = inv.state(), rst = ref.state();
      EXPECT_EQ(differing(st.first, rst.first), 0) << "Adam's first moment: " << what;
      if (world().is_root())
        std::printf("inversion, %s: 3 iterations, the same bits as one rank (RMSE %.6f m/s)\n", what.c_str(),
                    inv.rmse()[0]);
    }
  }
}

/// A Modeling of problem `p`: `batch` shots per launch, the model split over `ranks`.
fwi::ModelingSetup modeling_setup(Problem const& p, int order, int batch, core::DomainSplit const& split,
                                  comm::Communicator const& ranks) {
  fwi::ModelingSetup s;
  s.grid = p.grid;
  s.pml = p.pml;
  s.order = order;
  s.dt = p.dt;
  s.nt = p.nt;
  s.survey = p.survey;
  s.batch = batch;
  s.domains = split;
  s.ranks = ranks;
  return s;
}

// fwi::Modeling with domains (the program's `ksweep model`, and fwi's observed and final data):
// every shot group models its shots on its subdomains; every rank gets every shot's records, the
// same bits as one rank, for every split the ranks allow (1 shot per launch, so that groups
// hold different numbers of batches; 2D order 8 with a free surface, 3D order 4).
template <int Dim>
void modeling_same_records(Problem const& p, int order) {
  auto records = [&](core::DomainSplit const& split, comm::Communicator const& ranks) {
    fwi::Modeling<float> m(modeling_setup(p, order, 1, split, ranks));
    m.set_velocity(p.v_true.data());
    std::vector<float> w(static_cast<std::size_t>(p.survey.n_shots) * p.nt), r(w.size() * p.survey.n_receivers, -1.f);
    for (int sh = 0; sh < p.survey.n_shots; ++sh)
      for (int t = 0; t < p.nt; ++t) w[static_cast<std::size_t>(sh) * p.nt + t] = static_cast<float>(p.wavelet[t]);
    m.set_after_batch([](int, int) {});
    m.forward(w.data(), r.data());
    return r;
  };
  auto const ref = one_rank_reference(
      [&](comm::Communicator const& one) {
        return records({1, 1}, one);
      },
      [](std::vector<float>& v) { share(v); });
  for (auto const& split : splits(Dim, world().size())) {
    if (!split.split() && world().size() == 1) continue;
    auto const got = records(split, world());
    EXPECT_EQ(differing(got, ref), 0) << Dim << "D, domains " << core::describe(split, Dim) << ", rank "
                                      << world().rank();
    if (world().is_root())
      std::printf("modelling, %dD, domains %s, %d shot group(s): the same records as one rank\n", Dim,
                  core::describe(split, Dim).c_str(), world().size() / split.count());
  }
}

TEST(domains, modeling_split_gives_one_rank_s_records) {
  modeling_same_records<2>(problem_2d(true), 8);
  modeling_same_records<3>(problem_3d(), 4);
}

// fwi::Modeling with its shots over ranks (shot groups of one rank, or of one rank per
// subdomain): the records, the gradient (loss, misfits, synthetic records, images), the
// vector-Jacobian product, the adjoint's wavelet gradient, Born records, and RTM and LSRTM images of one rank, bit for
// bit, for every split the ranks allow, with the fp32 and the shipped fp16 store, one shot per batch (groups hold
// several batches: their shots' images are kept until the rank chain's sum) and every shot at once; the imaging with
// the absorbing layer's velocity given (held fixed).
struct Operations {
  std::vector<float> records, synthetic, born, wavelet_grad;
  std::vector<double> losses, grad, illum_src, illum_rec, vjp, rtm, lsrtm, misfit;
  double loss = 0;
};

template <int Dim>
Operations operations(Problem const& p, int order, storage::Dtype dtype, int batch, core::DomainSplit const& split,
                      comm::Communicator const& ranks) {
  auto s = modeling_setup(p, order, batch, split, ranks);
  s.storage.dtype = dtype;
  fwi::Modeling<float> m(s);
  std::size_t const shots = static_cast<std::size_t>(p.survey.n_shots), nt = static_cast<std::size_t>(p.nt);
  std::size_t const n = shots * nt * static_cast<std::size_t>(p.survey.n_receivers);
  std::size_t const cells = static_cast<std::size_t>(p.grid.cells());
  std::vector<float> w(shots * nt);
  for (std::size_t sh = 0; sh < shots; ++sh)
    for (std::size_t t = 0; t < nt; ++t) w[sh * nt + t] = static_cast<float>(p.wavelet[t]);
  Operations o;
  std::vector<float> observed(n, -1.f);
  m.set_velocity(p.v_true.data());
  m.forward(w.data(), observed.data());
  m.set_velocity(p.v0.data());
  o.records.assign(n, -1.f);
  m.forward(w.data(), o.records.data());
  o.synthetic.assign(n, -1.f);
  o.losses.assign(shots, -1.0);
  o.grad.assign(cells, -1.0);
  o.illum_src.assign(cells, -1.0);
  o.illum_rec.assign(cells, -1.0);
  o.loss = m.gradient(w.data(), observed.data(), 0.5, {{o.grad.data()}, o.illum_src.data(), o.illum_rec.data()},
                      o.synthetic.data(), o.losses.data());
  std::vector<float> residual(n);
  for (std::size_t i = 0; i < n; ++i) residual[i] = o.records[i] - observed[i];
  o.vjp.assign(cells, -1.0);
  m.vjp(w.data(), residual.data(), {{o.vjp.data()}});
  o.wavelet_grad.assign(shots * nt, -1.f);  // the adjoint's wavelet gradient
  m.adjoint(residual.data(), o.wavelet_grad.data());
  std::vector<float> scatter(cells);
  for (std::size_t i = 0; i < cells; ++i) scatter[i] = p.v_true[i] - p.v0[i];
  o.born.assign(n, -1.f);
  m.born(w.data(), scatter.data(), o.born.data());
  // Imaging as the program runs it: the absorbing layer held at the background (no chain rule).
  m.set_velocity(p.v0.data(), p.v0.data());
  fwi::LsrtmOptions lo;
  lo.iterations = 2;
  auto const [rtm, lsrtm] = fwi::rtm_and_lsrtm(m, w.data(), observed.data(), fwi::RtmOptions{}, lo);
  o.rtm = rtm.image;
  o.lsrtm = lsrtm.image;
  o.misfit = lsrtm.misfit;
  return o;
}

template <int Dim>
void operations_same_bits(Problem const& p, int order, std::vector<storage::Dtype> const& dtypes) {
  for (auto const dtype : dtypes)
    for (int const batch : {1, 0}) {
      auto const ref = one_rank_reference(
          [&](comm::Communicator const& one) {
            return operations<Dim>(p, order, dtype, batch, {1, 1}, one);
          },
          [](Operations& o) {
            share(o.records, o.synthetic, o.born, o.wavelet_grad);
            share(o.losses, o.grad, o.illum_src, o.illum_rec, o.vjp, o.rtm, o.lsrtm, o.misfit);
            share(o.loss);
          });
      for (auto const& split : splits(Dim, world().size())) {
        if (!split.split() && world().size() == 1) continue;
        auto aligned = split;  // the library cuts where the codec's blocks end: it may refuse a thin part
        aligned.align = core::cut_alignment(core::Layout(p.grid, p.pml, order), false, dtype);
        try {
          core::check_split(p.grid, aligned, order / 2, world().size());
        } catch (Error const& e) {
          ASSERT_GT(aligned.align, 1) << e.what();
          if (world().is_root())
            std::printf("modelling operations, domains %s with %s: refused (%s)\n", core::describe(split, Dim).c_str(),
                        storage::to_string(dtype).c_str(), e.what());
          continue;
        }
        auto const got = operations<Dim>(p, order, dtype, batch, split, world());
        std::string const what = std::to_string(Dim) + "D, " + storage::to_string(dtype) + " storage, batch " +
                                 std::to_string(batch) + ", domains " + core::describe(split, Dim) + ", " +
                                 std::to_string(world().size() / split.count()) + " shot group(s), rank " +
                                 std::to_string(world().rank());
        EXPECT_EQ(differing(got.records, ref.records), 0) << "forward records: " << what;
        EXPECT_EQ(std::memcmp(&got.loss, &ref.loss, sizeof got.loss), 0)
            << "loss " << got.loss << " vs " << ref.loss << ": " << what;
        EXPECT_EQ(differing(got.losses, ref.losses), 0) << "misfits: " << what;
        EXPECT_EQ(differing(got.synthetic, ref.synthetic), 0) << "synthetic records: " << what;
        EXPECT_EQ(differing(got.grad, ref.grad), 0) << "gradient: " << what;
        EXPECT_EQ(differing(got.illum_src, ref.illum_src), 0) << "source illumination: " << what;
        EXPECT_EQ(differing(got.illum_rec, ref.illum_rec), 0) << "receiver illumination: " << what;
        EXPECT_EQ(differing(got.vjp, ref.vjp), 0) << "vjp: " << what;
        EXPECT_EQ(differing(got.born, ref.born), 0) << "Born records: " << what;
        EXPECT_EQ(differing(got.wavelet_grad, ref.wavelet_grad), 0) << "adjoint: " << what;
        EXPECT_EQ(differing(got.rtm, ref.rtm), 0) << "RTM image: " << what;
        EXPECT_EQ(differing(got.lsrtm, ref.lsrtm), 0) << "LSRTM image: " << what;
        EXPECT_EQ(differing(got.misfit, ref.misfit), 0) << "LSRTM misfits: " << what;
        if (world().is_root())
          std::printf("modelling operations, %s: the same bits as one rank (LSRTM misfit %.4f)\n", what.c_str(),
                      got.misfit.back());
      }
    }
}

/// problem_2d with 6 shots: a rank's slice holds several, whose order in the sums shows.
Problem problem_2d_six_shots() {
  Problem p = problem_2d(true);
  p.survey.n_shots = 6;
  p.survey.sources.clear();
  for (int x : {5, 20, 46, 58, 70, 88}) p.survey.sources.push_back({2, x, 0});
  p.survey.receivers.clear();
  for (int s = 0; s < 6; ++s)
    for (int x = 0; x < p.grid.nx; ++x) p.survey.receivers.push_back({3, x, 0});
  return p;
}

TEST(domains, modeling_operations_over_ranks_same_bits) {
  operations_same_bits<2>(problem_2d_six_shots(), 8, {storage::Dtype::fp32, storage::Dtype::fp16});
  operations_same_bits<3>(problem_3d(), 4, {storage::Dtype::fp16});
}

TEST(domains, bad_splits_are_refused_with_the_limit) {
  core::ModelGrid const g(40, 93, 10.0);
  auto message = [&](core::ModelGrid const& grid, core::DomainSplit s, int ranks) {
    try {
      core::check_split(grid, s, 4, ranks);
    } catch (Error const& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(g, {1, 11}, 11).find("parts of 8 cells along x"), std::string::npos) << message(g, {1, 11}, 11);
  EXPECT_NE(message(g, {1, 11}, 11).find("at most 10 parts"), std::string::npos);
  EXPECT_NE(message(g, {1, 4}, 2).find("more than the 2 MPI ranks"), std::string::npos) << message(g, {1, 4}, 2);
  EXPECT_NE(message(g, {1, 2}, 3).find("do not divide into shot groups"), std::string::npos) << message(g, {1, 2}, 3);
  EXPECT_NE(message(g, {2, 1}, 2).find("a 2D model is split along x only"), std::string::npos);
  EXPECT_NE(message(g, {1, 0}, 2).find("at least 1 part"), std::string::npos);
  auto const v = core::ModelGrid::volume(20, 26, 27, 10.0);
  EXPECT_NE(message(v, {4, 1}, 4).find("parts of 6 cells along y"), std::string::npos) << message(v, {4, 1}, 4);
  EXPECT_EQ(message(v, {2, 2}, 8), "");
}

TEST(domains, off_grid_taps_across_a_cut_are_refused_by_name) {
  auto p = problem_2d(false);
  core::DomainSplit const split{1, 2};  // the cut at x = 47
  auto const sub = core::subdomain(p.grid, p.pml, split, 0, 3000.0);
  p.survey.receiver_points.clear();
  for (std::size_t k = 0; k < p.survey.receivers.size(); ++k)
    p.survey.receiver_points.push_back({3.0, static_cast<double>(p.survey.receivers[k].x), 0.0});
  p.survey.receiver_points[45].x = 45.5;  // taps x = 42 ... 49
  try {
    (void)core::local_survey(p.survey, p.grid, split, sub);
    FAIL() << "no error for taps across the cut";
  } catch (Error const& e) {
    std::string const m = e.what();
    EXPECT_NE(m.find("receiver 45 of shot 0 at x = 45.5 cells"), std::string::npos) << m;
    EXPECT_NE(m.find("x = 42 ... 49 reach across the cut at x = 47"), std::string::npos) << m;
  }
  p.survey.receiver_points[45].x = 40.5;  // taps 37 ... 44: held by the first domain
  auto const local = core::local_survey(p.survey, p.grid, split, sub);
  EXPECT_FALSE(local.away_receivers[45]);
  EXPECT_TRUE(local.away_receivers[50]);
}

}  // namespace

int main(int argc, char** argv) {
  comm::Environment env(argc, argv);
  ::setenv("OMP_PROC_BIND", "false", 0);
  ksweep::core::KokkosSession kokkos(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
