#pragma once
/// \file codec.hpp
/// Lossy encodings of the saved boundary ring, on integer bit patterns so that they run on
/// every backend and every Kokkos version.
///
/// Values are coded in blocks of 64 consecutive values, one codec type per storage.dtype:
///  - Fp32Codec: the compute precision, unchanged (no scale);
///  - Fp16Codec: IEEE binary16 of v / s with one fp32 scale s = max |v| per block, so small
///               values are not flushed to zero;
///  - Bf16Codec: bfloat16 of v (round to nearest even), no scale;
///  - Int8Codec: q = rne(127 v / s) in [-127, 127] with one fp32 scale s = max |v| per block.
/// NaN and infinity cannot be encoded: the encoder flags them.
///
/// A codec is an empty type with static members (see Int8Codec):
///  - `dtype`: its Dtype value; `has_scale`: whether it keeps one fp32 scale per block;
///    `block_coupled`: whether the code of a value depends on the other values of its block (a
///    shared scale, or values coded together), so that a block must never mix two shots;
///  - `value_bytes(real_bytes)` and `encoded_bytes(n, real_bytes)`: its layout;
///  - `encode_block<Real>(in, span, loops, out, bad)`: block `span.b`, with the loops of the
///    launch shape (impl::TeamLoops on devices: a team per block; impl::SerialLoops on hosts),
///    so a codec with variable work per block uses `loops.once` or its own team loops;
///  - `decode_value<Real>(in, n, i)`: value i (a block codec decodes the part of its block that
///    holds i: decoding is one index per value, fused into the adjoint launch).
/// The kernels (EncodeBlocks, DecodeValues) are templates on the codec type, and the runtime
/// dtype is turned into a codec type once per launch by dispatch_dtype, as orders are by
/// core::dispatch_order: no kernel switches on the dtype.
///
/// A new codec (say a ZFP-like block codec) touches:
///  1. this file: its codec type, its `Dtype` value and its place in `Codecs` (static_asserts
///     check both against the registry);
///  2. core/base/include/ksweep/base/names.hpp: its name and one-line description in the
///     storage.dtype entry (the configuration check, parse_dtype, to_string and `ksweep info`
///     follow);
///  3. README.md: the dtype names of the `[storage]` row (the ksweep_names test fails until
///     they agree);
///  4. tests/tst_storage.hpp: its error bound.
/// The step stores, the gradient engine, the drivers and the memory estimate need no change.

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/base/math.hpp>
#include <ksweep/base/names.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

namespace ksweep::storage {

/// The storage.dtype values, in the order of names::dtype and of `Codecs`.
enum class Dtype { fp32, fp16, bf16, int8 };

/// Cells per block.
inline constexpr int block_size = 64;

/// The dtype named `name`; an error names the value and the allowed names.
inline Dtype parse_dtype(std::string const& name) { return names::parse<Dtype>(names::dtype, name); }
inline std::string to_string(Dtype d) { return names::to_string(names::dtype, d); }

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

KOKKOS_INLINE_FUNCTION constexpr std::size_t align8(std::size_t bytes) { return (bytes + 7) / 8 * 8; }

/// The loops of one block on a device: a team per block, a thread per value.
template <class Member>
struct TeamLoops {
  Member const& m_team;
  /// f(k) for k in [0, len).
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(int len, F const& f) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(m_team, len), f);
  }
  /// The maximum of m over f(k, m), k in [0, len), from m = 0.
  template <class F>
  KOKKOS_INLINE_FUNCTION float max_of(int len, F const& f) const {
    float m = 0.0f;
    Kokkos::parallel_reduce(Kokkos::TeamThreadRange(m_team, len), f, Kokkos::Max<float>(m));
    return m;
  }
  /// f() on one thread of the team.
  template <class F>
  KOKKOS_INLINE_FUNCTION void once(F const& f) const {
    Kokkos::single(Kokkos::PerTeam(m_team), f);
  }
};

/// The loops of one block on a host: one index per block, plain loops (which vectorise).
struct SerialLoops {
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(int len, F const& f) const {
    for (int k = 0; k < len; ++k) f(k);
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION float max_of(int len, F const& f) const {
    float m = 0.0f;
    for (int k = 0; k < len; ++k) f(k, m);
    return m;
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION void once(F const& f) const {
    f();
  }
};

}  // namespace impl

/// Block `b` of an encoding of `n` values: values i0 .. i0 + len - 1.
struct BlockSpan {
  std::size_t n, b, i0;
  int len;
};

namespace impl {

/// Layout of the codecs with one fp32 scale per block: the codes (8-byte aligned), then the
/// block scales (8-byte aligned).
template <std::size_t ValueBytes>
struct ScaledLayout {
  static constexpr bool has_scale = true;
  static constexpr bool block_coupled = true;
  static constexpr std::size_t value_bytes(std::size_t) { return ValueBytes; }
  KOKKOS_INLINE_FUNCTION static constexpr std::size_t code_bytes(std::size_t n) { return align8(n * ValueBytes); }
  static constexpr std::size_t encoded_bytes(std::size_t n, std::size_t) {
    return code_bytes(n) + align8((n + block_size - 1) / block_size * 4);
  }

