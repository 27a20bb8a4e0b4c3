// An observed.h5 (fwi.observed): the fuzzer chooses the datasets' shapes, values and the
// attributes of a well-formed HDF5 file (the HDF5 library's own parsing of damaged files is not
// ksweep's to fuzz), and read_records must accept it or refuse it naming the file.
#include "fuzz_input.hpp"

#include <ksweep/io/hdf5_io.hpp>

#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <vector>

namespace {

template <class T>
void dataset(hid_t file, char const* name, hid_t type, std::vector<hsize_t> const& dims, FuzzedDataProvider& in) {
  hsize_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      switch (in.ConsumeIntegralInRange<int>(0, 7)) {
        case 0:
          x = std::numeric_limits<T>::quiet_NaN();
          break;
        case 1:
          x = std::numeric_limits<T>::infinity();
          break;
        case 2:
          x = in.ConsumeFloatingPoint<T>();
          break;
        default:
          x = static_cast<T>(in.ConsumeIntegralInRange<int>(-5, 200)) * T(10);
          break;
      }
    } else {
      x = in.ConsumeBool() ? in.ConsumeIntegral<T>() : in.ConsumeIntegralInRange<T>(-2, 120);
    }
  }
  hid_t const space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t const set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (n > 0) H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(set);
  H5Sclose(space);
}

void attribute(hid_t file, char const* name, hid_t type, double value) {
  hid_t const space = H5Screate(H5S_SCALAR);
  hid_t const a = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (type == H5T_NATIVE_INT) {
    int const i = static_cast<int>(value);
    H5Awrite(a, type, &i);
  } else {
    H5Awrite(a, type, &value);
  }
  H5Aclose(a);
  H5Sclose(space);
}

std::vector<hsize_t> dims(FuzzedDataProvider& in, std::vector<hsize_t> const& usual) {
  std::vector<hsize_t> d = usual;
  if (in.ConsumeIntegralInRange<int>(0, 9) == 0) d.resize(in.ConsumeIntegralInRange<std::size_t>(1, 4), 2);
  for (auto& x : d)
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) x = in.ConsumeIntegralInRange<hsize_t>(0, 5);
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  auto const path = ksweep::fuzz::scratch(".h5");
  hid_t const file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return 0;
  hsize_t const ns = in.ConsumeIntegralInRange<hsize_t>(0, 3), nt = in.ConsumeIntegralInRange<hsize_t>(0, 6),
                nr = in.ConsumeIntegralInRange<hsize_t>(0, 4);
  if (in.ConsumeIntegralInRange<int>(0, 15) != 0)
    dataset<float>(file, "data", H5T_NATIVE_FLOAT, dims(in, {ns, nt, nr}), in);
  bool const metres = in.ConsumeBool();
  if (metres) {
    dataset<double>(file, "src_pos", H5T_NATIVE_DOUBLE, dims(in, {ns, 3}), in);
    dataset<double>(file, "rec_pos", H5T_NATIVE_DOUBLE, dims(in, {ns, nr, 3}), in);
    dataset<int>(file, "rec_count", H5T_NATIVE_INT, dims(in, {ns}), in);
  }
  if (!metres || in.ConsumeBool()) {
    dataset<int>(file, "src_z", H5T_NATIVE_INT, dims(in, {ns}), in);
    dataset<int>(file, "src_x", H5T_NATIVE_INT, dims(in, {ns}), in);
    dataset<int>(file, "rec_z", H5T_NATIVE_INT, dims(in, {nr}), in);
    dataset<int>(file, "rec_x", H5T_NATIVE_INT, dims(in, {nr}), in);
    if (in.ConsumeBool()) {
      dataset<int>(file, "src_y", H5T_NATIVE_INT, dims(in, {ns}), in);
      dataset<int>(file, "rec_y", H5T_NATIVE_INT, dims(in, {nr}), in);
    }
  }
  for (char const* name : {"dt", "dh", "freq", "delay"})
    if (in.ConsumeIntegralInRange<int>(0, 15) != 0) {
      double const choices[] = {0.002,
                                10.0,
                                0.0,
                                -1.0,
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(),
                                1e300,
                                in.ConsumeFloatingPoint<double>()};
      attribute(file, name, H5T_NATIVE_DOUBLE, choices[in.ConsumeIntegralInRange<int>(0, 7)]);
    }
  for (char const* name : {"order", "nz", "nx", "ny"})
    if (in.ConsumeIntegralInRange<int>(0, 7) != 0)
      attribute(file, name, H5T_NATIVE_INT, in.ConsumeIntegralInRange<int>(-3, 120));
  H5Fclose(file);
  return ksweep::fuzz::run([&] { (void)ksweep::io::read_records(path, true); });
}
