#include "datatools/hyperloglog.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

namespace brook::datatools {
namespace {

// sigma and tau from Ertl (2017), section 4: they correct the raw estimate
// for empty registers (small range) and saturated ones (large range). Both
// loops stop when the series no longer changes the double.
double Sigma(double x) {
  if (x == 1.0) return std::numeric_limits<double>::infinity();
  double y = 1.0;
  double z = x;
  double z_prev;
  do {
    x *= x;
    z_prev = z;
    z += x * y;
    y += y;
  } while (z != z_prev);
  return z;
}

double Tau(double x) {
  if (x == 0.0 || x == 1.0) return 0.0;
  double y = 1.0;
  double z = 1.0 - x;
  double z_prev;
  do {
    x = std::sqrt(x);
    z_prev = z;
    y *= 0.5;
    z -= (1.0 - x) * (1.0 - x) * y;
  } while (z != z_prev);
  return z / 3.0;
}

}  // namespace

HyperLogLog::HyperLogLog(int precision) : precision_(precision) {
  assert(precision >= 4 && precision <= 18);
}

void HyperLogLog::AddToRegisters(uint64_t hash) {
  const uint64_t index = hash >> (64 - precision_);
  // The guard bit bounds the rank at 64 - p + 1 when the remaining bits are 0.
  const uint64_t rest = (hash << precision_) | (uint64_t{1} << (precision_ - 1));
  const uint8_t rank = static_cast<uint8_t>(std::countl_zero(rest) + 1);
  if (rank > registers_[index]) registers_[index] = rank;
}

void HyperLogLog::ToDense() {
  registers_.assign(size_t{1} << precision_, 0);
  for (uint64_t h : exact_) AddToRegisters(h);
  exact_ = {};
}

void HyperLogLog::AddHash(uint64_t hash) {
  if (registers_.empty()) {
    exact_.insert(hash);
    if (exact_.size() > kExactLimit) ToDense();
    return;
  }
  AddToRegisters(hash);
}

void HyperLogLog::Merge(const HyperLogLog& other) {
  assert(other.precision_ == precision_);
  if (other.registers_.empty()) {
    for (uint64_t h : other.exact_) AddHash(h);
    return;
  }
  if (registers_.empty()) ToDense();
  for (size_t i = 0; i < registers_.size(); ++i) {
    if (other.registers_[i] > registers_[i]) registers_[i] = other.registers_[i];
  }
}

double HyperLogLog::Estimate() const {
  if (registers_.empty()) return static_cast<double>(exact_.size());
  const int q = 64 - precision_;
  const double m = static_cast<double>(registers_.size());
  std::vector<int> histogram(q + 2, 0);
  for (uint8_t r : registers_) ++histogram[r];
  double z = m * Tau(1.0 - histogram[q + 1] / m);
  for (int k = q; k >= 1; --k) z = 0.5 * (z + histogram[k]);
  z += m * Sigma(histogram[0] / m);
  const double alpha_inf = 0.5 / std::log(2.0);
  return alpha_inf * m * m / z;
}

}  // namespace brook::datatools
