#pragma once
// The instantiations of one dimension and physics at the built orders: the modelling in both
// precisions and the inversion, in one translation unit, so that the float propagator and
// gradient engine they share are compiled once (the files generated from fwi_kernel.cpp.in: one
// per kernel, which builds compile in parallel).

#include "inversion_impl.hpp"
#include "modeling_impl.hpp"

#define KSWEEP_FWI_ORDER(Order, Dim, Physics)                                                                 \
  template std::unique_ptr<Modeling<float>::Impl> make_modeling<float, Order, Dim, Physics>(ModelingSetup);   \
  template std::unique_ptr<Modeling<double>::Impl> make_modeling<double, Order, Dim, Physics>(ModelingSetup); \
  template std::unique_ptr<Inversion::Impl> make_inversion<Order, Dim, Physics>(Problem, Options,             \
                                                                                comm::Communicator const&);