  /// Writes the block scale s = max |v| (flagging NaN and infinity); returns the divisor of
  /// the values: s, or 1 for a zero or non-finite s. Dividing rather than multiplying by 1 / s:
  /// for a subnormal s the reciprocal overflows.
  template <class Source, class Loops>
  KOKKOS_INLINE_FUNCTION static float scale(Source const& in, BlockSpan const& s, Loops const& loops, std::uint8_t* out,
                                            int* bad) {
    float const amax = loops.max_of(s.len, [&](int k, float& m) {
      float const v = static_cast<float>(in(s.i0 + k));
      if (!finite(v)) *bad = 1;
      float const a = v < 0 ? -v : v;
      m = a > m ? a : m;
    });
    float* scales = reinterpret_cast<float*>(out + code_bytes(s.n));
    loops.once([&]() { scales[s.b] = amax; });
    return amax > 0.0f && finite(amax) ? amax : 1.0f;
  }
  KOKKOS_INLINE_FUNCTION static float scale_of(std::uint8_t const* in, std::size_t n, std::size_t i) {
    return reinterpret_cast<float const*>(in + code_bytes(n))[i / block_size];
  }
};

}  // namespace impl

/// fp32: the values in the compute precision, unchanged.
struct Fp32Codec {
  static constexpr Dtype dtype = Dtype::fp32;
  static constexpr bool has_scale = false;
  static constexpr bool block_coupled = false;
  static constexpr std::size_t value_bytes(std::size_t real_bytes) { return real_bytes; }
  static constexpr std::size_t encoded_bytes(std::size_t n, std::size_t real_bytes) {
    return impl::align8(n * real_bytes);
  }

  template <class Real, class Source, class Loops>
  KOKKOS_INLINE_FUNCTION static void encode_block(Source const& in, BlockSpan const& s, Loops const& loops,
                                                  std::uint8_t* out, int* bad) {
    Real* codes = reinterpret_cast<Real*>(out) + s.i0;
    loops.for_each(s.len, [&](int k) {
      Real const v = in(s.i0 + k);
      if (!impl::finite(v)) *bad = 1;
      codes[k] = v;
    });
  }
  template <class Real>
  KOKKOS_INLINE_FUNCTION static Real decode_value(std::uint8_t const* in, std::size_t, std::size_t i) {
    return reinterpret_cast<Real const*>(in)[i];
  }
};

/// fp16: IEEE binary16 of v / s, one fp32 scale s = max |v| per block.
struct Fp16Codec : impl::ScaledLayout<2> {
  static constexpr Dtype dtype = Dtype::fp16;

  template <class Real, class Source, class Loops>
  KOKKOS_INLINE_FUNCTION static void encode_block(Source const& in, BlockSpan const& s, Loops const& loops,
                                                  std::uint8_t* out, int* bad) {
    float const den = scale(in, s, loops, out, bad);
    std::uint16_t* codes = reinterpret_cast<std::uint16_t*>(out) + s.i0;
    loops.for_each(s.len, [&](int k) { codes[k] = impl::float_to_half(static_cast<float>(in(s.i0 + k)) / den); });
  }
  template <class Real>
  KOKKOS_INLINE_FUNCTION static Real decode_value(std::uint8_t const* in, std::size_t n, std::size_t i) {
    return static_cast<Real>(impl::half_to_float(reinterpret_cast<std::uint16_t const*>(in)[i]) * scale_of(in, n, i));
  }
};

/// bf16: bfloat16 of v, rounded to nearest even, no scale.
struct Bf16Codec {
  static constexpr Dtype dtype = Dtype::bf16;
  static constexpr bool has_scale = false;
  static constexpr bool block_coupled = false;
  static constexpr std::size_t value_bytes(std::size_t) { return 2; }
  static constexpr std::size_t encoded_bytes(std::size_t n, std::size_t) { return impl::align8(n * 2); }

