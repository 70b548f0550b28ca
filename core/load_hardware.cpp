// Loading of the GPU catalog (data/gpus.yaml, data/gpus/*.yaml), data/nccl.yaml and topologies/*.yaml.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/nccl_release.hpp"
#include "dpsim/suggest.hpp"
#include "dpsim/tuner_plugin.hpp"
#include "load_internal.hpp"

namespace dpsim {

namespace fs = std::filesystem;

fs::path data_root() {
  if (const char* env = std::getenv("DPSIM_DATA_DIR"); env && *env) return fs::path(env);
  for (const fs::path& candidate : {fs::path(DPSIM_DATA_DIR_BUILD), fs::path(DPSIM_DATA_DIR_INSTALL)}) {
    std::error_code ec;
    if (fs::exists(candidate / "data" / "gpus.yaml", ec)) return candidate;
  }
  throw RuntimeError(fmt::format("cannot find dpsim's data files (data/gpus.yaml) under {} or {}; set DPSIM_DATA_DIR",
                                 DPSIM_DATA_DIR_BUILD, DPSIM_DATA_DIR_INSTALL));
}

namespace {

// A GPU architecture named by `text` (a value, or a map key) at `where`.
Arch parse_arch(const YNode& where, const std::string& text) {
  if (const auto a = arch_named(text)) return *a;
  std::vector<std::string> names;
  for (Arch a : kArchs) names.emplace_back(to_string(a));
  where.fail(fmt::format("\"{}\" is not one of: {}", text, fmt::join(names, ", ")));
}

CpuVendor parse_cpu_vendor(const YNode& n) {
  return n.as_enum<CpuVendor>({{"intel", CpuVendor::intel}, {"amd", CpuVendor::amd}, {"arm", CpuVendor::arm}});
}

double fraction(const YNode& n) {
  const double v = n.as_number();
  if (v <= 0 || v > 1) n.fail(fmt::format("must be in (0, 1], got {}", n.as_string()));
  return v;
}

Link parse_link(const YNode& n, bool latency_required) {
  n.allow_only({"bandwidth", "latency"});
  Link link;
  link.bandwidth_bytes_per_s = n.at("bandwidth").as_bandwidth();
  if (latency_required || n.has("latency")) link.latency_s = n.at("latency").as_seconds();
  return link;
}

std::vector<int> parse_gpu_list(const YNode& n, int gpus_per_node) {
  std::vector<int> out;
  for (size_t i = 0; i < n.size(); ++i) {
    const YNode item = n[i];
    out.push_back(static_cast<int>(item.as_int(0, 1 << 20)));
    if (out.back() >= gpus_per_node) {
      item.fail(fmt::format("GPU {} does not exist: a node has {} GPUs (0..{})", out.back(), gpus_per_node,
                            gpus_per_node - 1));
    }
  }
  return out;
}

ProtoValues parse_proto(const YNode& n) {
  n.allow_only({"ll", "ll128", "simple"});
  ProtoValues v{-1, -1, -1};  // -1: protocol not available for this algorithm
  if (auto x = n.get("ll")) v.ll = x->as_seconds();
  if (auto x = n.get("ll128")) v.ll128 = x->as_seconds();
  if (auto x = n.get("simple")) v.simple = x->as_seconds();
  return v;
}

Algorithm parse_algorithm_key(const YNode& parent, const std::string& key) { return algorithm_key(parent, key); }

constexpr std::pair<const char*, Fabric> kFabricKeys[] = {
    {"nvlink", Fabric::nvlink}, {"pcie", Fabric::pcie}, {"net", Fabric::net}};

// hw_latency.by_arch: {ampere: {nvlink: {ring: {ll: 2.7us}}}}
std::map<std::tuple<Arch, Fabric, Algorithm, Protocol>, double> parse_hw_latency_by_arch(const YNode& n) {
  std::map<std::tuple<Arch, Fabric, Algorithm, Protocol>, double> out;
  for (const auto& arch_key : n.keys()) {
    const YNode fabrics = n.at(arch_key);
    fabrics.allow_only({"nvlink", "pcie", "net"});
    const Arch arch = parse_arch(fabrics, arch_key);
    for (const auto& [key, fabric] : kFabricKeys) {
      const auto f = fabrics.get(key);
      if (!f) continue;
      for (const auto& algo : f->keys()) {
        const ProtoValues v = parse_proto(f->at(algo));  // -1: not given
        for (Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple})
          if (v.get(p) >= 0) out[{arch, fabric, parse_algorithm_key(*f, algo), p}] = v.get(p);
      }
    }
  }
  return out;
}

// A list of architectures: [volta, ampere, hopper].
std::vector<Arch> parse_arch_list(const YNode& n) {
  std::vector<Arch> out;
  for (size_t i = 0; i < n.size(); ++i) out.push_back(parse_arch(n[i], n[i].as_string()));
  return out;
}

std::map<Arch, double> parse_arch_bandwidths(const YNode& n) {
  std::map<Arch, double> out;
  for (const auto& key : n.keys()) out[parse_arch(n.at(key), key)] = n.at(key).as_bandwidth();
  return out;
}

CpuVendor parse_cpu_vendor_key(const YNode& parent, const std::string& key) {
  if (key == "amd") return CpuVendor::amd;
  if (key != "intel") parent.at(key).fail("\"" + key + "\" is not one of: intel, amd");
  return CpuVendor::intel;
}

// ll_max_busbw_multi_node: {intel: {two_nodes: 39GBps, more_nodes: 20.4GBps}, amd: {...}}
std::map<CpuVendor, std::array<double, 2>> parse_vendor_ll_caps(const YNode& n) {
  std::map<CpuVendor, std::array<double, 2>> out;
  for (const auto& key : n.keys()) {
    const YNode row = n.at(key);
    row.allow_only({"two_nodes", "more_nodes"});
    out[parse_cpu_vendor_key(n, key)] = {row.at("two_nodes").as_bandwidth(), row.at("more_nodes").as_bandwidth()};
  }
  return out;
}

// data/nccl.yaml step_chunks: how NCCL cuts a call into steps (step fidelity).
NcclStepChunks parse_step_chunks(const YNode& n) {
  n.allow_only({"tree", "tree_ll128_halving", "tree_ll128_steps_per_gpu", "nvls", "nvls_caps", "nvlstree_max",
                "nvlstree_caps", "nvls_channels", "collnet_chain", "collnet_chain_halving"});
  NcclStepChunks c;
  const YNode tree = n.at("tree");
  tree.allow_only({"ll", "ll128", "simple"});
  c.tree_bytes = {tree.at("ll").as_bytes(), tree.at("ll128").as_bytes(), tree.at("simple").as_bytes()};
  // A list of {number key: N, bytes key: SIZE} rules (the halvings' {steps, above}, the caps' {loops, chunk}).
  const auto rules = [](const YNode& list, const char* number, const char* bytes, auto element) {
    std::vector<decltype(element)> out;
    for (size_t i = 0; i < list.size(); ++i) {
      list[i].allow_only({number, bytes});
      out.push_back({list[i].at(number).as_positive_number(), list[i].at(bytes).as_bytes()});
    }
    return out;
  };
  const auto halvings = [&](const YNode& list) { return rules(list, "steps", "above", NcclStepChunks::Halving{}); };
  c.tree_ll128_halving = halvings(n.at("tree_ll128_halving"));
  c.collnet_chain_bytes = n.at("collnet_chain").as_bytes();
  c.collnet_chain_halving = halvings(n.at("collnet_chain_halving"));
  c.tree_ll128_steps_per_gpu = n.at("tree_ll128_steps_per_gpu").as_positive_number();
  c.nvls_bytes = n.at("nvls").as_bytes();
  const auto caps = [&](const YNode& list) { return rules(list, "loops", "chunk", NcclStepChunks::Cap{}); };
  c.nvls_caps = caps(n.at("nvls_caps"));
  c.nvlstree_caps = caps(n.at("nvlstree_caps"));
  const YNode tree_max = n.at("nvlstree_max");
  tree_max.allow_only({"chunk", "from_nodes"});
  c.nvlstree_max_bytes = tree_max.at("chunk").as_bytes();
  c.nvlstree_max_from_nodes = static_cast<int>(tree_max.at("from_nodes").as_int(1, 1 << 20));
  const YNode channels = n.at("nvls_channels");
  for (const auto& key : channels.keys()) {
    const YNode row = channels.at(key);
    row.allow_only({"one_node", "several_nodes"});
    c.nvls_channels[parse_arch(row, key)] = {static_cast<int>(row.at("one_node").as_int(1, 1024)),
                                             static_cast<int>(row.at("several_nodes").as_int(1, 1024))};
  }
  return c;
}

PipelineFill parse_fill(const YNode& n) {
  n.allow_only({"bytes", "bandwidth", "loop"});
  PipelineFill f{n.at("bytes").as_bytes(), n.at("bandwidth").as_bandwidth()};
  if (auto loop = n.get("loop")) {  // nvls_fill.loop: {channels: 16, heads: 8, max_heads: 32}
    loop->allow_only({"channels", "heads", "max_heads"});
    f.loop_channels = static_cast<int>(loop->at("channels").as_int(1, 1024));
    f.loop_heads = static_cast<int>(loop->at("heads").as_int(1, 1024));
    f.max_heads = static_cast<int>(loop->at("max_heads").as_int(1, 1024));
  }
  return f;
}

// ll_call_channels: {thread_threshold: 8B, max_threads: 512, min_threads: 64, max_channels: 32,
// channel_busbw: {hopper: 16GBps}}
NcclModel::LlCallChannels parse_ll_call_channels(const YNode& n) {
  n.allow_only({"thread_threshold", "max_threads", "min_threads", "max_channels", "channel_busbw"});
  NcclModel::LlCallChannels c;
  c.thread_threshold_bytes = n.at("thread_threshold").as_bytes();
  c.max_threads = static_cast<int>(n.at("max_threads").as_int(32, 4096));
  c.min_threads = static_cast<int>(n.at("min_threads").as_int(32, c.max_threads));
  c.max_channels = static_cast<int>(n.at("max_channels").as_int(1, 1024));
  c.channel_busbw_bytes_per_s = parse_arch_bandwidths(n.at("channel_busbw"));
  return c;
}

std::map<Protocol, std::vector<double>> parse_tree_correction(const YNode& n) {
  n.allow_only({"ll", "ll128", "simple"});
  std::map<Protocol, std::vector<double>> out;
  for (const auto& [key, proto] :
       {std::pair{"ll", Protocol::ll}, {"ll128", Protocol::ll128}, {"simple", Protocol::simple}}) {
    const YNode list = n.at(key);
    for (size_t i = 0; i < list.size(); ++i) out[proto].push_back(fraction(list[i]));
  }
  return out;
}

// The catalog: data/gpus.yaml holds what every GPU shares (`kernels:`), data/gpus/KEY.yaml each GPU; a command
// reads the GPUs it names, not the whole catalog.
fs::path gpu_dir() { return data_root() / "data" / "gpus"; }

YNode kernels_section() {
  const YNode root = YNode::load_file(data_root() / "data" / "gpus.yaml");
  root.allow_only({"kernels"});
  return root.at("kernels");
}

// The GPUs' keys: the names of data/gpus/*.yaml, sorted.
std::vector<std::string> gpu_keys() {
  const fs::path dir = gpu_dir();
  std::error_code ec;
  std::vector<std::string> keys;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".yaml") keys.push_back(it->path().stem().string());
  if (ec) throw RuntimeError(fmt::format("cannot read the GPU catalog {}: {}", dir.string(), ec.message()));
  std::sort(keys.begin(), keys.end());
  return keys;
}

