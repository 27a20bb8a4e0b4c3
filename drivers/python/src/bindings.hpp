#pragma once
// The classes of the module, each bound by its own source: Modeling32/Modeling64 (modeling.cpp)
// and Inversion (inversion.cpp); module.cpp holds the module's functions and calls these.

#include <pybind11/pybind11.h>

namespace ksweep::python {

void bind_modeling(pybind11::module_& m);
void bind_inversion(pybind11::module_& m);

}  // namespace ksweep::python
