// Splitting the arrays bound to model inputs into runs: as is, or a batch at a time.
#include "framework/cli/input_batching.h"

#include <algorithm>
#include <cstring>

#include "framework/cli/model_format.h"

namespace qflow::cli {

Expected<InputBatching> plan_input_batching(const Value& input, const Tensor& array, const std::string& file,
                                            bool split_symbolic) {
  const std::optional<ValueType>& type = input.type;
  const std::string declared = format_value_type(type);
  if (type && type->dtype != DType::Undefined && type->dtype != array.dtype())
    return invalid_input(file + ": input '" + input.name() + "' expects " + declared + ", the file holds " +
                         format_array_type(array));
  if (!type || !type->shape || type->shape->empty()) return InputBatching{};
  const std::vector<Dim>& dims = *type->shape;
  bool trailing_match = dims.size() == static_cast<std::size_t>(array.rank());
  for (std::size_t i = 1; trailing_match && i < dims.size(); ++i)
    if (dims[i].value && *dims[i].value != array.shape()[i]) trailing_match = false;
  if (trailing_match) {
    const Dim& first = dims[0];
    const int64_t rows = array.dim(0);
    if (!first.value) return split_symbolic ? InputBatching{true, rows, 0} : InputBatching{};
    const int64_t b = *first.value;
    if (rows == b) return InputBatching{};
    if (b > 0 && rows % b == 0) return InputBatching{true, rows, b};
  }
  const bool stackable = dims[0].value && *dims[0].value > 0;
  return invalid_input(file + ": input '" + input.name() + "' expects " + declared +
                       (stackable ? " (or such arrays stacked along the first axis)" : "") + ", the file holds " +
                       format_array_type(array));
}

Expected<RunBatches> plan_run_batches(const std::vector<InputBatching>& inputs, const std::vector<std::string>& files,
                                      int64_t batch_size) {
  RunBatches run;
  const std::string* reference = nullptr;
  bool any_fixed = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].batched) continue;
    if (reference && inputs[i].samples != run.samples)
      return invalid_input("inputs hold different numbers of samples: " + *reference + " has " +
                           std::to_string(run.samples) + ", " + files[i] + " has " + std::to_string(inputs[i].samples));
    if (!reference) {
      reference = &files[i];
      run.samples = inputs[i].samples;
    }
    if (inputs[i].fixed_chunk > 0) {
      if (any_fixed && run.chunk != inputs[i].fixed_chunk)
        return unsupported("inputs fix different batch sizes (" + std::to_string(run.chunk) + " and " +
                           std::to_string(inputs[i].fixed_chunk) + ")");
      any_fixed = true;
      run.chunk = inputs[i].fixed_chunk;
    }
  }
  if (reference && run.samples == 0) return invalid_input(*reference + " holds no samples");
  if (!any_fixed) run.chunk = batch_size > 0 ? batch_size : 0;
  if (run.chunk >= run.samples) run.chunk = 0;
  return run;
}

Tensor slice_rows(const Tensor& t, int64_t begin, int64_t count) {
  if (begin == 0 && count == t.dim(0)) return t;
  Shape shape = t.shape();
  shape[0] = count;
  Tensor out(t.dtype(), shape);
  const std::size_t row_bytes = t.dim(0) ? t.nbytes() / static_cast<std::size_t>(t.dim(0)) : 0;
  if (out.nbytes() > 0)
    std::memcpy(out.raw_data(), t.raw_data() + static_cast<std::size_t>(begin) * row_bytes, out.nbytes());
  return out;
}

Expected<Tensor> concat_rows(const std::string& name, const std::vector<Tensor>& parts) {
  if (parts.size() == 1) return parts[0];
  const Tensor& first = parts[0];
  int64_t rows = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    const bool same_tail = p.rank() == first.rank() && p.rank() > 0 &&
                           std::equal(p.shape().begin() + 1, p.shape().end(), first.shape().begin() + 1);
    if (p.dtype() != first.dtype() || !same_tail)
      return invalid_input("output '" + name + "' cannot be concatenated along its first axis: run 1 gave " +
                           format_array_type(first) + ", run " + std::to_string(i + 1) + " gave " + format_array_type(p));
    rows += p.dim(0);
  }
  Shape shape = first.shape();
  shape[0] = rows;
  QFLOW_ASSIGN_OR_RETURN(Tensor out, Tensor::make(first.dtype(), shape));
  std::size_t offset = 0;
  for (const Tensor& p : parts) {
    if (p.nbytes() > 0) std::memcpy(out.raw_data() + offset, p.raw_data(), p.nbytes());
    offset += p.nbytes();
  }
  return out;
}

}  // namespace qflow::cli