PassFactors pass_factors(const YNode& n) {
  n.allow_only({"forward", "backward"});
  return {n.at("forward").as_positive_number(), n.at("backward").as_positive_number()};
}

// The `kernels:` section, the same for every GPU.
void parse_kernels(const YNode& k, GpuSpec& spec) {
  k.allow_only({"gemm_tiles", "kernel_launch", "gemm_fixed_time", "attention_backward_factor",
                "attention_backward_time_factor", "cudnn_attention_backward_time_factor", "flash2_speedup_over_flash1",
                "eager_attention_bytes_per_score", "eager_elementwise_bytes", "eager_elementwise_time_factor",
                "native_kernel_time_factor", "cuda_context", "cublas_workspace", "nchw_convolution_transposes"});
  const YNode tiles = k.at("gemm_tiles");
  for (size_t i = 0; i < tiles.size(); ++i) {
    const YNode t = tiles[i];
    t.allow_only({"m", "n"});
    spec.gemm_tiles.push_back({t.at("m").as_int(1, 4096), t.at("n").as_int(1, 4096)});
  }
  if (spec.gemm_tiles.empty()) tiles.fail("must list at least one tile {m, n}");
  spec.kernel_launch_s = k.at("kernel_launch").as_seconds();
  spec.gemm_fixed_time_s = k.at("gemm_fixed_time").as_seconds();
  spec.attention_backward_factor = k.at("attention_backward_factor").as_positive_number();
  spec.attention_backward_time_factor = k.at("attention_backward_time_factor").as_positive_number();
  spec.cudnn_attention_backward_time_factor = k.at("cudnn_attention_backward_time_factor").as_positive_number();
  spec.eager_elementwise_time_factor = k.at("eager_elementwise_time_factor").as_positive_number();
  const YNode native = k.at("native_kernel_time_factor");
  native.allow_only({"layer_norm", "gelu"});
  spec.layer_norm_time_factor = pass_factors(native.at("layer_norm"));
  spec.gelu_time_factor = pass_factors(native.at("gelu"));
  spec.flash2_speedup_over_flash1 = k.at("flash2_speedup_over_flash1").as_positive_number();
  spec.cuda_context_bytes = k.at("cuda_context").as_bytes();
  const YNode nchw = k.at("nchw_convolution_transposes");
  nchw.allow_only({"feature_map_passes_per_call"});
  spec.nchw_transpose_passes_per_call = nchw.at("feature_map_passes_per_call").as_number();
  if (spec.nchw_transpose_passes_per_call < 0) nchw.at("feature_map_passes_per_call").fail("must be >= 0 passes");
  const YNode cublas = k.at("cublas_workspace");
  // One size per architecture that PyTorch treats apart, "other" for the rest.
  std::vector<std::string> keys{"other"};
  for (Arch a : kArchs) keys.emplace_back(to_string(a));
  cublas.allow_only(keys);
  const char* arch_key = to_string(spec.arch);
  spec.cublas_workspace_bytes = cublas.at(cublas.has(arch_key) ? arch_key : "other").as_bytes();
  const YNode eager = k.at("eager_attention_bytes_per_score");
  eager.allow_only({"eager", "eager_16bit"});
  for (AttentionImpl impl : {AttentionImpl::eager, AttentionImpl::eager_16bit}) {
    const YNode e = eager.at(to_string(impl));
    e.allow_only({"forward", "backward", "saved", "saved_dropout"});
    spec.eager_score_bytes[impl] = {e.at("forward").as_positive_number(), e.at("backward").as_positive_number(),
                                    e.at("saved").as_positive_number(), e.at("saved_dropout").as_positive_number()};
  }
  const YNode ew = k.at("eager_elementwise_bytes");
  ew.allow_only({"rms_norm", "rotary", "gated_act"});
  const auto op_bytes = [](const YNode& n) {
    n.allow_only({"forward", "backward", "saved"});
    const double saved = n.at("saved").as_number();
    if (saved < 0) n.at("saved").fail("must be >= 0 (bytes its backward keeps)");
    return EagerOpBytes{n.at("forward").as_positive_number(), n.at("backward").as_positive_number(), saved};
  };
  const auto eager_op = [&](const char* key) {
    const YNode o = ew.at(key);
    o.allow_only({"16bit", "32bit"});
    return EagerOp{op_bytes(o.at("16bit")), op_bytes(o.at("32bit"))};
  };
  spec.eager_elementwise = {eager_op("rms_norm"), eager_op("rotary"), eager_op("gated_act")};
}

