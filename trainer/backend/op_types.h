// Small enums shared by the backend ops, the model spec and the models, with
// their spellings in job specs. Header-only so that model code can use them
// without linking a backend.
#pragma once

#include <cstdint>
#include <string_view>

namespace brook::trainer {

// Elementwise nonlinearity after a dense layer.
enum class Activation { kNone, kRelu, kSigmoid, kTanh };

// How an example's embedding rows are pooled into one vector. kMean of an
// example with no ids is the zero vector.
enum class Combiner { kSum, kMean };

// kLogLoss: binary cross-entropy on sigmoid(logit), labels in [0, 1].
// kMse: squared error of the raw output (rating regression).
enum class LossKind { kLogLoss, kMse };

enum class DType { kFloat32, kUint32 };

inline std::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
  }
  return "unknown";
}

inline std::string_view CombinerName(Combiner c) { return c == Combiner::kSum ? "sum" : "mean"; }

inline std::string_view LossName(LossKind l) { return l == LossKind::kLogLoss ? "logloss" : "mse"; }

// Whether dropout keeps element `i` of a tensor dropped with seed `seed` and
// probability `rate`. Part of the backend contract: every backend (CPU, CUDA)
// draws the same mask from this counter-based hash, so backends agree bit for
// bit and a step can be replayed. splitmix64 of (seed, i); the top 24 bits
// form a uniform number in [0, 1).
constexpr bool DropoutKeep(uint64_t seed, uint64_t i, float rate) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return u >= rate;
}

}  // namespace brook::trainer
