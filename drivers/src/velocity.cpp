#include <ksweep/io/velocity.hpp>

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/io/hdf5_io.hpp>

#include <openssl/evp.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace ksweep::io {
namespace {

std::string const fetch_script = "share/marmousi/fetch_marmousi.py";

bool host_is_little_endian() {
  std::uint32_t const one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

std::vector<float> read_raw_f32(std::filesystem::path const& path, std::size_t count) {
  std::error_code ec;
  auto const bytes = std::filesystem::file_size(path, ec);
  KSWEEP_REQUIRE(!ec, "cannot stat velocity file " << path << ": " << ec.message());
  std::uintmax_t const expected = static_cast<std::uintmax_t>(count) * sizeof(float);
  KSWEEP_REQUIRE(bytes == expected, "velocity file " << path << " has " << bytes << " bytes, expected " << expected
                                                     << " (nz*nx*4 for float32)");
  std::vector<float> v(count);
  std::ifstream in(path, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "cannot open velocity file " << path);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(expected));
  KSWEEP_REQUIRE(in.gcount() == static_cast<std::streamsize>(expected),
                 "short read from " << path << ": got " << in.gcount() << " of " << expected << " bytes");
  if (!host_is_little_endian()) {
    for (auto& x : v) {
      std::uint32_t u = 0;
      std::memcpy(&u, &x, 4);
      u = (u >> 24) | ((u >> 8) & 0xff00u) | ((u << 8) & 0xff0000u) | (u << 24);
      std::memcpy(&x, &u, 4);
    }
  }
  return v;
}

void check_values(VelocityModel const& m, std::string const& what) {
  for (std::size_t i = 0; i < m.vp.size(); ++i) {
    float const v = m.vp[i];
    KSWEEP_REQUIRE(std::isfinite(v) && v > 0, "velocity model " << what << " has a bad value at (iz = " << i / m.nx
                                                                << ", ix = " << i % m.nx << "): " << v
                                                                << " (every value must be finite and > 0 m/s)");
  }
}

void check_declared_size(ModelSection const& s, VelocityModel const& m) {
  KSWEEP_REQUIRE(s.nz == 0 || s.nz == m.nz, "model.nz = " << s.nz << " does not match " << s.source << " (nz = " << m.nz
                                                          << "); leave it out or set it to " << m.nz);
  KSWEEP_REQUIRE(s.nx == 0 || s.nx == m.nx, "model.nx = " << s.nx << " does not match " << s.source << " (nx = " << m.nx
                                                          << "); leave it out or set it to " << m.nx);
  KSWEEP_REQUIRE(s.dh == 0 || std::abs(s.dh - m.dh) <= 1e-9 * m.dh,
                 "model.dh = " << s.dh << " does not match " << s.source << " (dh = " << m.dh
                               << "); leave it out or set it to " << m.dh);
}

VelocityModel load_named(NamedModel const& n) {
  auto const path = find_marmousi_file(n.file_name);
  std::error_code ec;
  auto const bytes = std::filesystem::file_size(path, ec);
  KSWEEP_REQUIRE(!ec && bytes == n.bytes, "Marmousi file " << path << " has " << (ec ? 0 : bytes) << " bytes, expected "
                                                           << n.bytes << "; re-run " << fetch_script);
  auto const hash = sha256_file(path);
  KSWEEP_REQUIRE(hash == n.sha256, "Marmousi file " << path << " has SHA-256 " << hash << ", expected " << n.sha256
                                                    << "; the file is corrupt or not the "
                                                       "expected model, re-run "
                                                    << fetch_script);
  VelocityModel m;
  m.nz = n.nz;
  m.nx = n.nx;
  m.dh = n.dh;
  m.vp = read_raw_f32(path, static_cast<std::size_t>(n.nz) * static_cast<std::size_t>(n.nx));
  m.description = n.name + " (" + path.string() + ")";
  return m;
}

void decimate(VelocityModel& m, int d) {
  if (d == 1) return;
  int const nz = (m.nz - 1) / d + 1;
  int const nx = (m.nx - 1) / d + 1;
  std::vector<float> out(static_cast<std::size_t>(nz) * static_cast<std::size_t>(nx));
  for (int iz = 0; iz < nz; ++iz) {
    for (int ix = 0; ix < nx; ++ix) {
      out[static_cast<std::size_t>(iz) * nx + ix] =
          m.vp[static_cast<std::size_t>(iz) * d * m.nx + static_cast<std::size_t>(ix) * d];
    }
  }
  m.nz = nz;
  m.nx = nx;
  m.dh *= d;
  m.vp = std::move(out);
}

void crop(VelocityModel& m, std::array<int, 2> z, std::array<int, 2> x) {
  KSWEEP_REQUIRE(z[0] >= 0 && z[0] < z[1] && z[1] <= m.nz,
                 "model.crop_z = [" << z[0] << ", " << z[1] << "] must satisfy 0 <= z0 < z1 <= nz = " << m.nz
                                    << " (cells after decimation)");
  KSWEEP_REQUIRE(x[0] >= 0 && x[0] < x[1] && x[1] <= m.nx,
                 "model.crop_x = [" << x[0] << ", " << x[1] << "] must satisfy 0 <= x0 < x1 <= nx = " << m.nx
                                    << " (cells after decimation)");
  int const nz = z[1] - z[0];
  int const nx = x[1] - x[0];
  std::vector<float> out(static_cast<std::size_t>(nz) * static_cast<std::size_t>(nx));
  for (int iz = 0; iz < nz; ++iz) {
    for (int ix = 0; ix < nx; ++ix) {
      out[static_cast<std::size_t>(iz) * nx + ix] =
          m.vp[static_cast<std::size_t>(iz + z[0]) * m.nx + static_cast<std::size_t>(ix + x[0])];
    }
  }
  m.nz = nz;
  m.nx = nx;
  m.vp = std::move(out);
}

std::string lower_extension(std::string const& source) {
  std::string ext = std::filesystem::path(source).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

std::vector<NamedModel> const& named_models() {
  static std::vector<NamedModel> const models{
      {"marmousi2", "marmousi2_vp_nz281_nx1361_dx12.5.f32", 281, 1361, 12.5,
       "1c9297cc881d1103ffb52abf452b25bf2b878e6d519edf963a20eca9e9077bee", 1529764},
      {"marmousi2_fine", "marmousi2_vp_nz561_nx2721_dx6.25.f32", 561, 2721, 6.25,
       "f1cf50d53005c6ed04c794d16c8c29401031653b5727b63694f144d863afb44a", 6105924},
      {"marmousi", "marmousi_vp_nz122_nx384_dx24.f32", 122, 384, 24.0,
       "5b0db7c3b494a647c5eac581a9e067de58ed0560709b2bcb3b552005cb6d26dd", 187392},
  };
  return models;
}

std::filesystem::path find_marmousi_file(std::string const& file_name) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (char const* env = std::getenv("KSWEEP_MARMOUSI_DIR"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
  }
  std::error_code ec;
  fs::path const cwd = fs::current_path(ec);
  if (!ec) dirs.push_back(cwd / ".." / "shared" / "marmousi");
  dirs.push_back(fs::path(KSWEEP_SOURCE_DIR) / ".." / "shared" / "marmousi");
  if (char const* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    dirs.push_back(fs::path(xdg) / "ksweep" / "marmousi");
  } else if (char const* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(fs::path(home) / ".cache" / "ksweep" / "marmousi");
  }

  std::ostringstream looked;
  for (auto const& dir : dirs) {
    fs::path const candidate = (dir / file_name).lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate;
    looked << "\n  " << candidate.string();
  }
  KSWEEP_REQUIRE(false, "velocity file '" << file_name << "' not found; looked in:" << looked.str()
                                          << "\nSet KSWEEP_MARMOUSI_DIR to the directory that "
                                             "holds it, or run /usr/bin/python3 "
                                          << fetch_script << " to download it into the per-user cache");
  return {};
}

std::string sha256_file(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "cannot open " << path << " to compute its SHA-256");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  KSWEEP_REQUIRE(ctx != nullptr, "OpenSSL EVP_MD_CTX_new failed while hashing " << path);
  KSWEEP_REQUIRE(EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1,
                 "OpenSSL EVP_DigestInit_ex(SHA-256) failed while hashing " << path);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    auto const got = in.gcount();
    if (got > 0) {
      KSWEEP_REQUIRE(EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(got)) == 1,
                     "OpenSSL EVP_DigestUpdate failed while hashing " << path);
    }
  }
  KSWEEP_REQUIRE(in.eof() && !in.bad(), "read error while hashing " << path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  KSWEEP_REQUIRE(EVP_DigestFinal_ex(ctx.get(), digest, &length) == 1,
                 "OpenSSL EVP_DigestFinal_ex failed while hashing " << path);
  static char const hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

VelocityModel load_velocity(ModelSection const& s) {
  KSWEEP_REQUIRE(s.decimate >= 1, "model.decimate = " << s.decimate << " must be >= 1");
  VelocityModel m;
  bool named = false;
  for (auto const& n : named_models()) {
    if (n.name == s.source) {
      m = load_named(n);
      named = true;
      break;
    }
  }
  if (!named) {
    std::string const ext = lower_extension(s.source);
    std::error_code ec;
    if (ext == ".h5" || ext == ".hdf5") {
      KSWEEP_REQUIRE(std::filesystem::is_regular_file(s.source, ec),
                     "model.source = \"" << s.source << "\": file not found");
      m = read_model(s.source);
    } else if (ext == ".f32" || ext == ".bin") {
      KSWEEP_REQUIRE(std::filesystem::is_regular_file(s.source, ec),
                     "model.source = \"" << s.source << "\": file not found");
      KSWEEP_REQUIRE(s.nz > 0 && s.nx > 0 && s.dh > 0, "model.source = \""
                                                           << s.source << "\" is a raw float32 file, so model.nz, "
                                                           << "model.nx and model.dh must all be > 0 (got nz = " << s.nz
                                                           << ", nx = " << s.nx << ", dh = " << s.dh << ")");
      m.nz = s.nz;
      m.nx = s.nx;
      m.dh = s.dh;
      m.vp = read_raw_f32(s.source, static_cast<std::size_t>(s.nz) * static_cast<std::size_t>(s.nx));
      m.description = s.source;
    } else {
      std::string names;
      for (auto const& n : named_models()) names += (names.empty() ? "" : ", ") + n.name;
      KSWEEP_REQUIRE(false, "model.source = \"" << s.source << "\" is neither a named model (" << names
                                                << ") nor a path ending in .f32, .bin, .h5 or "
                                                   ".hdf5");
    }
  }
  check_declared_size(s, m);
  KSWEEP_REQUIRE(m.dh > 0 && std::isfinite(m.dh),
                 "velocity model " << m.description << " has grid spacing dh = " << m.dh << ", must be finite and > 0");
  check_values(m, m.description);

  std::ostringstream desc;
  desc << m.description << ", " << m.nz << " x " << m.nx << " at " << m.dh << " m";
  decimate(m, s.decimate);
  if (s.decimate > 1) {
    desc << ", decimated by " << s.decimate << " to " << m.nz << " x " << m.nx << " at " << m.dh << " m";
  }
  if (s.crop_z || s.crop_x) {
    auto const z = s.crop_z.value_or(std::array<int, 2>{0, m.nz});
    auto const x = s.crop_x.value_or(std::array<int, 2>{0, m.nx});
    crop(m, z, x);
    desc << ", cropped to z [" << z[0] << ", " << z[1] << ") x [" << x[0] << ", " << x[1] << ") = " << m.nz << " x "
         << m.nx;
  }
  m.description = desc.str();
  return m;
}

}  // namespace ksweep::io