// flash1_fwd_bwd: a list of {causal, head_dim, tflops: {sequence length: rate}}, each pair (causal, head_dim) once.
std::vector<AttentionRateCurve> parse_attention_rates(const YNode& list) {
  std::vector<AttentionRateCurve> out;
  if (!list.is_sequence() || list.size() == 0) list.fail("must list at least one {causal, head_dim, tflops}");
  for (size_t i = 0; i < list.size(); ++i) {
    const YNode c = list[i];
    c.allow_only({"causal", "head_dim", "tflops"});
    AttentionRateCurve curve{c.at("causal").as_bool(), c.at("head_dim").as_int(1, 4096), {}};
    for (const AttentionRateCurve& seen : out)
      if (seen.causal == curve.causal && seen.head_dim == curve.head_dim)
        c.fail(fmt::format("a second curve for causal {} and head_dim {}", curve.causal, curve.head_dim));
    const YNode rates = c.at("tflops");
    rates.require_map();
    for (const std::string& k : rates.keys()) {
      int64_t seq = 0;
      const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), seq);
      if (ec != std::errc{} || end != k.data() + k.size() || seq < 1)
        rates.fail(fmt::format("key \"{}\" is not a sequence length (a positive integer)", k));
      curve.rate_by_sequence.emplace_back(seq, rates.at(k).as_flops());
    }
    if (curve.rate_by_sequence.empty()) rates.fail("must give at least one {sequence length: rate}");
    std::sort(curve.rate_by_sequence.begin(), curve.rate_by_sequence.end());
    out.push_back(std::move(curve));
  }
  return out;
}