  template <class Real, class Source, class Loops>
  KOKKOS_INLINE_FUNCTION static void encode_block(Source const& in, BlockSpan const& s, Loops const& loops,
                                                  std::uint8_t* out, int* bad) {
    std::uint16_t* codes = reinterpret_cast<std::uint16_t*>(out) + s.i0;
    loops.for_each(s.len, [&](int k) {
      float const v = static_cast<float>(in(s.i0 + k));
      if (!impl::finite(v)) *bad = 1;
      codes[k] = impl::float_to_bf16(v);
    });
  }
  template <class Real>
  KOKKOS_INLINE_FUNCTION static Real decode_value(std::uint8_t const* in, std::size_t, std::size_t i) {
    return static_cast<Real>(impl::bf16_to_float(reinterpret_cast<std::uint16_t const*>(in)[i]));
  }
};

/// int8: q = rne(127 v / s) in [-127, 127], one fp32 scale s = max |v| per block of 64 values.
struct Int8Codec : impl::ScaledLayout<1> {
  static constexpr Dtype dtype = Dtype::int8;

  template <class Real, class Source, class Loops>
  KOKKOS_INLINE_FUNCTION static void encode_block(Source const& in, BlockSpan const& s, Loops const& loops,
                                                  std::uint8_t* out, int* bad) {
    float const den = scale(in, s, loops, out, bad);
    std::int8_t* codes = reinterpret_cast<std::int8_t*>(out) + s.i0;
    loops.for_each(s.len, [&](int k) {
      float q = impl::rne(static_cast<float>(in(s.i0 + k)) / den * 127.0f);
      q = q > 127.0f ? 127.0f : q;
      q = q >= -127.0f ? q : -127.0f;  // also NaN (flagged by scale()), so the cast is defined
      codes[k] = static_cast<std::int8_t>(q);
    });
  }
  template <class Real>
  KOKKOS_INLINE_FUNCTION static Real decode_value(std::uint8_t const* in, std::size_t n, std::size_t i) {
    return static_cast<Real>(static_cast<float>(reinterpret_cast<std::int8_t const*>(in)[i]) *
                             (scale_of(in, n, i) / 127.0f));
  }
};

/// The codec types, in the order of Dtype and of the registry's storage.dtype names.
using Codecs = std::tuple<Fp32Codec, Fp16Codec, Bf16Codec, Int8Codec>;

namespace impl {
template <std::size_t... I>
constexpr bool codecs_in_dtype_order(std::index_sequence<I...>) {
  return ((std::tuple_element_t<I, Codecs>::dtype == static_cast<Dtype>(I)) && ...);
}
static_assert(codecs_in_dtype_order(std::make_index_sequence<std::tuple_size_v<Codecs>>{}),
              "ksweep::storage::Codecs: codec i must have dtype Dtype(i)");
static_assert(std::tuple_size_v<Codecs> == names::dtype.size(),
              "ksweep::storage::Codecs: one codec per name of names::dtype");

template <std::size_t I, class F>
decltype(auto) dispatch_codec(std::size_t i, F&& f) {
  if constexpr (I + 1 < std::tuple_size_v<Codecs>) {
    if (i != I) return dispatch_codec<I + 1>(i, std::forward<F>(f));
  }
  return f(std::tuple_element_t<I, Codecs>{});
}
}  // namespace impl

/// Calls f(Codec{}) with the codec type of a runtime dtype: the launch boundary between the
/// configuration and the kernels, which are templates on the codec.
template <class F>
decltype(auto) dispatch_dtype(Dtype d, F&& f) {
  auto const i = static_cast<std::size_t>(d);
  if (i >= std::tuple_size_v<Codecs>) names::dtype.reject(std::to_string(static_cast<int>(d)));
  return impl::dispatch_codec<0>(i, std::forward<F>(f));
}

/// Whether a dtype carries one fp32 scale per block.
inline bool has_scale(Dtype d) {
  return dispatch_dtype(d, [](auto c) { return decltype(c)::has_scale; });
}
/// Whether a value's code depends on the other values of its block (then a block must not
/// mix values of two shots: see RingValues).
inline bool block_coupled(Dtype d) {
  return dispatch_dtype(d, [](auto c) { return decltype(c)::block_coupled; });
}
/// Bytes of one encoded value (fp32 keeps the compute precision: `real_bytes`).
inline std::size_t value_bytes(Dtype d, std::size_t real_bytes) {
  return dispatch_dtype(d, [&](auto c) { return decltype(c)::value_bytes(real_bytes); });
}
/// Bytes to encode n values: codes, then (if any) the block scales, 8-byte aligned.
inline std::size_t encoded_bytes(Dtype d, std::size_t n, std::size_t real_bytes) {
  return dispatch_dtype(d, [&](auto c) { return decltype(c)::encoded_bytes(n, real_bytes); });
}

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

/// The ring of each shot is `stride` values in the order of `offset`: an offset >= 0 is a cell of
/// the field, an offset -1 - p the padding value p (zeros read from and written to `pad`,
/// [shot][stride - cells]). The ring's layout (core::ring_layout) pads so that a codec block never
/// holds values of two shots, nor cells of two tiles of the model (see core::cut_alignment): a
/// shot's encoding then depends neither on its neighbours in the batch nor on how the model is
/// split into domains.
template <class Real, class MemorySpace>
struct RingValues {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_field;  // [shot][NZ + 2M][NX + 2M]
  Kokkos::View<int const*, MemorySpace> m_offset;                   // [stride]
  FastDivisor m_n;                                                  // n: values per shot (stride)
  Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace> m_pad;     // [shot][stride - cells]
  KOKKOS_INLINE_FUNCTION Real& operator()(std::size_t i) const {
    int const v = static_cast<int>(i);  // shots x stride < 2^31 (checked by the owner)
    int const s = m_n.divide(v), k = v - s * m_n.m_n;
    int const o = m_offset(k);
    if (o < 0) return m_pad(s, -1 - o);
    return m_field.data()[static_cast<std::size_t>(s) * m_field.stride(0) + static_cast<std::size_t>(o)];
  }
};

/// Writes zeros through a value sink (index 0 .. n-1).
template <class Sink>
struct ZeroValues {
  Sink m_sink;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const { m_sink(i) = 0; }
};

/// Copies a value source into a value sink (index 0 .. n-1).
template <class Source, class Sink>
struct CopyValues {
  Source m_source;
  Sink m_sink;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const { m_sink(i) = m_source(i); }
};

/// Encodes n values of `in` into `out` (bytes) block by block with codec `Codec`; sets
/// bad() = 1 on NaN or infinity. Devices run one team per block (a thread per value, a team
/// reduction for the block scale); host backends one index per block with plain loops.
template <class Codec, class Real, class MemorySpace, class Source = ViewValues<Real const, MemorySpace>>
struct EncodeBlocks {
  Source m_in;
  Kokkos::View<std::uint8_t*, MemorySpace> m_out;
  Kokkos::View<int, MemorySpace> m_bad;
  std::size_t m_n;

