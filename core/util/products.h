#pragma once
// Matrix products of the inference forwards (LETR's transformers, CoaT): float32, or bfloat16
// operands with float32 accumulation and results (oneDNN's AVX512-BF16 / AMX kernels) while a
// ProductDtypeGuard asks for them on this thread (docs/performance.md). A guard of kQInt8 runs the
// linear layers alone as int8 products (dynamic quantization: weights per output channel,
// activations per tensor at each call, oneDNN's kernels) and every other product in float32.
#include <torch/torch.h>

namespace glimpse::products {

// Sets the precision of this thread's products for a forward pass and restores it after.
struct ProductDtypeGuard {
    explicit ProductDtypeGuard(torch::ScalarType t);
    ~ProductDtypeGuard();
    ProductDtypeGuard(const ProductDtypeGuard&) = delete;
    ProductDtypeGuard& operator=(const ProductDtypeGuard&) = delete;
    torch::ScalarType was;
};

// The dtype of this thread's products (kFloat unless a guard asks for another).
torch::ScalarType productDtype();
// True when products of x run in a lower floating-point precision (a guard asks for bfloat16 and
// x is on the CPU).
bool lowPrecision(const torch::Tensor& x);
// True when linear layers on x run as int8 products (a kQInt8 guard and x on the CPU). A gradient
// flows back to x as through the float32 layer (straight through the roundings); the weights get
// none: int8 is for inference.
bool int8Linear(const torch::Tensor& x);
// Whether this LibTorch has the int8 linear kernels (its oneDNN quantized engine), which it then
// selects. kQInt8 guards need them.
bool int8Available();

// A linear layer: torch::linear in float32, or with operands in the guard's dtype.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
torch::Tensor linear(torch::nn::LinearImpl& l, const torch::Tensor& x);
// As linear, but a low-precision result stays in the guard's dtype: for a layer whose output
// goes, through an elementwise function, into another product (an MLP's hidden layer). Where the
// bias rides in the product (inputs <= outputs) the product already rounds its result to that
// dtype and the next product would round its input to it again, and LibTorch's ReLU and GELU on
// bfloat16 compute in float32 and round once, so the result is bit-identical to linear()'s;
// otherwise it is linear()'s rounded once more. It saves a float32 copy of the hidden layer both
// ways.
torch::Tensor linearLow(torch::nn::LinearImpl& l, const torch::Tensor& x);

// Batched product [n, a, k] x [n, k, c] -> [n, a, c]. LibTorch 1.13's CPU bmm does not hand float32
// batches to the BLAS (10x slower than one matrix product per batch entry, docs/performance.md),
// so without gradients the CPU runs one BLAS product per entry.
torch::Tensor bmm(const torch::Tensor& a, const torch::Tensor& b);

} // namespace glimpse::products