GpuSpec parse_gpu(const YNode& g, const std::string& key, const YNode& kernels) {
  g.allow_only({"name",
                "arch",
                "peak_bf16",
                "peak_fp16",
                "peak_fp32",
                "peak_tf32",
                "peak_fp8",
                "fp8_gemm_efficiency",
                "memory",
                "memory_bandwidth",
                "pcie_p2p",
                "gemm_efficiency",
                "memory_efficiency",
                "sm_count",
                "attention_efficiency",
                "cudnn_attention_efficiency",
                "flash1_fwd_bwd",
                "flash1_fwd_bwd_scale",
                "source",
                "form_factor",
                "notes"});
  GpuSpec spec;
  spec.key = key;
  spec.name = g.at("name").as_string();
  spec.arch = parse_arch(g.at("arch"), g.at("arch").as_string());
  if (auto v = g.get("peak_bf16")) spec.peak_bf16_flops_per_s = v->as_flops();
  spec.peak_fp16_flops_per_s = g.at("peak_fp16").as_flops();
  spec.peak_fp32_flops_per_s = g.at("peak_fp32").as_flops();
  if (auto v = g.get("peak_tf32")) spec.peak_tf32_flops_per_s = v->as_flops();
  if (auto v = g.get("peak_fp8")) spec.peak_fp8_flops_per_s = v->as_flops();
  if (auto v = g.get("fp8_gemm_efficiency")) {
    if (!(spec.peak_fp8_flops_per_s > 0)) v->fail("needs peak_fp8 (the rate it is a fraction of)");
    spec.fp8_gemm_efficiency = fraction(*v);
  }
  spec.memory_bytes = g.at("memory").as_bytes();
  spec.memory_as_written = g.at("memory").as_string();
  spec.memory_bandwidth_bytes_per_s = g.at("memory_bandwidth").as_bandwidth();
  if (auto v = g.get("pcie_p2p")) spec.pcie_p2p = v->as_bool();
  spec.gemm_efficiency = fraction(g.at("gemm_efficiency"));
  spec.memory_efficiency = fraction(g.at("memory_efficiency"));
  spec.sm_count = static_cast<int>(g.at("sm_count").as_int(1, 1 << 16));
  spec.attention_efficiency = fraction(g.at("attention_efficiency"));
  if (auto v = g.get("cudnn_attention_efficiency")) spec.cudnn_attention_efficiency = fraction(*v);
  if (auto v = g.get("flash1_fwd_bwd")) spec.flash1_rates = parse_attention_rates(*v);
  // flash1_fwd_bwd_scale: the rate the trained runs' kernel reached over the benchmark's, applied to every point.
  if (auto v = g.get("flash1_fwd_bwd_scale")) {
    if (spec.flash1_rates.empty()) v->fail("scales flash1_fwd_bwd, which this GPU does not list");
    const double scale = v->as_positive_number();
    for (AttentionRateCurve& c : spec.flash1_rates)
      for (auto& point : c.rate_by_sequence) point.second *= scale;
  }
  if (auto v = g.get("source")) spec.source = v->as_string();
  parse_kernels(kernels, spec);
  return spec;
}

}  // namespace

GpuSpec load_gpu(const std::string& key) {
  const auto keys = gpu_keys();
  if (!std::binary_search(keys.begin(), keys.end(), key)) {
    throw InputError(fmt::format("unknown GPU \"{}\"{} (the GPUs in {}: {}; see dpsim inspect gpus)", key,
                                 did_you_mean(key, keys), gpu_dir().string(), fmt::join(keys, ", ")));
  }
  return parse_gpu(YNode::load_file(gpu_dir() / (key + ".yaml")), key, kernels_section());
}

std::vector<GpuSpec> load_gpu_catalog() {
  const YNode kernels = kernels_section();
  std::vector<GpuSpec> out;
  for (const auto& key : gpu_keys())
    out.push_back(parse_gpu(YNode::load_file(gpu_dir() / (key + ".yaml")), key, kernels));
  return out;
}

fs::path gpu_catalog_dir() { return gpu_dir(); }

// One release's replacements: {base_latency: {nvls: {simple: 23us}}, hw_latency: {nvlink: {nvls: {simple: 0us}}},
// ll_max_busbw: {hopper: 87.7GBps}}; `source` names where they were read.
NcclReleaseTuning parse_release(const YNode& n, const std::string& key) {
  n.allow_only({"source", "base_latency", "hw_latency", "ll_max_busbw", "ll128_default_architectures",
                "nvlstree_correction_architectures"});
  NcclReleaseTuning t;
  t.name = key;
  n.at("source").as_string();
  auto protocols = [](const YNode& algo, auto&& add) {
    const ProtoValues v = parse_proto(algo);  // -1: not given
    for (Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple})
      if (v.get(p) >= 0) add(p, v.get(p));
  };
  if (auto base = n.get("base_latency"))
    for (const auto& algo : base->keys())
      protocols(base->at(algo),
                [&](Protocol p, double s) { t.base_latency_s.emplace_back(parse_algorithm_key(*base, algo), p, s); });
  if (auto hw = n.get("hw_latency")) {
    hw->allow_only({"nvlink", "pcie", "net"});
    for (const auto& entry : kFabricKeys) {  // no structured binding: clang 14 cannot capture one in a lambda
      const auto f = hw->get(entry.first);
      if (!f) continue;
      const auto fabric = entry.second;
      for (const auto& algo : f->keys())
        protocols(f->at(algo), [&](Protocol p, double s) {
          t.hw_latency_s.emplace_back(fabric, parse_algorithm_key(*f, algo), p, s);
        });
    }
  }
  if (auto ll = n.get("ll_max_busbw")) t.ll_max_busbw_bytes_per_s = parse_arch_bandwidths(*ll);
  if (auto ll128 = n.get("ll128_default_architectures")) t.ll128_default_archs = parse_arch_list(*ll128);
  if (auto nvlstree = n.get("nvlstree_correction_architectures"))
    t.nvlstree_correction_archs = parse_arch_list(*nvlstree);
  return t;
}

