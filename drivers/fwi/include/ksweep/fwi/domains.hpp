#pragma once
/// \file domains.hpp
/// Ranks of a run whose model is split into domains (core/domain.hpp): the world's ranks form
/// shot groups of split.count() consecutive ranks, one rank per subdomain; the ranks of a group
/// share their shots and exchange halos (the `domain` communicator, ranked by subdomain index),
/// the ranks holding the same subdomain in every group sum their images in group order (the
/// `group` communicator). And the link of a subdomain's propagator to its neighbours.

#include <ksweep/base/environment.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/comm/halo_exchange.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/halo.hpp>

#include <memory>
#include <string>

namespace ksweep::fwi {

/// Whether the steps of a split overlap their halo exchange with their inner cells, as the
/// environment variable KSWEEP_OVERLAP says: 1 (on), 0 (off), -1 where it is unset (the
/// propagator's automatic choice, core::Propagator::set_overlap). The results are the same bits
/// either way; the switch is there to show it and to time both.
inline int overlap_from_environment() {
  return environment_switch("KSWEEP_OVERLAP", {"overlap the halo exchange with the inner cells",
                                               "exchange after each whole step", "automatic"});
}

struct Decomposition {
  core::DomainSplit split;
  int groups = 1;             ///< shot groups
  int group_index = 0;        ///< this rank's shot group
  int domain_index = 0;       ///< this rank's subdomain
  comm::Communicator domain;  ///< the ranks of this shot group, ranked by subdomain
  comm::Communicator group;   ///< the ranks holding this subdomain, ranked by shot group
};

/// Checks the split against the grid, the stencil radius and the world's ranks
/// (core::check_split, the same message on every rank) and splits the communicators once.
inline Decomposition decompose(comm::Communicator const& world, core::DomainSplit const& split,
                               core::ModelGrid const& grid, int radius) {
  core::check_split(grid, split, radius, world.size());
  Decomposition d;
  d.split = split;
  int const n = split.count();
  d.groups = world.size() / n;
  d.group_index = world.rank() / n;
  d.domain_index = world.rank() % n;
  d.domain = world.split(d.group_index, d.domain_index);
  d.group = world.split(d.domain_index, d.group_index);
  return d;
}

/// Links a subdomain's propagator to its neighbours through MPI (comm::HaloExchange); the
/// returned exchange holds the buffers and the timings and must outlive the propagator's runs.
template <class Propagator>
std::shared_ptr<comm::HaloExchange<typename Propagator::real_type, typename Propagator::execution_space>> link_halo(
    Propagator& prop, Decomposition const& dec, core::Subdomain const& sub) {
  using Real = typename Propagator::real_type;
  using Exchange = comm::HaloExchange<Real, typename Propagator::execution_space>;
  auto const& l = prop.layout();
  comm::HaloGeometry g;
  g.dim = l.dim;
  g.radius = l.radius;
  g.NZ = l.NZ;
  g.NY = l.NY;
  g.NX = l.NX;
  g.left = sub.left;
  g.right = sub.right;
  g.front = sub.front;
  g.back = sub.back;
  auto ex = std::make_shared<Exchange>(dec.domain, g, prop.space(), prop.max_shots());
  core::HaloLink<Real, typename Propagator::memory_space> hl;
  if (dec.split.split()) {
    Exchange* e = ex.get();
    hl.begin = [e](auto const& u, int shots) { e->begin(u, shots); };
    hl.finish = [e](auto const& u, int shots) { e->finish(u, shots); };
    hl.gather_records = [e](auto const& v, int shots) { e->gather(v, shots); };
    if (int const o = overlap_from_environment(); o >= 0) prop.set_overlap(o == 1);
  }
  prop.set_halo_link(hl);
  return ex;
}

/// Puts the parts of a contiguous view together over `c`, bit for bit: each rank holds its
/// part and +0 elsewhere (bitwise or; through a host copy where comm::staged()). Fences `space`.
template <class ExecSpace, class View>
void bitwise_or(ExecSpace const& space, comm::Communicator const& c, View const& v) {
  space.fence();
  if (c.size() == 1) return;
  std::size_t const bytes = v.span() * sizeof(typename View::value_type);
  comm::with_mpi_data(space, v, true, true, [&](auto* p) { c.allreduce_bor(p, bytes); });
}

/// Copies between a subdomain's cells (part, [nz][ny][nx] of the subdomain) and the whole
/// model's (whole, [nz][NY][NX]), one cell per index of the part: `to_whole` writes the whole.
template <class PartView, class WholeView>
struct SubdomainCopy {
  PartView part;
  WholeView whole;
  int ny, nx, NY, NX, y0, x0;
  bool to_whole;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    std::size_t const row = i / static_cast<std::size_t>(nx);
    int const x = static_cast<int>(i - row * static_cast<std::size_t>(nx));
    std::size_t const z = row / static_cast<std::size_t>(ny);
    int const y = static_cast<int>(row - z * static_cast<std::size_t>(ny));
    std::size_t const w = (z * static_cast<std::size_t>(NY) + static_cast<std::size_t>(y0 + y)) * NX + x0 + x;
    if (to_whole) whole(w) = part(i);
    else part(i) = whole(w);
  }
};

/// The copy functor between subdomain `d`'s cells and the whole model `grid`'s.
template <class PartView, class WholeView>
SubdomainCopy<PartView, WholeView> subdomain_copy(PartView const& part, WholeView const& whole,
                                                  core::ModelGrid const& grid, core::Subdomain const& d,
                                                  bool to_whole) {
  return {part, whole, d.ny, d.nx, grid.ny, grid.nx, d.y0, d.x0, to_whole};
}

}  // namespace ksweep::fwi
