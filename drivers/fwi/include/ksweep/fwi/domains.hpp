#pragma once
/// \file domains.hpp
/// Ranks of a run whose model is split into domains (core/domain.hpp): the world's ranks form
/// shot groups of split.count() consecutive ranks, one rank per subdomain; the ranks of a group
/// share their shots and exchange halos (the `domain` communicator, ranked by subdomain index),
/// the ranks holding the same subdomain in every group sum their images in group order (the
/// `group` communicator). And the link of a subdomain's propagator to its neighbours.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/comm/halo_exchange.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/halo.hpp>

#include <memory>

namespace ksweep::fwi {

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
std::shared_ptr<comm::HaloExchange<typename Propagator::real_type, typename Propagator::execution_space>> link(
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
    hl.exchange = [e](auto const& u, int shots) { e->exchange(u, shots); };
    hl.gather_records = [e](auto const& v, int shots) { e->gather(v, shots); };
  }
  prop.set_halo_link(hl);
  return ex;
}

}  // namespace ksweep::fwi
