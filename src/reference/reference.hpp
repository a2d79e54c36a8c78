// The reference: seed 003's decomposition as three materialized ops (S = scores with modifiers;
// P = masks then normalization; O = P V). In float64 it is the oracle of every test; in
// float32 it is the "three unfused ops" variant of the ablation benchmark.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::reference {

// How the decomposition computes.
//  F64: double everywhere (the oracle).
//  Naive: the same-precision naive implementation of DESIGN §3's tolerance rule: float
//         arithmetic, with S, P and O rounded to the input dtype after each op (identity for
//         fp32 inputs beyond float arithmetic).
enum class Precision { F64, Naive };

struct Result {
  std::vector<double> out;  // [B, Hq, Nq, Dv] contiguous
  std::vector<double> lse;  // [B, Hq, Nq]; -inf for rows with no kept key
};

// Reads args.q/k/v/bias/block_mask/cu_seqlens (any dtype, any strides), ignores args.out/args.lse.
// document: each document is its own attention problem, aligned bottom-right, with positions
// counted inside it (common/documents.hpp); rows of a document without keys give O = 0,
// LSE = -inf.
// Paged KV (args.paged): each batch entry's pages are gathered into a contiguous K / V and
// computed as its own problem (its own length, bottom-right unless q_offset is given); the
// per-(b, hq) ops below take contiguous K / V only.
// rope / rope_window: every Hugging Face scaling, through the RoPE library (rope/frequencies.hpp)
// at rope_seq_len(args); rope_window prunes pair r where |Δ| > rope::window_limits(...)[r].
// Throws Error(Verify) for invalid RoPE parameters, Error(Shape) for a rotary_dim that is odd or
// larger than the head dim.
Result attention(const KernelSpec& spec, const AttentionArgs& args,
                 Precision precision = Precision::F64);

// The three ops for one (b, hq), exposed for the ablation benchmark and for tests.
// S: [Nq, Nk] row-major scores after the score op and modifiers (masked cells not applied yet).
template <class T>
void scores(const KernelSpec& spec, const AttentionArgs& args, int64_t b, int64_t hq, T* S);
// In place S -> P (masks, then normalization); lse [Nq] (may be null).
template <class T>
void normalize(const KernelSpec& spec, const AttentionArgs& args, int64_t b, int64_t hq, T* S,
               T* lse);
// O[Nq, Dv] = P V for (b, hq); out row-major contiguous.
template <class T>
void pv(const AttentionArgs& args, int64_t b, int64_t hq, const T* P, T* out);

// The sequence length RoPE frequencies are computed for (what `dynamic` and `longrope` read):
// the largest position in play plus one, HF's max(position_ids) + 1, i.e. max(Nk, q_offset + Nq)
// (Nk when Nq = 0). With document offsets (args.cu_seqlens_k) positions restart in each
// document, so it is the longest key document (HF with packed position_ids); with a paged cache,
// the batch's largest (HF's max(position_ids) + 1 of a padded batch). Kernels must use
// the same length so that they rotate (and, for rope_window, prune) exactly as the reference does.
int64_t rope_seq_len(const AttentionArgs& args);

// Does the cell survive every mask of the spec? (Shared by the reference and the kernels' tests.)
bool keeps(const KernelSpec& spec, const AttentionArgs& args, int64_t b, int64_t hq, int64_t i,
           int64_t j);

// ALiBi slope of query head h of H (the ALiBi paper's rule, incl. non-power-of-two H), or the
// custom slopes of the spec.
double alibi_slope(const ScalarArgs& scalars, int64_t h, int64_t num_heads);

}  // namespace attnfuse::reference
