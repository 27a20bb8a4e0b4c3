#pragma once
/// \file codec.hpp
/// Lossy encodings of the saved boundary ring, on integer bit patterns so that they run on
/// every backend and every Kokkos version.
///
/// Values are coded in blocks of 256 consecutive cells:
///  - fp32: the compute precision, unchanged (no scale);
///  - fp16: IEEE binary16 of v / s with one fp32 scale s = max |v| per block, so small values
///          are not flushed to zero;
///  - bf16: bfloat16 of v (round to nearest even), no scale;
///  - int8: q = rne(127 v / s) in [-127, 127] with one fp32 scale s = max |v| per block.
/// NaN and infinity cannot be encoded: the encoder flags them.

#include <ksweep/base/error.hpp>
#include <ksweep/base/math.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <string>

namespace ksweep::storage {

enum class Dtype { fp32, fp16, bf16, int8 };

/// Cells per scale block.
inline constexpr int block_size = 256;

Dtype parse_dtype(std::string const& name);
std::string to_string(Dtype d);

/// Whether a dtype carries one fp32 scale per block.
constexpr bool has_scale(Dtype d) { return d == Dtype::fp16 || d == Dtype::int8; }

/// Bytes of one encoded value (fp32 keeps the compute precision: `real_bytes`).
constexpr std::size_t value_bytes(Dtype d, std::size_t real_bytes) {
  return d == Dtype::fp32 ? real_bytes : (d == Dtype::int8 ? 1 : 2);
}

/// Bytes to encode n values: codes, then (if any) the block scales, 8-byte aligned.
constexpr std::size_t encoded_bytes(Dtype d, std::size_t n, std::size_t real_bytes) {
  std::size_t const codes = (n * value_bytes(d, real_bytes) + 7) / 8 * 8;
  std::size_t const blocks = (n + block_size - 1) / block_size;
  return codes + (has_scale(d) ? (blocks * 4 + 7) / 8 * 8 : 0);
}

namespace impl {

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> IEEE binary16, round to nearest even, with subnormals; |f| beyond the half range
/// saturates to infinity (never happens for scaled values in [-1, 1]).
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_half(float f) {
  std::uint32_t const x = float_bits(f);
  std::uint32_t const sign = (x >> 16) & 0x8000u;
  std::uint32_t const mag = x & 0x7fffffffu;
  if (mag >= 0x47800000u) {  // >= 65536: overflow (or inf/nan)
    return static_cast<std::uint16_t>(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (mag < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (mag < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to 0
    std::uint32_t const e = mag >> 23;
    std::uint32_t const m = (mag & 0x7fffffu) | 0x800000u;
    std::uint32_t const shift = 126u - e;  // 14 - (e - 127) + 13 - 1 ... bits to drop (14..24)
    std::uint32_t const half_m = m >> shift;
    std::uint32_t const rem = m & ((1u << shift) - 1u);
    std::uint32_t const halfway = 1u << (shift - 1u);
    std::uint32_t r = half_m + ((rem > halfway || (rem == halfway && (half_m & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t h = ((mag - 0x38000000u) >> 13);
  std::uint32_t const rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

KOKKOS_INLINE_FUNCTION float half_to_float(std::uint16_t h) {
  std::uint32_t const sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  std::uint32_t const e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    // subnormal: m * 2^-24
    float const v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// float -> bfloat16, round to nearest even (NaN stays NaN).
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_bf16(float f) {
  std::uint32_t const x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  std::uint32_t const rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}
KOKKOS_INLINE_FUNCTION float bf16_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

/// Round to nearest, ties to even (a single instruction where the ISA has one, so the encode
/// loops vectorise).
KOKKOS_INLINE_FUNCTION float rne(float x) { return math::nearbyint(x); }

KOKKOS_INLINE_FUNCTION bool finite(float v) { return (float_bits(v) & 0x7f800000u) != 0x7f800000u; }
KOKKOS_INLINE_FUNCTION bool finite(double v) { return v - v == 0.0; }

}  // namespace impl

/// Value sources and sinks of the codecs: a plain view, or a ring of cells gathered from (or
/// scattered into) each shot's wavefield, value s * n + i <-> field(s)[offset[i]].
template <class Real, class MemorySpace>
struct ViewValues {
  Kokkos::View<Real*, MemorySpace> m_v;
  KOKKOS_INLINE_FUNCTION Real& operator()(std::size_t i) const { return m_v(i); }
};
/// Division by a fixed n >= 1 of 0 <= v < 2^31 as a multiply and a shift:
/// q = (v m) >> (31 + l) with l = ceil(log2 n) and m = ceil(2^(31+l) / n) is exact, because
/// the error term v (m n - 2^(31+l)) / (n 2^(31+l)) stays below 2^-l <= 1/n.
struct FastDivisor {
  std::uint64_t m_magic = std::uint64_t(1) << 31;
  int m_shift = 31;
  int m_n = 1;
  FastDivisor() = default;
  explicit FastDivisor(int n) : m_n(n) {
    KSWEEP_REQUIRE(n >= 1, "ksweep::storage::FastDivisor: divisor " << n << " must be >= 1");
    int l = 0;
    while ((std::int64_t(1) << l) < n) ++l;
    m_shift = 31 + l;
    m_magic = ((std::uint64_t(1) << m_shift) + static_cast<std::uint64_t>(n) - 1) / static_cast<std::uint64_t>(n);
  }
  KOKKOS_INLINE_FUNCTION int divide(int v) const {
    return static_cast<int>((static_cast<std::uint64_t>(v) * m_magic) >> m_shift);
  }
};

/// The ring of each shot is `stride` values: `cells` cells of the field, then padding (zeros
/// read from and written to `pad`, [shot][stride - cells]) so that a codec block of 256 values
/// never holds values of two shots: a shot's encoding then does not depend on its neighbours
/// in the batch.
template <class Real, class MemorySpace>
struct RingValues {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_field;  // [shot][NZ + 2M][NX + 2M]
  Kokkos::View<int const*, MemorySpace> m_offset;                     // [cells]
  FastDivisor m_n;                                                    // n: values per shot (stride)
  Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace> m_pad;       // [shot][stride - cells]
  int m_cells;
  KOKKOS_INLINE_FUNCTION Real& operator()(std::size_t i) const {
    int const v = static_cast<int>(i);  // shots x stride < 2^31 (checked by the owner)
    int const s = m_n.divide(v), k = v - s * m_n.m_n;
    if (k >= m_cells) return m_pad(s, k - m_cells);
    return m_field.data()[static_cast<std::size_t>(s) * m_field.stride(0) + static_cast<std::size_t>(m_offset(k))];
  }
};

/// Writes zeros through a value sink (index 0 .. n-1).
template <class Sink>
struct ZeroValues {
  Sink m_sink;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const { m_sink(i) = 0; }
};

/// Encodes n values of `in` into `out` (bytes) block by block; sets bad() = 1 on NaN or
/// infinity. Devices run one team per block (a thread per value, a team reduction for the
/// block scale); host backends one index per block with plain loops, which vectorise.
template <class Real, class MemorySpace, class Source = ViewValues<Real const, MemorySpace>>
struct EncodeBlocks {
  Source m_in;
  Kokkos::View<std::uint8_t*, MemorySpace> m_out;
  Kokkos::View<int, MemorySpace> m_bad;
  std::size_t m_n;
  Dtype m_dtype;

  // Block b, with the loops supplied by the launch shape: for_each(len, f(k)), max_of(len,
  // f(k, m)) -> the maximum, once(f) runs f on one thread.
  template <class ForEach, class MaxOf, class Once>
  KOKKOS_INLINE_FUNCTION void block(std::size_t b, ForEach const& for_each, MaxOf const& max_of, Once const& once) const {
    std::size_t const i0 = b * block_size;
    int const len = static_cast<int>((i0 + block_size < m_n ? i0 + block_size : m_n) - i0);
    std::uint8_t* base = m_out.data();
    auto const& in = m_in;
    auto const& bad = m_bad;
    if (m_dtype == Dtype::fp32) {
      Real* codes = reinterpret_cast<Real*>(base) + i0;
      for_each(len, [&](int k) {
        Real const v = in(i0 + k);
        if (!impl::finite(v)) bad() = 1;
        codes[k] = v;
      });
      return;
    }
    if (m_dtype == Dtype::bf16) {
      std::uint16_t* codes = reinterpret_cast<std::uint16_t*>(base) + i0;
      for_each(len, [&](int k) {
        float const v = static_cast<float>(in(i0 + k));
        if (!impl::finite(v)) bad() = 1;
        codes[k] = impl::float_to_bf16(v);
      });
      return;
    }
    float const amax = max_of(len, [&](int k, float& m) {
      float const v = static_cast<float>(in(i0 + k));
      if (!impl::finite(v)) bad() = 1;
      float const a = v < 0 ? -v : v;
      m = a > m ? a : m;
    });
    std::size_t const code_bytes = (m_n * value_bytes(m_dtype, sizeof(Real)) + 7) / 8 * 8;
    float* scales = reinterpret_cast<float*>(base + code_bytes);
    once([&]() { scales[b] = amax; });
    // Divide rather than multiply by 1 / amax: for a subnormal amax the reciprocal overflows.
    float const den = amax > 0.0f && impl::finite(amax) ? amax : 1.0f;
    if (m_dtype == Dtype::fp16) {
      std::uint16_t* codes = reinterpret_cast<std::uint16_t*>(base) + i0;
      for_each(len, [&](int k) { codes[k] = impl::float_to_half(static_cast<float>(in(i0 + k)) / den); });
    } else {
      std::int8_t* codes = reinterpret_cast<std::int8_t*>(base) + i0;
      for_each(len, [&](int k) {
        float q = impl::rne(static_cast<float>(in(i0 + k)) / den * 127.0f);
        q = q > 127.0f ? 127.0f : q;
        q = q >= -127.0f ? q : -127.0f;  // also NaN (flagged above), so the cast is defined
        codes[k] = static_cast<std::int8_t>(q);
      });
    }
  }

  // Devices: one team per block.
  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(Member const& team) const {
    block(
        static_cast<std::size_t>(team.league_rank()),
        [&](int len, auto const& f) { Kokkos::parallel_for(Kokkos::TeamThreadRange(team, len), f); },
        [&](int len, auto const& f) {
          float m = 0.0f;
          Kokkos::parallel_reduce(Kokkos::TeamThreadRange(team, len), f, Kokkos::Max<float>(m));
          return m;
        },
        [&](auto const& f) { Kokkos::single(Kokkos::PerTeam(team), f); });
  }

  // Hosts: one index per block.
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t b) const {
    block(
        b,
        [](int len, auto const& f) {
          for (int k = 0; k < len; ++k) f(k);
        },
        [](int len, auto const& f) {
          float m = 0.0f;
          for (int k = 0; k < len; ++k) f(k, m);
          return m;
        },
        [](auto const& f) { f(); });
  }
};

/// Decodes n values from `in` (bytes) into `out`, one value per index.
template <class Real, class MemorySpace, class Sink = ViewValues<Real, MemorySpace>>
struct DecodeValues {
  Kokkos::View<std::uint8_t const*, MemorySpace> m_in;
  Sink m_out;
  std::size_t m_n;
  Dtype m_dtype;

  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    std::uint8_t const* base = m_in.data();
    switch (m_dtype) {
      case Dtype::fp32: m_out(i) = reinterpret_cast<Real const*>(base)[i]; return;
      case Dtype::bf16: m_out(i) = static_cast<Real>(impl::bf16_to_float(reinterpret_cast<std::uint16_t const*>(base)[i])); return;
      default: break;
    }
    std::size_t const code_bytes = (m_n * value_bytes(m_dtype, sizeof(Real)) + 7) / 8 * 8;
    float const scale = reinterpret_cast<float const*>(base + code_bytes)[i / block_size];
    if (m_dtype == Dtype::fp16) {
      m_out(i) = static_cast<Real>(impl::half_to_float(reinterpret_cast<std::uint16_t const*>(base)[i]) * scale);
    } else {
      m_out(i) = static_cast<Real>(static_cast<float>(reinterpret_cast<std::int8_t const*>(base)[i]) * (scale / 127.0f));
    }
  }
};

/// Encodes n values from `in` into `out` (encoded_bytes(dtype, n) bytes) on `space`. NaN or
/// infinity sets `bad()` to 1 (checked by the caller at a convenient synchronisation point).
template <class ExecSpace, class Real, class MemorySpace, class Source>
void encode_from(ExecSpace const& space, Dtype dtype, Source const& in, std::size_t n,
                 Kokkos::View<std::uint8_t*, MemorySpace> out, Kokkos::View<int, MemorySpace> bad) {
  int const blocks = static_cast<int>((n + block_size - 1) / block_size);
  if (blocks == 0) return;
  EncodeBlocks<Real, MemorySpace, Source> const f{in, out, bad, n, dtype};
  if constexpr (Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible) {
    Kokkos::parallel_for("ksweep::storage::encode", Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<std::size_t>(blocks)), f);
  } else {
    Kokkos::parallel_for("ksweep::storage::encode", Kokkos::TeamPolicy<ExecSpace>(space, blocks, block_size), f);
  }
}

/// Encodes `in` (n values) into `out` on `space`.
template <class ExecSpace, class Real, class MemorySpace>
void encode(ExecSpace const& space, Dtype dtype, Kokkos::View<Real const*, MemorySpace> in,
            Kokkos::View<std::uint8_t*, MemorySpace> out, Kokkos::View<int, MemorySpace> bad) {
  encode_from<ExecSpace, Real>(space, dtype, ViewValues<Real const, MemorySpace>{in}, in.extent(0), out, bad);
}

/// Decodes `in` into `out` (n values) on `space`.
template <class ExecSpace, class Real, class MemorySpace>
void decode(ExecSpace const& space, Dtype dtype, Kokkos::View<std::uint8_t const*, MemorySpace> in,
            Kokkos::View<Real*, MemorySpace> out) {
  std::size_t const n = out.extent(0);
  Kokkos::parallel_for("ksweep::storage::decode", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
                       DecodeValues<Real, MemorySpace>{in, ViewValues<Real, MemorySpace>{out}, n, dtype});
}

}  // namespace ksweep::storage
