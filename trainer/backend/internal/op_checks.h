// The argument checks every Backend makes before an op touches memory
// (backend.h: "returns InvalidArgument and writes nothing"), shared by the
// CPU backend and the CUDA plugin so that both reject the same calls with the
// same messages ("<backend> backend <op>: <what>"). Header-only: the plugin
// links no brook library.
//
// Thread safety: stateless functions; an ArgChecks is immutable.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "trainer/backend/backend.h"

namespace brook::trainer::internal {

// Sizes above this are rejected before any arithmetic, so that products of
// three of them cannot overflow uint64.
inline constexpr int64_t kMaxExtent = int64_t{1} << 40;

inline absl::string_view DTypeName(DType t) { return t == DType::kFloat32 ? "float32" : "uint32"; }

// Saturating products/sums: the result only feeds "fits in the buffer" checks.
inline uint64_t SatMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}
inline uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

// Elements spanned by `rows` rows of `cols` at `stride` starting at `offset`.
inline uint64_t Extent(int64_t rows, int64_t cols, int64_t stride, int64_t offset) {
  if (rows == 0 || cols == 0) return 0;
  return SatAdd(SatAdd(SatMul(rows - 1, stride), offset), cols);
}

// The checks of one backend. `backend` starts every message ("cpu" gives
// "cpu backend Gemm: ..."); `owner` completes "<arg> was not allocated by
// <owner>" for a buffer of another backend.
class ArgChecks {
 public:
  constexpr ArgChecks(absl::string_view backend, absl::string_view owner)
      : backend_(backend), owner_(owner) {}

  absl::Status Bad(absl::string_view op, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(backend_, " backend ", op, ": ", what));
  }

  // Every size, stride and offset lies in [0, kMaxExtent].
  absl::Status Sizes(absl::string_view op, std::initializer_list<int64_t> sizes) const {
    for (int64_t s : sizes) {
      if (s < 0 || s > kMaxExtent) {
        return Bad(op, absl::StrCat("size, stride or offset ", s, " out of range [0, 2^40]"));
      }
    }
    return absl::OkStatus();
  }

  // `b` is not null, is this backend's (`owned`, which the caller computes
  // and which is ignored when b is null), has `dtype` and at least `need`
  // elements.
  absl::Status Buf(absl::string_view op, absl::string_view arg, const Buffer* b, DType dtype,
                   uint64_t need, bool owned) const {
    if (b == nullptr) return Bad(op, absl::StrCat(arg, " is null"));
    if (!owned) return Bad(op, absl::StrCat(arg, " was not allocated by ", owner_));
    if (b->dtype() != dtype) {
      return Bad(op,
                 absl::StrCat(arg, " is ", DTypeName(b->dtype()), ", needs ", DTypeName(dtype)));
    }
    if (b->size() < need) {
      return Bad(op, absl::StrCat(arg, " has ", b->size(), " elements, needs ", need));
    }
    return absl::OkStatus();
  }

  absl::Status Distinct(absl::string_view op, const Buffer* out,
                        std::initializer_list<const Buffer*> inputs) const {
    for (const Buffer* in : inputs) {
      if (in == out) return Bad(op, "the output buffer must not also be an input");
    }
    return absl::OkStatus();
  }

  // The contents of a CSR whose buffers passed Buf: `offsets` holds batch + 1
  // entries, `indices` num_indices. Reads host copies of the index data.
  absl::Status Csr(absl::string_view op, int64_t batch, const uint32_t* offsets,
                   const uint32_t* indices, size_t num_indices, int64_t num_rows) const {
    if (offsets[0] != 0) return Bad(op, absl::StrCat("offsets[0] is ", offsets[0], ", must be 0"));
    for (int64_t b = 0; b < batch; ++b) {
      if (offsets[b + 1] < offsets[b]) {
        return Bad(op, absl::StrCat("offsets decrease at example ", b));
      }
    }
    if (offsets[batch] > num_indices) {
      return Bad(op, absl::StrCat("offsets[batch] is ", offsets[batch], " but indices has ",
                                  num_indices, " elements"));
    }
    for (uint32_t i = 0; i < offsets[batch]; ++i) {
      if (indices[i] >= static_cast<uint64_t>(num_rows)) {
        return Bad(op, absl::StrCat("indices[", i, "] = ", indices[i], " >= num_rows ", num_rows));
      }
    }
    return absl::OkStatus();
  }

 private:
  const absl::string_view backend_;
  const absl::string_view owner_;
};

}  // namespace brook::trainer::internal
