#include <ksweep/io/hdf5_io.hpp>

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#if KSWEEP_ENABLE_HDF5
#include <hdf5.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <system_error>
#endif

namespace ksweep::io {

long node_index(double metres, double dh) {
  double const c = metres / dh;
  double const i = std::round(c);
  return std::abs(c - i) <= 1e-9 * std::max(1.0, std::abs(c)) && i >= 0 && i <= std::numeric_limits<int>::max()
             ? static_cast<long>(i)
             : -1;
}

bool RecordsFile::shared_spread() const {
  for (int s = 0; s < shots; ++s) {
    if (rec_count[static_cast<std::size_t>(s)] != receivers) return false;
    for (int i = 0; i < receivers; ++i)
      if (rec_pos[static_cast<std::size_t>(s) * receivers + i] != rec_pos[static_cast<std::size_t>(i)]) return false;
  }
  return true;
}

bool RecordsFile::on_grid() const {
  for (auto const* list : {&src_pos, &rec_pos})
    for (auto const& p : *list)
      if (node_index(p.z, dh) < 0 || node_index(p.x, dh) < 0 || node_index(p.y, dh) < 0) return false;
  return true;
}

#if KSWEEP_ENABLE_HDF5

namespace {

namespace fs = std::filesystem;

/// Turns HDF5's own error printing off once; errors are reported through ksweep::Error.
void silence_hdf5() {
  static bool const done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

herr_t collect_error(unsigned, H5E_error2_t const* err, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  if (err != nullptr && err->desc != nullptr) out->push_back(err->desc);
  return 0;
}

/// The outermost message on the HDF5 error stack, as " (HDF5: ...)", and clears the stack.
/// When a system call failed underneath (a full disk, a file-size limit), its cause is named
/// instead of HDF5's own wording.
std::string hdf5_detail() {
  std::vector<std::string> msgs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &msgs);
  H5Eclear2(H5E_DEFAULT);
  for (auto const& m : msgs) {
    auto const pos = m.find("errno = ");
    if (pos == std::string::npos) continue;
    int const err = std::atoi(m.c_str() + pos + 8);
    if (err > 0) return ": " + describe_errno(err);
  }
  return msgs.empty() ? std::string() : " (HDF5: " + msgs.front() + ")";
}

/// Owns an HDF5 identifier and closes it on every path.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) : m_id(id), m_closer(closer) {}
  Handle(Handle const&) = delete;
  Handle& operator=(Handle const&) = delete;
  Handle(Handle&& other) noexcept : m_id(other.m_id), m_closer(other.m_closer) { other.m_id = -1; }
  Handle& operator=(Handle&&) = delete;
  ~Handle() {
    if (m_id >= 0) m_closer(m_id);
  }
  hid_t get() const { return m_id; }
  bool valid() const { return m_id >= 0; }
  /// Closes now and reports whether that worked (for files, where close flushes).
  bool close() {
    if (m_id < 0) return true;
    herr_t const status = m_closer(m_id);
    m_id = -1;
    return status >= 0;
  }

