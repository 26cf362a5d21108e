// Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial. With a `seed` attribute every
// run draws the same values from std::mt19937 seeded with it (kernels keep no state between runs); without one each
// run seeds from std::random_device. Values never match other runtimes bit for bit; the ONNX spec allows that.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace {

std::mt19937 MakeEngine(bool has_seed, float seed) {
  // The seed's integer part modulo 2^32 (fmod keeps huge values defined).
  if (has_seed) return std::mt19937(static_cast<uint32_t>(static_cast<int64_t>(std::fmod(seed, 4294967296.0))));
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), rd(), rd()};
  return std::mt19937(seq);
}

template <typename D>
D FromDouble(double v) {
  if constexpr (std::is_same_v<D, Float16> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

bool IsFloatType(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// Uniform in [0, 1) with 53 random bits.
double Canonical(std::mt19937& gen) { return std::generate_canonical<double, 53>(gen); }

// ---------------------------------------------------------------------------------------------------------------
// RandomUniform / RandomNormal and their *Like variants.

enum class Distribution { kUniform, kNormal };

struct RandomParams {
  Distribution dist;
  bool like = false;          // shape (and maybe dtype) from the input
  bool has_dtype = false;
  DataType dtype = DataType::kFloat;
  Shape shape;                // non-Like only
  double a = 0, b = 1;        // uniform: low, high; normal: mean, scale
  bool has_seed = false;
  float seed = 0.f;
};

class RandomKernel final : public OpKernel {
 public:
  explicit RandomKernel(RandomParams p) : p_(std::move(p)) {}

  Status Compute(KernelContext& ctx) const override {
    Shape shape = p_.shape;
    DataType dtype = p_.dtype;
    if (p_.like) {
      const Tensor* in = ctx.Input(0);
      if (!in) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is missing");
      shape = in->shape();
      if (!p_.has_dtype) dtype = in->dtype();
      if (!IsFloatType(dtype))
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "output type ", DataTypeName(dtype),
                         " taken from the input is not a float type; set the dtype attribute");
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx.Output(0, dtype, shape));
    std::mt19937 gen = MakeEngine(p_.has_seed, p_.seed);
    const int64_t n = out->NumElements();
    return DispatchType<EPCTX_FLOAT_TYPES>(dtype, "random output", [&](auto tag) {
      using D = decltype(tag);
      D* d = out->data<D>();
      if (p_.dist == Distribution::kUniform) {
        for (int64_t i = 0; i < n; ++i) d[i] = FromDouble<D>(p_.a + (p_.b - p_.a) * Canonical(gen));
      } else {
        std::normal_distribution<double> normal(0.0, 1.0);
        for (int64_t i = 0; i < n; ++i) d[i] = FromDouble<D>(p_.a + p_.b * normal(gen));
      }
      return Status::OK();
    });
  }

 private:
  RandomParams p_;
};

Status ReadSeedAndDtype(const KernelInfo& info, bool has_default_dtype, bool* has_seed, float* seed, bool* has_dtype,
                        DataType* dtype) {
  *has_seed = info.HasAttr("seed");
  *seed = info.GetFloat("seed", 0.f);
  if (*has_seed && !std::isfinite(*seed))
    return info.Error(ErrorCode::INVALID_GRAPH, "seed must be finite, got ", *seed);
  *has_dtype = info.HasAttr("dtype");
  if (*has_dtype || has_default_dtype) {
    const int64_t v = info.GetInt("dtype", static_cast<int64_t>(DataType::kFloat));
    if (v < 0 || v > 100 || !IsValidDataType(static_cast<int32_t>(v)))
      return info.Error(ErrorCode::INVALID_GRAPH, "dtype ", v, " is not a valid data type");
    *dtype = static_cast<DataType>(v);
  }
  return Status::OK();
}

KernelFactory RandomFactory(Distribution dist, bool like) {
  return [dist, like](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    RandomParams p;
    p.dist = dist;
    p.like = like;
    RETURN_IF_ERROR(ReadSeedAndDtype(info, !like, &p.has_seed, &p.seed, &p.has_dtype, &p.dtype));
    if ((p.has_dtype || !like) && !IsFloatType(p.dtype))
      return info.Error(ErrorCode::INVALID_GRAPH, "dtype ", DataTypeName(p.dtype), " is not float16/float/double");
    if (dist == Distribution::kUniform) {
      p.a = info.GetFloat("low", 0.f);
      p.b = info.GetFloat("high", 1.f);
    } else {
      p.a = info.GetFloat("mean", 0.f);
      p.b = info.GetFloat("scale", 1.f);
    }
    if (!like) {
      const Attribute* shape = info.node().attr("shape");
      if (!shape || shape->type != Attribute::Type::kInts)
        return info.Error(ErrorCode::INVALID_GRAPH, "required ints attribute 'shape' is missing");
      for (int64_t d : shape->ints)
        if (d < 0) return info.Error(ErrorCode::INVALID_GRAPH, "shape ", ShapeToString(shape->ints), " has a negative dim");
      if (ShapeSize(shape->ints) < 0)
        return info.Error(ErrorCode::INVALID_GRAPH, "shape ", ShapeToString(shape->ints), " is too large");
      p.shape = shape->ints;
    }
    return std::unique_ptr<OpKernel>(new RandomKernel(std::move(p)));
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Bernoulli: output 1 with probability p, else 0.

class BernoulliKernel final : public OpKernel {
 public:
  BernoulliKernel(bool has_seed, float seed, bool has_dtype, DataType dtype)
      : has_seed_(has_seed), seed_(seed), has_dtype_(has_dtype), dtype_(dtype) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* in = ctx.Input(0);
    if (!in) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is missing");
    std::vector<double> prob(static_cast<size_t>(in->NumElements()));
    RETURN_IF_ERROR(DispatchType<EPCTX_FLOAT_TYPES>(in->dtype(), "Bernoulli input", [&](auto tag) {
      using S = decltype(tag);
      const S* s = in->data<S>();
      for (size_t i = 0; i < prob.size(); ++i) prob[i] = static_cast<double>(s[i]);
      return Status::OK();
    }));
    const DataType out_type = has_dtype_ ? dtype_ : in->dtype();
    ASSIGN_OR_RETURN(Tensor * out, ctx.Output(0, out_type, in->shape()));
    std::mt19937 gen = MakeEngine(has_seed_, seed_);
    return DispatchType<EPCTX_NUMERIC_TYPES, bool>(out_type, "Bernoulli output", [&](auto tag) {
      using D = decltype(tag);
      D* d = out->data<D>();
      for (size_t i = 0; i < prob.size(); ++i) d[i] = FromDouble<D>(Canonical(gen) < prob[i] ? 1.0 : 0.0);
      return Status::OK();
    });
  }

 private:
  bool has_seed_;
  float seed_;
  bool has_dtype_;
  DataType dtype_;
};

// ---------------------------------------------------------------------------------------------------------------
// Multinomial: input [batch, classes] of unnormalized log-probabilities; output [batch, sample_size] class indices.

class MultinomialKernel final : public OpKernel {
 public:
  MultinomialKernel(bool has_seed, float seed, DataType dtype, int64_t samples)
      : has_seed_(has_seed), seed_(seed), dtype_(dtype), samples_(samples) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* in = ctx.Input(0);
    if (!in) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is missing");
    if (in->rank() != 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must be [batch_size, class_size], got shape ",
                       ShapeToString(in->shape()));
    const int64_t batch = in->dim(0), classes = in->dim(1);
    std::vector<double> logits(static_cast<size_t>(in->NumElements()));
    RETURN_IF_ERROR(DispatchType<EPCTX_FLOAT_TYPES>(in->dtype(), "Multinomial input", [&](auto tag) {
      using S = decltype(tag);
      const S* s = in->data<S>();
      for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<double>(s[i]);
      return Status::OK();
    }));
    ASSIGN_OR_RETURN(Tensor * out, ctx.Output(0, dtype_, {batch, samples_}));
    if (batch > 0 && samples_ > 0 && classes == 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot sample from zero classes");
    std::mt19937 gen = MakeEngine(has_seed_, seed_);
    std::vector<double> cdf(static_cast<size_t>(classes));
    for (int64_t bi = 0; bi < batch; ++bi) {
      const double* row = &logits[bi * classes];
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, row[c]);
      if (!std::isfinite(mx))
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "row ", bi, " has no finite log-probability");
      double total = 0;
      for (int64_t c = 0; c < classes; ++c) {
        total += std::exp(row[c] - mx);
        cdf[c] = total;
      }
      if (!(total > 0) || !std::isfinite(total))
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "row ", bi, " has no finite positive probability mass");
      for (int64_t s = 0; s < samples_; ++s) {
        const double u = Canonical(gen) * total;
        int64_t c = static_cast<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        if (c >= classes) c = classes - 1;
        if (dtype_ == DataType::kInt32) out->data<int32_t>()[bi * samples_ + s] = static_cast<int32_t>(c);
        else out->data<int64_t>()[bi * samples_ + s] = c;
      }
    }
    return Status::OK();
  }

 private:
  bool has_seed_;
  float seed_;
  DataType dtype_;
  int64_t samples_;
};

}  // namespace