// releases: {"2.18.3": {...}, ...}: each key a release up to nccl_version; kept oldest first.
std::vector<NcclReleaseTuning> parse_releases(const YNode& n, const std::string& version) {
  n.require_map();
  const auto newest = parse_nccl_release(version);
  std::vector<NcclReleaseTuning> out;
  for (const auto& key : n.keys()) {
    const auto r = parse_nccl_release(key);
    if (!r) n.at(key).fail(fmt::format("\"{}\" is not an NCCL release (major.minor.patch)", key));
    if (newest && *r > *newest) n.at(key).fail(fmt::format("is newer than nccl_version {}", version));
    out.push_back(parse_release(n.at(key), key));
    out.back().release = *r;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.release < b.release; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].release == out[i - 1].release)
      n.fail(fmt::format("releases {} and {} are the same release", out[i - 1].name, out[i].name));
  return out;
}

// table_edge_latency and network_hops (data/nccl.yaml): what the topology's own latencies are measured against.
void read_path_latency(const YNode& root, NcclModel& m) {
  const YNode edge = root.at("table_edge_latency");
  edge.allow_only({"nvswitch", "pcie", "nvlink_mesh", "net", "efa"});
  for (const char* key : {"nvswitch", "pcie", "nvlink_mesh", "net", "efa"})
    m.table_edge_latency_s[key] = edge.at(key).as_seconds();
  const YNode hops = root.at("network_hops");
  hops.allow_only({"single_switch", "within_leaf", "across_leaves"});
  m.hops_single_switch = static_cast<int>(hops.at("single_switch").as_int(0, 64));
  m.hops_within_leaf = static_cast<int>(hops.at("within_leaf").as_int(0, 64));
  m.hops_across_leaves = static_cast<int>(hops.at("across_leaves").as_int(0, 64));
}

