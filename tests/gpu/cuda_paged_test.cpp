// Paged KV caches on the GPU (NHD / HND, pages of 1 to 256 rows, shuffled and shared pages,
// variable lengths with an empty sequence) in decode and prefill: bit for bit the contiguous call
// on the same data with the same LaunchTuning (to rounding where the two take different key
// tiles), and the float64 reference; TMA boxes, staged page lists, settled tables, the producer
// tile, and what paged calls refuse. The shared checks: cuda_decode_checks.hpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "cuda_decode_checks.hpp"
#include "gpu_inputs.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_knobs.hpp"

namespace attnfuse::decode_test {
namespace {

TEST_F(CudaDecode, PagedLayoutsPageSizesDecodeAndPrefill) {
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  for (Layout layout : {Layout::NHD, Layout::HND})
    for (int64_t ps : {1, 16, 64})
      for (bool prefill : {false, true}) {
        PagedCase c;
        // The first sequence's full pages are shared by the others when `share`; lengths 0, 1,
        // page_size, page_size + 1 and odd ones in one batch.
        c.lengths = {1200, 0, 1, ps, ps + 1, 333};
        c.page_size = ps;
        c.layout = layout;
        c.share = ps != 64 || layout == Layout::HND;
        if (prefill) {
          c.Hq = 4, c.Hkv = 1, c.Nq = 100;
          check_paged(spec, c, rng_, {LaunchTuning{1, Variant::Prefill}, LaunchTuning{3, Variant::Prefill}, LaunchTuning{0}});
        } else {
          c.Nq = ps == 16 ? 16 : 4;
          check_paged(spec, c, rng_, {LaunchTuning{1, Variant::Decode}, LaunchTuning{3, Variant::Decode},
                                      LaunchTuning{16, Variant::Decode}, LaunchTuning{0}});
        }
      }
}

TEST_F(CudaDecode, PagedLongSequencesSplitAcrossPages) {
  // Long caches with splits that start and end inside pages; GQA 8, one token and sixteen.
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  for (int64_t nq : {1, 16}) {
    PagedCase c{{20000, 4097, 0, 9001}, 16, Layout::HND, true, 8, 1, nq, std::nullopt};
    check_paged(spec, c, rng_, {LaunchTuning{7, Variant::Decode}, LaunchTuning{0}});
  }
}

TEST_F(CudaDecode, PagedSplitCallsTakeTheDeepTileByTmaOrOverShortParts) {
  // Llama-3-70B decode (64 query heads over 8 KV heads, one sequence, 32k cache) splits into
  // parts of few key tiles: the paged call takes the three-stage tile, as the contiguous one
  // does. Eight Llama-3-8B sequences split into long parts (~86 key tiles of 64): where Hopper's
  // copy engine reads the pages (page sizes that are multiples of 8; 128-key tiles in boxes of
  // 64 rows) they take the deep module all the same, and where cp.async does (pages of 12) they
  // keep two stages (passes::kPagedDeepMaxTiles; CudaKernel::plan). The forced split count of 3
  // gives long parts, 64 short ones.
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  check_paged(spec, {{32768}, 16, Layout::NHD, false, 64, 8, 1, std::nullopt}, rng_,
              {LaunchTuning{0}, LaunchTuning{3, Variant::Decode}, LaunchTuning{64, Variant::Decode}}, 3);
  const bool tma = runtime::device_info().arch() == 90 && runtime::decode_tma_enabled() &&
                   runtime::paged_tma_enabled();
  check_paged(spec, {std::vector<int64_t>(8, 32768), 16, Layout::NHD, false, 32, 8, 1, std::nullopt}, rng_,
              {LaunchTuning{0}}, tma ? 3 : 2);
  check_paged(spec, {std::vector<int64_t>(8, 32768), 64, Layout::NHD, false, 32, 8, 1, std::nullopt}, rng_,
              {LaunchTuning{0}, LaunchTuning{3, Variant::Decode}}, tma ? 3 : 2);
  // Four sequences at pages of 12: 32 blocks split 12 ways, parts of ~43 key tiles.
  check_paged(spec, {std::vector<int64_t>(4, 32768), 12, Layout::HND, false, 32, 8, 1, std::nullopt}, rng_,
              {LaunchTuning{0}}, 2);
}

TEST_F(CudaDecode, PagedShortPartsAtSmallPagesTakeTheProducerTile) {
  // Split calls over pages of 8-32 rows whose parts stream at most kPagedProducerMaxKeys keys take
  // the producer warp and 128-key tiles (PageCopy::TmaSmallBoxesProduced) on Hopper: Llama-3-70B
  // B1 / 32k at pages of 16 and 24 (parts of 2048 keys). Eight 8B sequences at pages of 16 (parts
  // of ~16k keys) keep the computing warps' 64-key tiles. Results against the reference, and bit
  // for bit the contiguous call where both read 128-key tiles (check_paged).
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  const bool hopper = runtime::device_info().arch() == 90 && runtime::decode_tma_enabled() &&
                      runtime::paged_tma_enabled() && !runtime::decode_tile_override();
  struct Want {
    PagedCase c;
    bool produced;
  };
  for (const Want& want : {Want{{{32768}, 16, Layout::NHD, false, 64, 8, 1, std::nullopt}, true},
                           Want{{{30001}, 24, Layout::HND, false, 64, 8, 1, std::nullopt}, true},
                           Want{{std::vector<int64_t>(8, 32768), 16, Layout::NHD, false, 32, 8, 1, std::nullopt}, false}}) {
    const PagedCase& c = want.c;
    SCOPED_TRACE(paged_name(c));
    const Dims d{std::ssize(c.lengths), c.Hq, c.Hkv, c.Nq, *std::max_element(c.lengths.begin(), c.lengths.end()), 128};
    Inputs in = make_inputs(spec, d, rng_, /*with_kv=*/false);
    const PagedInputs pg = make_paged(spec.dtype, c.layout, c.lengths, c.page_size, c.Hkv, 128, false, rng_);
    in.device.paged = pg.device;
    const LaunchPlan plan = runtime::cuda_kernel(spec).plan(in.device, spec.scalars, LaunchTuning{});
    ASSERT_GT(plan.num_splits, 1);
    const bool produced = hopper && want.produced;
    EXPECT_EQ(plan.module->spec.tile.producer_warp, produced || runtime::decode_producer_enabled());
    EXPECT_EQ(plan.module->spec.tile.block_k, produced ? 128 : 64);
    check_paged(spec, c, rng_, {LaunchTuning{0}, LaunchTuning{16, Variant::Decode}});
  }
}

TEST_F(CudaDecode, PagedPageListsStagedOrLookedUpAtAnyPageSize) {
  // A paged decode block stages its parts' page ids in shared memory when they number at most
  // passes::kCudaPageListSlots, else it reads the table (kv_copy.cuh, stage_page_list).
  // Page sizes that are not powers of two (the division path), parts that start and end inside
  // pages, and split counts on both sides of the limit: 6000 keys in pages of 5 are 1200 ids, so
  // 4 parts (300 ids each) read the table and 8 or 13 parts (150 or ~93) stage theirs.
  TRACE_SEED();
  static_assert(passes::kCudaPageListSlots == 256, "the split counts below straddle 256 ids per part");
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  const std::vector<LaunchTuning> splits = {LaunchTuning{4, Variant::Decode}, LaunchTuning{8, Variant::Decode},
                                            LaunchTuning{13, Variant::Decode}, LaunchTuning{0}};
  check_paged(spec, {{6000, 37, 1999}, 5, Layout::NHD, false, 8, 2, 1, std::nullopt}, rng_, splits);
  check_paged(spec, {{6000, 2500}, 24, Layout::HND, true, 16, 2, 3, 7000}, rng_, splits);
  const KernelSpec f16 = cuda_spec("softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V", DType::F16, 64);
  check_paged(f16, {{6000, 300}, 5, Layout::HND, false, 4, 4, 2, std::nullopt}, rng_, splits);
  // Pages of 16 go by TMA on Hopper, whose tiles hold passes::kCudaPageListSlotsTma ids: 20000
  // keys are 1250 ids, so one part reads the table and two (625 each) or more stage theirs.
  static_assert(passes::kCudaPageListSlotsTma == 1024, "the split counts below straddle 1024 ids per part");
  check_paged(spec, {{20000, 777}, 16, Layout::NHD, false, 8, 2, 1, std::nullopt}, rng_,
              {LaunchTuning{1, Variant::Decode}, LaunchTuning{2, Variant::Decode}, LaunchTuning{5, Variant::Decode}});
}

// A paged call launched as a dependent of the kernel ahead of it (the chain tests below): its
// inputs, its paged cache and its tuning.
struct DependentCase {
  PagedCase c;
  LaunchTuning tuning;
};
struct DependentCall {
  Dims d;
  Inputs in;
  PagedInputs pg;
  LaunchTuning t;
};
DependentCall dependent_call(const KernelSpec& spec, const DependentCase& cs, std::mt19937_64& rng) {
  const PagedCase& c = cs.c;
  DependentCall call{{std::ssize(c.lengths), c.Hq, c.Hkv, c.Nq, *std::max_element(c.lengths.begin(), c.lengths.end()), 128},
                     {}, {}, cs.tuning};
  call.in = make_inputs(spec, call.d, rng, /*with_kv=*/false);
  call.pg = make_paged(spec.dtype, c.layout, c.lengths, c.page_size, c.Hkv, 128, false, rng);
  call.in.host.paged = call.pg.host;
  call.in.device.paged = call.pg.device;
  call.t.dependent_launch = LaunchTuning::DependentLaunch::On;
  return call;
}

TEST_F(CudaDecode, PagedSettledTablesChainCallsOnOneStream) {
  // PagedKV::table_settled lets a paged call read its page table, and stage its page list, before
  // it waits for the kernel ahead of it (attention_fwd.cuh, FwdKernel::run); Q, K and V are still
  // read after. A chain of dependent launches with no host sync, call i's Q being call i-1's O
  // (NaN-poisoned until written), must match the reference on the Q each call was given and equal
  // the same chain without the promise bit for bit. Modules: the producer warp's 128-key tile
  // (70B at pages of 16), the 128-key tile in boxes of 64 rows (pages of 64, split and not, a
  // sequence without pages), the 64-key TMA tile over long parts (pages of 16), and the cp.async
  // module with its page list staged (13 parts) or read from the table (4 parts) at pages of 5.
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  const std::vector<DependentCase> cases = {
      {{{32768}, 16, Layout::NHD, false, 64, 8, 1, std::nullopt}, LaunchTuning{0}},
      {{{32768, 0, 9001}, 64, Layout::NHD, false, 32, 8, 1, std::nullopt}, LaunchTuning{0}},
      {{{32768, 0, 9001}, 64, Layout::HND, false, 32, 8, 1, std::nullopt}, LaunchTuning{4, Variant::Decode}},
      {{std::vector<int64_t>(4, 20000), 16, Layout::NHD, false, 32, 8, 1, std::nullopt}, LaunchTuning{3, Variant::Decode}},
      {{{6000, 37, 1999}, 5, Layout::NHD, false, 8, 2, 1, std::nullopt}, LaunchTuning{13, Variant::Decode}},
      {{{6000, 37, 1999}, 5, Layout::NHD, false, 8, 2, 1, std::nullopt}, LaunchTuning{4, Variant::Decode}},
  };
  for (const DependentCase& cs : cases) {
    SCOPED_TRACE(paged_name(cs.c) + " " + tuning_name(cs.tuning));
    auto [d, in, pg, t] = dependent_call(spec, cs, rng_);
    std::vector<Outputs> chained[2];
    for (const bool settled : {true, false}) {
      in.device.paged->table_settled = settled;
      chained[settled ? 0 : 1] = run_chain(spec, in.device, d, t, 4);
    }
    check_chain(spec, in.host, d, chained[0], chained[1], "a settled table changes the results");
  }
}

TEST_F(CudaDecode, PagedTableWrittenByTheKernelAheadIsReadAfterIt) {
  // A table that is not settled may be the output of the kernel just ahead of the call. The
  // call's blocks may start while that kernel runs (programmatic dependent launch), so they must
  // not read the table before griddepcontrol.wait (FwdKernel::run). Here the kernel ahead is an
  // attention call over one key, whose O is its V row bit for bit, and that O is the paged call's
  // page_indptr: until it lands the buffer holds a stale table (every sequence half as long),
  // which a premature read would use. Each paged call must match the reference on the written
  // table, and equal bit for bit the same call given that table directly. Two repetitions leave
  // random bits in the buffer instead of the stale table: a read before the wait would then name
  // entries outside page_indices and pages outside the pool. Modules: the producer warp's 128-key
  // tile (pages of 16, 128 pages per part), the 128-key tile in boxes of 64 rows, the cp.async
  // module at pages of 5 with its page list staged.
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  const KernelSpec writer = cuda_spec("softmax(scaled_dot_product(Q, K)) @ V", DType::BF16, 64);
  const std::vector<DependentCase> cases = {
      {{{32768}, 16, Layout::NHD, false, 64, 8, 1, std::nullopt}, LaunchTuning{16, Variant::Decode}},
      {{{32768, 0, 9001}, 64, Layout::NHD, false, 32, 8, 1, std::nullopt}, LaunchTuning{4, Variant::Decode}},
      {{{6000, 37, 1999}, 5, Layout::NHD, false, 8, 2, 1, std::nullopt}, LaunchTuning{13, Variant::Decode}},
  };
  for (const DependentCase& cs : cases) {
    SCOPED_TRACE(paged_name(cs.c) + " " + tuning_name(cs.tuning));
    auto [d, in, pg, t] = dependent_call(spec, cs, rng_);
    const Outputs direct = run_device(spec, in.device, d, t);
    ASSERT_TRUE(matches(expected(spec, in.host, d), spec.dtype, direct));

    // The writer's V row: indptr entry i in bf16 values 2i (low half) and 2i + 1 (high half), so
    // each value must be 0 or a normal bf16 pattern with a zero high half.
    std::vector<uint16_t> row(64, 0), stale(64, 0);
    ASSERT_LE(pg.indptr.size(), 32u);
    for (size_t i = 0; i < pg.indptr.size(); ++i) {
      const int32_t real = pg.indptr[i], old = real / 2;
      for (int32_t v : {real, old}) ASSERT_TRUE(v == 0 || (v >= 0x80 && v < 0x7f80)) << v;
      row[2 * i] = static_cast<uint16_t>(real);
      stale[2 * i] = static_cast<uint16_t>(old);
    }
    const std::vector<uint16_t> wq = gpu_test::random16(DType::BF16, 64, rng_), wk = gpu_test::random16(DType::BF16, 64, rng_);
    const runtime::DeviceBuffer dwq = gpu_test::upload(wq), dwk = gpu_test::upload(wk), dwv = gpu_test::upload(row);
    AttentionArgs w;
    w.q = TensorView::contiguous(dwq.get(), DType::BF16, {1, 1, 1, 64});
    w.k = TensorView::contiguous(dwk.get(), DType::BF16, {1, 1, 1, 64});
    w.v = TensorView::contiguous(dwv.get(), DType::BF16, {1, 1, 1, 64});
    for (int rep = 0; rep < 6; ++rep) {
      SCOPED_TRACE(fmt::format("repetition {}", rep));
      std::vector<uint16_t> before = stale;
      if (rep >= 4)
        for (uint16_t& x : before) x = static_cast<uint16_t>(rng_());
      runtime::DeviceBuffer table = gpu_test::upload(before);  // the writer's O
      runtime::DeviceBuffer out(direct.out.size() * 2), lse(direct.lse.size() * 4);
      out.poison();
      lse.poison();
      w.out = TensorView::contiguous(table.get(), DType::BF16, {1, 1, 1, 64});
      AttentionArgs a = in.device;
      a.paged->page_indptr = {static_cast<const int32_t*>(table.get()), pg.indptr.size()};
      a.out = TensorView::contiguous(out.get(), spec.dtype, {d.B, d.Hq, d.Nq, d.D});
      a.lse = LseView::contiguous(static_cast<float*>(lse.get()), {d.B, d.Hq, d.Nq});
      runtime::run_cuda(writer, w, nullptr, /*sync=*/false, LaunchTuning{0});
      runtime::run_cuda(spec, a, nullptr, /*sync=*/false, t);
      runtime::check(runtime::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
      std::vector<uint16_t> written(64);
      table.download(written.data());
      ASSERT_EQ(written, row) << "the writer's O is not its V row";
      Outputs got{std::vector<uint16_t>(direct.out.size()), std::vector<float>(direct.lse.size())};
      out.download(got.out.data());
      lse.download(got.lse.data());
      EXPECT_TRUE(bitwise_equal(got, direct, d)) << "the call read the table before the kernel ahead wrote it";
    }
  }
}

TEST_F(CudaDecode, PagedTmaBoxesAtEveryPageGeometry) {
  // On Hopper the paged decode tiles take K/V by TMA in boxes of gcd(page_size, block_k) rows
  // (kv_copy.cuh, tma_kv): 8-row boxes (pages of 8 and 24), 32-row ones, and pages of 128
  // and 256 that hold two and four 64-key tiles. Last pages end short over a pool of NaN, which
  // the boxes read and zero_tail_rows clears in V. Pages of 12 (boxes of 4 rows) take the cp.async
  // module. Each case against contiguous calls (which take TMA too, with 128-key tiles at D = 128,
  // as split paged calls do at pages of 128 and 256: bit for bit where both take the same tile,
  // else to rounding).
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  const std::vector<LaunchTuning> splits = {LaunchTuning{1, Variant::Decode}, LaunchTuning{5, Variant::Decode},
                                            LaunchTuning{0}};
  for (int64_t ps : {8, 12, 24, 32, 128, 256}) {
    const Layout layout = ps == 128 || ps == 24 ? Layout::HND : Layout::NHD;
    check_paged(spec, {{3001, 77, 640, 1}, ps, layout, true, 8, 2, 1, std::nullopt}, rng_, splits);
  }
  // Pages of 64 in two parts of 20000 keys: 313 page ids each, past the staged list's 256 slots,
  // so the 128-key TMA tile looks its pages up in the table.
  check_paged(spec, {{40000, 333}, 64, Layout::NHD, false, 8, 2, 1, std::nullopt}, rng_,
              {LaunchTuning{2, Variant::Decode}});
  const KernelSpec f16 = cuda_spec("softmax(softcap(alibi(causal(scaled_dot_product(Q, K))), 20)) @ V", DType::F16, 64);
  check_paged(f16, {{2000, 129, 64}, 32, Layout::HND, false, 4, 4, 2, std::nullopt}, rng_,
              {LaunchTuning{3, Variant::Decode}, LaunchTuning{0}});
  // The module is the TMA form on sm_90 where the page size is a multiple of 8 (the
  // runtime's choice, CudaKernel::resolved).
  const bool tma = runtime::device_info().arch() == 90 && runtime::decode_tma_enabled() &&
                   runtime::paged_tma_enabled();
  for (int64_t ps : {16, 12, 64}) {
    const Dims d{1, 8, 2, 1, 700, 128};
    Inputs in = make_inputs(spec, d, rng_, /*with_kv=*/false);
    const PagedInputs p = make_paged(spec.dtype, Layout::NHD, {700}, ps, 2, 128, false, rng_);
    in.device.paged = p.device;
    const LaunchPlan plan = runtime::cuda_kernel(spec).plan(in.device, spec.scalars, LaunchTuning{0});
    EXPECT_GT(plan.num_splits, 1);  // 11 key tiles of 64 (6 of 128) over 2 KV heads: short parts
    EXPECT_EQ(plan.module->spec.tile.tma_kv, tma && ps % 8 == 0) << "pages of " << ps;
    // Boxes of 64 rows read Hopper's 128-key tiles (passes::cuda_decode_wide_keys), and so do
    // boxes of 8-32 rows here, whose split parts are short (the producer warp's form,
    // runtime::kPagedProducerMaxKeys); the cp.async module keeps 64.
    const bool produced = tma && ps % 8 == 0 && ps % 64 != 0 && !runtime::decode_tile_override();
    EXPECT_EQ(plan.module->spec.tile.block_k, tma && (ps % 64 == 0 || produced) ? 128 : 64) << "pages of " << ps;
    EXPECT_EQ(plan.module->spec.tile.producer_warp, produced || (tma && ps % 8 == 0 && runtime::decode_producer_enabled()))
        << "pages of " << ps;
    // Unsplit calls copy pages as split ones do (unless ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=0).
    const LaunchPlan whole = runtime::cuda_kernel(spec).plan(in.device, spec.scalars, LaunchTuning{1, Variant::Decode});
    EXPECT_EQ(whole.module->spec.tile.tma_kv, tma && ps % 8 == 0 && runtime::paged_tma_unsplit_enabled())
        << "pages of " << ps;
  }
}

TEST_F(CudaDecode, PagedEveryCombinator) {
  TRACE_SEED();
  const std::vector<const char*> decode_programs = {
      "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 50)) @ V",
      "softmax(softcap(alibi(scaled_dot_product(Q, K)), 5)) @ V",
      "softmax(alibi(causal(scaled_dot_product(Q, K)), slopes=[0.4, 0.01, 0.2, 0.003, 0.9, 0.05, 0.1, 0.02])) @ V",
      "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
      "softmax(causal(rope(Q, K, base=500000))) @ V",
      "softmax(sliding_window(rope_window(Q, K, k=1), 40)) @ V",
  };
  const std::vector<LaunchTuning> decode = {LaunchTuning{1, Variant::Decode}, LaunchTuning{3, Variant::Decode},
                                            LaunchTuning{0}};
  for (const char* prog : decode_programs) {
    SCOPED_TRACE(prog);
    check_paged(cuda_spec(prog, DType::BF16, 128), {{300, 0, 17, 16, 1000}, 16, Layout::HND, true, 8, 2, 5, std::nullopt}, rng_,
                decode);
  }
  const std::vector<const char*> prefill_programs = {
      "softmax(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 60))) @ V",
      "softmax(causal(rope(Q, K, base=500000))) @ V",
  };
  const std::vector<LaunchTuning> prefill = {LaunchTuning{1, Variant::Prefill}, LaunchTuning{2, Variant::Prefill},
                                             LaunchTuning{0}};
  for (const char* prog : prefill_programs) {
    SCOPED_TRACE(prog);
    check_paged(cuda_spec(prog, DType::BF16, 128), {{257, 100, 0, 64, 65}, 64, Layout::NHD, false, 4, 2, 100, std::nullopt}, rng_,
                prefill);
  }
  // fp16 and another head dim, decode and prefill.
  const KernelSpec f16 = cuda_spec("softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V", DType::F16, 64);
  check_paged(f16, {{40, 1, 0, 129}, 16, Layout::NHD, true, 4, 4, 3, std::nullopt}, rng_, decode);
  check_paged(f16, {{40, 1, 0, 129}, 16, Layout::HND, false, 4, 4, 50, std::nullopt}, rng_, prefill);
}

TEST_F(CudaDecode, PagedExplicitQOffsetAppliesToEverySequence) {
  TRACE_SEED();
  const KernelSpec rope = cuda_spec("softmax(causal(rope(Q, K, base=500000))) @ V", DType::BF16, 128);
  check_paged(rope, {{1, 64, 65, 120}, 16, Layout::HND, false, 8, 2, 5, 40}, rng_,
              {LaunchTuning{1, Variant::Decode}, LaunchTuning{3, Variant::Decode}});
}

// Small shapes for compute-sanitizer (racecheck, synccheck, memcheck): the decode tiles' TMA
// pipeline once per form it takes on Hopper (contiguous in 128-key tiles; pages in boxes of 16
// and of 64 rows), split and unsplit, with ragged last tiles and a sequence of one key.
TEST_F(CudaDecode, SanitizerSubset) {
  TRACE_SEED();
  const KernelSpec spec = cuda_spec(kCausal, DType::BF16, 128);
  const std::vector<LaunchTuning> splits = {LaunchTuning{1, Variant::Decode}, LaunchTuning{3, Variant::Decode}};
  for (int64_t nk : {1, 700}) {
    const Dims d{2, 8, 2, 2, nk, 128};
    check(spec, d, std::nullopt, rng_, splits);
  }
  check_paged(spec, {{700, 1, 65}, 16, Layout::NHD, false, 8, 2, 1, std::nullopt}, rng_, splits);
  check_paged(spec, {{700, 1, 129}, 64, Layout::HND, false, 8, 2, 1, std::nullopt}, rng_, splits);
}

TEST_F(CudaDecode, PagedRefusals) {
  // The prerotate placement has no paged form; additive_bias has one key axis.
  TRACE_SEED();
  PagedCase c{{100, 0, 37}, 16, Layout::NHD, false, 4, 2, 2, std::nullopt};
  auto refused = [&](const KernelSpec& spec, const std::string& phrase) {
    const Dims d{3, c.Hq, c.Hkv, c.Nq, 100, spec.head_dim};
    Inputs in = make_inputs(spec, d, rng_, /*with_kv=*/false);
    const PagedInputs p = make_paged(spec.dtype, c.layout, c.lengths, c.page_size, c.Hkv, d.D, false, rng_);
    in.device.paged = p.device;
    gpu_test::expect_refused(spec, in.device, d, ErrorCode::Unsupported, phrase);
  };
  refused(cuda_spec("softmax(causal(rope(Q, K))) @ V", DType::BF16, 64, RopeMode::Prerotate), "");
  refused(cuda_spec("softmax(additive_bias(scaled_dot_product(Q, K))) @ V", DType::BF16, 64), "additive_bias");
}

// Dynamic and longrope scalings read the batch's longest sequence, which the page table keeps in
// device memory: the kernel finds it (FwdParams::rope_len). Original contexts below the longest
// sequence (dynamic's frequencies computed on the device, longrope's long factors) and above it
// (the fixed set), decode split and unsplit, prefill, rope_window's limits with them.
TEST_F(CudaDecode, PagedLengthDependentRopeScalings) {
  TRACE_SEED();
  std::string lf, sf;
  for (int r = 0; r < 64; ++r) lf += fmt::format("{}{:.2f}", r ? ", " : "", 1.0 + 0.1 * r), sf += (r ? ", 1.05" : "1");
  const auto programs = [&](int orig) {
    return std::vector<std::string>{
        fmt::format("softmax(causal(rope(Q, K, rope_type=dynamic, factor=3, original_max_position_embeddings={}))) @ V",
                    orig),
        fmt::format("softmax(causal(rope(Q, K, rope_type=longrope, factor=8, original_max_position_embeddings={}, "
                    "long_factor=[{}], short_factor=[{}]))) @ V",
                    orig, lf, sf),
        fmt::format("softmax(sliding_window(rope_window(Q, K, k=1, rope_type=dynamic, factor=2, "
                    "original_max_position_embeddings={}), 40)) @ V",
                    orig),
    };
  };
  const std::vector<LaunchTuning> decode = {LaunchTuning{1, Variant::Decode}, LaunchTuning{3, Variant::Decode}};
  const std::vector<LaunchTuning> prefill = {LaunchTuning{1, Variant::Prefill}};
  for (const int orig : {64, 999, 1000}) {  // the longest sequence holds 1000 keys
    for (const std::string& prog : programs(orig)) {
      SCOPED_TRACE(prog);
      const KernelSpec spec = cuda_spec(prog, DType::BF16, 128);
      check_paged(spec, {{300, 0, 17, 16, 1000}, 16, Layout::HND, true, 8, 2, 3, std::nullopt}, rng_, decode);
      check_paged(spec, {{257, 100, 0, 64, 1000}, 64, Layout::NHD, false, 4, 2, 70, std::nullopt}, rng_, prefill);
    }
  }
}

TEST_F(CudaDecode, PagedAutoRopePlacementIsFused) {
  // A long prefill, where the cost model may pre-rotate contiguous K/V: paged calls rotate in the
  // kernel (the plan only; nothing runs).
  TRACE_SEED();
  const KernelSpec spec = cuda_spec("softmax(causal(rope(Q, K))) @ V", DType::BF16, 128);
  const Dims d{1, 8, 2, 8192, 8192, 128};
  Inputs in = make_inputs(spec, d, rng_, /*with_kv=*/false);
  const PagedInputs p = make_paged(spec.dtype, Layout::NHD, {8192}, 64, 2, 128, false, rng_);
  in.device.paged = p.device;
  const LaunchPlan plan = runtime::cuda_kernel(spec).plan(in.device, spec.scalars);
  EXPECT_EQ(plan.rope_mode, RopeMode::Fused);
  EXPECT_EQ(plan.kv_layout, KvLayout::Paged);
  EXPECT_FALSE(plan.decode);
}

}  // namespace
}  // namespace attnfuse::decode_test
