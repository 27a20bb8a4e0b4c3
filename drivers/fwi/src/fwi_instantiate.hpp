#pragma once
// The instantiations of one dimension and physics, every stencil order: the modelling in both
// precisions and the inversion, in one translation unit, so that the float propagator and
// gradient engine they share are compiled once (fwi_2d.cpp, fwi_3d.cpp, fwi_vd_2d.cpp and
// fwi_vd_3d.cpp: one file per dimension and physics, which builds compile in parallel).

#include "inversion_impl.hpp"
#include "modeling_impl.hpp"

#define KSWEEP_FWI_ORDER(Order, Dim, Physics)                                                                 \
  template std::unique_ptr<Modeling<float>::Impl> make_modeling<float, Order, Dim, Physics>(ModelingSetup);   \
  template std::unique_ptr<Modeling<double>::Impl> make_modeling<double, Order, Dim, Physics>(ModelingSetup); \
  template std::unique_ptr<Inversion::Impl> make_inversion<Order, Dim, Physics>(Problem, Options,             \
                                                                                comm::Communicator const&);

#define KSWEEP_FWI_INSTANTIATE(Dim, Physics) \
  KSWEEP_FWI_ORDER(2, Dim, Physics)          \
  KSWEEP_FWI_ORDER(4, Dim, Physics)          \
  KSWEEP_FWI_ORDER(6, Dim, Physics)          \
  KSWEEP_FWI_ORDER(8, Dim, Physics)