NcclModel load_nccl(const fs::path& file) {
  const YNode root = YNode::load_file(file);
  root.allow_only({"nccl_version",
                   "base_latency",
                   "hw_latency",
                   "protocol_efficiency",
                   "ll_max_busbw",
                   "ll_max_busbw_multi_node",
                   "ll128_default_architectures",
                   "tree_bandwidth_factor",
                   "tree_protocol_efficiency",
                   "per_channel_max_ll128_busbw",
                   "ll_call_channels",
                   "nvls_efficiency",
                   "ring_simple_plateau_latency_factor",
                   "net_overhead",
                   "net_overhead_simple_factor",
                   "net_plugin_latency",
                   "tree_correction_factor",
                   "tree_correction_entries",
                   "nvlstree_correction_architectures",
                   "ring_efficiency",
                   "overlap_slowdown",
                   "nvls_algbw_per_link",
                   "nvls_min_gpus",
                   "nvls_fill",
                   "ring_fill",
                   "step_chunks",
                   "framework_launch_overhead",
                   "single_thread_launch_per_gpu",
                   "host_staged_fraction_of_link",
                   "releases",
                   "fsdp_inflight_all_gathers",
                   "table_edge_latency",
                   "network_hops",
                   "tp_comm_overlap",
                   "communicator_memory"});
  NcclModel m;
  m.file = file.string();
  m.version = root.at("nccl_version").as_string();
  m.communicator_bytes = root.at("communicator_memory").as_bytes();
  const YNode base = root.at("base_latency");
  for (const auto& key : base.keys()) m.base_latency_s[parse_algorithm_key(base, key)] = parse_proto(base.at(key));
  const YNode hw = root.at("hw_latency");
  hw.allow_only({"nvlink", "pcie", "net", "by_arch"});
  for (const auto& [key, fabric] : kFabricKeys) {
    const YNode f = hw.at(key);
    for (const auto& algo : f.keys()) m.hw_latency_s[fabric][parse_algorithm_key(f, algo)] = parse_proto(f.at(algo));
  }
  if (auto by_arch = hw.get("by_arch")) m.hw_latency_by_arch_s = parse_hw_latency_by_arch(*by_arch);
  const YNode eff = root.at("protocol_efficiency");
  eff.allow_only({"ll", "ll128", "simple"});
  m.protocol_efficiency = {fraction(eff.at("ll")), fraction(eff.at("ll128")), fraction(eff.at("simple"))};
  if (auto n = root.get("ll_max_busbw")) m.ll_max_busbw_bytes_per_s = parse_arch_bandwidths(*n);
  m.ll128_default_archs = parse_arch_list(root.at("ll128_default_architectures"));
  if (auto n = root.get("ll_max_busbw_multi_node")) m.ll_max_busbw_multi_node_bytes_per_s = parse_vendor_ll_caps(*n);
  m.tree_bandwidth_factor = fraction(root.at("tree_bandwidth_factor"));
  const YNode tree_eff = root.at("tree_protocol_efficiency");
  tree_eff.allow_only({"ll", "ll128", "simple"});
  m.tree_protocol_efficiency = {fraction(tree_eff.at("ll")), fraction(tree_eff.at("ll128")),
                                fraction(tree_eff.at("simple"))};
  if (auto n = root.get("per_channel_max_ll128_busbw"))
    m.per_channel_max_ll128_busbw_bytes_per_s = parse_arch_bandwidths(*n);
  if (auto n = root.get("ll_call_channels")) m.ll_call_channels = parse_ll_call_channels(*n);
  const YNode nvls_eff = root.at("nvls_efficiency");
  for (const auto& key : nvls_eff.keys())
    m.nvls_efficiency[parse_arch(nvls_eff.at(key), key)] = fraction(nvls_eff.at(key));
  m.nvls_algbw_per_link = root.at("nvls_algbw_per_link").as_positive_number();
  m.nvls_min_gpus = static_cast<int>(root.at("nvls_min_gpus").as_int(2, 1024));
  m.nvls_fill = parse_fill(root.at("nvls_fill"));
  m.ring_fill = parse_fill(root.at("ring_fill"));
  m.step_chunks = parse_step_chunks(root.at("step_chunks"));
  if (auto t = root.get("tree_correction_factor")) {
    m.tree_correction = parse_tree_correction(*t);
    // How many of the sizes each algorithm reads (tuning.cc:639, :643): required with the table, at most its length.
    const YNode e = root.at("tree_correction_entries");
    size_t shortest = SIZE_MAX;
    for (const auto& [p, factors] : m.tree_correction) shortest = std::min(shortest, factors.size());
    for (const auto& key : e.keys())
      m.tree_correction_entries[parse_algorithm_key(e, key)] =
          static_cast<int>(e.at(key).as_int(0, static_cast<int64_t>(shortest)));
  }
  if (auto a = root.get("nvlstree_correction_architectures")) m.nvlstree_correction_archs = parse_arch_list(*a);
  const YNode plateau = root.at("ring_simple_plateau_latency_factor");
  for (const auto& key : plateau.keys())
    m.ring_simple_plateau_latency_factor[parse_arch(plateau.at(key), key)] = plateau.at(key).as_positive_number();
  for (Arch a : kArchs)
    if (!m.ring_simple_plateau_latency_factor.count(a))
      plateau.fail(fmt::format("missing architecture \"{}\" (every architecture needs its factor)", to_string(a)));
  const YNode overhead = root.at("net_overhead");
  overhead.allow_only({"intel", "amd"});
  for (const auto& key : overhead.keys())
    m.net_overhead_s[parse_cpu_vendor_key(overhead, key)] = overhead.at(key).as_seconds();
  m.net_overhead_simple_factor = root.at("net_overhead_simple_factor").as_positive_number();
  if (auto v = root.get("net_plugin_latency")) {
    v->allow_only({"net", "efa"});
    for (const auto& key : v->keys()) m.net_plugin_latency_s[key] = v->at(key).as_seconds();
  }
  m.framework_launch_overhead_s = root.at("framework_launch_overhead").as_seconds();
  m.single_thread_launch_per_gpu_s = root.at("single_thread_launch_per_gpu").as_seconds();
  m.host_staged_fraction_of_link = fraction(root.at("host_staged_fraction_of_link"));
  if (auto v = root.get("releases")) m.releases = parse_releases(*v, m.version);
  if (auto v = root.get("fsdp_inflight_all_gathers")) m.fsdp_inflight_all_gathers = static_cast<int>(v->as_int(1, 64));
  read_path_latency(root, m);
  const YNode ring = root.at("ring_efficiency");
  ring.allow_only({"nvswitch", "pcie", "nvlink_mesh", "net", "efa", "shm", "by_arch"});
  for (const auto& key : ring.keys()) {
    if (key != "by_arch") m.ring_efficiency[key] = fraction(ring.at(key));
  }
  if (auto by_arch = ring.get("by_arch")) {
    for (const auto& key : by_arch->keys()) {
      const YNode classes = by_arch->at(key);
      classes.allow_only({"nvswitch", "pcie", "nvlink_mesh", "net", "efa", "shm"});
      auto& out = m.ring_efficiency_by_arch[parse_arch(by_arch->at(key), key)];
      for (const auto& c : classes.keys()) out[c] = fraction(classes.at(c));
    }
  }
  for (const char* key : {"nvswitch", "pcie", "net", "shm"}) {
    if (!m.ring_efficiency.count(key)) ring.fail(fmt::format("missing required key \"{}\"", key));
  }
  if (!m.ring_efficiency.count("nvlink_mesh")) m.ring_efficiency["nvlink_mesh"] = m.ring_efficiency["nvswitch"];
  const YNode tp = root.at("tp_comm_overlap");
  tp.allow_only({"pipeline_splits", "comm_sms"});
  m.tp_overlap_pipeline_splits = static_cast<int>(tp.at("pipeline_splits").as_int(1, 64));
  m.tp_overlap_comm_sms = static_cast<int>(tp.at("comm_sms").as_int(0, 1024));
  m.overlap_slowdown = root.at("overlap_slowdown").as_positive_number();
  if (m.overlap_slowdown < 1) root.at("overlap_slowdown").fail("must be >= 1 (a slowdown)");
  return m;
}

Topology sized_topology(Topology t, int nodes, int gpus_per_node, const std::function<void(const std::string&)>& fail) {
  if (nodes < 1 || gpus_per_node < 1 || static_cast<long long>(nodes) * gpus_per_node > (1 << 20))
    fail(
        fmt::format("{} nodes x {} GPUs: each must be at least 1, and together at most the 1,048,576 GPUs dpsim "
                    "simulates",
                    nodes, gpus_per_node));
  t.nodes = nodes;
  t = keep_first_gpus(std::move(t), gpus_per_node);
  validate_topology(t, fail);
  return t;
}

