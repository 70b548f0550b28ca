// Did-you-mean for names looked up in a list: GPU keys, topology names, YAML keys.
#include <catch2/catch.hpp>

#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/suggest.hpp"

using namespace dpsim;

namespace {

const std::vector<std::string> kGpus{"A100-PCIE-80GB", "A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM",
                                     "H200",           "L40S",          "RTX-4090",      "V100-SXM2-32GB"};

}  // namespace

TEST_CASE("a GPU key with its parts reordered, or in another case or separator, finds the key") {
  CHECK(close_names("A100-80GB-SXM", kGpus) == std::vector<std::string>{"A100-SXM-80GB"});
  CHECK(close_names("a100_sxm_80gb", kGpus) == std::vector<std::string>{"A100-SXM-80GB"});
  CHECK(close_names("A100 SXM 80GB", kGpus) == std::vector<std::string>{"A100-SXM-80GB"});
  CHECK(close_names("RTX4090", kGpus) == std::vector<std::string>{"RTX-4090"});
  CHECK(close_names("h100-sxm", kGpus) == std::vector<std::string>{"H100-SXM"});
}

TEST_CASE("a typo within 3 edits finds the closest; a reordered name with a typo too") {
  CHECK(close_names("H100-SXN", kGpus) == std::vector<std::string>{"H100-SXM"});
  CHECK(close_names("80G-SXM-A100", kGpus) == std::vector<std::string>{"A100-SXM-80GB"});
  CHECK(close_names("V100-SXM-32GB", kGpus) == std::vector<std::string>{"V100-SXM2-32GB"});
  CHECK(close_names("TPU-v5p", kGpus).empty());
}

TEST_CASE("a name that is part of several keys offers them all, and a more specific one its general key") {
  // "H100" is one edit from "H200" but names no part of it: the H100 key comes first.
  CHECK(close_names("H100", kGpus) == std::vector<std::string>{"H100-SXM"});
  CHECK(close_names("A100", kGpus) == std::vector<std::string>{"A100-PCIE-80GB", "A100-SXM-40GB", "A100-SXM-80GB"});
  CHECK(close_names("H100-SXM-80GB", kGpus) == std::vector<std::string>{"H100-SXM"});
}

TEST_CASE("did_you_mean phrases the guesses for a message, or says nothing") {
  CHECK(did_you_mean("A100-80GB-SXM", kGpus) == " (did you mean \"A100-SXM-80GB\"?)");
  CHECK(did_you_mean("A100-80GB", kGpus) == " (did you mean \"A100-PCIE-80GB\" or \"A100-SXM-80GB\"?)");
  CHECK(did_you_mean("A100", kGpus) == " (did you mean \"A100-PCIE-80GB\", \"A100-SXM-40GB\" or \"A100-SXM-80GB\"?)");
  CHECK(did_you_mean("micro_bach", {"micro_batch", "sequence_length"}) == " (did you mean \"micro_batch\"?)");
  // A one-part key inside the word does not beat a one-letter typo of the whole word.
  CHECK(did_you_mean("gemm_eficiency", {"gemm", "gemm_efficiency"}) == " (did you mean \"gemm_efficiency\"?)");
  CHECK(did_you_mean("zzz", kGpus).empty());
}

TEST_CASE("an unknown GPU names the catalog's keys and the closest one") {
  CHECK_THROWS_WITH(load_gpu("A100-80GB-SXM"),
                    Catch::StartsWith("unknown GPU \"A100-80GB-SXM\" (did you mean "
                                      "\"A100-SXM-80GB\"?) (the GPUs in ") &&
                        Catch::Contains("A100-SXM-80GB, A800-SXM-80GB, B200, GB200, H100-PCIE, H100-SXM") &&
                        Catch::EndsWith("; see dpsim inspect gpus)"));
}

TEST_CASE("the GPU catalog: every entry, sorted by key, with its memory as written and a source") {
  const auto gpus = load_gpu_catalog();
  REQUIRE(gpus.size() >= 8);
  for (size_t i = 1; i < gpus.size(); ++i) CHECK(gpus[i - 1].key < gpus[i].key);
  for (const auto& g : gpus) {
    INFO(g.key);
    CHECK(!g.source.empty());
    CHECK(!g.memory_as_written.empty());
    CHECK(load_gpu(g.key).memory_bytes == g.memory_bytes);
  }
  CHECK(load_gpu("H100-SXM").memory_as_written == "81559MiB");  // nvidia-smi's total, as written
  CHECK(load_gpu("H100-SXM").memory_bytes == 81559.0 * 1048576.0);
}
