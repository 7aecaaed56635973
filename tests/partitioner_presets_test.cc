#include <gtest/gtest.h>

#include "graph/error.h"
#include "partitioner/device_presets.h"

using namespace onnxtrain;

TEST(DevicePresets, DatasheetOrdering) {
  const DevicePreset& a100 = find_device_preset("a100-80gb-sxm");
  const DevicePreset& h100 = find_device_preset("h100-sxm");
  const DevicePreset& h200 = find_device_preset("h200-sxm");
  EXPECT_GT(h200.memory_bytes, h100.memory_bytes);
  EXPECT_EQ(h100.memory_bytes, a100.memory_bytes);  // both 80GB
  EXPECT_GT(h200.memory_bandwidth, h100.memory_bandwidth);
  EXPECT_GT(h100.memory_bandwidth, a100.memory_bandwidth);
  EXPECT_GT(h100.bf16_flops, a100.bf16_flops);
  EXPECT_DOUBLE_EQ(h200.bf16_flops, h100.bf16_flops);  // same compute, more and faster memory
  EXPECT_DOUBLE_EQ(h100.bf16_flops, 989.5e12);
  EXPECT_DOUBLE_EQ(a100.tf32_flops, 156e12);
  EXPECT_EQ(h200.memory_bytes, 141'000'000'000ull);
}

TEST(DevicePresets, EveryPresetIsConsistent) {
  ASSERT_EQ(device_presets().size(), 3u);
  for (const DevicePreset& d : device_presets()) {
    EXPECT_GT(d.fp32_flops, 0) << d.name;
    EXPECT_GT(d.tf32_flops, d.fp32_flops) << d.name;
    EXPECT_GT(d.bf16_flops, d.tf32_flops) << d.name;
    EXPECT_DOUBLE_EQ(d.fp16_flops, d.bf16_flops) << d.name;
    EXPECT_GT(d.memory_bytes, 0u) << d.name;
    EXPECT_GT(d.memory_bandwidth, 1e12) << d.name;
    EXPECT_EQ(&find_device_preset(d.name), &d);
  }
}

TEST(DevicePresets, LookupIsCaseInsensitiveAndTakesAliases) {
  EXPECT_EQ(find_device_preset("H200").name, "h200-sxm");
  EXPECT_EQ(find_device_preset("H100_SXM").name, "h100-sxm");
  EXPECT_EQ(find_device_preset("a100").name, "a100-80gb-sxm");
  EXPECT_EQ(find_link_preset("NVLink4").name, "nvlink4");
  EXPECT_EQ(find_link_preset("infiniband-ndr").name, "ib-ndr");
}

TEST(DevicePresets, UnknownNameListsKnownOnes) {
  try {
    find_device_preset("v100");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown device preset 'v100'"), std::string::npos) << what;
    for (const DevicePreset& d : device_presets()) EXPECT_NE(what.find(d.name), std::string::npos) << what;
  }
  try {
    find_link_preset("ethernet");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown link preset 'ethernet'"), std::string::npos) << what;
    for (const LinkPreset& l : link_presets()) EXPECT_NE(what.find(l.name), std::string::npos) << what;
  }
  EXPECT_THROW(find_device_preset(""), Error);
}

TEST(LinkPresets, BandwidthOrdering) {
  EXPECT_GT(find_link_preset("pcie5-x16").bandwidth, find_link_preset("pcie4-x16").bandwidth);
  EXPECT_GT(find_link_preset("nvlink4").bandwidth, find_link_preset("nvlink3").bandwidth);
  EXPECT_GT(find_link_preset("nvlink3").bandwidth, find_link_preset("pcie5-x16").bandwidth);
  EXPECT_GT(find_link_preset("ib-ndr").bandwidth, find_link_preset("ib-hdr").bandwidth);
  EXPECT_DOUBLE_EQ(find_link_preset("nvlink4").bandwidth, 450e9);
  for (const LinkPreset& l : link_presets()) {
    EXPECT_GT(l.latency_s, 0) << l.name;
    EXPECT_LT(l.latency_s, 1e-4) << l.name;
  }
  EXPECT_EQ(known_link_preset_names(), "pcie4-x16, pcie5-x16, nvlink3, nvlink4, ib-hdr, ib-ndr");
  EXPECT_EQ(known_device_preset_names(), "a100-80gb-sxm, h100-sxm, h200-sxm");
}