fs::path resolve_topology(const std::string& name_or_path, const fs::path& scenario_dir) {
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml");
  if (is_path) {
    const fs::path p(name_or_path);
    return p.is_absolute() ? p : scenario_dir / p;
  }
  std::error_code ec;
  for (const fs::path& dir :
       {scenario_dir / ".." / "topologies", scenario_dir / "topologies", data_root() / "topologies"}) {
    const fs::path candidate = dir / (name_or_path + ".yaml");
    if (fs::exists(candidate, ec)) return candidate;
  }
  return data_root() / "topologies" / (name_or_path + ".yaml");
}

namespace {

IntraNode parse_intra(const YNode& n, int gpus_per_node) {
  IntraNode intra;
  intra.kind = n.at("kind").as_enum<IntraKind>(
      {{"nvswitch", IntraKind::nvswitch}, {"pcie", IntraKind::pcie}, {"nvlink_mesh", IntraKind::nvlink_mesh}});
  switch (intra.kind) {
    case IntraKind::nvswitch:
      n.allow_only({"kind", "bandwidth", "latency", "nvls"});
      intra.gpu_link = {n.at("bandwidth").as_bandwidth(), n.at("latency").as_seconds()};
      if (auto v = n.get("nvls")) intra.nvls = v->as_bool();
      break;
    case IntraKind::pcie: {
      n.allow_only({"kind", "gpu_link", "switches", "inter_socket", "p2p", "host_staged_bandwidth"});
      intra.gpu_link = parse_link(n.at("gpu_link"), true);
      const YNode sw = n.at("switches");
      for (size_t i = 0; i < sw.size(); ++i) {
        const YNode s = sw[i];
        s.allow_only({"name", "root", "gpus", "uplink"});
        intra.switches.push_back({s.at("name").as_string(), s.at("root").as_string(),
                                  parse_gpu_list(s.at("gpus"), gpus_per_node), parse_link(s.at("uplink"), true)});
      }
      if (auto v = n.get("inter_socket")) intra.inter_socket = parse_link(*v, true);
      if (auto v = n.get("p2p"))
        intra.p2p = v->as_enum<PcieP2p>({{"nccl_default", PcieP2p::nccl_default},
                                         {"all_paths", PcieP2p::all_paths},
                                         {"disabled", PcieP2p::disabled}});
      if (auto v = n.get("host_staged_bandwidth")) intra.host_staged_bytes_per_s = v->as_bandwidth();
      break;
    }
    case IntraKind::nvlink_mesh: {
      n.allow_only({"kind", "links"});
      const YNode links = n.at("links");
      for (size_t i = 0; i < links.size(); ++i) {
        const YNode l = links[i];
        l.allow_only({"gpus", "bandwidth", "latency"});
        const auto pair = parse_gpu_list(l.at("gpus"), gpus_per_node);
        if (pair.size() != 2 || pair[0] == pair[1]) l.at("gpus").fail("a mesh link joins exactly two different GPUs");
        intra.mesh.push_back({pair[0],
                              pair[1],
                              {l.at("bandwidth").as_bandwidth(), l.has("latency") ? l.at("latency").as_seconds() : 0}});
      }
      break;
    }
  }
  return intra;
}

Network parse_network(const YNode& n) {
  n.allow_only({"kind", "transport", "link_latency", "oversubscription", "leaf_radix", "tuner_plugin", "sharp"});
  Network net;
  net.kind = n.at("kind").as_enum<NetworkKind>({{"none", NetworkKind::none},
                                                {"single_switch", NetworkKind::single_switch},
                                                {"fat_tree", NetworkKind::fat_tree},
                                                {"rail_optimized", NetworkKind::rail_optimized}});
  if (auto v = n.get("link_latency")) net.link_latency_s = v->as_seconds();
  if (auto v = n.get("sharp")) net.sharp = v->as_bool();
  if (auto v = n.get("oversubscription")) {
    net.oversubscription = v->as_positive_number();
    if (net.oversubscription < 1) v->fail("must be >= 1 (1 = full bisection)");
  }
  if (auto v = n.get("leaf_radix")) net.leaf_radix = static_cast<int>(v->as_int(1, 1 << 20));
  if (auto v = n.get("transport"))
    net.transport = v->as_enum<NetTransport>({{"infiniband", NetTransport::infiniband}, {"efa", NetTransport::efa}});
  if (auto v = n.get("tuner_plugin")) {
    net.tuner_plugin = find_tuner_plugin(v->as_string());
    if (!net.tuner_plugin)
      v->fail(fmt::format("no NCCL tuner plugin named \"{}\" in data/tuner_plugins.yaml (known: {})", v->as_string(),
                          fmt::join(tuner_plugin_names(), ", ")));
  }
  return net;
}

// A mesh lists a GPU pair once: two NVLinks between a pair are one link of their summed bandwidth (NV2 = 2 x
// 25 GB/s: bandwidth: 50GBps), so a second entry for the pair would be read one of two ways.
void refuse_duplicate_mesh_links(const YNode& links, const IntraNode& intra) {
  std::map<std::pair<int, int>, size_t> first;
  for (size_t i = 0; i < intra.mesh.size(); ++i) {
    const auto& l = intra.mesh[i];
    const auto [it, fresh] = first.emplace(std::minmax(l.gpu_a, l.gpu_b), i);
    if (!fresh)
      links[i].at("gpus").fail(fmt::format(
          "GPUs {} and {} are already joined by links[{}]: give one link per GPU pair with the pair's total "
          "bandwidth (two 25 GB/s NVLinks: 50GBps)",
          l.gpu_a, l.gpu_b, it->second));
  }
}

void refuse_duplicate_switch_names(const YNode& switches, const IntraNode& intra) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < intra.switches.size(); ++i) {
    const auto [it, fresh] = first.emplace(intra.switches[i].name, i);
    if (!fresh)
      switches[i].at("name").fail(
          fmt::format("switch \"{}\" is already switches[{}]: each switch needs its own name", it->first, it->second));
  }
}

