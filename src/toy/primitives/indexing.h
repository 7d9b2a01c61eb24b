// primitives/indexing.h — L1: taking rows, columns and slabs out of tensors and putting rows
// back, each with its gradient. Fused projections split their output with `narrow`; a mixture
// of experts picks an expert's weights with `slab` and moves tokens to and from the experts
// with `gather_rows`, `scale_rows`, `concat_rows` and `scatter_add_rows`.
//
// Glossary as in primitives.h; here N rows of a source, M rows picked, D row width.
#pragma once

#include "toy/primitives/primitives.h"

namespace toy {

// x[i]: slab i along the first dimension, as a zero-copy view of x's storage in x's dtype
// (quantized included: a slab is a whole number of rows, so of blocks). Gradient: dx is zero
// except slab i.  x: [N, ...] -> [...]
Tensor slab(const Tensor& x, int64_t i);

// Columns [begin, begin + n) of the last dimension (a copy). Gradient: scattered back into
// zeros.  x: [..., C] -> [..., n]
Tensor narrow(const Tensor& x, int64_t begin, int64_t n);

// y[m] = x[rows[m]]. Gradient: dx[rows[m]] += dy[m].  x: [N, D], rows: I32 [M] -> [M, D]
Tensor gather_rows(const Tensor& x, const Tensor& rows);

// The rows of every x_i, one after the other. Gradient: each x_i gets its rows of dy.
// x_i: [M_i, D] -> [Σ M_i, D]
Tensor concat_rows(const std::vector<Tensor>& xs);

// y = base with y[rows[m]] += src[m] (repeated rows add up). Gradient: dbase = dy,
// dsrc[m] = dy[rows[m]].  base: [N, D], rows: I32 [M], src: [M, D] -> [N, D]
Tensor scatter_add_rows(const Tensor& base, const Tensor& rows, const Tensor& src);

// y[m] = s[m]·x[m]. Gradient: dx[m] = s[m]·dy[m], ds[m] = dy[m]·x[m].  x: [M, D], s: [M] -> [M, D]
Tensor scale_rows(const Tensor& x, const Tensor& s);

// [row; x_b] for each b: a row (ViT's class token) before each item's rows, through concat_rows and
// gather_rows (so with their gradients).  row: [D], x: [B, N, D] -> [B, N + 1, D]
Tensor prepend_row(const Tensor& row, const Tensor& x);

// The first row of each item (ViT's class token after the encoder).  x: [B, T, D] -> [B, D]
Tensor first_rows(const Tensor& x);

}  // namespace toy