 private:
  hid_t m_id;
  Closer m_closer;
};

/// Builds the file in memory (HDF5's core driver, no backing store) and hands its image to
/// write_file_atomic: HDF5 never writes to the disk itself, so a full disk or a file-size limit
/// is reported with its cause, the temporary file is always removed, and no half-closed HDF5
/// file is left open.
template <class Body>
void write_atomic(fs::path const& path, Body&& body) {
  silence_hdf5();
  std::string image;
  {
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    KSWEEP_REQUIRE(fapl.valid() && H5Pset_fapl_core(fapl.get(), 1 << 20, 0) >= 0,
                   "cannot set up an in-memory HDF5 file for " << shown_path(path) << hdf5_detail());
    Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
    KSWEEP_REQUIRE(file.valid(), "cannot create HDF5 file " << shown_path(path) << hdf5_detail());
    body(file.get(), path);
    KSWEEP_REQUIRE(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0,
                   "cannot flush HDF5 file " << shown_path(path) << hdf5_detail());
    ssize_t const size = H5Fget_file_image(file.get(), nullptr, 0);
    KSWEEP_REQUIRE(size > 0, "cannot get the image of HDF5 file " << shown_path(path) << hdf5_detail());
    image.resize(static_cast<std::size_t>(size));
    KSWEEP_REQUIRE(H5Fget_file_image(file.get(), image.data(), image.size()) == size,
                   "cannot get the image of HDF5 file " << shown_path(path) << hdf5_detail());
    KSWEEP_REQUIRE(file.close(), "cannot close HDF5 file " << shown_path(path) << hdf5_detail());
  }
  write_file_atomic(path, image);
}

hsize_t to_hsize(int n) { return static_cast<hsize_t>(n); }

template <std::size_t Rank>
void write_dataset(hid_t file, fs::path const& where, std::string const& name, std::array<hsize_t, Rank> const& dims,
                   hid_t file_type, hid_t mem_type, void const* data) {
  Handle space(H5Screate_simple(static_cast<int>(Rank), dims.data(), nullptr), H5Sclose);
  KSWEEP_REQUIRE(space.valid(), "cannot create dataspace for dataset '" << name << "' in " << where << hdf5_detail());
  Handle set(H5Dcreate2(file, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  KSWEEP_REQUIRE(set.valid(), "cannot create dataset '" << name << "' in " << where << hdf5_detail());
  KSWEEP_REQUIRE(H5Dwrite(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0,
                 "cannot write dataset '" << name << "' to " << where << hdf5_detail());
}

void write_attribute(hid_t file, fs::path const& where, char const* name, hid_t file_type, hid_t mem_type,
                     void const* value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  KSWEEP_REQUIRE(space.valid(), "cannot create dataspace for attribute '" << name << "' in " << where << hdf5_detail());
  Handle attr(H5Acreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  KSWEEP_REQUIRE(attr.valid(), "cannot create attribute '" << name << "' in " << where << hdf5_detail());
  KSWEEP_REQUIRE(H5Awrite(attr.get(), mem_type, value) >= 0,
                 "cannot write attribute '" << name << "' to " << where << hdf5_detail());
}

void write_double(hid_t file, fs::path const& where, char const* name, double value) {
  write_attribute(file, where, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void write_int(hid_t file, fs::path const& where, char const* name, int value) {
  write_attribute(file, where, name, H5T_STD_I32LE, H5T_NATIVE_INT, &value);
}

Handle open_for_reading(fs::path const& path) {
  silence_hdf5();
  std::error_code ec;
  KSWEEP_REQUIRE(fs::exists(path, ec), "HDF5 file " << shown_path(path) << " does not exist");
  KSWEEP_REQUIRE(fs::is_regular_file(path, ec),
                 "HDF5 file " << shown_path(path) << " is not a regular file (a folder, device or pipe)");
  KSWEEP_REQUIRE(H5Fis_hdf5(path.c_str()) > 0, "file " << shown_path(path) << " is not an HDF5 file" << hdf5_detail());
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  KSWEEP_REQUIRE(file.valid(), "cannot open HDF5 file " << shown_path(path) << hdf5_detail());
  return file;
}

/// Reads a float or integer dataset of the expected rank, converting to T.
template <class T>
std::vector<T> read_dataset(hid_t file, fs::path const& path, char const* name, int rank, hid_t mem_type,
                            std::vector<hsize_t>& dims, bool read_values = true) {
  htri_t const exists = H5Lexists(file, name, H5P_DEFAULT);
  KSWEEP_REQUIRE(exists > 0, "HDF5 file " << shown_path(path) << " has no dataset '" << name << "'" << hdf5_detail());
  Handle set(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  KSWEEP_REQUIRE(set.valid(), "'" << name << "' in " << shown_path(path) << " is not a dataset" << hdf5_detail());
  Handle type(H5Dget_type(set.get()), H5Tclose);
  KSWEEP_REQUIRE(type.valid(),
                 "cannot get the type of dataset '" << name << "' in " << shown_path(path) << hdf5_detail());
  H5T_class_t const cls = H5Tget_class(type.get());
  KSWEEP_REQUIRE(cls == H5T_FLOAT || cls == H5T_INTEGER, "dataset '"
                                                             << name << "' in " << shown_path(path)
                                                             << " is not numeric (expected float or integer elements)");
  Handle space(H5Dget_space(set.get()), H5Sclose);
  KSWEEP_REQUIRE(space.valid(),
                 "cannot get the dataspace of dataset '" << name << "' in " << shown_path(path) << hdf5_detail());
  int const got_rank = H5Sget_simple_extent_ndims(space.get());
  if (rank == 0) {  // a model: 2D or 3D
    KSWEEP_REQUIRE(got_rank == 2 || got_rank == 3, "dataset '" << name << "' in " << shown_path(path) << " has rank "
                                                               << got_rank
                                                               << ", expected 2 ([nz][nx]) or 3 ([nz][ny][nx])");
    rank = got_rank;
  }
  KSWEEP_REQUIRE(got_rank == rank, "dataset '" << name << "' in " << shown_path(path) << " has rank " << got_rank
                                               << ", expected " << rank);
  dims.assign(static_cast<std::size_t>(rank), 0);
  KSWEEP_REQUIRE(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) == rank,
                 "cannot get the dimensions of dataset '" << name << "' in " << shown_path(path) << hdf5_detail());
  hsize_t count = 1;
  for (auto d : dims) {
    KSWEEP_REQUIRE(d <= static_cast<hsize_t>(std::numeric_limits<int>::max()),
                   "dataset '" << name << "' in " << shown_path(path) << " has a dimension of " << d
                               << ", more than the limit " << std::numeric_limits<int>::max());
    count *= d;
  }
  if (!read_values) return {};
  std::vector<T> out(static_cast<std::size_t>(count));
  if (count > 0) {
    KSWEEP_REQUIRE(H5Dread(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
                   "cannot read dataset '" << name << "' from " << shown_path(path) << hdf5_detail());
  }
  return out;
}

void read_attribute(hid_t file, fs::path const& path, char const* name, hid_t mem_type, void* value) {
  htri_t const exists = H5Aexists(file, name);
  KSWEEP_REQUIRE(exists > 0, "HDF5 file " << shown_path(path) << " has no attribute '" << name << "'" << hdf5_detail());
  Handle attr(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  KSWEEP_REQUIRE(attr.valid(), "cannot open attribute '" << name << "' in " << shown_path(path) << hdf5_detail());
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  KSWEEP_REQUIRE(space.valid(),
                 "cannot get the dataspace of attribute '" << name << "' in " << shown_path(path) << hdf5_detail());
  hssize_t const n = H5Sget_simple_extent_npoints(space.get());
  KSWEEP_REQUIRE(
      n == 1, "attribute '" << name << "' in " << shown_path(path) << " has " << n << " elements, expected a scalar");
  KSWEEP_REQUIRE(H5Aread(attr.get(), mem_type, value) >= 0,
                 "cannot read attribute '" << name << "' from " << shown_path(path) << " as a number" << hdf5_detail());
}

double read_double(hid_t file, fs::path const& path, char const* name) {
  double v = 0;
  read_attribute(file, path, name, H5T_NATIVE_DOUBLE, &v);
  return v;
}

int read_int(hid_t file, fs::path const& path, char const* name) {
  int v = 0;
  read_attribute(file, path, name, H5T_NATIVE_INT, &v);
  return v;
}

std::vector<int> read_ints(hid_t file, fs::path const& path, char const* name, std::size_t expected, char const* what) {
  std::vector<hsize_t> dims;
  auto v = read_dataset<int>(file, path, name, 1, H5T_NATIVE_INT, dims);
  KSWEEP_REQUIRE(v.size() == expected, "dataset '" << name << "' in " << shown_path(path) << " has " << v.size()
                                                   << " elements, expected " << expected << " (" << what << ")");
  return v;
}

void check_size(char const* what, std::size_t got, std::size_t expected, fs::path const& path) {
  KSWEEP_REQUIRE(got == expected, what << " has " << got << " elements, expected " << expected << " (writing "
                                       << shown_path(path) << ")");
}

}  // namespace

void write_records(fs::path const& path, RecordsFile const& r) {
  KSWEEP_REQUIRE(r.shots >= 1 && r.nt >= 1 && r.receivers >= 1,
                 "records for " << shown_path(path) << " have shots = " << r.shots << ", nt = " << r.nt
                                << ", receivers = " << r.receivers << "; all must be >= 1");
  std::size_t const n =
      static_cast<std::size_t>(r.shots) * static_cast<std::size_t>(r.nt) * static_cast<std::size_t>(r.receivers);
  check_size("records data", r.data.size(), n, path);
  check_size("src_pos", r.src_pos.size(), static_cast<std::size_t>(r.shots), path);
  check_size("rec_pos", r.rec_pos.size(), static_cast<std::size_t>(r.shots) * r.receivers, path);
  check_size("rec_count", r.rec_count.size(), static_cast<std::size_t>(r.shots), path);
  auto flat = [](std::vector<Position> const& p) {
    std::vector<double> out;
    for (auto const& q : p) out.insert(out.end(), {q.z, q.x, q.y});
    return out;
  };
  std::vector<double> const src = flat(r.src_pos), rec = flat(r.rec_pos);
  // Cell datasets of a shared spread on grid nodes (the layout of files without the metres).
  bool const cells = r.shared_spread() && r.on_grid();
  auto cell = [&](std::vector<Position> const& p, std::size_t n_points, double Position::*axis) {
    std::vector<int> out;
    for (std::size_t i = 0; i < n_points; ++i) out.push_back(static_cast<int>(node_index(p[i].*axis, r.dh)));
    return out;
  };
  std::size_t const ns = static_cast<std::size_t>(r.shots), nr = static_cast<std::size_t>(r.receivers);
  write_atomic(path, [&](hid_t file, fs::path const& where) {
    write_dataset<3>(file, where, "data", {to_hsize(r.shots), to_hsize(r.nt), to_hsize(r.receivers)}, H5T_IEEE_F32LE,
                     H5T_NATIVE_FLOAT, r.data.data());
    write_dataset<2>(file, where, "src_pos", {to_hsize(r.shots), 3}, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, src.data());
    write_dataset<3>(file, where, "rec_pos", {to_hsize(r.shots), to_hsize(r.receivers), 3}, H5T_IEEE_F64LE,
                     H5T_NATIVE_DOUBLE, rec.data());
    write_dataset<1>(file, where, "rec_count", {to_hsize(r.shots)}, H5T_STD_I32LE, H5T_NATIVE_INT, r.rec_count.data());
    if (cells) {
      auto put = [&](char const* name, std::vector<Position> const& p, std::size_t count, double Position::*axis) {
        auto const v = cell(p, count, axis);
        write_dataset<1>(file, where, name, {static_cast<hsize_t>(count)}, H5T_STD_I32LE, H5T_NATIVE_INT, v.data());
      };
      put("src_z", r.src_pos, ns, &Position::z);
      put("src_x", r.src_pos, ns, &Position::x);
      put("rec_z", r.rec_pos, nr, &Position::z);
      put("rec_x", r.rec_pos, nr, &Position::x);
      if (r.ny > 0) {
        put("src_y", r.src_pos, ns, &Position::y);
        put("rec_y", r.rec_pos, nr, &Position::y);
      }
    }
    write_double(file, where, "dt", r.dt);
    write_double(file, where, "dh", r.dh);
    write_int(file, where, "order", r.order);
    write_double(file, where, "freq", r.freq);
    write_double(file, where, "delay", r.delay);
    write_int(file, where, "nz", r.nz);
    write_int(file, where, "nx", r.nx);
    if (r.ny > 0) write_int(file, where, "ny", r.ny);
  });
}

RecordsFile read_records(fs::path const& path, bool values) {
  Handle file = open_for_reading(path);
  RecordsFile r;
  std::vector<hsize_t> dims;
  r.data = read_dataset<float>(file.get(), path, "data", 3, H5T_NATIVE_FLOAT, dims, values);
  r.shots = static_cast<int>(dims[0]);
  r.nt = static_cast<int>(dims[1]);
  r.receivers = static_cast<int>(dims[2]);
  r.dt = read_double(file.get(), path, "dt");
  r.dh = read_double(file.get(), path, "dh");
  r.order = read_int(file.get(), path, "order");
  r.freq = read_double(file.get(), path, "freq");
  r.delay = read_double(file.get(), path, "delay");
  r.nz = read_int(file.get(), path, "nz");
  r.nx = read_int(file.get(), path, "nx");
  if (H5Aexists(file.get(), "ny") > 0) r.ny = read_int(file.get(), path, "ny");
  std::size_t const ns = dims[0], nr = dims[2];
  if (H5Lexists(file.get(), "rec_pos", H5P_DEFAULT) > 0) {
    std::vector<hsize_t> d;
    auto const src = read_dataset<double>(file.get(), path, "src_pos", 2, H5T_NATIVE_DOUBLE, d);
    KSWEEP_REQUIRE(d[0] == ns && d[1] == 3, "dataset 'src_pos' in " << shown_path(path) << " is [" << d[0] << "]["
                                                                    << d[1] << "], expected [" << ns
                                                                    << "][3] (z, x, y of each shot's source)");
    auto const rec = read_dataset<double>(file.get(), path, "rec_pos", 3, H5T_NATIVE_DOUBLE, d);
    KSWEEP_REQUIRE(d[0] == ns && d[1] == nr && d[2] == 3,
                   "dataset 'rec_pos' in " << shown_path(path) << " is [" << d[0] << "][" << d[1] << "][" << d[2]
                                           << "], expected [" << ns << "][" << nr << "][3]");
    for (std::size_t i = 0; i < ns; ++i) r.src_pos.push_back({src[3 * i], src[3 * i + 1], src[3 * i + 2]});
    for (std::size_t i = 0; i < ns * nr; ++i) r.rec_pos.push_back({rec[3 * i], rec[3 * i + 1], rec[3 * i + 2]});
    r.rec_count = read_ints(file.get(), path, "rec_count", ns, "one per shot");
    for (std::size_t s = 0; s < ns; ++s)
      KSWEEP_REQUIRE(r.rec_count[s] >= 1 && r.rec_count[s] <= r.receivers,
                     "dataset 'rec_count' in " << shown_path(path) << " gives shot " << s << " " << r.rec_count[s]
                                               << " receivers: it must be in [1, " << r.receivers << "]");
    for (auto const* list : {&r.src_pos, &r.rec_pos})
      for (auto const& p : *list)
        KSWEEP_REQUIRE(std::isfinite(p.z) && std::isfinite(p.x) && std::isfinite(p.y),
                       "records file " << shown_path(path) << " holds a non-finite position (" << p.z << ", " << p.x
                                       << ", " << p.y << ") m");
    // The cell datasets of a shared spread, where the file has them too, must say what the
    // positions in metres say (an edited file whose two descriptions disagree is refused).
    if (H5Lexists(file.get(), "src_x", H5P_DEFAULT) > 0) {
      KSWEEP_REQUIRE(std::isfinite(r.dh) && r.dh > 0,
                     "records file " << shown_path(path) << " has dh = " << r.dh << ": it must be > 0");
      bool const three = r.ny > 0;
      std::vector<int> const zero_s(ns, 0), zero_r(nr, 0);
      auto const sz = read_ints(file.get(), path, "src_z", ns, "one per shot");
      auto const sx = read_ints(file.get(), path, "src_x", ns, "one per shot");
      auto const sy = three ? read_ints(file.get(), path, "src_y", ns, "one per shot") : zero_s;
      auto const rz = read_ints(file.get(), path, "rec_z", nr, "one per receiver");
      auto const rx = read_ints(file.get(), path, "rec_x", nr, "one per receiver");
      auto const ry = three ? read_ints(file.get(), path, "rec_y", nr, "one per receiver") : zero_r;
      auto const same = [&](Position const& p, int z, int x, int y) {
        auto const near = [&](double m, int c) { return std::abs(m - c * r.dh) <= 1e-6 * r.dh; };
        return near(p.z, z) && near(p.x, x) && near(p.y, y);
      };
      for (std::size_t s = 0; s < ns; ++s) {
        auto const& p = r.src_pos[s];
        KSWEEP_REQUIRE(same(p, sz[s], sx[s], sy[s]),
                       "records file " << shown_path(path) << " places shot " << s << "'s source at (" << p.z << ", "
                                       << p.x << ", " << p.y << ") m in 'src_pos' but at cell (" << sz[s] << ", "
                                       << sx[s] << ", " << sy[s] << ") x dh = " << r.dh
                                       << " m in its cell datasets: the two descriptions of the survey disagree");
        for (std::size_t i = 0; i < static_cast<std::size_t>(r.rec_count[s]); ++i) {
          auto const& q = r.rec_pos[s * nr + i];
          KSWEEP_REQUIRE(same(q, rz[i], rx[i], ry[i]),
                         "records file " << shown_path(path) << " places shot " << s << "'s receiver " << i << " at ("
                                         << q.z << ", " << q.x << ", " << q.y << ") m in 'rec_pos' but at cell ("
                                         << rz[i] << ", " << rx[i] << ", " << ry[i] << ") x dh = " << r.dh
                                         << " m in its cell datasets: the two descriptions of the survey disagree");
        }
      }
    }
  } else {  // cells of one shared spread
    auto const sz = read_ints(file.get(), path, "src_z", ns, "one per shot");
    auto const sx = read_ints(file.get(), path, "src_x", ns, "one per shot");
    auto const rz = read_ints(file.get(), path, "rec_z", nr, "one per receiver");
    auto const rx = read_ints(file.get(), path, "rec_x", nr, "one per receiver");
    std::vector<int> sy(ns, 0), ry(nr, 0);
    if (r.ny > 0) {
      sy = read_ints(file.get(), path, "src_y", ns, "one per shot");
      ry = read_ints(file.get(), path, "rec_y", nr, "one per receiver");
    }
    for (std::size_t s = 0; s < ns; ++s) {
      r.src_pos.push_back({sz[s] * r.dh, sx[s] * r.dh, sy[s] * r.dh});
      for (std::size_t i = 0; i < nr; ++i) r.rec_pos.push_back({rz[i] * r.dh, rx[i] * r.dh, ry[i] * r.dh});
    }
    r.rec_count.assign(ns, r.receivers);
  }
  KSWEEP_REQUIRE(std::isfinite(r.dt) && r.dt > 0,
                 "records file " << shown_path(path) << " has dt = " << r.dt << ": it must be > 0");
  for (std::size_t i = 0; i < r.data.size(); ++i) {
    if (std::isfinite(r.data[i])) continue;
    std::size_t const per_shot = static_cast<std::size_t>(r.nt) * r.receivers;
    std::size_t const shot = i / per_shot, t = (i % per_shot) / r.receivers, rec = i % r.receivers;
    std::size_t bad = 0;
    for (float x : r.data) bad += std::isfinite(x) ? 0 : 1;
    KSWEEP_REQUIRE(false, "records file " << shown_path(path) << " holds a non-finite sample (" << r.data[i]
                                          << ") at shot " << shot << ", time sample " << t << " (" << t * r.dt
                                          << " s), receiver " << rec << " (" << bad << " non-finite samples in all); "
                                          << "the data cannot be inverted: remove or repair those traces");
  }
  return r;
}

void write_model(fs::path const& path, std::vector<float> const& vp, int nz, int nx, double dh,
                 std::string const& dataset, int ny) {
  KSWEEP_REQUIRE(nz >= 1 && nx >= 1 && ny >= 0, "model for " << shown_path(path) << " has nz = " << nz
                                                             << ", nx = " << nx << ", ny = " << ny
                                                             << "; nz and nx must be >= 1, ny >= 0 (0: 2D)");
  check_size("model", vp.size(),
             static_cast<std::size_t>(nz) * static_cast<std::size_t>(ny > 0 ? ny : 1) * static_cast<std::size_t>(nx),
             path);
  write_atomic(path, [&](hid_t file, fs::path const& where) {
    if (ny > 0)
      write_dataset<3>(file, where, dataset, {to_hsize(nz), to_hsize(ny), to_hsize(nx)}, H5T_IEEE_F32LE,
                       H5T_NATIVE_FLOAT, vp.data());
    else
      write_dataset<2>(file, where, dataset, {to_hsize(nz), to_hsize(nx)}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, vp.data());
    write_double(file, where, "dh", dh);
  });
}

namespace {
VelocityModel read_model_file(fs::path const& path, bool values, std::string const& dataset) {
  Handle file = open_for_reading(path);
  VelocityModel m;
  std::vector<hsize_t> dims;
  m.vp = read_dataset<float>(file.get(), path, dataset.c_str(), 0, H5T_NATIVE_FLOAT, dims, values);
  for (std::size_t a = 0; a < dims.size(); ++a)
    KSWEEP_REQUIRE(dims[a] >= 1, "dataset '" << dataset << "' in " << shown_path(path) << " is empty: its dimension "
                                             << a << " has " << dims[a] << " cells (shape [" << dims[0]
                                             << (dims.size() == 3 ? ", " + std::to_string(dims[1]) : "") << ", "
                                             << dims.back() << "]); a model needs at least 1 cell "
                                             << "along each axis");
  m.nz = static_cast<int>(dims[0]);
  m.nx = static_cast<int>(dims.back());
  if (dims.size() == 3) m.ny = static_cast<int>(dims[1]);
  m.dh = read_double(file.get(), path, "dh");
  m.description = path.string();
  return m;
}
}  // namespace

VelocityModel read_model(fs::path const& path, std::string const& dataset) {
  return read_model_file(path, true, dataset);
}

VelocityModel read_model_shape(fs::path const& path, std::string const& dataset) {
  return read_model_file(path, false, dataset);
}

void write_datasets(fs::path const& path, std::vector<Dataset> const& datasets, double dh) {
  for (auto const& d : datasets) {
    KSWEEP_REQUIRE(!d.name.empty(), "a dataset for " << shown_path(path) << " has an empty name");
    KSWEEP_REQUIRE(d.n0 >= 1 && d.n1 >= 1, "dataset '" << d.name << "' for " << shown_path(path) << " has n0 = " << d.n0
                                                       << ", n1 = " << d.n1 << "; both must be >= 1");
    check_size(
        ("dataset '" + d.name + "'").c_str(), d.data.size(),
        static_cast<std::size_t>(d.n0) * static_cast<std::size_t>(d.n1) * static_cast<std::size_t>(d.n2 > 0 ? d.n2 : 1),
        path);
  }
  write_atomic(path, [&](hid_t file, fs::path const& where) {
    for (auto const& d : datasets) {
      if (d.n2 > 0)
        write_dataset<3>(file, where, d.name, {to_hsize(d.n0), to_hsize(d.n1), to_hsize(d.n2)}, H5T_IEEE_F32LE,
                         H5T_NATIVE_FLOAT, d.data.data());
      else
        write_dataset<2>(file, where, d.name, {to_hsize(d.n0), to_hsize(d.n1)}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                         d.data.data());
    }
    write_double(file, where, "dh", dh);
  });
}

void write_wavelets(fs::path const& path, std::vector<NamedTrace> const& traces, double dt) {
  KSWEEP_REQUIRE(!traces.empty() && dt > 0 && std::isfinite(dt),
                 "cannot write " << shown_path(path) << ": " << traces.size() << " traces of dt = " << dt << " s");
  for (auto const& t : traces)
    KSWEEP_REQUIRE(!t.name.empty() && !t.samples.empty() && t.samples.size() == traces[0].samples.size() &&
                       t.samples.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                   "cannot write " << shown_path(path) << ": trace '" << t.name << "' has " << t.samples.size()
                                   << " samples, the first " << traces[0].samples.size());
  write_atomic(path, [&](hid_t file, fs::path const& where) {
    for (auto const& t : traces)
      write_dataset<1>(file, where, t.name, {static_cast<hsize_t>(t.samples.size())}, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                       t.samples.data());
    write_double(file, where, "dt", dt);
  });
}

std::vector<double> read_wavelet_h5(fs::path const& path, double& dt) {
  Handle file = open_for_reading(path);
  std::vector<hsize_t> dims;
  auto w = read_dataset<double>(file.get(), path, "wavelet", 1, H5T_NATIVE_DOUBLE, dims);
  dt = read_double(file.get(), path, "dt");
  return w;
}

#else

namespace {
[[noreturn]] void no_hdf5(std::filesystem::path const& path) {
  throw Error("cannot access " + path.string() +
              ": ksweep was built without HDF5 (configure with -DKSWEEP_ENABLE_HDF5=ON)");
}
}  // namespace

void write_records(std::filesystem::path const& path, RecordsFile const&) { no_hdf5(path); }
RecordsFile read_records(std::filesystem::path const& path, bool) { no_hdf5(path); }
void write_model(std::filesystem::path const& path, std::vector<float> const&, int, int, double, std::string const&,
                 int) {
  no_hdf5(path);
}
VelocityModel read_model(std::filesystem::path const& path, std::string const&) { no_hdf5(path); }
VelocityModel read_model_shape(std::filesystem::path const& path, std::string const&) { no_hdf5(path); }
void write_datasets(std::filesystem::path const& path, std::vector<Dataset> const&, double) { no_hdf5(path); }
void write_wavelets(std::filesystem::path const& path, std::vector<NamedTrace> const&, double) { no_hdf5(path); }
std::vector<double> read_wavelet_h5(std::filesystem::path const& path, double&) { no_hdf5(path); }

#endif

Dataset model_dataset(VelocityModel const& shape, std::string name, std::vector<float> data) {
  return shape.ny > 0 ? Dataset{std::move(name), shape.nz, shape.ny, std::move(data), shape.nx}
                      : Dataset{std::move(name), shape.nz, shape.nx, std::move(data)};
}

void write_models(std::filesystem::path const& path, VelocityModel const& shape, std::vector<std::string> const& names,
                  std::vector<std::vector<float>> const& fields) {
  KSWEEP_REQUIRE(names.size() == fields.size() && !fields.empty(),
                 "write_models: " << fields.size() << " field(s) named by " << names.size() << " name(s)");
  if (fields.size() == 1 && names[0] == "vp") {
    write_model(path, fields[0], shape.nz, shape.nx, shape.dh, "vp", shape.ny);
    return;
  }
  std::vector<Dataset> sets;
  for (std::size_t p = 0; p < fields.size(); ++p) sets.push_back(model_dataset(shape, names[p], fields[p]));
  write_datasets(path, sets, shape.dh);
}

}  // namespace ksweep::io