void refuse_repeated_nic_gpus(const YNode& nics, const std::vector<Nic>& parsed) {
  for (size_t i = 0; i < parsed.size(); ++i) {
    std::set<int> seen;
    for (size_t j = 0; j < parsed[i].gpus.size(); ++j) {
      if (!seen.insert(parsed[i].gpus[j]).second)
        nics[i].at("gpus")[j].fail(fmt::format("GPU {} is listed twice for this NIC", parsed[i].gpus[j]));
    }
  }
}

// Entries a topology names once (each check reports the second entry's line).
void refuse_duplicates(const YNode& root, const Topology& t) {
  if (t.intra.kind == IntraKind::nvlink_mesh) refuse_duplicate_mesh_links(root.at("intra_node").at("links"), t.intra);
  if (t.intra.kind == IntraKind::pcie) refuse_duplicate_switch_names(root.at("intra_node").at("switches"), t.intra);
  if (auto nics = root.get("nics")) refuse_repeated_nic_gpus(*nics, t.nics);
}

}  // namespace

Topology load_topology(const fs::path& file) {
  const YNode root = YNode::load_file(file);
  root.allow_only(
      {"name", "gpu", "nodes", "gpus_per_node", "intra_node", "nics", "network", "cpu_vendor", "description"});
  Topology t;
  t.file = file.string();
  t.name = root.at("name").as_string();
  const YNode gpu = root.at("gpu");
  try {
    t.gpu = load_gpu(gpu.as_string());
  } catch (const InputError& e) {
    if (std::string(e.what()).starts_with("unknown GPU")) gpu.fail(e.what());
    throw;
  }
  t.nodes = static_cast<int>(root.at("nodes").as_int(1, 1 << 20));
  t.gpus_per_node = static_cast<int>(root.at("gpus_per_node").as_int(1, 1024));
  t.intra = parse_intra(root.at("intra_node"), t.gpus_per_node);
  if (auto nics = root.get("nics")) {
    for (size_t i = 0; i < nics->size(); ++i) {
      const YNode nic = (*nics)[i];
      nic.allow_only({"gpus", "bandwidth", "latency"});
      t.nics.push_back({parse_gpu_list(nic.at("gpus"), t.gpus_per_node),
                        {nic.at("bandwidth").as_bandwidth(), nic.has("latency") ? nic.at("latency").as_seconds() : 0}});
    }
  }
  if (auto net = root.get("network")) t.network = parse_network(*net);
  if (auto v = root.get("cpu_vendor")) t.cpu_vendor = parse_cpu_vendor(*v);
  refuse_duplicates(root, t);
  validate_topology(t, [&](const std::string& msg) { root.fail(msg); });
  return t;
}

// Checks that hold whatever the overrides: every GPU reachable inside a node, NICs for multi-node.
void validate_topology(const Topology& t, const std::function<void(const std::string&)>& fail) {
  const int g = t.gpus_per_node;
  if (t.intra.kind == IntraKind::pcie) {
    std::vector<int> seen(static_cast<size_t>(g), 0);
    for (const auto& s : t.intra.switches) {
      for (int gpu : s.gpus) {
        if (gpu >= g)
          fail(fmt::format("intra_node.switches: switch {} serves GPU {}, but a node has {} GPUs", s.name, gpu, g));
        seen[static_cast<size_t>(gpu)]++;
      }
    }
    std::set<std::string> roots;
    for (const auto& s : t.intra.switches) roots.insert(s.root);
    for (int i = 0; i < g; ++i) {
      if (seen[static_cast<size_t>(i)] != 1) {
        fail(fmt::format("intra_node.switches: GPU {} is behind {} PCIe switches (must be exactly one)", i,
                         seen[static_cast<size_t>(i)]));
      }
    }
    if (roots.size() > 1 && !t.intra.inter_socket) {
      fail("intra_node: switches hang from several root complexes but no inter_socket link joins them (no route)");
    }
  }
  if (t.intra.kind == IntraKind::nvlink_mesh && g > 1) {
    std::vector<int> component(static_cast<size_t>(g), -1);
    std::vector<int> stack{0};
    component[0] = 0;
    while (!stack.empty()) {
      const int at = stack.back();
      stack.pop_back();
      for (const auto& l : t.intra.mesh) {
        for (const auto& [a, b] : {std::pair{l.gpu_a, l.gpu_b}, {l.gpu_b, l.gpu_a}}) {
          if (a == at && b < g && component[static_cast<size_t>(b)] < 0) {
            component[static_cast<size_t>(b)] = 0;
            stack.push_back(b);
          }
        }
      }
    }
    for (int i = 0; i < g; ++i) {
      if (component[static_cast<size_t>(i)] < 0)
        fail(fmt::format("intra_node.links: GPU {} has no NVLink route to GPU 0", i));
    }
  }
  for (const auto& nic : t.nics) {
    for (int gpu : nic.gpus) {
      if (gpu >= g) fail(fmt::format("nics: a NIC serves GPU {}, but a node has {} GPUs (0..{})", gpu, g, g - 1));
    }
  }
  if (t.nodes > 1) {
    if (t.nics.empty()) fail(fmt::format("{} nodes but no nics: GPUs on different nodes have no route", t.nodes));
    if (t.network.kind == NetworkKind::none) fail(fmt::format("{} nodes but network.kind is none", t.nodes));
    std::vector<int> served(static_cast<size_t>(g), 0);
    for (const auto& nic : t.nics) {
      for (int gpu : nic.gpus) served[static_cast<size_t>(gpu)]++;
    }
    for (int i = 0; i < g; ++i) {
      if (!served[static_cast<size_t>(i)])
        fail(fmt::format("nics: GPU {} is served by no NIC (no route off the node)", i));
    }
  }
}

}  // namespace dpsim
