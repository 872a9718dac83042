#include "trainer/model/model.h"

#include "common/status_macros.h"
#include "trainer/model/internal/model_base.h"

namespace brook::trainer {

int64_t DenseVariableSpec::num_floats() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const ModelSpec& spec, Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("Model::Create: backend is null");
  RETURN_IF_ERROR(spec.Validate());
  switch (spec.type) {
    case ModelType::kLr:
      return internal::CreateLr(spec, backend);
    case ModelType::kWideDeep:
      return internal::CreateWideDeep(spec, backend);
    case ModelType::kDeepFm:
      return internal::CreateDeepFm(spec, backend);
    case ModelType::kDlrm:
      return internal::CreateDlrm(spec, backend);
  }
  return absl::InvalidArgumentError("Model::Create: unknown model type");
}

}  // namespace brook::trainer