  KOKKOS_INLINE_FUNCTION BlockSpan span(std::size_t b) const {
    std::size_t const i0 = b * block_size;
    return {m_n, b, i0, static_cast<int>((i0 + block_size < m_n ? i0 + block_size : m_n) - i0)};
  }
  // Devices: one team per block.
  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(Member const& team) const {
    Codec::template encode_block<Real>(m_in, span(static_cast<std::size_t>(team.league_rank())),
                                       impl::TeamLoops<Member>{team}, m_out.data(), m_bad.data());
  }
  // Hosts: one index per block.
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t b) const {
    Codec::template encode_block<Real>(m_in, span(b), impl::SerialLoops{}, m_out.data(), m_bad.data());
  }
};

/// Decodes n values from `in` (bytes) with codec `Codec` into `out`, one value per index.
template <class Codec, class Real, class MemorySpace, class Sink = ViewValues<Real, MemorySpace>>
struct DecodeValues {
  Kokkos::View<std::uint8_t const*, MemorySpace> m_in;
  Sink m_out;
  std::size_t m_n;

  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    m_out(i) = Codec::template decode_value<Real>(m_in.data(), m_n, i);
  }
};

/// Encodes n values from `in` into `out` (Codec::encoded_bytes(n) bytes) on `space`: one
/// launch. NaN or infinity sets `bad()` to 1 (checked by the caller at a convenient
/// synchronisation point).
template <class ExecSpace, class Real, class Codec, class MemorySpace, class Source>
void encode_blocks(ExecSpace const& space, Codec, Source const& in, std::size_t n,
                   Kokkos::View<std::uint8_t*, MemorySpace> out, Kokkos::View<int, MemorySpace> bad) {
  int const blocks = static_cast<int>((n + block_size - 1) / block_size);
  if (blocks == 0) return;
  EncodeBlocks<Codec, Real, MemorySpace, Source> const f{in, out, bad, n};
  if constexpr (Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible) {
    launch_for("ksweep::storage::encode", Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<std::size_t>(blocks)),
               f);
  } else {
    launch_for("ksweep::storage::encode", Kokkos::TeamPolicy<ExecSpace>(space, blocks, block_size), f);
  }
}

/// Encodes n values from `in` into `out` (encoded_bytes(dtype, n) bytes) on `space`.
template <class ExecSpace, class Real, class MemorySpace, class Source>
void encode_from(ExecSpace const& space, Dtype dtype, Source const& in, std::size_t n,
                 Kokkos::View<std::uint8_t*, MemorySpace> out, Kokkos::View<int, MemorySpace> bad) {
  dispatch_dtype(dtype, [&](auto codec) { encode_blocks<ExecSpace, Real>(space, codec, in, n, out, bad); });
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
  dispatch_dtype(dtype, [&](auto codec) {
    launch_for("ksweep::storage::decode", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
               DecodeValues<decltype(codec), Real, MemorySpace>{in, ViewValues<Real, MemorySpace>{out}, n});
  });
}

}  // namespace ksweep::storage