void RegisterExtraRandomKernels(KernelRegistry& r) {
  r.Register("", "RandomUniform", RandomFactory(Distribution::kUniform, false));
  r.Register("", "RandomNormal", RandomFactory(Distribution::kNormal, false));
  r.Register("", "RandomUniformLike", RandomFactory(Distribution::kUniform, true));
  r.Register("", "RandomNormalLike", RandomFactory(Distribution::kNormal, true));
  r.Register("", "Bernoulli", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    bool has_seed = false, has_dtype = false;
    float seed = 0.f;
    DataType dtype = DataType::kFloat;
    RETURN_IF_ERROR(ReadSeedAndDtype(info, false, &has_seed, &seed, &has_dtype, &dtype));
    if (has_dtype && (dtype == DataType::kString || dtype == DataType::kComplex64 || dtype == DataType::kComplex128))
      return info.Error(ErrorCode::INVALID_GRAPH, "dtype ", DataTypeName(dtype), " is not allowed for Bernoulli");
    return std::unique_ptr<OpKernel>(new BernoulliKernel(has_seed, seed, has_dtype, dtype));
  });
  r.Register("", "Multinomial", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    bool has_seed = false, has_dtype = false;
    float seed = 0.f;
    DataType dtype = DataType::kInt32;
    RETURN_IF_ERROR(ReadSeedAndDtype(info, false, &has_seed, &seed, &has_dtype, &dtype));
    if (!has_dtype) dtype = DataType::kInt32;
    if (dtype != DataType::kInt32 && dtype != DataType::kInt64)
      return info.Error(ErrorCode::INVALID_GRAPH, "dtype must be int32 or int64, got ", DataTypeName(dtype));
    const int64_t samples = info.GetInt("sample_size", 1);
    if (samples < 0) return info.Error(ErrorCode::INVALID_GRAPH, "sample_size must be >= 0, got ", samples);
    return std::unique_ptr<OpKernel>(new MultinomialKernel(has_seed, seed, dtype, samples));
  });
}

}  // namespace epctx
